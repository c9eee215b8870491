"""End-to-end latency and accuracy of coded inference on real clusters (``coded experiment latency``).

LeNet-5 on MNIST test images: each call codes K = 10 images for N = 50 workers, each
worker runs the network on its one coded image, and the master decodes. Delays are
injected per worker (:mod:`codedcomputing.runtime.delays`), seeded:

- ``shifted-exp``: ``T = 50 ms * (1 + Exp(1))``;
- ``pareto``: ``T = 50 ms * Pareto(alpha = 1.5)`` (minimum 50 ms, heavy tail).

50 ms, not less, because on the embedded cluster the workers share the machine's CPUs:
50 single-image LeNet-5 forwards take ~40 ms on 2 cores, and the delays must dominate
that for the run to model N machines rather than one busy one.

Schemes, all on the same cluster:

- ``uncoded``: K workers, one image each, waiting for all K;
- ``replication``: N workers (N / K copies of each image), waiting until every image has
  its first copy;
- ``bacc``, ``gcc``: N coded workers, waiting for the fastest N - S, S = 10 and 20 (20%
  and 40% of N): fewer results cut the wait and cost accuracy.

Backends: ``thread`` (:class:`~codedcomputing.runtime.ThreadCluster`, one thread per CPU) and
``ray`` (:class:`~codedcomputing.runtime.RayCluster`, local, skipped with a message when Ray
is not installed) measure wall-clock time; ``simulated``
(:class:`~codedcomputing.runtime.SimulatedCluster`) runs K = 100, N = 500, S = 100 and 200 on a
virtual clock (the master's encode and decode are still timed for real). Each row's
``latency_s`` is the end-to-end time of one call: encode + wait + decode.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from functools import partial
from pathlib import Path

import numpy as np

from .. import datasets, metrics, models
from .._progress import progress as show_progress
from ..codes import BACC, GCC, Replication, Uncoded
from ..runtime import CodedExecutor, RayCluster, SimulatedCluster, ThreadCluster
from ..runtime.delays import Pareto, ShiftedExponential
from .records import (
    COUNT,
    FRACTION,
    NONNEGATIVE,
    POSITIVE,
    SIZE,
    TEXT,
    Cell,
    Headline,
    band_note,
    interval,
    pyplot,
    save_figure,
    scheme_style,
)

NAME = "latency"
# one line of `coded experiment --help`
SUMMARY = "p50/p95/p99 latency of coded LeNet-5 inference on thread, Ray and simulated clusters"
CELLS = {
    "backend": TEXT,
    "delay_model": TEXT,
    "scheme": TEXT,
    "num_inputs": SIZE,
    "num_workers": SIZE,
    "num_stragglers": COUNT,
    "wait_for": Cell("any"),  # a number of workers, or "complete"
    "trial": COUNT,
    "latency_s": POSITIVE,  # on a log axis
    "rel_acc": FRACTION,
    "encode_s": NONNEGATIVE,
    "decode_s": NONNEGATIVE,
}
COLUMNS = tuple(CELLS)
SCHEMES = ("uncoded", "replication", "bacc", "gcc")
BACKENDS = ("thread", "ray", "simulated")
DELAY_SCALE = 0.05  # seconds: the fastest a worker ever answers
DELAY_MODELS = {
    "shifted-exp": lambda: ShiftedExponential(DELAY_SCALE, rate=1.0),
    "pareto": lambda: Pareto(DELAY_SCALE, alpha=1.5),
}


@dataclass(frozen=True)
class Config:
    num_inputs: int = 10
    num_workers: int = 50
    stragglers: tuple[int, ...] = (10, 20)
    delay_models: tuple[str, ...] = tuple(DELAY_MODELS)  # on the real backends
    trials: int = 150
    backends: tuple[str, ...] = BACKENDS
    ray_trials: int = 100
    sim_inputs: int = 100
    sim_workers: int = 500
    sim_stragglers: tuple[int, ...] = (100, 200)
    sim_trials: int = 200


# Quick: real time only under shifted-exponential delays (Pareto's tail makes uncoded calls
# take seconds); the simulated backend runs both.
QUICK = Config(trials=10, backends=("thread", "simulated"), delay_models=("shifted-exp",), sim_trials=30)


def schemes(num_inputs: int, num_workers: int, stragglers: tuple[int, ...]):
    """``(name, code, wait_for, S)`` per scheme and S (``wait_for`` None: until complete)."""
    out = [
        ("uncoded", Uncoded(num_inputs), None, 0),
        ("replication", Replication(num_inputs, num_workers // num_inputs), None, 0),
    ]
    for s in stragglers:
        out.append(("bacc", BACC(num_inputs, num_workers), num_workers - s, s))
        out.append(("gcc", GCC(num_inputs, num_workers), num_workers - s, s))
    return out


def grid(config: Config, backend: str) -> tuple[int, int, tuple[int, ...], int]:
    """``(K, N, the S values, calls per scheme)`` that ``config`` runs on ``backend`` (the
    simulated one: its own, larger grid)."""
    if backend == "simulated":
        return config.sim_inputs, config.sim_workers, config.sim_stragglers, config.sim_trials
    trials = config.ray_trials if backend == "ray" else config.trials
    return config.num_inputs, config.num_workers, config.stragglers, trials


def delay_models(config: Config, backend: str) -> tuple[str, ...]:
    """The delay models ``config`` runs on ``backend`` (the simulated one: every one)."""
    return tuple(DELAY_MODELS) if backend == "simulated" else tuple(config.delay_models)


def make_cluster(backend: str, delays, seed: int):
    if backend == "thread":
        return ThreadCluster(num_threads=os.cpu_count() or 2, delays=delays, seed=seed)
    if backend == "ray":
        return RayCluster(delays=delays, seed=seed)
    if backend == "simulated":
        return SimulatedCluster(delays=delays, seed=seed)
    raise ValueError(f"backend must be one of {', '.join(BACKENDS)}; got {backend!r}")


def measure(executor: CodedExecutor, wait_for, images, labels, f, trials: int, rng, step=None) -> list[dict]:
    """``trials`` calls of ``executor`` on random batches of ``images``: one dict per call.

    Each dict has ``latency_s`` (encode + wait + decode), its parts, ``rel_acc`` (argmax
    agreement with ``f`` run directly), ``accuracy`` (against ``labels``), ``mse`` and the
    numbers of failed and dropped workers.
    """
    k = executor.code.num_inputs
    out = []
    for _ in range(trials):
        pick = rng.choice(len(images), size=k, replace=False)
        x = images[pick]
        truth = f(x)
        result = executor.run(x, wait_for=wait_for)
        report = result.report
        out.append(
            {
                "latency_s": report.total_s,
                "encode_s": report.encode_s,
                "wait_s": report.wait_s,
                "decode_s": report.decode_s,
                "worker_compute_s": float(np.nansum(report.compute_s)),
                "rel_acc": metrics.relative_accuracy(result.estimates, truth),
                "accuracy": float(np.mean(result.estimates.argmax(axis=1) == labels[pick])),
                "mse": metrics.mse(result.estimates, truth),
                "failed": len(report.failed),
                "dropped": int(report.dropped.size),
            }
        )
        if step is not None:
            step()
    return out


TRACES = ("thread", "ray")  # backends whose service times ship as traces (frontier's "trace" regime)


def record_trace(backend: str, calls: int, seed: int = 0, *, num_workers: int = 50, progress: bool = False):
    """``(calls, num_workers)`` measured service times, in seconds: how long each worker's model
    call ran (``report.compute_s``) on this experiment's ``backend`` cluster (``thread`` or
    ``ray``), with no injected delay.

    Each call sends one MNIST test image to each of the ``num_workers`` workers (an
    :class:`~codedcomputing.Uncoded` job of ``num_workers`` inputs), every worker runs LeNet-5
    on it, and the call waits for all of them; ``calls`` such calls after one warm-up. The
    service time, not the time from dispatch: with fewer CPUs than workers the time from
    dispatch is mostly the worker's place in the queue for the CPUs (0.04-2.4 times the median
    on 2 cores, rising with the worker's number), an artefact of running N workers on one
    machine; the service time keeps what a worker's own machine would show, the model call
    slowed by whatever else runs. With this experiment's injected delays the trace would
    replay the injected model, which the frontier's ``shifted-exp`` regime already draws. Not
    reproducible: it is a measurement.
    """
    if backend not in TRACES:
        raise ValueError(f"backend must be one of {', '.join(TRACES)}; got {backend!r}")
    if backend == "ray" and not _ray_available():
        raise ValueError("backend 'ray' needs Ray installed (pip install 'codedcomputing[ray]')")
    data = datasets.mnist()
    f = models.numpy_function("lenet5", progress=progress)
    rng = np.random.default_rng(seed)
    cluster = make_cluster(backend, None, seed)
    table = np.empty((calls, num_workers))
    try:
        executor = CodedExecutor(Uncoded(num_workers), f, cluster)
        executor.run(data.test_x[:num_workers])  # warm-up: caches, Ray workers
        with show_progress(f"latency: {backend} trace", calls, enabled=progress) as step:
            for call in range(calls):
                pick = rng.choice(len(data.test_x), size=num_workers, replace=False)
                table[call] = executor.run(data.test_x[pick]).report.compute_s
                step()
    finally:
        cluster.close()  # a Ray cluster it started is shut down
    return table


def write_trace(latencies, path) -> Path:
    """Write a ``(calls, workers)`` table of seconds as a long-format trace CSV (columns
    ``call``, ``worker``, ``latency_s``, microseconds), the format
    :meth:`~codedcomputing.runtime.delays.Trace.from_csv` reads."""
    table = np.asarray(latencies, dtype=np.float64)
    if table.ndim != 2 or not np.all(np.isfinite(table)):
        raise ValueError(f"latencies must be a finite (calls, workers) table, got shape {table.shape}")
    path = Path(path)
    lines = ["call,worker,latency_s"]
    lines += [f"{c},{n},{t:.6f}" for c, row in enumerate(table) for n, t in enumerate(row)]
    path.write_text("\n".join(lines) + "\n")
    return path


def _ray_available() -> bool:
    try:
        import ray  # noqa: F401
    except ImportError:
        return False
    return True


def run(config: Config, seed: int, *, progress: bool = True) -> list[dict]:
    """The experiment's rows: one per (backend, delay model, scheme, S, call)."""
    backends = tuple(config.backends)
    if "ray" in backends and not _ray_available():
        print("latency: Ray is not installed (pip install 'codedcomputing[ray]'); skipping the ray backend")
        backends = tuple(b for b in backends if b != "ray")
    data = datasets.mnist()
    f = models.numpy_function("lenet5", progress=progress)
    rows = []
    total = sum(
        grid(config, b)[3] * len(delay_models(config, b)) * len(schemes(*grid(config, b)[:3]))
        for b in backends
    )
    with show_progress("latency: calls", total, enabled=progress) as step:
        for backend in backends:
            k, n, s_values, trials = grid(config, backend)
            for delay_name in delay_models(config, backend):
                make_delays = DELAY_MODELS[delay_name]
                for scheme_index, (scheme, code, wait_for, s) in enumerate(schemes(k, n, s_values)):
                    call_seed = seed + 1000 * scheme_index
                    cluster = make_cluster(backend, make_delays(), call_seed)
                    try:
                        executor = CodedExecutor(code, f, cluster)
                        executor.run(data.test_x[:k], wait_for=wait_for)  # warm-up: caches, Ray workers
                        measured = measure(
                            executor,
                            wait_for,
                            data.test_x,
                            data.test_y,
                            f,
                            trials,
                            np.random.default_rng(seed),
                            step,
                        )
                    finally:
                        if backend != "ray":
                            cluster.close()
                    for trial, values in enumerate(measured):
                        rows.append(
                            {
                                "experiment": NAME,
                                "backend": backend,
                                "delay_model": delay_name,
                                "model": "lenet5",
                                "scheme": scheme,
                                "num_inputs": k,
                                "num_workers": code.num_workers,
                                "num_stragglers": s,
                                "wait_for": wait_for if wait_for is not None else "complete",
                                "trial": trial,
                                "seed": seed,
                                **values,
                            }
                        )
            if backend == "ray":
                import ray

                ray.shutdown()
    return rows


