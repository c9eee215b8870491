"""Per-query latency and accuracy at equal resources: coding against replication, hedging and
learned parity (``coded experiment frontier``).

One *group* of K queries (MNIST test images for ``lenet5`` and ``vit``) is dispatched at t = 0; each
worker's finish time is one draw of the regime's delay model, in units of the base service
time (no queueing). At resource level L a scheme may use N = L K model calls' worth of
workers. Per query, every scheme answers as follows (``T_n``: worker n's finish time):

- ``uncoded`` (1x): query k on its own worker: ``T_k``;
- ``replication``: a share L - 1 of the queries get a second copy (fractional r = L), first
  copy wins: ``min(T_k, T_copy)``;
- ``hedge``: a backup to another worker after delay d, first answer wins:
  ``min(T_k, d + T_backup)``; d is the (2 - L) quantile of an earlier period's finish times
  (:func:`hedge_delay`: the same regime, its own draws, never the reported ones), so that the
  share of queries hedged (measured on the reported draws: ``extra_load``) is about L - 1;
- ``parm-k<k>`` (ParM): one parity worker per k queries computes a parity model on the sum of
  the k queries; a query not back on its own by ``tau`` is reconstructed (parity output minus
  the k - 1 other outputs) once the parity and the others arrived:
  ``min(T_k, max(tau, T_parity, T_others))``; knob: tau, as for the systematic codes (without
  it, a reconstruction that beats its own answer by the jitter's margin, a third of the
  queries with k = 2, would replace the exact answer by an approximate one). Run where
  L = 1 + 1/k (k = 2 at 1.5x, k = 4 at 1.25x). The parity model (``parity`` column) is the
  learned one of :mod:`codedcomputing.models.parity` (its own encoder, concatenation by
  default; shipped for LeNet-5 with k = 2 and 4, any other trained on first use, then
  cached), or with ``Config.parity = "deployed-model"`` the network itself on the sum of the
  group's queries; on the ``linear`` stand-in task always the latter, where the
  reconstruction is exact;
- ``gcc-systematic``, ``bacc-systematic``, ``manifold-gcc`` (systematic codes, N = L K): query k
  is answered by its systematic worker if it returned by ``tau``, else decoded at ``tau`` from
  the workers back by then (later if fewer than the code's ``min_results`` were):
  ``T_k if T_k <= t_dec else t_dec``, ``t_dec = max(tau, the min_results-th finish)``;
  knob: tau;
- ``gcc``, ``bacc`` (non-systematic, N = L K): every query answered when the first w of N
  returned; knob: w.

Extra load: work beyond one model call per query, each copy, backup and parity worker counted
as a full call whether or not it was cancelled: (N - K) / K for codes, replication and ParM;
the measured share of hedged queries for hedging.

Regimes (each worker's service time, base 1): ``shifted-exp``: ``1 + Exp(1)``;
``bimodal-p<p>-x<s>`` (rare heavy stragglers): ``(1 + U(0, 0.1))``, times s with probability p
(the issue's grid is p in {0.01, 0.02, 0.05, 0.1} x s in {5, 10, 20}; the default config runs
p = 0.01, 0.02, 0.05, 0.1 at 10x and p = 0.05 at 5x and 20x); ``bernoulli``: frequent moderate
slowness, each worker slow (3x) with probability 0.2 independently; ``persistent``: a
:class:`~codedcomputing.runtime.delays.BurstyMarkov` per worker position (slow 10x, p_slow =
0.002, p_recover = 0.02: slow 9% of the time in bursts of ~50 groups), the groups drawn in
order; ``trace-thread`` and ``trace-ray``: :class:`~codedcomputing.runtime.delays.Trace`
replaying the latency experiment's measured service times on its thread and Ray clusters
(:func:`codedcomputing.experiments.latency.record_trace`: LeNet-5 on one MNIST image per
worker, 100 calls of 50 workers, recorded on the project's 2-core development machine and
shipped in ``experiments/traces``), each worker drawing a random measured call and column,
scaled to median 1; ``trace``: the same over ``Config.trace_csv`` (columns call, worker,
latency_s), or over a synthetic trace (:func:`synthetic_trace`) when that is empty.

Pairing: the same groups of queries for every regime, level and scheme; within a (regime,
level), one delay draw per group of 2K worker positions: query k's own worker is position k for
every scheme (a systematic code's worker of input k included), and copies, backups, parities
take positions K, K + 1, ... . Intervals: percentile bootstrap over groups (500 resamples, the
same resampled groups for every scheme of a (regime, level), so the ratios ``vs_replication``
and ``vs_hedge`` are paired).

Selection apart from report: :func:`frontier_table` (the headline, the claims) chooses each
cell's best code and knob, and ParM's tau, on the even-numbered groups (``select_*`` columns)
and reports them on the odd-numbered ones (``heldout_*``), so no reported p99.9 is the minimum
of many noisy p99.9s taken on itself. A p99.9 over Q queries rests on about Q / 1000 of them
(fewer distinct values for a non-systematic code, which answers a group at once).

Decoding is free unless ``Config.decode_cost`` (in base service times) says otherwise:
``benchmarks/perf/bench_frontier_decode_cost.py`` measures a decode at about one LeNet-5 call here.

How the arithmetic was checked: the per-query latency functions below are tested against
brute-force loops over small hand-made draws (tests/experiments/test_frontier.py); the
non-systematic wait-for-w latency against :meth:`CodedExecutor.run` on a simulated cluster
replaying the same draws, and the systematic latency against ``CodedExecutor.run_queries``
there (one difference by design: with fewer than ``min_results`` workers back by tau,
``run_queries`` leaves the missing queries unanswered, this experiment waits for them). The
decodes are the codes' own ``decode_details`` on the workers back by the decode time, f
computed once per group on all N coded inputs.
"""

from __future__ import annotations

import importlib.resources
import math
import re
import zlib
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from .. import datasets, models
from .._progress import progress as show_progress
from .._validation import check_count, check_number
from ..codes import BACC, GCC, ManifoldGCC
from ..points import make_points
from ..runtime.delays import Bimodal, BurstyMarkov, ShiftedExponential, Trace
from .manifold import manifold_map
from .records import (
    FRACTION,
    NONNEGATIVE,
    POSITIVE,
    SIZE,
    TEXT,
    Cell,
    Headline,
    pyplot,
    save_figure,
)

