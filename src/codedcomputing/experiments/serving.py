"""Serving a query stream at equal resources: p50, p99, p99.9 and accuracy against offered load
(``coded experiment serving``).

Queries (MNIST test digits, LeNet-5) arrive singly, open loop, at an offered load stated as
utilisation = arrival rate x mean service time / R (:func:`~codedcomputing.serving.poisson_arrivals`,
or :func:`~codedcomputing.serving.bursty_arrivals` with ``Config.arrivals = "bursty"``). Every
scheme runs on the same R replicas, each a FIFO queue (:mod:`codedcomputing.serving`), so the
comparison is at equal resources and the redundant work a scheme adds (copies, hedges, parities)
lengthens the same queues; it is recorded per row as ``extra_load`` (redundant service seconds
per primary second) and ``load = utilisation x (1 + extra_load)`` (what the scheme puts on the
replicas; ``busy`` is the replicas' measured busy fraction). Schemes, for R = 15 by default:

- ``none``: one task per query, power of two choices;
- ``replication``: two copies, first answer wins, unstarted copies cancelled;
- ``hedge d=<d>``: a backup ``d`` service times after dispatch if no answer came (``Config.hedge_delays``);
- ``bacc tau=<tau>``, ``gcc tau=<tau>``: systematic BACC and GCC over groups of K = 10 queries with
  N - K = 5 parities (1.5x resources), a group closing at K queries or ``max_group_wait``; a
  query not back on its own ``tau`` after its group's close is decoded from what arrived
  (:class:`~codedcomputing.serving.Coded`; GCC's decoder the natural cubic spline);
- ``parm k=2``: learned parity (ParM), one parity per 2 queries (1.5x too), with the parity
  model of :mod:`codedcomputing.models.parity` (shipped for LeNet-5). A run with
  ``train_parity=False`` (the quick one) leaves ParM out when that model is neither shipped
  nor cached, and says so; the full run trains it then (``parity_models_used``).

Grids. The full grid runs on the simulated clock (:class:`~codedcomputing.serving.SimulatedServer`):
every regime (``Config.regimes``: rare heavy stragglers ``bimodal-p0.01-x10``, the headline,
``Bimodal(base=1, p=0.01, slowdown=10)``; ``bimodal-p0.05-x10``; ``shifted-exp``, ``1 + Exp(1)``)
x utilisation x scheme x replicate, ``Config.queries`` queries each. A small grid runs live
(``Config.live_backends``: :class:`~codedcomputing.serving.ThreadServer` replica threads, and
:class:`~codedcomputing.serving.RayServer` actors in the full run when Ray is installed), on
R = 6 replicas with BACC 4/6, the injected service draws of ``Config.live_regime`` (one clock
unit = ``time_unit`` seconds, the real LeNet-5 call on top), and again on the simulated clock
with the same arrivals, digits and service draws (``grid = "small"``), so the live servers
check the simulator.

Accuracy is computed from real outputs: the simulated server computes each query's answer
from exactly the results its group had at its decode; ``accuracy`` is argmax agreement with
the labels, ``rel_acc`` with the exact model on the same queries, ``model_acc`` the exact
model's accuracy on them (a failed live query counts as wrong).

Pairing: in one (regime, replicate) every scheme and utilisation sees the same digits and the
same service draw in each replica slot; arrivals are drawn per utilisation and shared by the
schemes. Intervals are 95% percentile bootstrap intervals over replicates (independent draws).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from .. import datasets, models
from .. import serving as srv
from .._progress import progress as show_progress
from ..codes import BACC, GCC
from ..runtime.delays import Bimodal, ShiftedExponential
from .records import (
    COUNT,
    FRACTION,
    NONNEGATIVE,
    POSITIVE,
    SIZE,
    TEXT,
    Headline,
    band_note,
    interval,
    pyplot,
    save_figure,
)

NAME = "serving"
SUMMARY = (
    "p50/p99/p99.9 and accuracy of served LeNet-5 queries against load, every scheme on the same replicas"
)
REGIMES = {
    "bimodal-p0.01-x10": lambda: Bimodal(base=1.0, p=0.01, slowdown=10.0),
    "bimodal-p0.05-x10": lambda: Bimodal(base=1.0, p=0.05, slowdown=10.0),
    "shifted-exp": lambda: ShiftedExponential(scale=1.0, rate=1.0),
}
HEADLINE_REGIME = "bimodal-p0.01-x10"  # the goal: rare heavy stragglers
BACKENDS = ("simulated", "threads", "ray")
LIVE = ("threads", "ray")
BASELINES = ("replication", "hedge")  # the equal-resources baselines the goal names
CODED = ("bacc", "gcc")
TOLERANCE = 0.01  # a coded scheme "keeps accuracy" within 1 point of the exact model
CELLS = {
    "backend": TEXT,
    "grid": TEXT,
    "regime": TEXT,
    "utilisation": POSITIVE,
    "scheme": TEXT,
    "family": TEXT,
    "replicate": COUNT,
    "num_replicas": SIZE,
    "group_size": SIZE,
    "num_workers": SIZE,
    "queries": SIZE,
    "p50": POSITIVE,
    "p99": POSITIVE,
    "p999": POSITIVE,
    "accuracy": FRACTION,
    "rel_acc": FRACTION,
    "model_acc": FRACTION,
    "extra_load": NONNEGATIVE,
    "load": NONNEGATIVE,
}
COLUMNS = tuple(CELLS)


@dataclass(frozen=True)
class Config:
    regimes: tuple[str, ...] = ("bimodal-p0.01-x10", "bimodal-p0.05-x10")  # also "shifted-exp"
    utilisations: tuple[float, ...] = (0.3, 0.4, 0.5, 0.6, 0.7, 0.8)
    arrivals: str = "poisson"  # or "bursty"
    num_replicas: int = 15  # R, the same for every scheme
    group_size: int = 10  # K
    num_workers: int = 15  # the codes' N: N - K parities per group (1.5x)
    queries: int = 10_000  # per run: a p99.9 rests on its 10 slowest
    replicates: int = 2
    taus: tuple[float, ...] = (1.5, 3.0)
    hedge_delays: tuple[float, ...] = (1.5, 3.0)
    max_group_wait: float = 5.0
    parm: bool = True
    train_parity: bool = True  # False: leave ParM out unless its parity model is cached
    # the small grid on live servers, and on the simulated clock with the same draws
    live_backends: tuple[str, ...] = LIVE
    live_regime: str = "bimodal-p0.05-x10"
    live_utilisations: tuple[float, ...] = (0.3, 0.5)
    live_replicas: int = 6
    live_group_size: int = 4
    live_workers: int = 6
    live_queries: int = 300
    live_replicates: int = 2
    time_unit: float = 0.02  # seconds per clock unit on live servers


QUICK = Config(
    regimes=("bimodal-p0.01-x10", "bimodal-p0.05-x10"),
    utilisations=(0.3, 0.5, 0.8),
    queries=2000,
    replicates=1,
    taus=(1.5,),
    hedge_delays=(1.5,),
    train_parity=False,
    live_backends=("threads",),
    live_utilisations=(0.5,),
    live_queries=120,
    live_replicates=1,
)


@dataclass(frozen=True)
class Variant:
    """One scheme of a grid: its ``label`` (the CSV's ``scheme``), ``family`` (none,
    replication, hedge, bacc, gcc, parm), its knob as text, and ``make()``, a fresh scheme."""

    label: str
    family: str
    knob: str
    make: object


def parm_k(group_size: int, num_workers: int) -> int | None:
    """ParM's k at the codes' resources (one parity per k queries: N / K = 1 + 1 / k), or None."""
    parities = num_workers - group_size
    return group_size // parities if parities > 0 and group_size % parities == 0 else None


def variants(config: Config, *, live: bool = False, parity_f=None) -> list[Variant]:
    """The schemes of the full grid (``live``: the small grid's, one knob each, BACC only)."""
    k, n = (config.live_group_size, config.live_workers) if live else (config.group_size, config.num_workers)
    taus = config.taus[:1] if live else config.taus
    delays = config.hedge_delays[:1] if live else config.hedge_delays
    wait = config.max_group_wait
    out = [
        Variant("none", "none", "", srv.NoRedundancy),
        Variant("replication", "replication", "copies=2", lambda: srv.Replication(2)),
    ]
    out += [Variant(f"hedge d={d:g}", "hedge", f"d={d:g}", lambda d=d: srv.Hedge(d)) for d in delays]
    codes = {
        "bacc": lambda: BACC(k, n, systematic=True),
        "gcc": lambda: GCC(k, n, systematic=True, decoding="spline"),
    }
    for family in CODED[:1] if live else CODED:
        out += [
            Variant(
                f"{family} tau={tau:g}",
                family,
                f"tau={tau:g}",
                lambda tau=tau, family=family: srv.Coded(codes[family](), tau=tau, max_group_wait=wait),
            )
            for tau in taus
        ]
    size = parm_k(k, n)
    if parity_f is not None and size is not None:
        out.append(
            Variant(
                f"parm k={size}",
                "parm",
                f"k={size}",
                lambda: srv.ParM(size, max_group_wait=wait, parity_f=parity_f),
            )
        )
    return out


def parity_models_used(config: Config) -> list[tuple[str, int]]:
    """``[("lenet5", k)]``: the learned parity model a run of ``config`` loads, or trains on first
    use (none when it trains none: ``train_parity=False`` uses a cached one only)."""
    size = parm_k(config.group_size, config.num_workers)
    return [("lenet5", size)] if config.parm and config.train_parity and size is not None else []


def _parity_function(config: Config, progress: bool):
    """ParM's parity model as a batch function over groups, or None (left out, said why)."""
    size = parm_k(config.group_size, config.num_workers)
    if not config.parm or size is None:
        return None
    from ..models import parity

    if not config.train_parity and not parity.is_cached("lenet5", size):
        print(
            f"serving: ParM left out: LeNet-5's parity model (k = {size}) is not cached, "
            "and this run trains none"
        )
        return None
    return parity.parity_function(parity.load_parity("lenet5", size, progress=progress))


class _Table:
    """``f`` with its outputs on the test digits looked up by the input's bytes (queries are test
    digits; only coded and parity inputs are new): the same numbers as ``f`` on the full batch,
    without running LeNet-5 again on every query of every run."""

    def __init__(self, f, inputs: np.ndarray, outputs: np.ndarray):
        self.f, self.outputs = f, outputs
        self.index = {row.tobytes(): i for i, row in enumerate(inputs)}

    def __call__(self, batch):
        batch = np.ascontiguousarray(batch, dtype=np.float32)
        where = np.array([self.index.get(row.tobytes(), -1) for row in batch], dtype=np.int64)
        if np.all(where >= 0):
            return self.outputs[where]
        out = np.empty((batch.shape[0], *self.outputs.shape[1:]), dtype=self.outputs.dtype)
        known = where >= 0
        out[known] = self.outputs[where[known]]
        out[~known] = self.f(batch[~known])
        return out


def _arrivals(kind: str, count: int, utilisation: float, replicas: int, service, rng) -> np.ndarray:
    if kind == "bursty":
        return srv.bursty_arrivals(count, utilisation, replicas, service, rng)
    return srv.poisson_arrivals(count, utilisation, replicas, service, rng)


def _check(config: Config) -> None:
    unknown = [r for r in (*config.regimes, config.live_regime) if r not in REGIMES]
    if unknown:
        raise ValueError(f"regimes must be among {', '.join(REGIMES)}; got {unknown}")
    if config.arrivals not in ("poisson", "bursty"):
        raise ValueError(f"arrivals must be 'poisson' or 'bursty', got {config.arrivals!r}")
    wrong = [b for b in config.live_backends if b not in LIVE]
    if wrong:
        raise ValueError(f"live_backends must be among {', '.join(LIVE)}; got {wrong}")


def _ray_available() -> bool:
    try:
        import ray  # noqa: F401
    except ImportError:
        return False
    return True


def measure(record, truth: np.ndarray, labels: np.ndarray) -> dict:
    """One run's figures: latency percentiles (clock units), accuracy against the labels and
    the exact model, the answers' kinds and the work (a failed query counts as wrong)."""
    estimates = np.asarray(record.estimates, dtype=np.float64)
    answered = np.all(np.isfinite(estimates.reshape(estimates.shape[0], -1)), axis=1)
    predicted = np.where(answered, np.nan_to_num(estimates).argmax(axis=1), -1)
    counts = record.counts()
    extra = float(record.extra_load)
    return {
        "p50": record.percentile(50),
        "p99": record.percentile(99),
        "p999": record.percentile(99.9),
        "mean": float(record.latency.mean()),
        "accuracy": float(np.mean(predicted == labels)),
        "rel_acc": float(np.mean(predicted == truth.argmax(axis=1))),
        "model_acc": float(np.mean(truth.argmax(axis=1) == labels)),
        "exact_share": float(np.mean(record.exact)),
        "decoded_share": counts["decoded"] / record.num_queries,
        "failed": counts["failed"],
        "extra_load": extra,
        "busy": float(record.utilisation.mean()),
        "cancelled": int(record.cancelled),
    }


def run(config: Config, seed: int, *, progress: bool = True) -> list[dict]:
    """The experiment's rows: one per (backend, grid, regime, utilisation, scheme, replicate)."""
    _check(config)
    live = tuple(config.live_backends)
    if "ray" in live and not _ray_available():
        print("serving: Ray is not installed (pip install 'codedcomputing[ray]'); skipping the ray backend")
        live = tuple(b for b in live if b != "ray")
    data = datasets.mnist()
    f = models.numpy_function("lenet5", progress=progress)
    outputs = np.asarray(f(data.test_x))
    table = _Table(f, data.test_x, outputs)
    parity_f = _parity_function(config, progress)
    full, small = variants(config, parity_f=parity_f), variants(config, live=True, parity_f=parity_f)
    total = len(config.regimes) * config.replicates * len(config.utilisations) * len(full)
    total += (1 + len(live)) * config.live_replicates * len(config.live_utilisations) * len(small)
    rows = []

    def add(values, **keys):
        load = keys["utilisation"] * (1.0 + values["extra_load"])  # the work it puts on the replicas
        rows.append({"experiment": NAME, **keys, "seed": seed, **values, "load": load})

    with show_progress("serving: runs", total, enabled=progress) as step:
        for regime_index, regime in enumerate(config.regimes):
            for replicate in range(config.replicates):
                service = REGIMES[regime]()
                picks = np.random.default_rng([seed, regime_index, replicate]).integers(
                    0, data.test_x.shape[0], config.queries
                )
                inputs, truth, labels = data.test_x[picks], outputs[picks], data.test_y[picks]
                server = srv.SimulatedServer(config.num_replicas, service, seed=seed * 1000 + replicate)
                for u in config.utilisations:
                    rng = np.random.default_rng([seed, regime_index, replicate, round(u * 1000)])
                    arrivals = _arrivals(
                        config.arrivals, config.queries, u, config.num_replicas, service, rng
                    )
                    for v in full:
                        record = server.run(v.make(), arrivals, inputs=inputs, f=table)
                        add(
                            measure(record, truth, labels),
                            **_keys("simulated", "full", regime, u, v, replicate, config, live=False),
                        )
                        step()
        backends = ("simulated", *live)
        ray_started = False
        try:
            for replicate in range(config.live_replicates):
                service = REGIMES[config.live_regime]()
                picks = np.random.default_rng([seed, 99, replicate]).integers(
                    0, data.test_x.shape[0], config.live_queries
                )
                inputs, truth, labels = data.test_x[picks], outputs[picks], data.test_y[picks]
                server_seed = seed * 1000 + 500 + replicate
                for u in config.live_utilisations:
                    rng = np.random.default_rng([seed, 99, replicate, round(u * 1000)])
                    arrivals = _arrivals(
                        config.arrivals, config.live_queries, u, config.live_replicas, service, rng
                    )
                    for backend in backends:
                        if backend == "ray" and not ray_started:
                            ray_started = _start_ray()
                        for v in small:
                            record = _run_small(
                                backend, v, config, service, server_seed, arrivals, inputs, f, table
                            )
                            add(
                                measure(record, truth, labels),
                                **_keys(
                                    backend, "small", config.live_regime, u, v, replicate, config, live=True
                                ),
                            )
                            step()
        finally:
            if ray_started:
                import ray

                ray.shutdown()
    return rows


def _start_ray() -> bool:
    """A local Ray for the ray backend's runs (True: this run started it, and stops it)."""
    import ray

    if ray.is_initialized():
        return False
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False, configure_logging=False)
    return True