def label(row: dict) -> str:
    """``gcc S=10``-style name of a row's scheme (no S for the schemes that wait for all)."""
    return scheme_label(row["scheme"], row["num_stragglers"] if row["wait_for"] != "complete" else None)


def scheme_label(scheme: str, s: int | None) -> str:
    """``gcc S=10``: ``scheme`` waiting for all but ``s`` workers (None: for all of them)."""
    return f"{scheme} S={s}" if s is not None else scheme


def percentiles(rows: list[dict]) -> dict[tuple, dict[str, float]]:
    """``{(backend, delay_model, label): {p50, p95, p99, rel_acc, master_s, trials}}`` from rows."""
    groups: dict[tuple, list[dict]] = {}
    for row in rows:
        groups.setdefault((row["backend"], row["delay_model"], label(row)), []).append(row)
    out = {}
    for key, mine in groups.items():
        latency = np.array([row["latency_s"] for row in mine])
        out[key] = {
            "p50": float(np.percentile(latency, 50)),
            "p95": float(np.percentile(latency, 95)),
            "p99": float(np.percentile(latency, 99)),
            "rel_acc": float(np.mean([row["rel_acc"] for row in mine])),
            "master_s": float(np.median([row["encode_s"] + row["decode_s"] for row in mine])),
            "trials": len(mine),
        }
    return out


