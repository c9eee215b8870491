"""The same training schemes on a real cluster of the runtime (threads, Ray): stateful workers
that hold their partitions and, under pipelining, their stored gradients between steps.

Each worker is a :class:`WorkerState` created once (its partitions and its stored
gradients stay with it; only ``theta`` and the step travel per step). A step is one
``cluster.submit`` of a tiny per-worker input (the worker's index) and one ``cluster.collect``
that waits for what the scheme needs (all ``n``, the fastest ``n - s``, or the first arrival
of every FR group) or until the step's deadline, so stragglers of a step never hold up the
next step's dispatch: the step being closed, their work is discarded (a pipelined worker
then keeps its older stored gradient, as on the simulated clock: its fresh gradient is kept
only when its result arrived in time). What a scheme does with too few usable messages (an
exact one raises, an approximate one takes a flagged, *degraded* step) is the table of
:mod:`~codedcomputing.gradient_coding.training`.

**Deadlines.** ``step_timeout_s`` seconds after a step's dispatch the master stops waiting
for it: the workers not in are its stragglers. ``None`` (the default) is automatic, and a
step ends at the earlier of two times:

- its deadline: the first step may take up to :data:`FIRST_STEP_TIMEOUT_S` (60 s), each
  later one :data:`STEP_TIMEOUT_FACTOR` (10) times the median of the earlier steps that did
  not time out, and at least :data:`MIN_STEP_TIMEOUT_S` (10 s);
- its own pace: once half the workers (``ceil(n / 2)``) have answered with a usable message,
  ``STEP_TIMEOUT_FACTOR`` times the seconds that took after the dispatch, and at least
  :data:`MIN_STEP_TIMEOUT_S` for an exact scheme (a step short of messages raises) or
  :data:`MIN_DEGRADED_WAIT_S` (1 s) for an approximate one (it takes a degraded step).

So hung workers cost a step about the healthy workers' pace (or the floor), not 60 s: a run
with more hung workers than ``s`` never finishes a step on time, and the deadline alone would
stay at the first step's. The floors are generous because a step past them makes an exact
scheme raise: waiting for all of 12 workers with ``delays.Pareto(0.001, 1.1)`` (200,000
sampled steps, delays alone), the deadline was passed once in 160 steps with a 1 s floor,
once in 2,350 with 10 s. Set ``step_timeout_s`` to what your steps can take (a fixed
deadline, without the pace rule; ``math.inf`` for heavy tails and no hung worker).
``math.inf``: no deadline (a hung worker then hangs a scheme that needs it). A step that
its pace ended is ``timed_out``, and the workers not in are late. On threads the master then
waits for a step on a thread of its own, so that it can end the step while gradients hang in
the cluster's threads (that wait is left to end at the step's deadline, its results unused).

**Busy and hung workers.** A worker still computing an earlier step (a gradient that hangs,
or runs past its step) is not given another: its task for the new step fails at once
("still computing"), so it is a straggler of every step until it returns, and a hung
gradient holds one thread (one slot of its Ray actor), never more. A worker's injected delay
is slept *after* its compute and ends when its step closes, as does an injected ``"hang"``:
a worker that is only late is free again for the next step, as on the simulated clock.

Time is real: each worker computes its partitions (``s + 1`` for GC, one for PGC) and then
sleeps its delay for the step, drawn from ``delays`` (any :mod:`codedcomputing.runtime.delays`
model, seeded), so the delay adds to the real compute as on the simulated clock (a
cluster's own ``delays``, on threads and Ray alike, instead hold each result back at the
master: they set its earliest arrival, and the worker is free meanwhile). Meant for a
:class:`~codedcomputing.ThreadCluster` with a thread per worker and some to spare; a
:class:`~codedcomputing.SimulatedCluster` would charge every task the same ``compute_s``
whatever its load, so use :func:`~codedcomputing.gradient_coding.simulate` for the virtual
clock. The cluster's own ``faults`` apply too (on threads around each worker's task, on Ray
inside the actors). On a :class:`~codedcomputing.RayCluster` each worker is a Ray actor that
keeps its state in its own process (:func:`_train_on_ray`).
"""

from __future__ import annotations

import collections
import concurrent.futures
import itertools
import math
import queue
import threading
import time
import warnings

import numpy as np

from ..runtime.clusters import Cluster
from ..runtime.collect import Collector, wait_real_time
from ..runtime.delays import DelayModel
from ..runtime.faults import CORRUPTING, InjectedFault, corrupt
from ..runtime.ray_cluster import RayCluster, _ray, _resolve
from .training import (
    EXACT_SCHEMES,
    Ages,
    Problem,
    Run,
    Step,
    WorkerFailure,
    check_run,
    check_step_timeout,
    checked_gradient,
    computed_slots,
    message_problem,
    warn_degraded,
)

