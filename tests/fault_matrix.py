"""The fault matrix: backend x fault kind x number of faulty workers -> what a coded call does.

A test helper (``tests/runtime/test_fault_matrix.py`` asserts it; ``tests/drivers/fault_matrix.py`` prints
it). Setting: a code (GCC, and BACC) with ``K = 4`` inputs and ``N = 12`` workers, ``S = 3``
stragglers allowed, ``executor.run(X, wait_for=N - S, deadline=D)``; ``f`` a fixed random tanh
layer mapping 5 columns to 3. The faulty workers ARRIVE FIRST: a :class:`cc.delays.Trace`
gives them delay 0 and the honest ones 20-40 ms, so a faulty result is the first thing the
master sees.

``f`` (:class:`FaultyF`) receives only the coded row, so it finds its worker by the nearest
row of ``code.encode(X)`` and applies that worker's fault (:data:`KINDS`); ``"hang"`` is the
library's own fault (:class:`cc.faults.Fixed`). On :class:`cc.SimulatedCluster`, which runs
``f`` on batches of rows and does not time it: a batch that holds a faulty worker's row
raises, so the cluster runs the rows one by one, as real workers would; and ``"sleep"`` is
a delay past the deadline in the trace (a sleeping ``f`` would not be late on a virtual
clock).

Documented outcomes (what the runtime implements; :func:`documented`):

- (a) kinds that make a worker unusable (:data:`UNUSABLE`): with at most ``S + 1`` faulty
  workers the call returns finite ``(K, d)`` estimates equal to decoding the true outputs of
  the workers in ``result.alive``, every faulty worker absent from ``alive`` and present in
  ``report.failed`` (``report.dropped`` for ``"sleep"`` and ``"hang"``); with all ``N``
  faulty, ``run`` raises :class:`cc.InsufficientResultsError` carrying ``.report``.
- (b) kinds whose output is usable after conversion (:data:`CONVERTIBLE`: a list, a torch
  tensor for numpy inputs): those workers are in ``alive`` and the estimates are a numpy
  array equal to decoding the true outputs.
- (c) ``"garbage"``: finite ``(K, d)`` estimates (nothing at the master can tell it).
- ``"misshaped"`` from all ``N`` workers is no fault the master can see: every worker agrees
  on the shape, so the call decodes estimates of that shape ("ok (the shape all returned)").

Each call runs on a helper thread under a time limit, so that a crash (any exception,
``SystemExit`` included) or a hang is recorded as the call's outcome (:class:`Observation`) and
the matrix goes on. A call whose deadline expired before an honest worker answered (a busy
machine) is run again with a longer deadline (:data:`DEADLINE_FACTORS`, :func:`run_call`). On
Ray one :class:`cc.RayCluster` (:func:`start_ray`, :data:`RAY_CPUS` CPUs) serves every cell:
its ``delays``, ``faults`` and ``rng`` are set afresh for each call, and after each call
:func:`settle` waits until the tasks left over have run (after a ``"sleep"`` call, until the
sleepers woke), so the next call starts on free CPUs with warm worker processes. Sleeping and
hung tasks hold their CPUs past the deadline, so Ray gets more logical CPUs (:data:`RAY_CPUS`)
than a cell has such tasks; and a faulty task may still be queued when the honest results
suffice (Ray picks the order; behind a killed worker process, :data:`KILLS_PROCESS`, the more
so), so an unusable faulty worker that never arrived may be in ``report.dropped``
(:func:`documented` accepts that, on Ray only).
"""

from __future__ import annotations

import math
import os
import sys
import threading
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass

import numpy as np
import torch

import codedcomputing as cc
from codedcomputing.runtime import Cluster, Report