def headline(rows: list[dict]) -> Headline:
    """p50 and p99 per backend, delay model and scheme, and p99 over uncoded's p99 there."""
    stats = percentiles(rows)
    table_rows = []
    for (backend, delay, name), v in stats.items():
        uncoded = stats.get((backend, delay, "uncoded"))
        ratio = v["p99"] / uncoded["p99"] if uncoded else ""
        table_rows.append(
            (backend, delay, name, v["p50"] * 1e3, v["p99"] * 1e3, ratio, v["rel_acc"], v["trials"])
        )
    return Headline(
        title="latency: end-to-end (encode + wait + decode) percentiles per call",
        columns=("backend", "delays", "scheme", "p50 ms", "p99 ms", "p99 / uncoded", "rel. acc", "calls"),
        rows=table_rows,
    )


def _calls(rows: list[dict]) -> str:
    """The number of calls per scheme, or its range when backends differ."""
    counts = sorted({v["trials"] for v in percentiles(rows).values()})
    return str(counts[0]) if len(counts) == 1 else f"{counts[0]}-{counts[-1]}"


def _line_style(row: dict, s_rank: dict[int, int]) -> dict:
    """Colour by scheme, line style by S (solid for the smallest S), so that the two S of
    one scheme, and schemes at one S, tell apart."""
    style = scheme_style(row["scheme"])
    dashes = ("-", "--", ":", "-.")
    rank = s_rank.get(row["num_stragglers"], 0) if row["wait_for"] != "complete" else 0
    return {"color": style.get("color"), "ls": dashes[rank % len(dashes)]}