__all__ = [
    "FIRST_STEP_TIMEOUT_S",
    "MAX_CACHED_PROBLEMS",
    "MIN_DEGRADED_WAIT_S",
    "MIN_STEP_TIMEOUT_S",
    "STEP_TIMEOUT_FACTOR",
    "train",
]

FIRST_STEP_TIMEOUT_S = 60.0
STEP_TIMEOUT_FACTOR = 10.0
MIN_STEP_TIMEOUT_S = 10.0  # heavy-tailed delays must not turn an exact scheme's slow step into an error
MIN_DEGRADED_WAIT_S = 1.0  # the pace floor of an approximate scheme (a step cut short is only degraded)
HANG_LIMIT_S = 600.0  # an injected hang ends by then even if its step is never closed
SETUP_TIMEOUT_S = 120.0  # Ray: starting and resetting the actors before the clock starts
MAX_CACHED_PROBLEMS = 2  # Ray: the problems whose actors a cluster keeps for later runs
# Ray: an actor keeps the (set) close events of its last steps, so that a call of a recent step
# that starts after its close returns at once; older ones are dropped, lest they pile up.
CLOSED_STEPS_KEPT = 8


class WorkerBusy(WorkerFailure):
    """The worker is still computing an earlier step: a straggler of this one."""


class WorkerState:
    r"""The trainers' plumbing, not public API (its arguments are the trainers' own, checked
    there). One worker's state: its partitions, its scheme's coefficients over them, and (for
    pipelined schemes) the latest gradient of each partition. :meth:`work` runs one step;
    under pipelining its fresh gradients stay pending until the master :meth:`settle`\ s the
    step, keeping them only if the worker's result arrived in time (a late worker's work is
    lost, as on the simulated clock). ``report(worker, t, slots)``, if given, is called each
    time it keeps gradients (of ``slots``, computed at step ``t``), under its lock: how the thread
    trainer's :class:`~.training.Ages` learns what each worker holds."""

    def __init__(self, worker: int, partitions, coefficients, pipelined: bool, report=None):
        self.worker = int(worker)
        self.partitions = [int(p) for p in partitions]
        self.coefficients = np.asarray(coefficients, dtype=np.float64)
        self.pipelined = bool(pipelined)
        self.report = report
        self.stored: dict[int, np.ndarray] = {}
        self.pending: dict[int, dict[int, np.ndarray]] = {}  # step -> slot -> fresh gradient
        self.closed = -1  # the last step settled: later work for it or earlier is dropped
        self.computing: int | None = None  # the step whose gradients are being computed
        self.lock = threading.Lock()

    def work(
        self,
        problem: Problem,
        theta: np.ndarray,
        t: int,
        *,
        closed: threading.Event,
        fault: str | None = None,
        seed: int = 0,
    ) -> np.ndarray:
        """This step's message. GC, IS and DGD: the coefficient-weighted sum of fresh
        gradients over its partitions (DGD and IS-SGD hold one). PGC: recompute partition
        slot ``t mod (s + 1)`` (and every slot it holds no gradient for: all of them at step
        0, kept however late the message) and send the sum of the stored ones with the
        fresh ones in their slots.

        Raises :class:`WorkerBusy` at once while an earlier step is still being computed,
        and :class:`~.training.WorkerFailure` for a gradient that is not a finite vector of
        the parameters' shape. ``closed`` is set when the step ends. ``fault``: an injected
        fault (:data:`~.training.FAULT_KINDS`); ``"hang"`` waits for ``closed``, then returns
        None."""
        if fault == "raise":
            raise InjectedFault("injected fault: worker raised")
        if fault == "hang":  # no result: None once the step is over (nothing left to raise to)
            closed.wait(HANG_LIMIT_S)
            return None
        with self.lock:
            if self.computing is not None:
                raise WorkerBusy(f"worker {self.worker} is still computing step {self.computing + 1}")
            self.computing = t
        try:
            message = self._compute(problem, theta, t)
        finally:
            with self.lock:
                self.computing = None
        return corrupt(message, fault, seed) if fault in CORRUPTING else message

    def _compute(self, problem, theta, t) -> np.ndarray:
        if not self.pipelined:
            pairs = zip(self.coefficients, self.partitions, strict=True)
            return sum(c * checked_gradient(problem, theta, j) for c, j in pairs)
        with self.lock:
            missing = [slot for slot, j in enumerate(self.partitions) if j not in self.stored]
        slots = computed_slots(missing, t, len(self.partitions))
        fresh = {slot: checked_gradient(problem, theta, self.partitions[slot]) for slot in slots}
        with self.lock:
            # filling in is kept however late: it holds every slot after one step
            filled = [slot for slot in missing if self.partitions[slot] not in self.stored]
            self._keep(filled, fresh, t)
            if t > self.closed:
                self.pending[t] = {slot: g for slot, g in fresh.items() if slot not in missing}
            current = dict(self.stored)
        current.update({self.partitions[slot]: g for slot, g in fresh.items()})
        return sum(current.values())

    def settle(self, t: int, arrived: bool) -> None:
        """End step ``t``: keep its pending gradients if the worker's result arrived."""
        with self.lock:
            fresh = self.pending.pop(t, None)
            if arrived and fresh is not None:
                self._keep(list(fresh), fresh, t)
            self.closed = max(self.closed, t)
            for step in [k for k in self.pending if k <= self.closed]:
                del self.pending[step]

    def _keep(self, slots: list[int], fresh: dict[int, np.ndarray], t: int) -> None:
        """Store the ``fresh`` gradients of ``slots`` (computed at step ``t``); under the lock."""
        for slot in slots:
            self.stored[self.partitions[slot]] = fresh[slot]
        if slots and self.report is not None:
            self.report(self.worker, t, slots)