K, N, S = 4, 12, 3
WAIT_FOR = N - S
D_IN, D_OUT = 5, 3
COUNTS = (1, S, S + 1, N)
CODES = ("gcc", "bacc")
BACKENDS = ("thread", "simulated", "ray")
DEADLINE_S = {"thread": 1.0, "simulated": 1.0, "ray": 2.0}
# past deadline + this a call is "hang": far above any wait on a busy machine (a hang is a bug)
LIMIT_S = {"thread": 60.0, "simulated": 60.0, "ray": 120.0}
# A call whose deadline expired before some HONEST worker answered says nothing about the fault
# under test, only that the machine was busy (at load 10 no Ray task answered within 2 s): it is
# run again with the deadline times the next factor, and judged by the first call in which every
# honest worker that the call waited for arrived in time (:func:`timing_limited`). A wrong
# outcome that does not depend on the deadline fails at every factor.
DEADLINE_FACTORS = (1, 4, 16)
HONEST_DELAY_S = (0.02, 0.04)  # honest workers' delays, spread over this range; faulty: 0
SLEEP_PAST_S = 0.25  # a "sleep" worker answers this long after the deadline (then threads are free)
# Logical CPUs of the local Ray: more than the S + 1 sleeping or hung tasks a cell can hold,
# so that honest tasks are never queued behind them past the deadline (with 2, one seed in
# three of a 4-sleeper cell dropped every honest worker).
RAY_CPUS = 6

UNUSABLE = (
    "raise",
    "systemexit",
    "memoryerror",
    "nan",
    "inf",
    "misshaped",
    "none",
    "strings",
    "sleep",
    "hang",
    "os_exit",
)
CONVERTIBLE = ("list", "torch")
UNDETECTABLE = ("garbage",)
KINDS = (
    "raise",
    "systemexit",
    "memoryerror",
    "nan",
    "inf",
    "garbage",
    "misshaped",
    "none",
    "list",
    "torch",
    "strings",
    "sleep",
    "hang",
    "os_exit",
)
RAY_ONLY = ("os_exit",)  # os._exit on a thread would end the test process
LATE = ("sleep", "hang")  # faulty workers that never arrive in time: report.dropped
KILLS_PROCESS = ("systemexit", "os_exit")  # on Ray: the worker process exits

# Ray worker processes import torch in settle() (unpickling _Warm, which refers to it),
# outside the timed calls. (A first import of torch inside a worker thread, racing the
# master, is tested on its own in runtime/test_worker_results.py.)

_rng = np.random.default_rng(0)
WEIGHTS = _rng.normal(size=(D_IN, D_OUT)) / math.sqrt(D_IN)
BIAS = 0.1 * _rng.normal(size=D_OUT)


def kinds_for(backend: str) -> tuple[str, ...]:
    """The fault kinds tried on ``backend`` (``"os_exit"`` only on Ray)."""
    return tuple(kind for kind in KINDS if backend == "ray" or kind not in RAY_ONLY)


def honest(x) -> np.ndarray:
    """The true ``f``: a fixed random tanh layer, ``(n, 5) -> (n, 3)``."""
    return np.tanh(np.asarray(x, dtype=np.float64) @ WEIGHTS + BIAS)


def make_code(name: str) -> cc.Code:
    if name == "gcc":
        return cc.GCC(K, N)
    if name == "bacc":
        return cc.BACC(K, N)
    raise ValueError(f"code must be one of {CODES}, got {name!r}")