NAME = "frontier"
SUMMARY = "per-query p50/p99/p99.9 and accuracy at equal resources: codes vs replication, hedging, ParM"
TASKS = ("lenet5", "vit", "linear")
SYSTEMATIC = ("gcc-systematic", "bacc-systematic", "manifold-gcc")
NON_SYSTEMATIC = ("gcc", "bacc")
CODED = (*SYSTEMATIC, *NON_SYSTEMATIC)
EXACT = ("uncoded", "replication", "hedge")
RESAMPLES = 500
TOLERANCE = 0.01  # a coded scheme "keeps accuracy" within 1 point of the exact model
CELLS = {
    "regime": TEXT,
    "level": Cell("number", low=1),
    "scheme": TEXT,
    "knob_value": Cell("number", low=0, optional=True),
    "p50": POSITIVE,
    "p99": POSITIVE,
    "p999": POSITIVE,
    "p999_low": POSITIVE,
    "p999_high": POSITIVE,
    "accuracy": FRACTION,
    "accuracy_low": FRACTION,
    "accuracy_high": FRACTION,
    "rel_acc": FRACTION,
    "extra_load": NONNEGATIVE,
    "model_acc": FRACTION,
    "num_inputs": SIZE,
    # the headline's best code: chosen on the even-numbered groups, reported on the odd ones
    "select_p999": POSITIVE,
    "select_accuracy": FRACTION,
    "heldout_p999": POSITIVE,
    "heldout_accuracy": FRACTION,
}
COLUMNS = tuple(CELLS)


@dataclass(frozen=True)
class Config:
    task: str = "lenet5"
    num_inputs: int = 20  # K: divisible by 2 and 4 (ParM), L K whole at every level
    levels: tuple[float, ...] = (1.1, 1.25, 1.5, 2.0)
    regimes: tuple[str, ...] = (
        "shifted-exp",
        "bimodal-p0.01-x10",
        "bimodal-p0.02-x10",
        "bimodal-p0.05-x10",
        "bimodal-p0.1-x10",
        "bimodal-p0.05-x5",
        "bimodal-p0.05-x20",
        "bernoulli",
        "persistent",
        "trace-thread",
        "trace-ray",
    )
    groups: int = 250  # K queries each: 5,000 queries per (regime, level, scheme, knob)
    taus: tuple[float, ...] = (1.1, 1.2, 1.5, 2.0, 3.0)
    wait_fractions: tuple[float, ...] = (0.6, 0.75, 0.9, 1.0)  # w = ceil(fraction N)
    parity_k: tuple[int, ...] = (2, 4)
    trace_csv: str = ""  # the "trace" regime's measured trace; "" for the synthetic one
    # GCC's decoder (GCC, systematic GCC, ManifoldGCC): the natural cubic spline, 14x cheaper
    # per new alive set than the default gap-aware blend (0.69 ms against 9.9 ms at K = 20,
    # N = 30, measured); "auto" for the codes' default
    gcc_decoding: str = "spline"
    # ParM's parity model: "learned" (codedcomputing.models.parity: shipped or cached) or
    # "deployed-model" (the network on the sum of the group's queries; always on "linear")
    parity: str = "learned"
    # the coded schemes' decode time per group, in base service times, added to every decoded
    # answer (ParM's reconstruction, a subtraction, costs nothing here): 0 treats decoding as
    # free next to a model call, which holds for slow models (the spline decode: 0.69 ms at
    # K = 20, N = 30, measured) and flatters the codes for fast ones
    decode_cost: float = 0.0


QUICK = Config(
    regimes=("shifted-exp", "bimodal-p0.05-x10", "persistent"),
    levels=(1.25, 1.5),
    groups=40,
    taus=(1.2, 2.0),
    wait_fractions=(0.75, 1.0),
)

BIMODAL = re.compile(r"bimodal-p(?P<p>[0-9.]+)-x(?P<slowdown>[0-9.]+)")


# -- per-query latencies (the arithmetic; each checked at its boundary) -----------------------


def _times(values, name: str) -> np.ndarray:
    arr = np.asarray(values, dtype=np.float64)
    if arr.size and (np.isnan(arr).any() or (arr < 0).any()):
        raise ValueError(f"{name} must be finish times >= 0 (inf: never), got {values!r}")
    return arr


def replication_latency(own, copy) -> np.ndarray:
    """First copy wins: ``min(own, copy)`` elementwise (``copy`` inf where a query has no copy)."""
    return np.minimum(_times(own, "own"), _times(copy, "copy"))


def hedge_latency(primary, backup, delay: float) -> np.ndarray:
    """A backup sent after ``delay`` to a second worker, first answer wins:
    ``min(primary, delay + backup)`` (a query back by ``delay`` sends none)."""
    delay = check_number(delay, "delay", low=0.0)
    return np.minimum(_times(primary, "primary"), delay + _times(backup, "backup"))


def hedged_share(primary, delay: float) -> float:
    """The share of queries whose backup is sent: ``mean(primary > delay)``, each a full call."""
    delay = check_number(delay, "delay", low=0.0)
    return float(np.mean(_times(primary, "primary") > delay))


def hedge_delay(calibration, extra_share: float) -> float:
    """The hedge delay that spends ``extra_share`` extra calls: the ``1 - extra_share`` quantile
    of ``calibration``, finish times of an earlier period (not the draws it is reported on, so
    the delay is set as an operator would set it, and the measured share hedged varies around
    ``extra_share``)."""
    extra_share = check_number(extra_share, "extra_share", low=0.0, high=1.0)
    calibration = _times(calibration, "calibration")
    if not calibration.size or not np.isfinite(calibration).all():
        raise ValueError(f"calibration must be finite finish times, got {calibration.size} values")
    return float(np.quantile(calibration, 1.0 - extra_share))