class StepDeadline:
    """Each step's deadline in seconds: ``step_timeout_s`` if given, else automatic; and,
    automatic, the end by the step's own pace (:meth:`clock`; module docstring). ``exact``:
    the scheme raises when a step falls short (the pace rule's floor is then
    :data:`MIN_STEP_TIMEOUT_S`, else :data:`MIN_DEGRADED_WAIT_S`)."""

    def __init__(self, step_timeout_s: float | None, exact: bool = True):
        self.fixed = step_timeout_s
        self.exact = exact
        self.times: list[float] = []

    def seconds(self) -> float:
        if self.fixed is not None:
            return self.fixed
        if not self.times:
            return FIRST_STEP_TIMEOUT_S
        return max(MIN_STEP_TIMEOUT_S, STEP_TIMEOUT_FACTOR * float(np.median(self.times)))

    def record(self, step_s: float, timed_out: bool) -> None:
        if not timed_out:
            self.times.append(step_s)

    def clock(self, start: float, num_workers: int) -> StepClock:
        """The clock of a step of ``num_workers`` dispatched at ``start`` (``perf_counter``)."""
        if self.fixed is not None:
            return StepClock(start, self.fixed)
        floor = MIN_STEP_TIMEOUT_S if self.exact else MIN_DEGRADED_WAIT_S
        return StepClock(start, self.seconds(), quorum=math.ceil(num_workers / 2), floor=floor)


class StepClock:
    """When one step ends: ``deadline_s`` after ``start``, or (with a ``quorum``) once that
    many workers have :meth:`answered`, ``max(floor, STEP_TIMEOUT_FACTOR x`` the seconds the
    quorum took ``)`` after ``start``, whichever is earlier. The master waits on it (:meth:`wait`,
    threads) or reads :meth:`expired` (Ray)."""

    def __init__(self, start: float, deadline_s: float, quorum: int | None = None, floor: float = 0.0):
        self.start, self.deadline_s = start, deadline_s
        self.seconds = deadline_s  # the step's end, in seconds after its dispatch (inf: none)
        self.end = start + deadline_s
        self.quorum, self.floor = quorum, floor
        self.answers = 0
        self.closed = False
        self.lock = threading.Lock()
        self.waiting: set[threading.Event] = set()

    def answered(self, latency: float) -> None:
        """A usable message arrived ``latency`` seconds after the dispatch."""
        with self.lock:
            self.answers += 1
            if self.quorum is None or self.answers != self.quorum:
                return
            self.seconds = min(self.seconds, max(self.floor, STEP_TIMEOUT_FACTOR * latency))
            self.end = self.start + self.seconds
            waiting = list(self.waiting)
        for wake in waiting:  # their waits are now shorter
            wake.set()

    def expired(self) -> bool:
        return time.perf_counter() >= self.end

    @property
    def paced(self) -> bool:
        """Whether the step's pace set an end before its deadline."""
        return self.seconds < self.deadline_s

    def close(self) -> None:
        """The step is over: every wait ends."""
        with self.lock:
            self.closed = True
            waiting = list(self.waiting)
        for wake in waiting:
            wake.set()

    def wait(self, future: concurrent.futures.Future | None = None) -> bool:
        """Wait until ``future`` is done (True), or until the step ends first (False)."""
        wake = threading.Event()
        if future is not None:
            future.add_done_callback(lambda _: wake.set())
        with self.lock:
            self.waiting.add(wake)
        try:
            while True:  # every change sets wake after it is made: checked after each wake-up
                if future is not None and future.done():
                    return True
                limit = self.end - time.perf_counter()
                if self.closed or limit <= 0.0:
                    return False
                wake.wait(None if math.isinf(limit) else limit)
                wake.clear()
        finally:
            with self.lock:
                self.waiting.discard(wake)