class FaultyF:
    """``f`` for one call: :func:`honest`, except on the workers in ``faults`` ({worker: kind}).

    A worker is found by the row of ``coded`` (the call's ``code.encode(X)``) nearest to the
    row it received. A batch of several rows holding a faulty worker's row raises
    :class:`ValueError`, so a simulated cluster runs those rows one by one. ``"sleep"`` sleeps
    until ``wake_at`` (``time.time()`` seconds), then answers correctly. A module-level class,
    so that cloudpickle can ship it to Ray workers (by value: see :func:`start_ray`).
    """

    def __init__(self, coded, faults: dict[int, str], wake_at: float = 0.0, seed: int = 0):
        self.coded = np.array(coded, dtype=np.float64)
        self.faults = {int(n): kind for n, kind in faults.items()}
        self.wake_at = float(wake_at)
        self.seed = int(seed)
        self.weights, self.bias = WEIGHTS, BIAS
        gaps = np.linalg.norm(self.coded[:, None, :] - self.coded[None, :, :], axis=-1)
        gaps[np.diag_indices_from(gaps)] = np.inf
        if gaps.min() < 1e-6:
            raise ValueError("two coded rows coincide: the workers cannot be told apart")

    def honest(self, x) -> np.ndarray:
        return np.tanh(np.asarray(x, dtype=np.float64) @ self.weights + self.bias)

    def workers_of(self, x) -> np.ndarray:
        x = np.asarray(x, dtype=np.float64).reshape(len(x), -1)
        return np.argmin(np.square(x[:, None, :] - self.coded[None, :, :]).sum(axis=-1), axis=1)

    def __call__(self, x):
        workers = self.workers_of(x)
        kinds = [self.faults.get(int(n)) for n in workers]
        if len(workers) != 1:
            if any(kind is not None for kind in kinds):
                raise ValueError("a batch with a faulty worker's row: run the rows one by one")
            return self.honest(x)
        return self.worker(int(workers[0]), kinds[0], x)

    def worker(self, n: int, kind: str | None, x):
        """What worker ``n`` with fault ``kind`` returns (or does) for its row ``x``."""
        if kind == "raise":
            raise ValueError(f"worker {n}: f raised")
        if kind == "systemexit":
            sys.exit(3)
        if kind == "memoryerror":
            raise MemoryError(f"worker {n}: out of memory (a memory hog)")
        if kind == "os_exit":
            os._exit(1)
        if kind == "sleep":
            time.sleep(max(0.0, self.wake_at - time.time()))
        out = self.honest(x)
        if kind in (None, "sleep", "hang"):
            return out
        if kind == "nan":
            return np.full_like(out, np.nan)
        if kind == "inf":
            return np.full_like(out, np.inf)
        if kind == "garbage":
            scale = float(np.sqrt(np.mean(np.square(out)))) or 1.0
            return np.random.default_rng([self.seed, n]).normal(0.0, scale, out.shape)
        if kind == "misshaped":
            return out[:, :-1]  # (1, d - 1)
        if kind == "none":
            return None
        if kind == "list":
            return out.tolist()
        if kind == "torch":
            import torch  # here, not at the top: a Ray worker unpickling FaultyF does not import it

            return torch.from_numpy(out)
        if kind == "strings":
            return np.array([[f"w{n}c{j}" for j in range(out.shape[1])]])
        raise ValueError(f"unknown fault kind {kind!r}")


WARM_TASK_S = 0.1  # a settle task holds its CPU this long, so that the tasks run side by side
WARM_WAIT_S = 30.0  # settle calls again until RAY_CPUS processes answered, for at most this long


class _Warm:
    """A trivial ``f`` for :func:`settle`: imports torch (as the ``"torch"`` fault needs), holds
    its CPU for :data:`WARM_TASK_S`, and answers its worker process's id."""

    def __call__(self, x):
        torch.zeros(1)  # a Ray worker process imports torch (to unpickle this), outside the timed calls
        time.sleep(WARM_TASK_S)
        return np.zeros_like(np.asarray(x, dtype=np.float64)) + os.getpid()


@dataclass(frozen=True)
class Cell:
    backend: str
    code: str
    kind: str
    count: int

    @property
    def id(self) -> str:
        return f"{self.backend}-{self.code}-{self.kind}-{self.count}"


def documented(kind: str, count: int, backend: str = "thread") -> tuple[str, ...]:
    """The observed outcomes (:func:`classify`'s strings) that match the documented one.

    A faulty worker that never arrived is in ``report.dropped``, not ``report.failed``:
    accepted on Ray only, where the tasks share a few CPUs in an order Ray picks, so a faulty
    task can still be queued when the honest results suffice (seen for NaN and inf results on
    a CI run: worker 0 dropped, the call correct), the more so where the fault kills worker
    processes (:data:`KILLS_PROCESS`), whose restart holds the queue.
    """
    if kind == "misshaped" and count == N:
        return ("ok (the shape all returned)",)
    if kind in UNUSABLE:
        if count > S + 1:
            return ("raised InsufficientResultsError",)
        if backend == "ray":
            return ("ok", "ok (faulty dropped before arriving)")
        return ("ok",)
    if kind in CONVERTIBLE:
        return ("ok (converted used)",)
    if kind in UNDETECTABLE:
        return ("ok (garbage used)", "ok (garbage not used)")
    raise ValueError(f"unknown fault kind {kind!r}")