def parity_latency(own, parity, k: int, tau: float | None = None) -> tuple[np.ndarray, np.ndarray]:
    """ParM over ``own`` ``(..., K)`` finish times in parity groups of ``k`` consecutive queries
    and ``parity`` ``(..., K / k)``: query q is answered at ``min(T_q, max(tau, T_parity, max of
    the group's other T))`` (no ``tau``: as soon as a reconstruction is possible); returns that
    and whether it was reconstructed (not its own answer)."""
    if tau is not None:
        tau = check_number(tau, "tau", low=0.0, low_open=True)
    own = _times(own, "own")
    parity = _times(parity, "parity")
    k = check_count(k, "k", 2)
    if own.shape[-1] % k or parity.shape[-1] != own.shape[-1] // k:
        raise ValueError(f"parity must hold one finish time per {k} queries, got {parity.shape}")
    grouped = own.reshape(*own.shape[:-1], -1, k)
    # the latest of the others: the group's largest, or its second largest for the largest one
    order = np.sort(grouped, axis=-1)
    largest, second = order[..., -1:], order[..., -2:-1]
    others = np.where(grouped == largest, second, largest)
    rebuilt = np.maximum(parity[..., None], others)
    if tau is not None:
        rebuilt = np.maximum(rebuilt, tau)
    latency = np.minimum(grouped, rebuilt)
    return latency.reshape(own.shape), (rebuilt < grouped).reshape(own.shape)


def systematic_latency(
    own, workers, tau: float, min_results: int = 1, decode_cost: float = 0.0
) -> tuple[np.ndarray, np.ndarray]:
    """A systematic code's answers: ``own`` ``(..., K)`` the finish times of the inputs' own
    workers, ``workers`` ``(..., N)`` all N workers'. Decoding starts at ``t_dec = max(tau,
    the min_results-th finish)`` on the workers back by then and takes ``decode_cost``; query k
    is answered at ``T_k`` if ``T_k <= t_dec + decode_cost``, else at ``t_dec + decode_cost``
    (decoded). Returns the latencies and the decode start times ``(...,)``."""
    tau = check_number(tau, "tau", low=0.0, low_open=True)
    decode_cost = check_number(decode_cost, "decode_cost", low=0.0)
    own, workers = _times(own, "own"), _times(workers, "workers")
    min_results = check_count(min_results, "min_results", 1, workers.shape[-1])
    t_dec = np.maximum(tau, np.sort(workers, axis=-1)[..., min_results - 1])
    done = t_dec[..., None] + decode_cost
    return np.where(own <= done, own, done), t_dec


def wait_latency(workers, wait_for: int, decode_cost: float = 0.0) -> np.ndarray:
    """A non-systematic code waiting for the first ``wait_for`` of N, then decoding for
    ``decode_cost``: every query at the ``wait_for``-th smallest finish time plus
    ``decode_cost``, ``(...,)``."""
    workers = _times(workers, "workers")
    wait_for = check_count(wait_for, "wait_for", 1, workers.shape[-1])
    decode_cost = check_number(decode_cost, "decode_cost", low=0.0)
    return np.sort(workers, axis=-1)[..., wait_for - 1] + decode_cost


# -- regimes ----------------------------------------------------------------------------------


def synthetic_trace(rng: np.random.Generator, calls: int = 1000, workers: int = 64) -> np.ndarray:
    """The stand-in for a measured trace, ``(calls, workers)``: ``1 + 0.1 U`` per result, each
    worker position with its own fixed speed ``1 + |N(0, 0.05)|``, and with probability 0.03 a
    spike of ``LogNormal(ln 4, 0.6)`` times (the shape of thread latencies measured here under
    CPU contention: a tight body and rare multi-x spikes)."""
    speed = 1.0 + np.abs(rng.normal(0.0, 0.05, workers))
    body = (1.0 + 0.1 * rng.random((calls, workers))) * speed
    spike = rng.random((calls, workers)) < 0.03
    return body * np.where(spike, rng.lognormal(np.log(4.0), 0.6, (calls, workers)), 1.0)


SHIPPED_TRACES = ("trace-thread", "trace-ray")


def shipped_trace(backend: str):
    """The measured service-time trace of the latency experiment's ``backend`` cluster
    (``"thread"`` or ``"ray"``) that ships with the library: the path of its CSV."""
    if f"trace-{backend}" not in SHIPPED_TRACES:
        raise ValueError(f"backend must be 'thread' or 'ray'; got {backend!r}")
    return Path(str(importlib.resources.files(__package__).joinpath("traces", f"{backend}.csv")))


def delay_model(regime: str, config: Config, rng: np.random.Generator):
    """The delay model of ``regime`` (module docstring); a ``ValueError`` naming ``regimes``
    for an unknown one."""
    if regime == "shifted-exp":
        return ShiftedExponential(scale=1.0, rate=1.0)
    if regime == "bernoulli":
        return Bimodal(base=1.0, p=0.2, slowdown=3.0, jitter=0.1)
    if regime == "persistent":
        return BurstyMarkov(base=1.0, p_slow=0.002, p_recover=0.02, slowdown=10.0, jitter=0.1)
    if regime == "trace" or regime in SHIPPED_TRACES:
        if regime in SHIPPED_TRACES:
            table = Trace.from_csv(shipped_trace(regime.removeprefix("trace-"))).latencies
        elif config.trace_csv:
            table = Trace.from_csv(config.trace_csv).latencies
        else:
            table = synthetic_trace(rng)
        return Trace(table / np.median(table), shuffle=True)
    match = BIMODAL.fullmatch(regime)
    if match:
        p, slowdown = float(match["p"]), float(match["slowdown"])
        if 0 <= p <= 1 and slowdown > 0:
            return Bimodal(base=1.0, p=p, slowdown=slowdown, jitter=0.1)
    raise ValueError(
        f"regimes: unknown regime {regime!r} (known: shifted-exp, bimodal-p<p>-x<slowdown>, bernoulli, "
        "persistent, trace, trace-thread, trace-ray)"
    )


def check_config(config: Config) -> Config:
    """``config``'s values checked, a ``ValueError`` naming the field at fault."""
    if config.task not in TASKS:
        raise ValueError(f"task must be one of {', '.join(TASKS)}, got {config.task!r}")
    k = check_count(config.num_inputs, "num_inputs", 2)
    check_count(config.groups, "groups", 2)
    for level in config.levels:
        check_number(level, "levels", low=1.0, high=2.0)  # r < 1: no such resource level
        if level > 1 and round((level - 1) * k) < 1:
            raise ValueError(f"levels: {level} gives no extra worker at num_inputs = {k}")
    for tau in config.taus:
        check_number(tau, "taus", low=0.0, low_open=True)
    for fraction in config.wait_fractions:
        check_number(fraction, "wait_fractions", low=0.0, high=1.0, low_open=True)
    for parity in config.parity_k:
        check_count(parity, "parity_k", 2)
    check_number(config.decode_cost, "decode_cost", low=0.0)
    if config.parity not in ("learned", "deployed-model"):
        raise ValueError(f"parity must be 'learned' or 'deployed-model', got {config.parity!r}")
    rng = np.random.default_rng(0)
    for regime in config.regimes:
        delay_model(regime, Config(), rng)  # raises for an unknown one
    return config