def train(
    scheme: str,
    problem: Problem,
    num_stragglers: int,
    steps: int,
    cluster: Cluster,
    *,
    lr: float = 0.1,
    delays: DelayModel | None = None,
    seed=0,
    code_seed: int = 0,
    faults=None,
    step_timeout_s: float | None = None,
) -> list[Step]:
    """Run ``scheme`` (one of :data:`~codedcomputing.gradient_coding.SCHEMES`) for ``steps``
    steps on ``cluster``, one worker per partition of ``problem``, each worker sleeping a
    delay from ``delays`` (seeded by ``seed``) after its compute; return ``steps + 1`` entries (step 0,
    the start, first), with real seconds.

    ``faults``: injected worker faults (``None``, ``{worker: kind}`` or a
    :mod:`codedcomputing.runtime.faults` model; :mod:`~codedcomputing.gradient_coding.training`).
    ``step_timeout_s``: each step's deadline in seconds (``None``: automatic; module
    docstring). Raises :class:`~.codes.TooManyStragglersError` (with ``history``) when an
    exact scheme cannot decode a step; warns when an approximate one took degraded steps."""
    run = check_run(scheme, problem, num_stragglers, steps, lr, delays, seed, code_seed, faults)
    if not isinstance(cluster, Cluster):
        raise ValueError(f"cluster must be a codedcomputing cluster (ThreadCluster, ...), got {cluster!r}")
    deadline = StepDeadline(check_step_timeout(step_timeout_s), exact=run.scheme in EXACT_SCHEMES)
    if delays is not None:
        delays.reset()  # a model with memory starts afresh
    if isinstance(cluster, RayCluster):
        history = _train_on_ray(run, delays, deadline, cluster)
    else:
        history = _train_on_threads(run, delays, deadline, cluster)
    warn_degraded(run, history)
    return history


def _train_on_threads(run: Run, delays, deadline: StepDeadline, cluster: Cluster) -> list[Step]:
    problem, n = run.problem, run.n
    ages = Ages(n, run.s + 1)
    kept: queue.SimpleQueue = (
        queue.SimpleQueue()
    )  # (worker, step, slots): what workers kept, read at each close
    workers = [
        WorkerState(
            i, run.partitions(i), run.coefficients(i), run.pipelined, report=lambda *what: kept.put(what)
        )
        for i in range(n)
    ]
    rows = np.arange(n, dtype=np.float64)[:, None]
    theta = problem.initial.copy()
    history = [Step(0, 0.0, 0.0, float(problem.loss(theta)))]
    closed = threading.Event()
    # With the pace rule a step's collect runs on a thread of these, so that the master can end
    # the step at its pace even while gradients hang in the cluster's threads (a running
    # Python function cannot be stopped): such a collect is left to end at its deadline.
    collects = concurrent.futures.ThreadPoolExecutor(n + 2, thread_name_prefix="gradient-collect")
    try:
        for t in range(run.steps):
            delay, faults, seeds = run.step_inputs(delays, t)
            closed = threading.Event()  # set when the step ends: sleeping and hung workers return
            clock = deadline.clock(time.perf_counter(), n)
            step = _ThreadStep(clock)

            def task(
                row, theta=theta, t=t, delay=delay, faults=faults, seeds=seeds, closed=closed, step=step
            ):
                worker = workers[int(np.asarray(row).ravel()[0])]
                if closed.is_set():  # started after its step ended: nothing to do
                    return None
                i = worker.worker
                fault, seed = faults.get(i), int(seeds[i])
                try:
                    message = worker.work(problem, theta, t, fault=fault, closed=closed, seed=seed)
                except Exception as err:
                    step.failed(i, err)
                    raise
                if message is None:  # an injected hang, over with its step
                    return None
                if fault in CORRUPTING:
                    step.check(i, message, run.dim)
                closed.wait(float(delay[i]))  # a slow worker, after its compute
                return message[None]

            call = cluster.submit(task, rows)
            arguments = (call, lambda alive: run.enough(list(alive)), clock.deadline_s)
            options = {"output_shape": (run.dim,), "on_usable": step.arrived}
            if clock.quorum is None:  # a fixed deadline: collected here
                gathered = cluster.collect(*arguments, **options)
            else:
                collecting = collects.submit(cluster.collect, *arguments, **options)
                gathered = collecting.result() if clock.wait(collecting) or not clock.paced else None
            closed.set()
            clock.close()
            if gathered is not None:
                alive = [int(i) for i in gathered.alive]
                failed = {int(w): why for w, why in gathered.failed.items()}
                timed_out = bool(gathered.timed_out)
                late = gathered.dropped.tolist() if timed_out else []
                messages = np.asarray(gathered.results, dtype=np.float64) if alive else np.zeros((0, run.dim))
                step_s, end_s = gathered.wall_s, clock.deadline_s
            else:  # the step's pace ended it: what had arrived, the rest late
                alive, messages, failed = step.freeze(run.dim)
                late = [i for i in range(n) if i not in alive and i not in failed]
                timed_out, step_s, end_s = True, time.perf_counter() - clock.start, clock.seconds
            for worker in workers:  # the step closes: late workers' work is dropped
                worker.settle(t, worker.worker in alive)
            estimate, used, degraded = run.decode(t, messages, alive, failed, late, end_s, history)
            deadline.record(step_s, timed_out)
            while not kept.empty():  # in the order the workers kept them (a late fill-in included)
                ages.arrived(*kept.get())
            step_ages = ages.ages(t) if run.pipelined else None
            theta = run.close_step(
                history, theta, estimate, step_s, used, step_ages, degraded, timed_out, failed
            )
    finally:
        closed.set()
        collects.shutdown(wait=False)
    return history