@dataclass
class Observation:
    cell: Cell
    seed: int
    observed: str
    seconds: float
    detail: str = ""

    @property
    def expected(self) -> tuple[str, ...]:
        return documented(self.cell.kind, self.cell.count, self.cell.backend)

    @property
    def matches(self) -> bool:
        return self.observed in self.expected

    def describe(self) -> str:
        return (
            f"{self.cell.id} seed {self.seed}: {self.observed} (documented: {' or '.join(self.expected)})"
            f" [{self.detail}]"
        )


def injection(cell: Cell, faulty: list[int], deadline_s: float):
    """``(faults for FaultyF, delay model, fault model)`` for a call with ``faulty`` workers."""
    low, high = HONEST_DELAY_S
    delays = low + (high - low) * np.arange(N) / (N - 1)
    delays[faulty] = 0.0
    f_faults = {n: cell.kind for n in faulty}
    fault_model = None
    if cell.kind == "hang":
        f_faults, fault_model = {}, cc.faults.Fixed(dict.fromkeys(faulty, "hang"))
    elif cell.kind == "sleep" and cell.backend == "simulated":
        f_faults = {}
        delays[faulty] = deadline_s + SLEEP_PAST_S
    return f_faults, cc.delays.Trace([delays.tolist()]), fault_model


def make_cluster(backend: str, delays, faults, seed: int, ray_cluster=None) -> Cluster:
    """A fresh thread or simulated cluster, or the shared RayCluster set up for this call."""
    if backend == "thread":
        return cc.ThreadCluster(num_threads=4, delays=delays, faults=faults, seed=seed)
    if backend == "simulated":
        return cc.SimulatedCluster(delays=delays, faults=faults, seed=seed)
    if backend == "ray":
        if ray_cluster is None:
            raise ValueError("the ray backend needs the shared cluster from start_ray()")
        ray_cluster.delays, ray_cluster.faults = delays, faults
        ray_cluster.rng = np.random.default_rng(seed)
        return ray_cluster
    raise ValueError(f"backend must be one of {BACKENDS}, got {backend!r}")


def call_with_limit(fn: Callable, limit_s: float):
    """``("value", fn())``, ``("error", the exception)`` or ``("hang", None)`` past ``limit_s``."""
    box: dict = {}

    def target():
        try:
            box["value"] = fn()
        except BaseException as err:  # SystemExit too: it is an outcome here
            box["error"] = err

    thread = threading.Thread(target=target, name="fault-matrix-call", daemon=True)
    thread.start()
    thread.join(limit_s)
    if thread.is_alive():
        return "hang", None
    if "error" in box:
        return "error", box["error"]
    return "value", box["value"]


def _short(text: str, limit: int) -> str:
    text = " ".join(str(text).split())
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _report_detail(report, faulty: list[int]) -> str:
    if report is None:
        return ""
    alive = sorted(np.asarray(report.alive).tolist())
    by_reason: dict[str, list[int]] = {}
    for n, reason in sorted(report.failed.items()):
        by_reason.setdefault(_short(reason, 60), []).append(n)
    failed = "{" + ", ".join(f"{workers}: {reason!r}" for reason, workers in by_reason.items()) + "}"
    latency = np.asarray(report.latency, dtype=np.float64)
    honest_ = [n for n in range(N) if n not in faulty]
    first = ""
    if faulty and np.isfinite(latency[faulty]).any():
        first_faulty = np.nanmin(latency[faulty])
        first_honest = np.nanmin(latency[honest_]) if np.isfinite(latency[honest_]).any() else math.inf
        first = f" faulty first: {'yes' if first_faulty < first_honest else 'no'}"
    return (
        f"faulty={faulty} alive={alive} failed={failed} dropped={np.asarray(report.dropped).tolist()}"
        f" timed_out={report.timed_out} wait_s={report.wait_s:.2f}{first}"
    )


