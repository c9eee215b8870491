"""Pipelined gradient coding against gradient coding and the ignore-stragglers baselines:
training loss against wall-clock time on the simulated clock.

n = 12 workers, one data partition each; s in {1, 2, 3}; every scheme of
:mod:`codedcomputing.gradient_coding.training` (DGD, GC-FR, GC-CR, IS-SGD, IS-GC, PGC-FR,
PGC-CR), plain SGD. A worker's time per step is its number of partitions times the measured
per-partition compute time ``c`` (the median of timed gradient evaluations of the model on
one partition, measured once per run of the experiment) plus an exponential delay with mean
``ratio * c``: ratio 1 and 2 (the published delay means were 1 s and 2 s; their ratio to the
compute is not known), and, in one panel, ratio from 0.25 to 4 at s = 2; and persistent
slowness (:func:`delay_model`: bursty Markov chains, slow steps 8x) at every s. Trials differ in
their delays only (the seed of the clock).

The target loss is DGD's loss after ``target_step`` steps (averaged over trials at ratio 1);
a run's time to target is the virtual wall-clock time of its first step at or below it.

Model: logistic regression on the MNIST images (``--quick``: on the 8x8 digits); the
config also takes a one-hidden-layer MLP and LeNet-5 (:data:`MODELS`).

Real backends (:data:`BACKENDS`): a short run of every scheme at one setting (s =
``backend_stragglers``, delay mean = 1x the compute) with
:func:`~codedcomputing.gradient_coding.train_on_cluster` on real threads (a
:class:`~codedcomputing.ThreadCluster`, one thread per worker and spares, torch and BLAS on
one thread each) and on Ray (a local :class:`~codedcomputing.RayCluster`: one actor per
worker holding its state); each worker really computes its partitions and then sleeps its
delay, and the clock is real seconds. Their rows carry ``backend`` "threads" or "ray"; the
grid's are "simulated". On one machine the workers' compute contends for its cores and each
step pays a real dispatch, so real seconds exceed the virtual ones; what is compared is
each backend's ordering of the schemes and its GC/PGC ratios.

Outputs: ``gradient-coding.csv`` (one row per backend, scheme, s, delay ratio, step and
trial) and the figures.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from .. import datasets
from .._progress import progress as show_progress
from ..gradient_coding import SCHEMES, Problem, simulate
from ..runtime.delays import AdditiveExponential, BurstyMarkov
from .records import (
    COUNT,
    NONNEGATIVE,
    POSITIVE,
    SIZE,
    TEXT,
    Cell,
    Headline,
    log_scale,
    means,
    pyplot,
    save_figure,
)

NAME = "gradient-coding"
SUMMARY = "PGC vs GC, DGD, IS-SGD, IS-GC: training loss against wall-clock (n = 12, s = 1-3)"
CELLS = {
    "backend": Cell("text", optional=True),  # empty: the simulated clock
    "in_grid": Cell("flag"),
    "in_sweep": Cell("flag"),
    "scheme": TEXT,
    "num_workers": SIZE,
    "num_stragglers": COUNT,
    "delay_ratio": POSITIVE,
    "step": COUNT,
    "wall_time_s": NONNEGATIVE,
    "loss": POSITIVE,  # on a log axis
    "trial": COUNT,
    "compute_s": POSITIVE,
    "dataset": TEXT,
    "target_step": COUNT,
}
COLUMNS = tuple(CELLS)
STYLES = {
    "dgd": {"color": "0.3", "ls": "-"},
    "gc-fr": {"color": "C0", "ls": "--"},
    "gc-cr": {"color": "C1", "ls": "--"},
    "is-sgd": {"color": "C2", "ls": ":"},
    "is-gc": {"color": "C4", "ls": ":"},
    "pgc-fr": {"color": "C0", "ls": "-"},
    "pgc-cr": {"color": "C1", "ls": "-"},
}


MODELS = ("logistic", "mlp", "lenet5")
BACKENDS = ("threads", "ray")


@dataclass(frozen=True)
class Config:
    dataset: str = "mnist"
    model: str = "logistic"
    train_size: int | None = None  # the first this many training images (None: all)
    num_workers: int = 12
    stragglers: tuple[int, ...] = (1, 2, 3)
    ratios: tuple[float, ...] = (1.0, 2.0)
    sweep_ratios: tuple[float, ...] = (0.25, 0.5, 1.0, 2.0, 4.0)
    sweep_stragglers: int = 2
    steps: int = 150
    target_step: int = 100
    lr: float = 0.5
    trials: int = 5
    bursty: bool = True
    backends: tuple[str, ...] = BACKENDS
    backend_stragglers: int = 3
    backend_trials: int = 2


QUICK = Config(
    dataset="digits",
    stragglers=(1, 3),
    sweep_ratios=(0.5, 2.0),
    steps=60,
    target_step=40,
    trials=2,
    backend_trials=1,
)


def problem(config: Config, seed: int) -> Problem:
    """The model (:data:`MODELS`: logistic regression, a one-hidden-layer MLP of 64 ReLU
    units, or LeNet-5), cross-entropy, on the dataset's training images (the first
    ``train_size``, or all), initialised from ``seed``."""
    import torch

    from ..models.lenet import LeNet5, LeNet5Config

    data = datasets.load(config.dataset)
    images, labels = data.train_x[: config.train_size], data.train_y[: config.train_size]
    x = images.reshape(len(images), -1)
    torch.manual_seed(seed)
    if config.model == "logistic":
        module = torch.nn.Linear(x.shape[1], 10)
    elif config.model == "mlp":
        nn = torch.nn
        module = nn.Sequential(nn.Linear(x.shape[1], 64), nn.ReLU(), nn.Linear(64, 10))
    elif config.model == "lenet5":
        module = LeNet5(LeNet5Config(image_size=images.shape[-1], dropout=0.0))  # deterministic
        x = images
    else:
        raise ValueError(f"model must be one of {MODELS}, got {config.model!r}")
    return Problem.from_torch(module, x, labels, config.num_workers, seed)


def measure_compute(problem: Problem, repeats: int = 7) -> float:
    """The median seconds of one partition's gradient (partitions in turn)."""
    times = []
    for r in range(repeats):
        start = time.perf_counter()
        problem.gradient(problem.initial, r % problem.num_partitions)
        times.append(time.perf_counter() - start)
    return float(np.median(times))