class _ThreadStep:
    """What a thread step's master knows beside its collect: the usable messages in arrival
    order (``on_usable``, which also tells the ``clock``) and why workers failed (told by their
    tasks), read by :meth:`freeze` when the step's pace ends it before its collect does."""

    def __init__(self, clock: StepClock):
        self.clock = clock
        self.lock = threading.Lock()
        self.messages: dict[int, np.ndarray] = {}  # in arrival order
        self.failures: dict[int, str] = {}
        self.frozen = False

    def arrived(self, worker: int, latency: float, output) -> None:
        with self.lock:
            if self.frozen:
                return
            self.messages[int(worker)] = output
        self.clock.answered(latency)

    def failed(self, worker: int, error: BaseException) -> None:
        with self.lock:
            if not self.frozen:
                self.failures[worker] = f"{type(error).__name__}: {error}"[:300]

    def check(self, worker: int, message: np.ndarray, dim: int) -> None:
        """A message an injected fault corrupted: unusable (as the collector will find)."""
        why = message_problem(np.asarray(message), dim)
        if why is not None:
            with self.lock:
                if not self.frozen:
                    self.failures[worker] = why

    def freeze(self, dim: int) -> tuple[list[int], np.ndarray, dict[int, str]]:
        """``(alive, messages, failed)`` now; later arrivals and failures are not counted."""
        with self.lock:
            self.frozen = True
            alive = list(self.messages)
            rows = [np.asarray(self.messages[i], dtype=np.float64).reshape(1, dim) for i in alive]
            failed = {w: why for w, why in self.failures.items() if w not in self.messages}
        return alive, (np.concatenate(rows) if rows else np.zeros((0, dim))), failed


_actor_class = None