def classify(cell: Cell, code: cc.Code, coded, faulty: list[int], status: str, value, limit_s: float):
    """``(observed, detail)``: a short string for what the call did, and the particulars."""
    if status == "hang":
        return f"hang (no answer in {limit_s:g} s)", ""
    if status == "error":
        err = value
        report = getattr(err, "report", None)
        if isinstance(err, cc.InsufficientResultsError):
            detail = _short(f"{err}", 200) + " | " + _report_detail(report, faulty)
            if not isinstance(report, Report):
                return "raised InsufficientResultsError without .report", detail
            return "raised InsufficientResultsError", detail
        return _short(f"crash {type(err).__name__}: {err}", 90), _short(repr(err), 300)
    result = value
    report = result.report
    detail = _report_detail(report, faulty)
    estimates = result.estimates
    if not isinstance(estimates, np.ndarray):
        return f"estimates are {type(estimates).__module__}.{type(estimates).__name__}", detail
    if cell.kind == "misshaped" and cell.count == N and estimates.shape == (K, D_OUT - 1):
        expected = code.decode(honest(coded)[result.alive][:, :-1], result.alive)
        agree = np.allclose(estimates, expected, rtol=1e-10, atol=1e-12)
        return ("ok (the shape all returned)" if agree else "wrong values"), detail
    if estimates.shape != (K, D_OUT):
        return f"wrong shape {tuple(estimates.shape)}", detail
    if not np.all(np.isfinite(estimates)):
        return "non-finite estimates", detail
    faulty_set = set(faulty)
    alive = set(np.asarray(result.alive).tolist())
    if cell.kind in UNDETECTABLE:
        return ("ok (garbage used)" if faulty_set & alive else "ok (garbage not used)"), detail
    expected = code.decode(honest(coded)[result.alive], result.alive)
    if not np.allclose(estimates, expected, rtol=1e-10, atol=1e-12):
        return "wrong values", detail
    if cell.kind in CONVERTIBLE:
        rejected = faulty_set & set(report.failed)
        if rejected:
            return f"converted output rejected ({len(rejected)} in failed)", detail
        used = len(faulty_set & alive)
        # On real backends a converted result that the scheduler delivered after the call had
        # its results is dropped as late, not rejected: a busy machine can reorder zero-delay
        # tasks behind honest ones (seen on Ray with another test process beside it).
        dropped = set(np.asarray(report.dropped).tolist())
        late = cell.backend != "simulated" and (faulty_set - alive) <= dropped
        if used != min(cell.count, WAIT_FOR) and not (late and used > 0):
            return f"{used} of {cell.count} converted used", detail
        return "ok (converted used)", detail
    used = faulty_set & alive
    if used:
        return f"faulty used ({len(used)} in alive)", detail
    where = "dropped" if cell.kind in LATE else "failed"
    dropped = set(np.asarray(report.dropped).tolist())
    missing = faulty_set - (dropped if where == "dropped" else set(report.failed))
    if missing and missing <= dropped and cell.kind not in LATE:
        # Never arrived: on Ray a killed worker process is restarted (~1 s), and the tasks
        # queued behind it may run after the call has its results.
        return "ok (faulty dropped before arriving)", detail
    if missing:
        return f"faulty not in report.{where} ({len(missing)})", detail
    return "ok", detail


def timing_limited(status: str, value, faulty: list[int]) -> bool:
    """Whether a call's deadline expired while an honest worker had not answered: a busy
    machine, not the fault under test, decided what the call did."""
    report = getattr(value, "report", None) if status in ("value", "error") else None
    if not isinstance(report, Report) or not report.timed_out:
        return False
    dropped = set(np.asarray(report.dropped).tolist())
    return any(n not in faulty for n in dropped)


def settle(ray_cluster, timeout_s: float = 120.0) -> None:
    """Wait until the shared RayCluster's CPUs are free and its worker processes warm.

    A call of ``RAY_CPUS * 2`` short tasks, queued behind whatever the last call left running
    (sleeps, tasks of killed processes), that imports torch in each worker process; called
    again (for up to :data:`WARM_WAIT_S`) until ``RAY_CPUS`` distinct processes answered one
    call, so that a cell after one that killed processes does not wait for Ray to start new
    ones within its deadline.
    """
    ray_cluster.delays, ray_cluster.faults = None, None
    tasks = 2 * RAY_CPUS
    warm_by = time.monotonic() + WARM_WAIT_S
    while True:
        gathered = ray_cluster.gather(_WARM, np.zeros((tasks, 1)), tasks, deadline=timeout_s)
        processes = set(np.asarray(gathered.results, dtype=np.float64).ravel().astype(np.int64).tolist())
        if len(processes) >= RAY_CPUS or time.monotonic() >= warm_by:
            return