def _panel_title(rows: list[dict], backend: str, delay: str) -> str:
    mine = [r for r in rows if (r["backend"], r["delay_model"]) == (backend, delay)]
    k, n = mine[0]["num_inputs"], max(r["num_workers"] for r in mine)
    return f"{backend} (K = {k}, N = {n}), {delay} delays"


def _plain_ticks(axis) -> None:
    """Log-axis ticks as plain milliseconds (100, 200, 1000), not 2 x 10^2."""
    from matplotlib.ticker import FuncFormatter

    def minor(value, _):  # 200, 300, 500 only where fewer than two decades show: else they crowd
        low, high = axis.get_view_interval()
        return f"{value:g}" if high < 100 * low and f"{value:g}"[0] in "235" else ""

    axis.set_major_formatter(FuncFormatter(lambda value, _: f"{value:g}"))
    axis.set_minor_formatter(FuncFormatter(minor))


def plot(rows: list[dict], out_dir: Path) -> list[Path]:
    """Latency CDFs (one panel per backend and delay model, one line per scheme and S) and
    p50/p95/p99 bars with bootstrap error bars, on log axes: Pareto's uncoded tail is
    seconds where the coded schemes take ~100 ms."""
    plt = pyplot()
    panels = list(dict.fromkeys((row["backend"], row["delay_model"]) for row in rows))
    fig, axes = plt.subplots(1, len(panels), figsize=(5 * len(panels), 4.2), squeeze=False)
    for ax, (backend, delay) in zip(axes[0], panels, strict=True):
        mine = [r for r in rows if (r["backend"], r["delay_model"]) == (backend, delay)]
        s_rank = {
            s: i
            for i, s in enumerate(sorted({r["num_stragglers"] for r in mine if r["wait_for"] != "complete"}))
        }
        for name in dict.fromkeys(label(r) for r in mine):
            calls = [r for r in mine if label(r) == name]
            latency = np.sort([r["latency_s"] for r in calls]) * 1e3
            ax.step(
                np.concatenate([latency[:1], latency]),  # from 0 at the fastest call
                np.arange(latency.size + 1) / latency.size,
                where="post",
                label=name,
                **_line_style(calls[0], s_rank),
            )
        ax.set_xscale("log")
        _plain_ticks(ax.xaxis)
        ax.set_ylim(0, 1.02)
        ax.set_xlabel("end-to-end latency (ms, log scale)")
        ax.set_ylabel("fraction of calls at most this long")
        ax.set_title(_panel_title(rows, backend, delay))
        ax.legend(fontsize=8)
    caption = f"empirical CDF over {_calls(rows)} calls per scheme; latency = encode + wait + decode"
    figures = [save_figure(fig, out_dir, f"{NAME}_cdf", caption)]

    stats = percentiles(rows)
    fig, axes = plt.subplots(1, len(panels), figsize=(5 * len(panels), 4.2), squeeze=False)
    width = 0.26
    for ax, (backend, delay) in zip(axes[0], panels, strict=True):
        names = [name for (b, d, name) in stats if (b, d) == (backend, delay)]
        for i, q in enumerate((50, 95, 99)):
            estimates, lows, highs = [], [], []
            for name in names:
                latency = [
                    r["latency_s"] * 1e3
                    for r in rows
                    if (r["backend"], r["delay_model"], label(r)) == (backend, delay, name)
                ]
                value = interval(latency, statistic=partial(np.percentile, q=q))
                estimates.append(value.estimate)
                lows.append(value.estimate - value.low)
                highs.append(value.high - value.estimate)
            ax.bar(
                np.arange(len(names)) + (i - 1) * width,
                estimates,
                width,
                yerr=[lows, highs],
                capsize=2,
                error_kw={"lw": 0.8},
                label=f"p{q}",
            )
        ax.set_yscale("log")
        _plain_ticks(ax.yaxis)
        ax.set_xticks(np.arange(len(names)), names, rotation=30, ha="right", fontsize=8)
        ax.set_ylabel("end-to-end latency (ms, log scale)")
        ax.set_title(_panel_title(rows, backend, delay))
        ax.legend(fontsize=8)
    caption = band_note(_calls(rows), statistic="percentile", what="error bars", unit="calls")
    figures.append(save_figure(fig, out_dir, f"{NAME}_percentiles", caption))
    return figures