# -- codes ------------------------------------------------------------------------------------


def systematic_workers(code) -> np.ndarray:
    """``(K,)``: the worker that computes input k raw, -1 where none: the codes'
    ``systematic_workers`` where it names one, else the first worker whose point is the input's
    (a layout with explicit points, or a bound ManifoldGCC, before the codes name them)."""
    found = getattr(code, "systematic_workers", None)
    if found is not None and np.any(np.asarray(found) >= 0):
        return np.asarray(found, dtype=np.intp)
    same = code.alpha[:, None] == code.beta[None, :]
    return np.where(same.any(axis=1), same.argmax(axis=1), -1)


def systematic_code(kind: str, k: int, n: int, **options):
    """A systematic GCC or BACC: ``systematic=True`` where the codes take it; else the same
    layout spelled out (the inputs at their Chebyshev points, each parity point at the middle
    of the widest gap between points placed so far)."""
    cls = GCC if kind == "gcc" else BACC
    try:
        return cls(k, n, systematic=True, **options)
    except TypeError:  # the codes without the option
        alpha = make_points("chebyshev", k, kind="data")
        placed = sorted(alpha)
        for _ in range(n - k):
            gaps = np.diff(placed)
            i = int(np.argmax(gaps))
            placed.insert(i + 1, (placed[i] + placed[i + 1]) / 2)
        return cls(k, n, alpha=alpha, beta=np.array(placed), **options)


def _positions(code, k: int, systematic: bool) -> np.ndarray:
    """``(N,)`` delay positions of the code's workers: input k's systematic worker at position
    k, the other workers at K, K + 1, ... in worker order (a code with no systematic worker:
    worker n at position n)."""
    own = systematic_workers(code) if systematic else np.full(code.num_inputs, -1)
    if not np.any(own >= 0):
        return np.arange(code.num_workers)
    position = np.full(code.num_workers, -1)
    position[own[own >= 0]] = np.flatnonzero(own >= 0)
    rest = np.flatnonzero(position < 0)
    position[rest] = k + np.arange(rest.size)
    return position


# -- tasks ------------------------------------------------------------------------------------


def _task_rng(seed: int, *key) -> np.random.Generator:
    return np.random.default_rng([seed, *(zlib.crc32(str(part).encode()) for part in key)])


def _task(config: Config, seed: int, progress: bool):
    """``(f, queries (Q, ...), labels (Q,))``: the pool the groups draw from."""
    if config.task in models.MODELS:
        data = datasets.mnist()
        return models.numpy_function(config.task, progress=progress), data.test_x, data.test_y
    # the stand-in: points on a curve in R^100, f linear onto 10 classes, labels f's argmax
    rng = _task_rng(seed, "linear")
    embed, weights = manifold_map(rng, 1), rng.normal(size=(100, 10)) / 10.0
    x = embed(rng.uniform(size=(400, 1)))

    def f(batch):
        return np.asarray(batch, dtype=np.float64) @ weights

    return f, x, np.argmax(f(x), axis=1)


# -- the run ----------------------------------------------------------------------------------


def run(config: Config, seed: int, *, progress: bool = True) -> list[dict]:
    """The experiment's rows: one per (regime, level, scheme, knob), each over ``groups`` x K
    queries."""
    check_config(config)
    f, pool, labels = _task(config, seed, progress)
    k, g = config.num_inputs, config.groups
    draw = _task_rng(seed, "groups")
    picks = np.stack([draw.choice(len(pool), k, replace=False) for _ in range(g)])
    x, y_label = pool[picks], labels[picks]  # (G, K, ...), (G, K)
    truth = f(x.reshape(g * k, *x.shape[2:])).reshape(g, k, -1)
    model_label = truth.argmax(axis=2)
    model_acc = float(np.mean(model_label == y_label))
    # loaded (or trained: minutes, with their own progress) before the bar starts
    parity_models = _parity_models(config, k, progress)
    rows = []
    steps = len(config.levels) * (1 + len(config.regimes))
    with show_progress("frontier: levels x (codes + regimes)", steps, enabled=progress) as step:
        prepared = {}
        for level in config.levels:
            prepared[level] = _coded_results(f, x, k, round(level * k), config, parity_models)
            step()
        for regime in config.regimes:
            rng = _task_rng(seed, "delays", regime)
            model = delay_model(regime, config, rng)
            # the hedge delay's calibration: an earlier period of the same deployment, its own draws
            calibration_rng = _task_rng(seed, "calibration", regime)
            model.reset()
            calibration = np.stack([model.sample(k, calibration_rng) for _ in range(g)])
            model.reset()
            draws = np.stack([model.sample(2 * k, rng) for _ in range(g)])  # (G, 2K) positions
            for level in config.levels:
                cell = _cell(config, level, draws, calibration, prepared[level], truth, y_label, model_label)
                boot = _task_rng(seed, "bootstrap", regime, level).integers(g, size=(RESAMPLES, g))
                rows += _rows(cell, boot, regime, level, config, model_acc, seed)
                step()
    return rows


def _coded_results(f, x, k: int, n: int, config: Config, parity_models: dict) -> dict:
    """Per coded scheme: ``(codes per group, positions per group (G, N), results (G, N, C))``:
    f computed once per group on all N coded inputs; ``"parity"``: ``{k: (G, K / k, C)}``, the
    parity model's outputs on the sums of k consecutive queries, where N = K + K / k."""
    g = x.shape[0]
    sizes = [size for size in parity_models if (n - k) * size == k]
    out = {"parity": {size: _parity_outputs(f, x, size, parity_models[size]) for size in sizes}}
    decoding = config.gcc_decoding
    fixed = {
        "gcc-systematic": systematic_code("gcc", k, n, decoding=decoding),
        "bacc-systematic": systematic_code("bacc", k, n),
        "gcc": GCC(k, n, decoding=decoding),
        "bacc": BACC(k, n),
    }
    manifold = ManifoldGCC(k, n, decoding=decoding)
    for scheme in CODED:
        codes = [manifold.bind(x[i]) for i in range(g)] if scheme == "manifold-gcc" else [fixed[scheme]] * g
        coded = np.stack([code.encode(x[i]) for i, code in enumerate(codes)])  # (G, N, ...)
        y = f(coded.reshape(g * n, *coded.shape[2:])).reshape(g, n, -1).astype(np.float64)
        positions = np.stack([_positions(code, k, scheme in SYSTEMATIC) for code in codes])
        out[scheme] = (codes, positions, y)
    return out