def _worker_actor():
    """The Ray actor class of a worker (built on first use: Ray is imported only then). A
    threaded actor (``max_concurrency``), so that a worker sleeping its delay, or hung,
    still takes the master's ``close`` of the step and answers the next step at once ("still
    computing" while a gradient runs); ``num_cpus=0``, so that n actors fit a small node
    (their compute shares its CPUs)."""
    global _actor_class
    if _actor_class is None:
        ray = _ray()

        @ray.remote(max_concurrency=4, num_cpus=0)
        class GradientWorker:
            def __init__(self, problem):
                self.problem = problem
                self.run = None  # the run whose calls count: an earlier run's may come after its reset
                self.state = None
                self.events: dict[int, threading.Event] = {}
                self.lock = threading.Lock()

            def reset(self, run, worker, partitions, coefficients, pipelined):
                with self.lock:
                    self.run, self.state = run, WorkerState(worker, partitions, coefficients, pipelined)
                    for event in self.events.values():
                        event.set()
                    self.events = {}
                return True

            def _step(self, run, t):
                """``(state, step t's close event)`` for a call of the current run, else None."""
                with self.lock:
                    if run != self.run:
                        return None
                    return self.state, self.events.setdefault(t, threading.Event())

            def work(self, run, theta, t, delay, fault, settled, seed):
                """``(the message as one row, seconds its compute took)``, as the runtime's
                tasks answer; ``(None, NaN)`` after an injected hang; ``(the exception, NaN)``
                when it failed (returned, not raised: an error left in a reference nobody
                reads would be logged as unhandled)."""
                current = self._step(run, t)
                if current is None:
                    return WorkerFailure("a call of an earlier run"), math.nan
                state, closed = current
                if settled is not None:  # the previous step's close, should it come after this call
                    state.settle(*settled)
                start = time.perf_counter()
                try:
                    message = state.work(self.problem, theta, t, fault=fault, closed=closed, seed=seed)
                except Exception as err:  # the worker's failure: the master records it
                    return err, math.nan
                seconds = time.perf_counter() - start
                if message is None:
                    return None, math.nan
                closed.wait(delay)
                return message[None], seconds

            def close(self, run, t, arrived):
                current = self._step(run, t)
                if current is None:  # an earlier run's, after this one's reset: its state is gone
                    return
                state, closed = current
                state.settle(t, arrived)
                closed.set()
                with self.lock:
                    for step in [k for k in self.events if k < t - CLOSED_STEPS_KEPT]:
                        self.events.pop(step).set()

        _actor_class = GradientWorker
    return _actor_class