def _runs(config: Config) -> dict[tuple[int, float, str], tuple[bool, bool]]:
    """``{(s, ratio, delays): (in the grid, in the sweep)}``: the grid, the sweep's extra
    settings, then persistent slowness (``delays="bursty"``, every s of the grid)."""
    grid = [(s, r, "exponential") for s in config.stragglers for r in config.ratios]
    sweep = [(config.sweep_stragglers, r, "exponential") for r in config.sweep_ratios]
    bursty = [(s, 1.0, "bursty") for s in config.stragglers] if config.bursty else []
    return {key: (key in grid, key in sweep) for key in dict.fromkeys(grid + sweep + bursty)}


def delay_model(kind: str, ratio: float, compute_s: float):
    """Exponential delays of mean ``ratio * compute_s``, or persistent slowness: a bursty
    Markov chain per worker (slow with probability 0.05 per step, recovering with 0.3: a
    long-run 14% of steps slow, in bursts of ~3) whose slow steps take 8x a base delay of
    ``ratio * compute_s``."""
    if kind == "bursty":
        return BurstyMarkov(base=ratio * compute_s, p_slow=0.05, p_recover=0.3, slowdown=8.0)
    return AdditiveExponential(mean=ratio * compute_s)


def _check_backends(backends) -> tuple[str, ...]:
    backends = tuple(backends)
    unknown = [b for b in backends if b not in BACKENDS]
    if unknown:
        raise ValueError(f"backends must be among {BACKENDS}, got {unknown}")
    return backends


def run(config: Config, seed: int, *, progress: bool = True) -> list[dict]:
    """The experiment's rows: one per (backend, scheme, s, ratio, step, trial): the simulated
    grid, then the short runs on the real backends of ``config.backends``."""
    backends = _check_backends(config.backends)
    task = problem(config, seed)
    compute_s = measure_compute(task)
    rows = []
    settings = _runs(config)
    total = len(settings) * config.trials + len(backends) * config.backend_trials

    def record(history, backend, s, ratio, kind, trial, in_grid, in_sweep):
        rows.extend(
            {
                "experiment": NAME,
                "dataset": config.dataset,
                "backend": backend,
                "scheme": scheme,
                "num_workers": config.num_workers,
                "num_stragglers": s,
                "delay_ratio": ratio,
                "delays": kind,
                "model": config.model,
                "compute_s": compute_s,
                "step": point.step,
                "wall_time_s": point.wall_time_s,
                "step_time_s": point.step_time_s,
                "loss": point.loss,
                "trial": trial,
                "seed": seed,
                "target_step": config.target_step,
                "in_grid": in_grid,
                "in_sweep": in_sweep,
            }
            for scheme, history in history.items()
            for point in history
        )

    with show_progress("gradient-coding: runs", total, enabled=progress) as step:
        for (s, ratio, kind), (in_grid, in_sweep) in settings.items():
            delays = delay_model(kind, ratio, compute_s)
            for trial in range(config.trials):
                histories = {
                    scheme: simulate(
                        scheme,
                        task,
                        s,
                        config.steps,
                        lr=config.lr,
                        compute_s=compute_s,
                        delays=delays,
                        seed=[seed, s, int(ratio * 1000), trial, int(kind == "bursty")],
                    )
                    for scheme in SCHEMES
                }
                record(histories, "simulated", s, ratio, kind, trial, in_grid, in_sweep)
                step()
        for backend in backends:
            for trial, histories in enumerate(_on_backend(backend, task, config, compute_s, seed)):
                record(histories, backend, config.backend_stragglers, 1.0, "exponential", trial, False, False)
                step()
    return rows