def _cell(config, level, draws, calibration, coded, truth, y_label, model_label) -> list[dict]:
    """Each scheme's per-query latencies ``(G, K)``, correctness against the labels and the
    model, the degraded mask and the extra load, at one (regime, level)."""
    g, k = truth.shape[:2]
    n = round(level * k)
    extra = n - k
    own = draws[:, :k]
    exact_right, exact_agree = model_label == y_label, np.ones((g, k), dtype=bool)
    none = np.zeros((g, k), dtype=bool)
    cell = []

    def add(scheme, knob, value, latency, right, agree, degraded, load, parity=""):
        cell.append(
            {
                "scheme": scheme,
                "knob": knob,
                "knob_value": value,
                "num_workers": n if scheme != "uncoded" else k,
                "latency": latency,
                "right": right,
                "agree": agree,
                "degraded": degraded,
                "extra_load": load,
                "parity": parity,
            }
        )

    add("uncoded", "", "", own, exact_right, exact_agree, none, 0.0)
    copy = np.full((g, k), np.inf)
    copy[:, :extra] = draws[:, k : k + extra]  # the first `extra` queries of a group get a copy
    add("replication", "r", level, replication_latency(own, copy), exact_right, exact_agree, none, extra / k)
    delay = hedge_delay(calibration, extra / k)
    hedged = hedge_latency(own, draws[:, k : 2 * k], delay)
    add("hedge", "d", delay, hedged, exact_right, exact_agree, none, hedged_share(own, delay))
    parity_k = k // extra if extra and k % extra == 0 else 0
    if parity_k in config.parity_k:
        estimate = _parm_estimates(truth, parity_k, coded).argmax(axis=2)
        for tau in config.taus:
            latency, rebuilt = parity_latency(own, draws[:, k : k + extra], parity_k, tau)
            label = np.where(rebuilt, estimate, model_label)
            add(
                f"parm-k{parity_k}",
                "tau",
                tau,
                latency,
                label == y_label,
                label == model_label,
                rebuilt,
                extra / k,
                parity=parity_kind(config),
            )
    for scheme in SYSTEMATIC:
        codes, positions, y = coded[scheme]
        times = np.take_along_axis(draws, positions, axis=1)  # (G, N)
        own_workers = np.stack([systematic_workers(code) for code in codes])
        for tau in config.taus:
            mins = codes[0].min_results
            latency, t_dec = systematic_latency(own, times, tau, mins, config.decode_cost)
            decoded = own > t_dec[:, None] + config.decode_cost  # its own result not back by then
            label = model_label.copy()
            for i in np.flatnonzero(decoded.any(axis=1)):
                alive = np.flatnonzero(times[i] <= t_dec[i])
                estimate = codes[i].decode_details(y[i, alive], alive).estimates
                label[i, decoded[i]] = estimate[decoded[i]].argmax(axis=1)
            # a returned systematic worker's row is f(x_k) (its own result): the model's label,
            # up to the encoder's rounding of x_k
            own_label = np.take_along_axis(y, own_workers[:, :, None], axis=1).argmax(axis=2)
            label = np.where(decoded, label, own_label)
            add(scheme, "tau", tau, latency, label == y_label, label == model_label, decoded, extra / k)
    for scheme in NON_SYSTEMATIC:
        codes, positions, y = coded[scheme]
        times = np.take_along_axis(draws, positions, axis=1)
        for fraction in config.wait_fractions:
            wait_for = max(codes[0].min_results, math.ceil(fraction * n))
            t_wait = wait_latency(times, wait_for, config.decode_cost)
            label = np.empty((g, k), dtype=np.intp)
            for i in range(g):
                alive = np.argsort(times[i], kind="stable")[:wait_for]
                label[i] = codes[i].decode_details(y[i, alive], alive).estimates.argmax(axis=1)
            latency = np.broadcast_to(t_wait[:, None], (g, k))
            add(scheme, "w", wait_for, latency, label == y_label, label == model_label, ~none, extra / k)
    return cell


def parity_kind(config: Config) -> str:
    """What computes ParM's parity: ``"learned"`` (the parity model of
    :mod:`codedcomputing.models.parity` for the task's network: shipped, or trained on first use) or
    ``"deployed-model"`` (the network itself on the sum of the group's queries: exact for the
    ``linear`` stand-in)."""
    return "deployed-model" if config.task == "linear" or config.parity == "deployed-model" else "learned"