class _ActorPool:
    """The ``n`` worker actors a Ray cluster keeps for one problem (shipped once, through the
    object store), spread over the live nodes, with what a run needs to replace the ones that
    die: a dead actor (its process or node gone) is replaced by a new one on a live node, at
    most ``2 n`` times a run; until the new one is ready, and for good once the replacements
    are spent, its worker is a straggler."""

    def __init__(self, cluster: RayCluster, problem: Problem, n: int):
        self.problem = problem
        self.shared = cluster.share(problem)
        self.actors: list = [None] * n
        self.config: list = []
        self.runs = itertools.count()  # each run's calls carry its number (the actors ignore older ones)
        self.run = -1
        self.resetting: dict[int, object] = {}
        self.inflight: dict[int, list] = {}  # worker -> its calls not read yet
        self.settled: dict[int, tuple[int, bool]] = {}
        self.dead: set[int] = set()
        self.replaced = 0
        self.nodes: list[str] = []

    def _new(self, i: int):
        """A new actor for worker ``i``, on the ``i``-th live node round-robin, so that losing
        a node loses about ``n / nodes`` workers (left to Ray, zero-CPU actors packed 4 of 6
        on one of 3 nodes here, with a soft preference too). A zero-CPU actor fits any node;
        one whose node died meanwhile fails, and is replaced on a live one."""
        from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

        placement = "DEFAULT"
        if self.nodes:
            placement = NodeAffinitySchedulingStrategy(self.nodes[i % len(self.nodes)], soft=False)
        return _worker_actor().options(scheduling_strategy=placement).remote(self.shared)

    def _live_nodes(self) -> list[str]:
        try:
            return sorted(node["NodeID"] for node in _ray().nodes() if node.get("Alive"))
        except Exception:  # no node table: let Ray place them
            return []

    def start(self, run: Run, ages: Ages) -> None:
        """Reset every actor for ``run`` (replacing dead ones) and wait, up to
        :data:`SETUP_TIMEOUT_S`, until they are ready."""
        ray = _ray()
        self.run = next(self.runs)
        self.config = [
            (self.run, i, run.partitions(i), run.coefficients(i), run.pipelined) for i in range(run.n)
        ]
        self.ages = ages
        self.resetting, self.inflight, self.settled, self.dead, self.replaced = {}, {}, {}, set(), 0
        if any(actor is None for actor in self.actors):
            self.nodes = self._live_nodes()
        for i, actor in enumerate(self.actors):
            if actor is None:
                self.actors[i] = self._new(i)
            self.resetting[i] = self.actors[i].reset.remote(*self.config[i])
        end = time.perf_counter() + SETUP_TIMEOUT_S
        while self.resetting and time.perf_counter() < end:
            refs = list(self.resetting.values())
            ray.wait(refs, num_returns=len(refs), timeout=max(end - time.perf_counter(), 0.0))
            before = dict(self.resetting)
            for i in list(before):
                self.unavailable(i)
            if self.resetting == before:  # nothing became ready: the timeout passed
                break

    def replace(self, i: int) -> None:
        ray = _ray()
        old = self.actors[i]
        try:
            ray.kill(old, no_restart=True)
        except Exception:  # already gone, or a handle from an earlier Ray session
            pass
        self.inflight.pop(i, None)
        self.settled.pop(i, None)
        self.ages.forget(i)
        if self.replaced >= 2 * len(self.actors):
            self.dead.add(i)
            self.resetting.pop(i, None)
            return
        self.replaced += 1
        self.nodes = self._live_nodes()  # a lost node has left the table by the time its actors' calls fail
        self.actors[i] = self._new(i)
        self.resetting[i] = self.actors[i].reset.remote(*self.config[i])

    def unavailable(self, i: int) -> str | None:
        """Why worker ``i`` cannot take this step (dead, or its new actor is not ready yet)."""
        ray = _ray()
        if i in self.dead:
            return "its actor died, and this run's replacements are spent"
        ref = self.resetting.get(i)
        if ref is None:
            return None
        ready, _ = ray.wait([ref], timeout=0)
        if not ready:
            return "its (new) actor is not ready yet"
        try:
            ray.get(ref)
        except ray.exceptions.RayActorError:
            self.replace(i)
            return "its actor died; a new one is starting"
        except Exception as err:  # e.g. the problem does not unpickle in the new process
            self.dead.add(i)
            self.resetting.pop(i, None)
            return f"its actor failed to start: {type(err).__name__}: {err}"[:300]
        del self.resetting[i]
        return None

    def check_inflight(self) -> None:
        """Read the calls of earlier steps that finished since (what nobody reads, Ray logs
        as unhandled when it failed): a dead actor is replaced."""
        ray = _ray()
        refs = {ref: i for i, calls in self.inflight.items() for ref in calls}
        if not refs:
            return
        ready, _ = ray.wait(list(refs), num_returns=len(refs), timeout=0)
        dead = set()
        for ref in ready:
            i = refs[ref]
            self.inflight[i].remove(ref)
            try:
                ray.get(ref)
            except ray.exceptions.RayActorError:
                dead.add(i)
            except Exception:  # a failed step of its own: already recorded
                pass
        for i in dead:
            if self.actors[i] is not None and i not in self.resetting:
                self.replace(i)

    def collect(self, owner: dict, collector: Collector, held: np.ndarray, clock: StepClock) -> bool:
        """Feed ``collector`` the answers of a step's calls (``owner``: reference -> worker) as
        they finish, each held back ``held[worker]`` seconds (the cluster's own delays), until
        it is done or the step's ``clock`` has passed its deadline; returns ``timed_out``
        (``collector`` checks the clock's earlier end by pace, woken here when it comes). An
        actor that died is replaced, and its worker is a straggler of the step."""
        ray = _ray()
        pending = list(owner)

        def poll(timeout):
            nonlocal pending
            if not pending:
                return None
            until_end = clock.end - time.perf_counter()  # the step's end may have come nearer
            if timeout is None or until_end < timeout:
                timeout = max(until_end, 0.0) if np.isfinite(until_end) else timeout
            ready, pending = ray.wait(pending, num_returns=1, timeout=timeout)
            finished_at = time.perf_counter()
            return [(owner[ref], finished_at, ref) for ref in ready]

        def resolve(ref):
            i = owner[ref]
            if ref in self.inflight.get(i, ()):
                self.inflight[i].remove(ref)
            outcome, seconds = _resolve(ref)
            if isinstance(outcome, ray.exceptions.RayActorError):
                self.replace(i)
                outcome = WorkerFailure(f"its actor died ({type(outcome).__name__})")
            return outcome, seconds

        return wait_real_time(collector, held, clock.start, clock.deadline_s, poll, resolve)

    def kill(self) -> None:
        ray = _ray()
        for actor in self.actors:
            if actor is not None:
                try:
                    ray.kill(actor, no_restart=True)
                except Exception:  # already gone, or from an earlier Ray session
                    pass
        self.actors = [None] * len(self.actors)


def _actor_pool(cluster: RayCluster, problem: Problem, n: int) -> _ActorPool:
    """The actors for ``problem`` on ``cluster``, created on first use and kept for later runs
    (starting a worker process costs about a second), for the last
    :data:`MAX_CACHED_PROBLEMS` problems only: older problems' actors are killed."""
    pools = cluster.__dict__.get("_gradient_workers")
    if not isinstance(pools, collections.OrderedDict):
        pools = cluster.__dict__["_gradient_workers"] = collections.OrderedDict()
    pool = pools.get(id(problem))
    if pool is None or pool.problem is not problem:  # a new problem (or a reused id): fresh actors
        if pool is not None:
            pool.kill()
        pool = pools[id(problem)] = _ActorPool(cluster, problem, n)  # holds the problem: its id is not reused
    pools.move_to_end(id(problem))
    while len(pools) > MAX_CACHED_PROBLEMS:
        _, old = pools.popitem(last=False)
        old.kill()
    return pool