def _on_backend(backend: str, task: Problem, config: Config, compute_s: float, seed: int):
    """Yield, per trial, ``{scheme: history}`` from a short run of every scheme on a real
    ``backend`` (s = ``config.backend_stragglers``, exponential delays of mean ``compute_s``
    slept after each worker's compute; schemes interleaved within a trial, so the machine's
    load falls on all of them alike)."""
    import torch
    from threadpoolctl import threadpool_limits

    from ..gradient_coding import train_on_cluster
    from ..runtime.clusters import ThreadCluster

    s = config.backend_stragglers
    delays = delay_model("exponential", 1.0, compute_s)
    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # the workers are the parallelism: no intra-op pools under them
    try:
        with threadpool_limits(1):
            if backend == "threads":
                cluster = ThreadCluster(4 * config.num_workers, seed=seed)
            else:
                from ..runtime.ray_cluster import RayCluster

                cluster = RayCluster(seed=seed)
            with cluster:
                for trial in range(config.backend_trials):
                    yield {
                        scheme: train_on_cluster(
                            scheme,
                            task,
                            s,
                            config.steps,
                            cluster,
                            lr=config.lr,
                            delays=delays,
                            seed=[seed, s, 1000, trial, 0],
                            step_timeout_s=60.0,  # no fault is injected: a loaded machine is only slow
                        )
                        for scheme in SCHEMES
                    }
    finally:
        torch.set_num_threads(threads)


def target_loss(rows: list[dict]) -> float:
    """DGD's mean loss at ``target_step`` under exponential delays at ratio 1 (or the nearest
    ratio run), on the simulated clock."""
    rows = [row for row in _exponential(rows) if _backend(row) == "simulated"]
    if not rows:
        raise ValueError("no simulated rows under exponential delays, so no target loss")
    target_step = rows[0]["target_step"]
    ratio = min({row["delay_ratio"] for row in rows}, key=lambda r: abs(r - 1.0))
    losses = [
        row["loss"]
        for row in rows
        if row["scheme"] == "dgd" and row["step"] == target_step and row["delay_ratio"] == ratio
    ]
    return float(np.mean(losses))


def _exponential(rows):
    return [row for row in rows if row.get("delays", "exponential") == "exponential"]


def _backend(row) -> str:
    return row.get("backend") or "simulated"  # rows written before the backends had no column


def times_to_target(
    rows: list[dict], delays: str = "exponential", backend: str = "simulated"
) -> dict[tuple, tuple[float, float]]:
    """``{(scheme, s, ratio): (mean wall-clock seconds, mean steps)}`` to the target loss
    (:func:`target_loss`) under ``delays`` ("exponential" or "bursty") on ``backend``
    ("simulated", "threads" or "ray"), over the trials that reached it (NaN if none did)."""
    target = target_loss(rows)
    rows = [row for row in rows if row.get("delays", "exponential") == delays and _backend(row) == backend]
    first: dict[tuple, tuple[float, int]] = {}
    for row in rows:
        key = (row["scheme"], row["num_stragglers"], row["delay_ratio"], row["trial"])
        if row["loss"] <= target and (key not in first or row["step"] < first[key][1]):
            first[key] = (row["wall_time_s"], row["step"])
    out: dict[tuple, list] = {}
    for (scheme, s, ratio, _), value in first.items():
        out.setdefault((scheme, s, ratio), []).append(value)
    settings = {(row["scheme"], row["num_stragglers"], row["delay_ratio"]) for row in rows}
    return {
        key: tuple(np.mean(out[key], axis=0)) if key in out else (float("nan"), float("nan"))
        for key in settings
    }