def _parity_sizes(config: Config) -> list[int]:
    """The group sizes of ``config.parity_k`` that some level runs (L = 1 + 1/k)."""
    k = config.num_inputs
    return [
        size
        for size in config.parity_k
        if k % size == 0 and any(round(level * k) - k == k // size for level in config.levels)
    ]


def parity_models_used(config: Config) -> list[tuple[str, int]]:
    """``[(task, k), ...]``: the learned parity models (:mod:`codedcomputing.models.parity`) a
    run of ``config`` loads (shipped, cached, or trained on first use; none with
    ``parity="deployed-model"`` or on the ``linear`` task)."""
    return [(config.task, size) for size in _parity_sizes(config)] if parity_kind(config) == "learned" else []


def _parity_models(config: Config, k: int, progress: bool) -> dict:
    """``{size: parity model (groups (G, size, ...) -> (G, C)) or None (the deployed network on
    the sum)}`` for each group size of ``config.parity_k`` that some level runs."""
    sizes = _parity_sizes(config)
    if parity_kind(config) != "learned":
        return dict.fromkeys(sizes)
    from ..models import parity

    return {
        size: parity.parity_function(parity.load_parity(config.task, size, progress=progress))
        for size in sizes
    }


def _parity_outputs(f, x, size: int, model) -> np.ndarray:
    """``(G, K / size, C)``: the parity outputs of each group of ``size`` consecutive queries
    (``model`` None: ``f`` on the group's sum)."""
    g, k = x.shape[:2]
    groups = x.reshape(g * (k // size), size, *x.shape[2:])
    outputs = f(groups.sum(axis=1)) if model is None else model(groups)
    return np.asarray(outputs, dtype=np.float64).reshape(g, k // size, -1)


def _parm_estimates(truth, k: int, coded) -> np.ndarray:
    """ParM's reconstruction of every query from its group's parity output and the other
    outputs, ``(G, K, C)``: ``P - sum of the others`` (``coded["parity"][k]``: the parity
    outputs, (G, K / k, C))."""
    g, num, c = truth.shape
    parity = coded["parity"][k]  # (G, K / k, C)
    sums = truth.reshape(g, num // k, k, c).sum(axis=2, keepdims=True)
    return (parity[:, :, None, :] - (sums - truth.reshape(g, num // k, k, c))).reshape(g, num, c)


def _rows(cell, boot, regime, level, config, model_acc, seed) -> list[dict]:
    """The rows of one (regime, level), with bootstrap intervals over groups (the same
    resampled groups for every scheme) and paired p99.9 ratios to replication and hedging."""
    resampled = {}
    for entry in cell:
        lat = entry["latency"]
        resampled[entry["scheme"], entry["knob_value"]] = np.percentile(
            lat[boot].reshape(boot.shape[0], -1), 99.9, axis=1
        )
    replication = next(v for (s, _), v in resampled.items() if s == "replication")
    hedge = next(v for (s, _), v in resampled.items() if s == "hedge")
    point = {e["scheme"]: float(np.percentile(e["latency"], 99.9)) for e in cell if e["scheme"] in EXACT}
    held = _held_out(cell, boot)
    rows = []
    for entry in cell:
        if entry["scheme"] == "uncoded" and level != config.levels[0]:
            continue  # 1x whatever the level: once per regime
        lat, right = entry["latency"], entry["right"]
        p999 = float(np.percentile(lat, 99.9))
        boots = resampled[entry["scheme"], entry["knob_value"]]
        acc_boot = right.mean(axis=1)[boot].mean(axis=1)
        degraded = entry["degraded"]
        to_rep, to_hedge = boots / replication, boots / hedge
        rows.append(
            {
                "experiment": NAME,
                "task": config.task,
                "regime": regime,
                "level": float(level) if entry["scheme"] != "uncoded" else 1.0,
                "num_inputs": config.num_inputs,
                "num_workers": entry["num_workers"],
                "scheme": entry["scheme"],
                "knob": entry["knob"],
                "knob_value": entry["knob_value"],
                "parity": entry["parity"],
                "queries": lat.size,
                "seed": seed,
                "p50": float(np.percentile(lat, 50)),
                "p99": float(np.percentile(lat, 99)),
                "p999": p999,
                "p999_low": float(np.percentile(boots, 2.5)),
                "p999_high": float(np.percentile(boots, 97.5)),
                "accuracy": float(right.mean()),
                "accuracy_low": float(np.percentile(acc_boot, 2.5)),
                "accuracy_high": float(np.percentile(acc_boot, 97.5)),
                "rel_acc": float(entry["agree"].mean()),
                "degraded_share": float(degraded.mean()),
                "degraded_acc": float(entry["agree"][degraded].mean()) if degraded.any() else "",
                "extra_load": float(entry["extra_load"]),
                "model_acc": model_acc,
                "decode_cost": config.decode_cost,
                # the paired ratios at this level ("" for uncoded, which has no level)
                "vs_replication": p999 / point["replication"],
                "vs_replication_low": float(np.percentile(to_rep, 2.5)),
                "vs_replication_high": float(np.percentile(to_rep, 97.5)),
                "vs_hedge": p999 / point["hedge"],
                "vs_hedge_low": float(np.percentile(to_hedge, 2.5)),
                "vs_hedge_high": float(np.percentile(to_hedge, 97.5)),
                **held[entry["scheme"], entry["knob_value"]],
            }
        )
        if entry["scheme"] == "uncoded":
            rows[-1] |= dict.fromkeys([key for key in rows[-1] if "vs_" in key], "")
    return rows


def _held_out(cell, boot) -> dict:
    """Per (scheme, knob value): its figures on the two halves of the groups, so that the headline
    can pick a scheme's knob on one half and report it on the other. ``select_p999``,
    ``select_accuracy``: on the even-numbered groups (where the best knob is chosen);
    ``heldout_*``: on the odd-numbered ones, with the p99.9 ratios to replication and hedging
    and their paired bootstrap intervals (``boot``'s resamples folded onto the odd groups, the
    same for every scheme)."""
    boot = boot[:, : boot.shape[1] // 2] % (cell[0]["latency"].shape[0] // 2)
    halves, resampled = {}, {}
    for entry in cell:
        key, lat, right = (entry["scheme"], entry["knob_value"]), entry["latency"], entry["right"]
        report = lat[1::2]
        halves[key] = {
            "select_p999": float(np.percentile(lat[0::2], 99.9)),
            "select_accuracy": float(right[0::2].mean()),
            "heldout_p999": float(np.percentile(report, 99.9)),
            "heldout_accuracy": float(right[1::2].mean()),
            "heldout_queries": report.size,
        }
        resampled[key] = np.percentile(report[boot].reshape(boot.shape[0], -1), 99.9, axis=1)
    for name in ("replication", "hedge"):
        base = next(key for key in halves if key[0] == name)
        for key, figures in halves.items():
            ratio = resampled[key] / resampled[base]
            figures[f"heldout_vs_{name}"] = figures["heldout_p999"] / halves[base]["heldout_p999"]
            figures[f"heldout_vs_{name}_low"] = float(np.percentile(ratio, 2.5))
            figures[f"heldout_vs_{name}_high"] = float(np.percentile(ratio, 97.5))
    return halves


# -- reading the rows -------------------------------------------------------------------------


def row_problem(row: dict) -> str:
    """Why a row cannot be drawn across its cells ("" if it can): p50 <= p99 <= p99.9."""
    return "" if row["p50"] <= row["p99"] <= row["p999"] else "percentiles out of order"


def frontier_table(rows: list[dict], tolerance: float = TOLERANCE) -> list[dict]:
    """Per (regime, level > 1): the best coded scheme against replication and level-matched
    hedging at the same level. The scheme and its knob are *chosen* on the even-numbered groups
    (``select_*`` columns: the lowest p99.9 among :data:`CODED` whose accuracy is within
    ``tolerance`` of the exact model's; where none is, the most accurate of those with a p99.9
    below both baselines', or of all if none is) and *reported* on the odd-numbered ones
    (``heldout_*``: p99.9, accuracy, the paired ratio intervals), so the figure a claim rests
    on was not used to pick it; ParM's tau likewise. ``keeps_accuracy`` and ``wins`` (it keeps
    accuracy and its p99.9 is below both baselines') are read on the held-out half."""
    table = []
    cells = dict.fromkeys((row["regime"], row["level"]) for row in rows if row["level"] > 1)
    for regime, level in cells:
        mine = [row for row in rows if (row["regime"], row["level"]) == (regime, level)]
        by_scheme = {row["scheme"]: row for row in mine if row["scheme"] in EXACT}
        coded = [row for row in mine if row["scheme"] in CODED]
        if not coded or "replication" not in by_scheme or "hedge" not in by_scheme:
            continue
        replication, hedge = by_scheme["replication"], by_scheme["hedge"]
        # the exact schemes' accuracy is the model's on the same half of the groups
        select_model, model_acc = replication["select_accuracy"], replication["heldout_accuracy"]
        candidates = [row for row in coded if row["select_accuracy"] >= select_model - tolerance]
        if candidates:
            best = min(candidates, key=lambda row: (row["select_p999"], -row["select_accuracy"]))
        else:  # what its speed costs: the most accurate of those faster than both, if any
            baseline = min(replication["select_p999"], hedge["select_p999"])
            faster = [row for row in coded if row["select_p999"] < baseline]
            best = min(faster or coded, key=lambda row: (-row["select_accuracy"], row["select_p999"]))
        parms = [row for row in mine if row["scheme"].startswith("parm-")]
        parm = min(
            parms,
            key=lambda row: (row["select_accuracy"] < select_model - tolerance, row["select_p999"]),
            default=None,
        )
        keeps = best["heldout_accuracy"] >= model_acc - tolerance
        baseline = min(replication["heldout_p999"], hedge["heldout_p999"])
        table.append(
            {
                "regime": regime,
                "level": level,
                "scheme": best["scheme"],
                "knob": best["knob"],
                "knob_value": best["knob_value"],
                "p999": best["heldout_p999"],
                "accuracy": best["heldout_accuracy"],
                "degraded_acc": best["degraded_acc"],
                "model_acc": model_acc,
                "keeps_accuracy": keeps,
                "replication_p999": replication["heldout_p999"],
                "hedge_p999": hedge["heldout_p999"],
                "hedge_extra_load": hedge["extra_load"],
                "parm": parm["scheme"] if parm else "",
                "parm_knob_value": parm["knob_value"] if parm else "",
                "parm_p999": parm["heldout_p999"] if parm else math.nan,
                "parm_accuracy": parm["heldout_accuracy"] if parm else math.nan,
                "vs_replication": tuple(
                    best[f"heldout_vs_replication{end}"] for end in ("", "_low", "_high")
                ),
                "vs_hedge": tuple(best[f"heldout_vs_hedge{end}"] for end in ("", "_low", "_high")),
                "wins": keeps and best["heldout_p999"] < baseline,
                "verdict": _verdict(
                    keeps, best["heldout_p999"], baseline, _interval_to(best, replication, hedge)
                ),
                "queries": best["heldout_queries"],
                "select_queries": best["queries"] - best["heldout_queries"],
            }
        )
    return table


def _interval_to(best: dict, replication: dict, hedge: dict) -> tuple[float, float]:
    """The held-out paired 95% interval of ``best``'s p99.9 over the faster baseline's."""
    name = "replication" if replication["heldout_p999"] <= hedge["heldout_p999"] else "hedge"
    return best[f"heldout_vs_{name}_low"], best[f"heldout_vs_{name}_high"]


def _verdict(keeps: bool, p999: float, baseline: float, interval: tuple[float, float] = (0.0, 0.0)) -> str:
    """ "wins", "ties" (the same p99.9), "loses (latency)" or "loses (accuracy)"; a win or a
    latency loss whose paired ratio ``interval`` to the faster baseline holds 1 says
    "not clear"."""
    if not keeps:
        return "loses (accuracy)"
    if math.isclose(p999, baseline, rel_tol=1e-9):
        return "ties"
    clear = not interval[0] <= 1.0 <= interval[1]
    if p999 < baseline:
        return "wins" if clear else "wins (not clear)"
    return "loses (latency)" if clear else "loses (latency, not clear)"


VERDICT_CELLS = {  # the headline's narrow spelling
    "loses (accuracy)": "loses:\naccuracy",
    "loses (latency)": "loses:\nlatency",
    "loses (latency, not clear)": "loses:\nlatency?",
    "wins (not clear)": "wins?",
}


def _label(row: dict) -> str:
    knob = row["knob_value"]
    if row["knob"] == "tau":
        return f"{row['scheme']} tau={knob:g}"
    if row["knob"] == "w":
        return f"{row['scheme']} w={knob}"
    return row["scheme"]


def headline(rows: list[dict]) -> Headline:
    """Per (regime, level): the best coded scheme of :func:`frontier_table` (its knob chosen on
    one half of the groups), its p99.9 and accuracy on the other half, and its p99.9 as a share
    of replication's and of level-matched hedging's there, with the paired intervals, and
    learned parity's (ParM) p99.9 and accuracy. Cells break in two lines by design, so the
    table fits 100 columns."""
    table_rows = []
    for entry in frontier_table(rows):
        ratio, low, high = entry["vs_replication"]
        hedge, hedge_low, hedge_high = entry["vs_hedge"]
        table_rows.append(
            (
                f"{entry['regime']}\n{entry['level']:g}x",
                _label(entry).replace(" ", "\n"),
                f"{entry['p999']:.3g}\n({entry['accuracy']:.3f})",
                f"{ratio:.2g} of {entry['replication_p999']:.3g}\n[{low:.2g},{high:.2g}]",
                f"{hedge:.2g} of {entry['hedge_p999']:.3g}\n[{hedge_low:.2g},{hedge_high:.2g}]",
                f"{entry['parm_p999']:.3g}\n({entry['parm_accuracy']:.3f})" if entry["parm"] else "",
                VERDICT_CELLS.get(entry["verdict"], entry["verdict"]),
            )
        )
    model_acc = rows[0]["model_acc"] if rows else math.nan
    table = frontier_table(rows)
    held, chosen = (table[0]["queries"], table[0]["select_queries"]) if table else (0, 0)
    return Headline(
        title="frontier: the best coded scheme's p99.9 against replication and hedging at equal resources",
        columns=(
            "regime",
            "best code",
            "p99.9\n(acc.)",
            "/ repl.\n[95%]",
            "/ hedge\n[95%]",
            "ParM\n(acc.)",
            "coding",
        ),
        rows=table_rows,
        note=f"latency in base service times; exact model accuracy {model_acc:.3f}; decoding costs "
        f"{rows[0].get('decode_cost', 0.0) if rows else 0.0:g} per decoded answer. Each code's knob "
        f"chosen on the even-numbered groups ({chosen} queries), every figure shown on the odd-numbered "
        f"ones ({held} queries: a p99.9 rests on its ~{max(held // 1000, 1)} slowest, fewer distinct "
        f"values for codes that answer a group at once); intervals: paired bootstrap over groups "
        f"({RESAMPLES} resamples); 'wins': within 1 point of the model's accuracy and a p99.9 below both "
        "baselines'; '?': the paired interval of the ratio to the faster one holds 1",
    )


STYLES = {
    "uncoded": {"color": "0.4", "marker": "x", "ls": ""},
    "replication": {"color": "C4", "marker": "v", "ls": ""},
    "hedge": {"color": "C1", "marker": "s", "ls": ""},
    "gcc-systematic": {"color": "C0", "marker": "o", "ls": "-"},
    "bacc-systematic": {"color": "C2", "marker": "^", "ls": "-"},
    "manifold-gcc": {"color": "C3", "marker": "D", "ls": "-"},
    "gcc": {"color": "C0", "marker": "o", "ls": ":", "mfc": "none"},
    "bacc": {"color": "C2", "marker": "^", "ls": ":", "mfc": "none"},
    "parm-k2": {"color": "C5", "marker": "P", "ls": "--"},
    "parm-k4": {"color": "C6", "marker": "X", "ls": "--"},
}
KNOB_NAMES = {"tau": "over tau", "w": "over w"}


def plot(rows: list[dict], out_dir: Path) -> list[Path]:
    """``frontier.png``: p99.9 latency (log) against accuracy, a panel per regime (rows) and
    resource level (columns); each coded scheme a line over its knob, the exact baselines
    single points; error bars: 95% bootstrap intervals of both. Points more than 15 points
    below the model's accuracy are drawn at the axis' left edge, hollow."""
    plt = pyplot()
    from matplotlib import ticker

    regimes = list(dict.fromkeys(row["regime"] for row in rows))
    levels = sorted({row["level"] for row in rows if row["level"] > 1})
    fig, axes = plt.subplots(
        len(regimes), len(levels), figsize=(max(4.6 * len(levels), 9.0), 3.0 * len(regimes)), squeeze=False
    )
    model_acc = rows[0]["model_acc"]
    left = model_acc - 0.15
    for axes_row, regime in zip(axes, regimes, strict=True):
        for ax, level in zip(axes_row, levels, strict=True):
            mine = [r for r in rows if r["regime"] == regime and r["level"] in (level, 1.0)]
            for scheme in dict.fromkeys(r["scheme"] for r in mine):
                points = sorted(
                    (r for r in mine if r["scheme"] == scheme),
                    key=lambda r: r["knob_value"] if r["knob_value"] != "" else 0,
                )
                style = dict(STYLES.get(scheme, {"color": "C5", "marker": "P", "ls": ""}))
                x = np.array([max(r["accuracy"], left) for r in points])
                y = np.array([r["p999"] for r in points])
                xerr = np.array(
                    [
                        [max(r["accuracy"] - r["accuracy_low"], 0), r["accuracy_high"] - r["accuracy"]]
                        for r in points
                    ]
                ).T
                yerr = np.array([[r["p999"] - r["p999_low"], r["p999_high"] - r["p999"]] for r in points]).T
                clipped = np.array([r["accuracy"] < left for r in points])
                xerr[:, clipped] = 0
                label = scheme + (
                    f" ({KNOB_NAMES[points[0]['knob']]})" if points[0]["knob"] in KNOB_NAMES else ""
                )
                line = ax.errorbar(
                    x, y, xerr=xerr, yerr=np.maximum(yerr, 0), label=label, ms=4, lw=1, capsize=2, **style
                )
                if clipped.any():
                    ax.plot(
                        x[clipped], y[clipped], ls="", marker="<", ms=7, mfc="none", color=line[0].get_color()
                    )
            ax.axvline(model_acc, color="0.6", ls=":", lw=1)
            ax.set_xlim(left - 0.005, model_acc + 0.01)
            ax.set_yscale("log")
            # plain numbers at 1, 2, 5 x 10^k: latencies span about one decade
            ax.yaxis.set_major_locator(ticker.LogLocator(subs=(1.0, 2.0, 5.0)))
            ax.yaxis.set_major_formatter(ticker.FuncFormatter(lambda value, _: f"{value:g}"))
            ax.yaxis.set_minor_formatter(ticker.NullFormatter())
            ax.set_title(f"{regime}, {level:g}x", fontsize=9)
            ax.set_xlabel("accuracy (vs labels)", fontsize=8)
            ax.set_ylabel("p99.9 latency (service times)", fontsize=8)
            ax.tick_params(labelsize=7)
    # one legend for every scheme drawn in any panel (ParM's k differs between levels)
    legend = {}
    for ax in axes.flat:
        for handle, label in zip(*ax.get_legend_handles_labels(), strict=True):
            legend.setdefault(label, handle)
    axes[0][0].legend(legend.values(), legend.keys(), fontsize=6, loc="best")
    # at the very top: tight_layout keeps the suptitle's height free there, not at the default
    # y = 0.98, which on a tall figure (ten regimes) lands inside the first row's titles
    fig.suptitle(
        "frontier: per-query p99.9 latency against accuracy at equal resources",
        y=1 - 0.06 / fig.get_figheight(),
        va="top",
    )
    queries = rows[0]["queries"]
    caption = (
        f"bars: 95% bootstrap intervals over groups ({RESAMPLES} resamples), {queries} queries a point; "
        "dotted: the model's accuracy; '<': further left"
    )
    return [save_figure(fig, out_dir, NAME, caption)]