def _run_small(backend, variant, config, service, seed, arrivals, inputs, f, table):
    """One run of the small grid on ``backend`` (live servers run the real LeNet-5 per task)."""
    r = config.live_replicas
    if backend == "simulated":
        return srv.SimulatedServer(r, service, seed=seed).run(
            variant.make(), arrivals, inputs=inputs, f=table
        )
    options = {"service": service, "time_unit": config.time_unit, "seed": seed}
    if backend == "threads":
        server = srv.ThreadServer(f, r, variant.make(), **options)
    else:
        server = srv.RayServer(f, r, variant.make(), actor_options={"num_cpus": 0}, **options)
    return server.run(arrivals, inputs, timeout=60.0)


def _keys(backend, grid, regime, utilisation, variant, replicate, config, *, live) -> dict:
    if live:
        r, k, n, q = config.live_replicas, config.live_group_size, config.live_workers, config.live_queries
    else:
        r, k, n, q = config.num_replicas, config.group_size, config.num_workers, config.queries
    return {
        "backend": backend,
        "grid": grid,
        "regime": regime,
        "arrivals": config.arrivals,
        "utilisation": utilisation,
        "scheme": variant.label,
        "family": variant.family,
        "knob": variant.knob,
        "num_replicas": r,
        "group_size": k,
        "num_workers": n,
        "queries": q,
        "replicate": replicate,
        "time_unit_s": config.time_unit if backend in LIVE else "",
    }