def row_problem(row: dict) -> str:
    """Why a row of the CSV cannot be drawn across its cells ("" if it can): its scheme is one
    of :data:`SCHEMES`."""
    return "" if row["scheme"] in SCHEMES else "scheme not one of the schemes"


def plot(rows: list[dict], out_dir: Path) -> list[Path]:
    """``gradient-coding.png``: (a) loss against wall-clock and (b) against steps at the
    largest s and ratio 1 (mean over trials); (c) time to target per scheme and s at each
    grid ratio; (d) the sweep: time to target against the delay ratio at the sweep's s;
    (e) under persistent slowness; (f) each scheme's time to target over DGD's on the same
    backend, simulated and real (when the rows hold real backends)."""
    plt = pyplot()
    target = target_loss(rows)
    reach = times_to_target(rows)
    flag = {True: True, False: False, "True": True, "False": False}  # as written or read back
    grid_rows = [r for r in rows if flag[r["in_grid"]]]  # both flags are False for bursty and real rows
    sweep_rows = [r for r in rows if flag[r["in_sweep"]]]
    if not grid_rows:
        raise ValueError("no rows of the grid (in_grid True), which panels (a)-(c) show")
    stragglers = sorted({row["num_stragglers"] for row in grid_rows})
    ratios = sorted({row["delay_ratio"] for row in grid_rows})
    s_top = max(stragglers)
    ratio_one = min(ratios, key=lambda r: abs(r - 1.0))
    shown = [r for r in grid_rows if r["num_stragglers"] == s_top and r["delay_ratio"] == ratio_one]
    curve = means(shown, ("scheme", "step"), "loss")
    clock = means(shown, ("scheme", "step"), "wall_time_s")
    bursty = times_to_target(rows, "bursty")
    real = [b for b in BACKENDS if any(_backend(row) == b for row in rows)]
    fig, grid = plt.subplots(2, 3, figsize=(19, 9.6))
    axes = grid.ravel()
    for scheme in SCHEMES:
        steps = sorted(step for sch, step in curve if sch == scheme)
        loss = [curve[(scheme, k)] for k in steps]
        axes[0].plot([clock[(scheme, k)] for k in steps], loss, label=scheme, lw=1.3, **STYLES[scheme])
        axes[1].plot(steps, loss, label=scheme, lw=1.3, **STYLES[scheme])
    for ax, xlabel in ((axes[0], "wall-clock (virtual s)"), (axes[1], "step")):
        ax.axhline(target, color="0.5", lw=0.8, ls="-.", label=f"target {target:.3f}")
        ax.set_yscale("log")
        ax.set_xlabel(xlabel)
        ax.set_ylabel("training loss (mean over trials)")
        ax.set_title(f"({'a' if ax is axes[0] else 'b'}) s = {s_top}, delay mean = {ratio_one:g} x compute")
        ax.legend(fontsize=7)
    sweep_s = sweep_rows[0]["num_stragglers"] if sweep_rows else s_top
    sweep_ratios = sorted({row["delay_ratio"] for row in sweep_rows})
    for scheme in SCHEMES:
        for ratio, alpha in zip(ratios, (1.0, 0.45), strict=False):
            y = [_seconds(reach, (scheme, s, ratio)) for s in stragglers]
            label = f"{scheme}, delay {ratio:g}x" if len(ratios) > 1 else scheme
            axes[2].plot(stragglers, y, marker="o", alpha=alpha, label=label, **STYLES[scheme])
        ys = [_seconds(reach, (scheme, sweep_s, r)) for r in sweep_ratios]
        axes[3].plot(sweep_ratios, ys, marker="o", label=scheme, **STYLES[scheme])
    axes[2].set_xticks(stragglers)
    axes[2].set_xlabel("s (stragglers tolerated)")
    axes[2].set_ylabel("virtual s to the target loss")
    log_scale(axes[2])
    axes[2].set_title("(c) time to target" + (" (faint: the larger delay)" if len(ratios) > 1 else ""))
    axes[2].legend(fontsize=6, ncol=2)
    if sweep_ratios:
        axes[3].set_xscale("log")
        axes[3].set_xticks(sweep_ratios, [f"{r:g}" for r in sweep_ratios])
        axes[3].xaxis.set_minor_locator(plt.NullLocator())
        log_scale(axes[3])
        axes[3].set_xlabel("delay mean / per-partition compute")
        axes[3].set_ylabel("virtual s to the target loss")
        axes[3].set_title(f"(d) the delay sweep, s = {sweep_s}")
        axes[3].legend(fontsize=7)
    else:  # a config without the sweep
        axes[3].set_axis_off()
    if bursty:
        b_stragglers = sorted({key[1] for key in bursty})
        for scheme in SCHEMES:
            y = [_seconds(bursty, (scheme, s, 1.0)) for s in b_stragglers]
            axes[4].plot(b_stragglers, y, marker="o", label=scheme, **STYLES[scheme])
        axes[4].set_xticks(b_stragglers)
        axes[4].set_xlabel("s (stragglers tolerated)")
        axes[4].set_ylabel("virtual s to the target loss")
        log_scale(axes[4])
        axes[4].set_title("(e) persistent slowness (bursty Markov, 8x slow)")
        axes[4].legend(fontsize=7)
    else:
        axes[4].set_axis_off()
    if real:
        _plot_backends(axes[5], rows, real)
    else:
        axes[5].set_axis_off()
    trials = len({row["trial"] for row in rows})
    compute = rows[0]["compute_s"]
    model = {"logistic": "logistic regression", "mlp": "an MLP", "lenet5": "LeNet-5"}
    fig.suptitle(
        f"n = {rows[0]['num_workers']} workers, {model.get(rows[0].get('model'), rows[0].get('model'))} "
        f"on {rows[0]['dataset']}, per-partition compute {compute * 1e3:.2f} ms "
        "((a)-(e): virtual clock)"
    )
    note = (
        f"means over {trials} trials (delays redrawn per trial); "
        f"target: DGD's mean loss at step {rows[0]['target_step']}"
    )
    return [save_figure(fig, out_dir, NAME, note)]