_WARM = _Warm()


def run_call(cell: Cell, seed: int, ray_cluster=None) -> Observation:
    """One coded call of ``cell`` with seed ``seed``: its :class:`Observation`.

    Run again with a longer deadline (:data:`DEADLINE_FACTORS`) while the outcome is not the
    documented one and the deadline expired before an honest worker answered."""
    base_s = DEADLINE_S[cell.backend]
    for attempt, factor in enumerate(DEADLINE_FACTORS):
        observation, limited = _one_call(cell, seed, base_s * factor, ray_cluster)
        if attempt:
            late = "honest workers were late"
            observation.detail += f" | deadline {base_s * factor:g} s, try {attempt + 1} ({late})"
        if observation.matches or not limited:
            return observation
    return observation


def _one_call(cell: Cell, seed: int, deadline_s: float, ray_cluster=None) -> tuple[Observation, bool]:
    """:func:`run_call` under one deadline: the observation, and whether it was
    :func:`timing_limited`."""
    limit_s = deadline_s + LIMIT_S[cell.backend]
    code = make_code(cell.code)
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(K, D_IN))
    faulty = sorted(rng.choice(N, size=cell.count, replace=False).tolist())
    coded = code.encode(X)
    f_faults, delays, fault_model = injection(cell, faulty, deadline_s)
    cluster = make_cluster(cell.backend, delays, fault_model, seed, ray_cluster)
    start = time.perf_counter()
    try:
        f = FaultyF(coded, f_faults, wake_at=time.time() + deadline_s + SLEEP_PAST_S, seed=seed)
        executor = cc.CodedExecutor(code, f, cluster)
        status, value = call_with_limit(
            lambda: executor.run(X, wait_for=WAIT_FOR, deadline=deadline_s), limit_s
        )
        seconds = time.perf_counter() - start
        observed, detail = classify(cell, code, coded, faulty, status, value, limit_s)
    finally:
        if cluster is not ray_cluster:
            cluster.close()
    if cell.backend == "ray" and cell.kind == "sleep":  # sleeping tasks would hold the next call's CPUs
        time.sleep(max(0.0, f.wake_at + 0.05 - time.time()))
    if cell.backend == "ray" and status != "hang":
        status_s, settle_error = call_with_limit(lambda: settle(ray_cluster), LIMIT_S["ray"])
        if status_s != "value":
            detail += f" | settle: {status_s} {settle_error!r}"
    return Observation(cell, seed, observed, seconds, detail), timing_limited(status, value, faulty)


def run_cell(cell: Cell, seeds: Iterable[int] = (0,), ray_cluster=None, progress=None) -> list[Observation]:
    """:func:`run_call` for each seed; ``progress(observation)`` after each, if given."""
    observations = []
    for seed in seeds:
        observation = run_call(cell, seed, ray_cluster)
        observations.append(observation)
        if progress is not None:
            progress(observation)
    return observations


def cells(backends: Iterable[str] = BACKENDS, codes: Iterable[str] = CODES, counts=COUNTS) -> list[Cell]:
    return [
        Cell(backend, code, kind, count)
        for backend in backends
        for code in codes
        for kind in kinds_for(backend)
        for count in counts
    ]


def start_ray(num_cpus: int = RAY_CPUS) -> cc.RayCluster:
    """The RayCluster every Ray cell shares (a local Ray of ``num_cpus`` CPUs), warmed up.

    Ray's workers cannot import this module (it lives in ``tests/``): its classes are
    shipped by value.
    """
    import ray

    cluster = cc.RayCluster(num_cpus=num_cpus, seed=0)
    ray.cloudpickle.register_pickle_by_value(sys.modules[__name__])
    settle(cluster)
    return cluster


def stop_ray(cluster: cc.RayCluster) -> None:
    import ray

    try:
        ray.cloudpickle.unregister_pickle_by_value(sys.modules[__name__])
    except ValueError:  # not registered
        pass
    cluster.close()