# -- summaries: what the headline, the figures and the claims read ------------------------------


def cells(rows: list[dict]) -> dict[tuple, dict]:
    """``{(backend, grid, regime, utilisation, scheme): summary}``: each percentile, accuracy and
    load as the mean over replicates (p999 with its bootstrap :class:`Interval`), the family, the
    per-replicate p99.9 (for paired ratios) and the number of replicates."""
    groups: dict[tuple, list[dict]] = {}
    for row in rows:
        key = (row["backend"], row["grid"], row["regime"], row["utilisation"], row["scheme"])
        groups.setdefault(key, []).append(row)
    out = {}
    for key, mine in groups.items():
        mine = sorted(mine, key=lambda r: r["replicate"])
        entry = {
            name: float(np.mean([r[name] for r in mine]))
            for name in ("p50", "p99", "p999", "accuracy", "rel_acc", "model_acc", "extra_load", "load")
        }
        entry["p999_interval"] = interval([r["p999"] for r in mine])
        entry["by_replicate"] = {r["replicate"]: r["p999"] for r in mine}
        entry["family"] = mine[0]["family"]
        entry["replicates"] = len(mine)
        out[key] = entry
    return out


def keeps_accuracy(entry: dict) -> bool:
    """Within :data:`TOLERANCE` of the exact model's accuracy on the same queries."""
    return entry["accuracy"] >= entry["model_acc"] - TOLERANCE