def _train_on_ray(run: Run, delays, deadline: StepDeadline, cluster: RayCluster) -> list[Step]:
    """:func:`train` on Ray: one actor per worker holds its state (the actors and the shipped
    problem are kept on the cluster for its later runs, :func:`_actor_pool`; each run resets
    their states, and the clock starts once every actor is ready); a step sends ``theta``
    (put once) and collects the actors' answers as the cluster collects its tasks' results
    (:func:`~codedcomputing.runtime.collect.wait_real_time`, with the cluster's own delays
    and faults drawn as its ``submit`` draws them), until the scheme has enough or the step ends
    (its deadline, or its pace: :class:`StepClock`). At the step's close the master tells
    every actor whether its result arrived (``close``: late work is dropped, sleeping and hung
    calls end; nothing is cancelled through Ray). An actor that died is a straggler and is
    replaced (:class:`_ActorPool`)."""
    ray = _ray()
    problem, n = run.problem, run.n
    ages = Ages(n, run.s + 1)
    pool = _actor_pool(cluster, problem, n)
    pool.start(run, ages)
    theta = problem.initial.copy()
    history = [Step(0, 0.0, 0.0, float(problem.loss(theta)))]
    for t in range(run.steps):
        delay, faults, seeds = run.step_inputs(delays, t)
        computed = [ages.computed(i, t) for i in range(n)] if run.pipelined else None
        held = np.zeros(n) if cluster.delays is None else np.asarray(cluster.delays.sample(n, cluster.rng))
        if cluster.faults is not None:  # the cluster's own faults, as on threads
            faults = {**cluster.faults.sample(n, cluster.rng), **faults}
        pool.check_inflight()
        unavailable: dict[int, str] = {}
        start = time.perf_counter()
        theta_ref = ray.put(theta)
        owner = {}
        for i in range(n):
            why = pool.unavailable(i)
            if why is not None:
                unavailable[i] = why
                continue
            ref = pool.actors[i].work.remote(
                pool.run,
                theta_ref,
                t,
                float(delay[i]),
                faults.get(i),
                pool.settled.pop(i, None),
                int(seeds[i]),
            )
            owner[ref] = i
            pool.inflight.setdefault(i, []).append(ref)
        clock = deadline.clock(start, n)
        collector = Collector(
            n,
            lambda alive, clock=clock: run.enough(alive) or clock.expired(),
            output_shape=(run.dim,),
            on_usable=lambda worker, latency, output, clock=clock: clock.answered(latency),
        )
        timed_out = pool.collect(owner, collector, held, clock)
        step_s = time.perf_counter() - start
        answered = set(collector.outputs) | set(collector.failed)
        unanswered = [i for i in owner.values() if i not in answered]
        # short, with calls out, before the deadline: the step's pace ended it
        paced = not timed_out and bool(unanswered) and not run.enough(collector.alive)
        timed_out = timed_out or paced
        alive = list(collector.alive)
        failed = {**unavailable, **collector.failed}
        for i in owner.values():  # the step closes: late work is dropped, sleepers wake
            if pool.actors[i] is not None and i not in pool.resetting and i not in pool.dead:
                pool.inflight.setdefault(i, []).append(pool.actors[i].close.remote(pool.run, t, i in alive))
                pool.settled[i] = (t, i in alive)
        if run.pipelined:  # the master's record (its workers' own is in their processes)
            for i in owner.values():
                if i in alive:
                    ages.arrived(i, t, computed[i])
                elif i not in failed and i not in pool.resetting:  # late: kept what it filled in
                    ages.arrived(i, t, ages.missing(i))
        late = unanswered if timed_out else []
        messages = np.concatenate([collector.outputs[i] for i in alive]) if alive else np.zeros((0, run.dim))
        end_s = clock.seconds if paced else clock.deadline_s
        estimate, used, degraded = run.decode(t, messages, alive, failed, late, end_s, history)
        deadline.record(step_s, timed_out)
        step_ages = ages.ages(t) if run.pipelined else None
        theta = run.close_step(history, theta, estimate, step_s, used, step_ages, degraded, timed_out, failed)
    pool.check_inflight()  # read what finished: a dead actor is replaced now, not next run
    if pool.replaced:
        warnings.warn(
            f"{run.scheme}: {pool.replaced} worker actors died and were replaced during the run"
            + (f"; workers {sorted(pool.dead)} stayed dead" if pool.dead else ""),
            RuntimeWarning,
            stacklevel=3,
        )
    return history