def _seconds(reach: dict, key: tuple) -> float:
    """The time to target of ``key`` (scheme, s, ratio); NaN, drawn as a gap, where the rows
    hold none (a CSV read back with rows left out)."""
    return reach.get(key, (np.nan, np.nan))[0]


def _plot_backends(ax, rows, real) -> None:
    """Panel (f): time to target over DGD's on the same backend, per scheme, at the real
    runs' setting: the simulated clock (the grid's trials) beside each real backend."""
    s = next(row["num_stragglers"] for row in rows if _backend(row) == real[0])
    backends = ["simulated", *real]
    width = 0.8 / len(backends)
    for b, backend in enumerate(backends):
        reach = times_to_target(rows, backend=backend)
        dgd = _seconds(reach, ("dgd", s, 1.0))
        ratios = [_seconds(reach, (scheme, s, 1.0)) / dgd for scheme in SCHEMES]
        ax.bar(np.arange(len(SCHEMES)) + (b - (len(backends) - 1) / 2) * width, ratios, width, label=backend)
    ax.axhline(1.0, color="0.5", lw=0.8)
    ax.set_xticks(np.arange(len(SCHEMES)), SCHEMES, rotation=30)
    ax.set_ylabel("time to target / DGD's on the same backend")
    ax.set_title(f"(f) simulated against real, s = {s}, delay mean = compute")
    ax.set_ylim(0, ax.get_ylim()[1] * 1.2)  # room for the legend's one row above the bars
    ax.legend(
        fontsize=7, loc="upper left", ncol=3, title="backend (real: seconds; trial means)", title_fontsize=7
    )


def headline(rows: list[dict]) -> Headline:
    """Time to the target loss per scheme, s and delays, and GC over PGC."""
    table = []
    runs = [(kind, "simulated") for kind in ("exponential", "bursty")]
    runs += [("exponential", b) for b in BACKENDS if any(_backend(row) == b for row in rows)]
    for kind, backend in runs:
        reach = times_to_target(rows, kind, backend)
        for s in sorted({key[1] for key in reach}):
            for ratio in sorted({key[2] for key in reach if key[1] == s}):
                seconds = {scheme: _seconds(reach, (scheme, s, ratio)) for scheme in SCHEMES}
                fr = seconds["gc-fr"] / seconds["pgc-fr"]
                cr = seconds["gc-cr"] / seconds["pgc-cr"]
                label = f"{ratio:g}" if kind == "exponential" else f"bursty {ratio:g}"
                if backend != "simulated":
                    label = f"{backend} {ratio:g} (real s)"
                table.append((s, label, *(seconds[scheme] for scheme in SCHEMES), fr, cr))
    return Headline(
        title=(
            f"gradient-coding: seconds to the target loss ({target_loss(rows):.4f}; virtual, "
            "real on threads and ray); "
            "GC/PGC time ratios"
        ),
        columns=("s", "delay/compute", *SCHEMES, "gc-fr/pgc-fr", "gc-cr/pgc-cr"),
        rows=table,
    )