def compare(rows_or_cells, regime: str, utilisation: float, *, backend="simulated", grid="full") -> dict:
    """Coded against the best equal-resources baseline (replication or hedging, least mean
    p99.9) at one cell: the best code keeping accuracy (else the best code, flagged), its p99.9
    ratio to the baseline's (mean of the per-replicate ratios, paired, with its bootstrap
    interval), and whether coding wins (keeps accuracy and a lower p99.9). Raises KeyError when
    the cell lacks a baseline or a code."""
    table = rows_or_cells if isinstance(rows_or_cells, dict) else cells(rows_or_cells)
    here = {
        scheme: e
        for (b, g, reg, u, scheme), e in table.items()
        if (b, g, reg) == (backend, grid, regime) and math.isclose(u, utilisation)
    }
    baselines = {s: e for s, e in here.items() if e["family"] in BASELINES}
    codes = {s: e for s, e in here.items() if e["family"] in CODED}
    if not baselines or not codes:
        raise KeyError((regime, utilisation))
    base = min(baselines, key=lambda s: baselines[s]["p999"])
    keeping = {s: e for s, e in codes.items() if keeps_accuracy(e)}
    pool = keeping or codes
    code = min(pool, key=lambda s: pool[s]["p999"])
    mine, theirs = codes[code]["by_replicate"], baselines[base]["by_replicate"]
    ratios = [mine[r] / theirs[r] for r in mine if r in theirs]
    parm = next((s for s, e in here.items() if e["family"] == "parm"), None)
    return {
        "baseline": base,
        "baseline_p999": baselines[base]["p999"],
        "code": code,
        "code_entry": codes[code],
        "keeps_accuracy": bool(keeping),
        "ratio": interval(ratios),
        "wins": bool(keeping) and codes[code]["p999"] < baselines[base]["p999"],
        "none": here.get("none"),
        "parm": parm,
        "parm_entry": here.get(parm) if parm else None,
    }


def headline(rows: list[dict]) -> Headline:
    """Per regime and utilisation of the full grid: the best baseline's and the best code's
    p99.9, their paired ratio, the code's accuracy against the model's, and who wins."""
    table = cells(rows)
    out = []
    settings = dict.fromkeys((reg, u) for (b, g, reg, u, _) in table if (b, g) == ("simulated", "full"))
    for regime, u in sorted(settings, key=lambda s: (s[0] != HEADLINE_REGIME, s)):
        try:
            c = compare(table, regime, u)
        except KeyError:
            continue
        code = c["code_entry"]
        verdict = "coded" if c["wins"] else ("base (acc.)" if not c["keeps_accuracy"] else "base (tail)")
        out.append(
            (
                regime,
                u,
                f"{c['baseline']}",
                c["baseline_p999"],
                c["code"],
                code["p999"],
                c["ratio"].estimate,
                code["accuracy"],
                code["model_acc"],
                verdict,
            )
        )
    first = rows[0] if rows else {}
    return Headline(
        title="serving: p99.9 of the best code against the best equal-resources baseline (simulated clock)",
        columns=("regime", "load", "baseline", "p99.9", "code", "p99.9 ", "ratio", "acc.", "model", "winner"),
        rows=out,
        note=(
            f"R = {first.get('num_replicas', '?')} replicas for every scheme, "
            f"K = {first.get('group_size', '?')}, "
            f"N = {first.get('num_workers', '?')}; load: utilisation offered; p99.9 in mean service times; "
            "ratio: the code's p99.9 over the best baseline's (replication or hedging), paired; the code is "
            "the best within 1 point of the model's accuracy (else the best, and the baseline wins)"
        ),
    )


# -- figures ------------------------------------------------------------------------------------

STYLES = {
    "none": {"color": "0.45", "marker": "x", "ls": "--"},
    "replication": {"color": "C4", "marker": "v", "ls": "-."},
    "hedge": {"color": "C1", "marker": "s", "ls": "-"},
    "bacc": {"color": "C2", "marker": "^", "ls": "-"},
    "gcc": {"color": "C0", "marker": "o", "ls": "-"},
    "parm": {"color": "C3", "marker": "D", "ls": "-"},
}


def _style(scheme: str, family: str, rank: int) -> dict:
    style = dict(STYLES.get(family, {"marker": "o"}))
    if rank:  # a scheme's second knob: dotted, hollow markers
        style.update(ls=":", mfc="none")
    return style


def _plain_ticks(axis) -> None:
    """Log-axis ticks as plain numbers (2, 5, 10), not 2 x 10^0; minor ones only where the axis
    spans less than two decades."""
    from matplotlib.ticker import FuncFormatter

    def minor(value, _):
        low, high = axis.get_view_interval()
        return f"{value:g}" if high < 100 * low and f"{value:g}"[0] in "235" else ""

    axis.set_major_formatter(FuncFormatter(lambda value, _: f"{value:g}"))
    axis.set_minor_formatter(FuncFormatter(minor))


def plot(rows: list[dict], out_dir: Path) -> list[Path]:
    """``serving.png``: p99.9, p50 and accuracy against utilisation, a row of panels per regime
    (the full grid, simulated clock), one line per scheme, error bars over replicates;
    ``serving_backends.png`` (when the small grid ran): each scheme's p50 and p99 on the live
    backends against the simulated clock's on the same draws."""
    plt = pyplot()
    table = cells(rows)
    figures = []
    full = {k: e for k, e in table.items() if k[:2] == ("simulated", "full")}
    regimes = list(dict.fromkeys(k[2] for k in full))
    if regimes:
        fig, axes = plt.subplots(len(regimes), 3, figsize=(15, 3.8 * len(regimes)), squeeze=False)
        replicates = sorted({e["replicates"] for e in full.values()})
        for ax_row, regime in zip(axes, regimes, strict=True):
            mine = {k: e for k, e in full.items() if k[2] == regime}
            schemes = list(dict.fromkeys(k[4] for k in mine))
            knobs: dict[str, int] = {}
            for scheme in schemes:
                family = next(e["family"] for k, e in mine.items() if k[4] == scheme)
                rank = knobs.get(family, 0)
                knobs[family] = rank + 1
                style = _style(scheme, family, rank)
                points = sorted((k[3], e) for k, e in mine.items() if k[4] == scheme)
                u = np.array([p[0] for p in points])
                p999 = [p[1]["p999_interval"] for p in points]
                est = np.array([i.estimate for i in p999])
                err = np.array([[i.estimate - i.low for i in p999], [i.high - i.estimate for i in p999]])
                ax_row[0].errorbar(u, est, yerr=err, capsize=2, label=scheme, **style)
                ax_row[1].plot(u, [p[1]["p50"] for p in points], label=scheme, **style)
                ax_row[2].plot(u, [p[1]["accuracy"] for p in points], label=scheme, **style)
            model = np.mean([e["model_acc"] for e in mine.values()])
            ax_row[2].axhline(model, color="k", lw=0.8)
            ax_row[2].axhline(model - TOLERANCE, color="k", lw=0.8, ls=":")
            for ax, what in zip(ax_row, ("p99.9 latency", "p50 latency", "accuracy"), strict=True):
                ax.set_xlabel("offered load (utilisation without redundancy)")
                ax.set_title(f"{regime}: {what}", fontsize=10)
            for ax in ax_row[:2]:
                ax.set_yscale("log")
                _plain_ticks(ax.yaxis)
                ax.set_ylabel("latency (mean service times, log scale)")
            ax_row[2].set_ylabel("argmax agreement with the labels")
            ax_row[2].set_title(f"{regime}: accuracy (line: the model; dotted: 1 point below)", fontsize=9)
        axes[0][1].legend(fontsize=7, loc="upper left")  # once: the p50 panel's upper left is empty
        first = rows[0]
        fig.suptitle(
            f"serving: LeNet-5 queries on R = {first['num_replicas']} replicas for every scheme "
            f"(codes K = {first['group_size']}, N = {first['num_workers']}), simulated clock"
        )
        caption = (
            band_note(
                "/".join(map(str, replicates)), statistic="p99.9", what="error bars", unit="replicate(s)"
            )
            + "; markers: means over replicates"
        )
        figures.append(save_figure(fig, out_dir, NAME, caption))
    small = {k: e for k, e in table.items() if k[1] == "small"}
    live = [b for b in LIVE if any(k[0] == b for k in small)]
    if live:
        fig, axes = plt.subplots(1, 2, figsize=(10, 4.4), squeeze=False)
        for ax, stat in zip(axes[0], ("p50", "p99"), strict=True):
            values = []
            for (backend, _, regime, u, scheme), e in small.items():
                twin = small.get(("simulated", "small", regime, u, scheme))
                if backend == "simulated" or twin is None:
                    continue
                style = STYLES.get(e["family"], {})
                ax.scatter(
                    twin[stat],
                    e[stat],
                    color=style.get("color"),
                    marker="o" if backend == "threads" else "s",
                    label=f"{scheme} ({backend})",
                )
                values += [twin[stat], e[stat]]
            if values:
                low, high = min(values) * 0.8, max(values) * 1.25
                ax.plot([low, high], [low, high], color="k", lw=0.8)
                ax.set_xscale("log")
                ax.set_yscale("log")
                _plain_ticks(ax.xaxis)
                _plain_ticks(ax.yaxis)
            ax.set_xlabel(f"{stat} on the simulated clock (clock units)")
            ax.set_ylabel(f"{stat} live (clock units)")
            ax.set_title(stat)
            handles, labels = ax.get_legend_handles_labels()
            unique = dict(zip(labels, handles, strict=True))
            ax.legend(unique.values(), unique.keys(), fontsize=7)
        first = next(r for r in rows if r["grid"] == "small")
        fig.suptitle(
            f"serving, small grid: live replicas ({', '.join(live)}) against the simulated clock, "
            f"R = {first['num_replicas']}, {first['regime']}, {first['queries']} queries"
        )
        caption = "one point per scheme and utilisation (mean over replicates); the line is y = x"
        figures.append(save_figure(fig, out_dir, f"{NAME}_backends", caption))
    return figures
