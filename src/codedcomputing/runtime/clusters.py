"""Cluster backends and their one primitive, :meth:`Cluster.gather`.

``gather(f, inputs, wait_for, deadline)`` gives worker ``n`` the task ``f(inputs[n:n+1])``
for every ``n``, takes results in the order they arrive until ``wait_for`` usable ones
are in (or the workers that arrived satisfy a predicate, or ``deadline`` seconds have
passed, or nothing more can come), and drops or cancels the rest. Everything
straggler-related (:class:`~codedcomputing.runtime.CodedExecutor`, the latency experiment,
the demo) is built on it. Backends: :class:`ThreadCluster` (in-process threads, the
embedded default), :class:`~codedcomputing.runtime.RayCluster` and
:class:`SimulatedCluster` (a virtual clock).

A result is *usable* when the task returned without raising, and the output is an array
of finite numbers (a tensor, or anything numpy reads as numbers) with one row, shaped like
the most of the arrived results (or like the shape the caller declared). Anything else (an
exception, ``SystemExit``, a crash, NaN, None, strings, a minority shape) makes the worker
a straggler recorded in :attr:`Gathered.failed`, never an error of the caller. Injected
delays (:mod:`~codedcomputing.runtime.delays`) are added to each worker's real time on the
master's side; injected faults (:mod:`~codedcomputing.runtime.faults`) replace what the
worker does.
"""

from __future__ import annotations

import heapq
import math
import numbers
import queue
import time
from abc import ABC, abstractmethod
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field

import numpy as np

from .. import _arraylib
from .._validation import check_count, check_number, check_rng
from .delays import DelayModel
from .faults import FaultModel, InjectedFault, corrupt

__all__ = ["Cluster", "Gathered", "SimulatedCluster", "ThreadCluster", "run_task"]

WaitFor = int | Callable[[np.ndarray], bool]
MAX_THREADS = 10_000  # a pool larger than this is a typo, not a cluster


@dataclass(eq=False)
class Gathered:
    """What one :meth:`Cluster.gather` call got back.

    - ``results``: the usable outputs stacked in arrival order, ``(len(alive), ...)``, as
      ``f`` returned them (numpy or torch); ``None`` when nothing usable arrived.
    - ``alive``: the workers whose usable results these are, in arrival order.
    - ``latency``: ``(N,)`` seconds from dispatch to each worker's arrival (usable or
      failed), injected delay included; NaN for workers that never arrived in time.
    - ``failed``: ``{worker: reason}`` for workers that arrived with an exception or an
      unusable output. ``dropped``: workers that had not arrived when the call ended
      (slow, hung, or cancelled), sorted.
    - ``delays``: the injected ``(N,)`` delays; ``faults``: the injected ``{worker: kind}``.
    - ``wall_s``: seconds the call took (virtual seconds on a simulated cluster).
    - ``timed_out``: True when the deadline ended the call before ``wait_for`` was met.
    """

    results: object
    alive: np.ndarray
    latency: np.ndarray
    failed: dict[int, str]
    dropped: np.ndarray
    delays: np.ndarray
    faults: dict[int, str]
    wall_s: float
    timed_out: bool = False
    compute_s: np.ndarray = field(default_factory=lambda: np.zeros(0))

    def trace_rows(self, call: int) -> list[dict]:
        """This call's latencies as rows for a replayable trace (:meth:`delays.Trace.from_csv`)."""
        return trace_rows(self.latency, call)


def trace_rows(latency: np.ndarray, call: int) -> list[dict]:
    """``[{"call", "worker", "latency_s"}]``, one per worker; ``""`` for one that never arrived."""
    return [
        {"call": int(call), "worker": n, "latency_s": float(t) if np.isfinite(t) else ""}
        for n, t in enumerate(np.asarray(latency, dtype=np.float64))
    ]


def run_task(f, x, fault: str | None, seed: int):
    """One worker's task: ``(f(x), seconds f took)``, with an injected fault applied.

    Runs wherever the backend runs tasks (a thread, a Ray worker process).
    """
    if fault == "raise":
        raise InjectedFault("injected fault: worker raised")
    if fault == "hang":
        while True:  # never ends: threads never start such a task, Ray ends hangs at its gate
            time.sleep(3600)
    start = time.perf_counter()
    out = f(x)
    seconds = time.perf_counter() - start
    if fault in ("nan", "garbage"):
        out = corrupt(out, fault, seed)
    return out, seconds


def check_wait_for(wait_for, num_workers: int) -> Callable[[list[int]], bool]:
    """``wait_for`` (a count in ``1..N`` or a predicate on the arrived workers) as a predicate."""
    if callable(wait_for):
        return lambda arrived: bool(wait_for(np.asarray(arrived, dtype=np.int64)))
    if isinstance(wait_for, bool) or not isinstance(wait_for, (int, np.integer)):
        raise ValueError(
            f"wait_for must be an integer or a predicate on the arrived workers, got {wait_for!r}"
        )
    if not 1 <= wait_for <= num_workers:
        raise ValueError(f"wait_for must be in 1..{num_workers} (the number of workers), got {wait_for}")
    count = int(wait_for)
    return lambda arrived: len(arrived) >= count


def check_deadline(deadline) -> float:
    """``deadline`` (seconds after dispatch, or None for no deadline) as a float (inf for None)."""
    if deadline is None:
        return math.inf
    if not isinstance(deadline, (bool, np.bool_)) and isinstance(deadline, numbers.Real):
        try:
            if float(deadline) > 0:  # also rejects NaN; inf is no deadline, as None
                return float(deadline)
        except OverflowError:  # an int too large for a float
            pass
    raise ValueError(f"deadline must be a number of seconds > 0 (or inf), or None, got {deadline!r}")


def check_output_shape(output_shape) -> tuple[int, ...] | None:
    """``output_shape`` (None, or a sequence of sizes >= 0) as a tuple of ints."""
    if output_shape is None:
        return None
    try:
        sizes = tuple(output_shape)
    except TypeError:
        sizes = None
    if sizes is None or not all(
        isinstance(size, (int, np.integer)) and not isinstance(size, bool) and size >= 0 for size in sizes
    ):
        raise ValueError(
            "output_shape must be None or a sequence of sizes >= 0 (f's output for one input, "
            f"without the batch axis), got {output_shape!r}"
        )
    return tuple(int(size) for size in sizes)


def _num_rows(inputs) -> int:
    if not hasattr(inputs, "shape") or len(inputs.shape) == 0 or inputs.shape[0] == 0:
        shape = tuple(inputs.shape) if hasattr(inputs, "shape") else type(inputs).__name__
        raise ValueError(f"inputs must be an array or tensor with one row per worker, got {shape}")
    return int(inputs.shape[0])


class _Collector:
    """Sorts arrivals into usable results and failures, in arrival order.

    Usable outputs are grouped by shape. Unless the caller declared the shape, the group
    with the most members leads (on a tie, the one that got there first), and only its
    workers count towards ``enough``: one mis-shaped worker arriving first cannot set the
    shape the others are judged by. When the call ends, the other groups' workers are
    failures.
    """

    def __init__(self, num_workers: int, enough: Callable[[list[int]], bool], output_shape=None):
        self.num_workers = num_workers
        self.enough = enough
        self.declared = None if output_shape is None else (1, *output_shape)
        self.groups: dict[tuple, list[int]] = {}
        self.leader: tuple | None = None
        self.outputs: dict[int, object] = {}
        self.failed: dict[int, str] = {}
        self.latency = np.full(num_workers, np.nan)
        self.compute_s = np.full(num_workers, np.nan)

    @property
    def alive(self) -> list[int]:
        """The workers whose usable results are in the leading shape's group, in arrival order."""
        return self.groups[self.leader] if self.leader is not None else []

    def arrive(self, worker: int, latency: float, outcome, compute_s: float = math.nan) -> None:
        """Record ``outcome`` (an output, or the exception the task raised)."""
        self.latency[worker] = latency
        self.compute_s[worker] = compute_s
        if isinstance(outcome, BaseException):
            self.failed[worker] = f"{type(outcome).__name__}: {outcome}"[:300]
            return
        output, reason = _usable(outcome)
        if reason is None and self.declared is not None and tuple(output.shape) != self.declared:
            reason = f"returned shape {tuple(output.shape)}, not the declared {self.declared}"
        if reason is not None:
            self.failed[worker] = reason
            return
        shape = tuple(output.shape)
        group = self.groups.setdefault(shape, [])
        group.append(worker)
        self.outputs[worker] = output
        if self.leader is None or len(group) > len(self.groups[self.leader]):
            self.leader = shape

    @property
    def done(self) -> bool:
        return self.enough(self.alive)

    def gathered(self, delays, faults, wall_s, timed_out, like) -> Gathered:
        """What arrived, with the results converted to the kind of ``like`` (the inputs sent)."""
        failed = dict(self.failed)
        alive = self.alive
        for shape, workers in self.groups.items():
            if shape != self.leader:
                reason = f"returned shape {shape}, unlike the {len(alive)} results of shape {self.leader}"
                failed.update(dict.fromkeys(workers, reason))
        arrived = set(self.outputs) | set(failed)
        dropped = np.array([n for n in range(self.num_workers) if n not in arrived], dtype=np.int64)
        return Gathered(
            results=_stack([self.outputs[n] for n in alive], like),
            alive=np.array(alive, dtype=np.int64),
            latency=self.latency,
            failed=failed,
            dropped=dropped,
            delays=delays,
            faults=faults,
            wall_s=wall_s,
            timed_out=timed_out,
            compute_s=self.compute_s,
        )


def _usable(out) -> tuple[object, str | None]:
    """``(out as an array or tensor, None)``, or ``(None, why it is unusable)``."""
    if out is None:
        return None, "returned None"
    if not (_arraylib.is_torch(out) or isinstance(out, np.ndarray)):
        try:
            out = np.asarray(out, dtype=np.float64)  # a list or a scalar of numbers
        except (TypeError, ValueError, OverflowError):
            return None, f"returned {type(out).__name__}, not an array of numbers"
    if not _arraylib.is_torch(out) and not (np.issubdtype(out.dtype, np.number) or out.dtype == bool):
        return None, f"returned an array of dtype {out.dtype}, not numbers"
    shape = tuple(out.shape)
    if len(shape) == 0 or shape[0] != 1:
        return None, f"returned shape {shape}; a task's output needs one row (f on a batch of one)"
    finite = bool(out.isfinite().all()) if _arraylib.is_torch(out) else bool(np.all(np.isfinite(out)))
    if not finite:
        return None, "returned NaN or inf"
    return out, None


def _stack(outputs: list, like):
    """``outputs`` as one array of ``like``'s kind: numpy, or torch on ``like``'s device."""
    if not outputs:
        return None
    outputs = [_arraylib.convert_like(out, like) for out in outputs]
    if _arraylib.is_torch(like):
        import torch

        return torch.cat(outputs)
    return np.concatenate(outputs)


class Cluster(ABC):
    """A backend that runs one task per worker: see :meth:`gather`.

    ``delays`` (a :class:`~codedcomputing.runtime.delays.DelayModel`) and ``faults`` (a
    :class:`~codedcomputing.runtime.faults.FaultModel`) are injected on every call, drawn
    from a generator seeded by ``seed``. Clusters are context managers; :meth:`close`
    frees their resources.
    """

    name: str = "cluster"

    def __init__(self, delays: DelayModel | None = None, faults: FaultModel | None = None, seed=0):
        if delays is not None and not isinstance(delays, DelayModel):
            raise ValueError(f"delays must be a codedcomputing.delays model or None, got {delays!r}")
        if faults is not None and not isinstance(faults, FaultModel):
            raise ValueError(f"faults must be a codedcomputing.faults model or None, got {faults!r}")
        self.delays = delays
        self.faults = faults
        self.rng = check_rng(seed, "seed")

    def gather(
        self, f: Callable, inputs, wait_for: WaitFor, deadline: float | None = None, *, output_shape=None
    ) -> Gathered:
        """Run ``f(inputs[n:n+1])`` on every worker ``n``; return the first results to arrive.

        - ``inputs``: ``(N, ...)`` numpy array or torch tensor, one row per worker.
        - ``wait_for``: stop once this many usable results are in, or (a callable) once
          ``wait_for(alive)`` is true for the workers whose usable results are in.
        - ``deadline``: seconds after dispatch; the call returns whatever arrived by then.
        - ``output_shape``: the shape of ``f``'s output for one input, without the batch
          axis, if known; results of another shape are failures. When it is not given,
          the shape most arrived results share is the one results are judged by (only
          those count towards ``wait_for``), so no one mis-shaped worker sets it.

        It also returns early when every worker has answered or failed. It never raises
        for a worker's failure: check ``len(result.alive)``. Results come back as the
        inputs' kind (a worker's torch tensor becomes numpy for numpy inputs, and numpy
        becomes a tensor on the inputs' device for torch inputs). Workers still running when
        it returns finish in the background, their results discarded (on Ray, tasks not
        started yet skip ``f`` and injected hangs end: see :class:`RayCluster`).
        """
        if not callable(f):
            raise ValueError(f"f must be callable, got {f!r}")
        num_workers = _num_rows(inputs)
        collector = _Collector(
            num_workers, check_wait_for(wait_for, num_workers), check_output_shape(output_shape)
        )
        deadline_s = check_deadline(deadline)
        delays = (
            np.zeros(num_workers)
            if self.delays is None
            else np.asarray(self.delays.sample(num_workers, self.rng))
        )
        faults = {} if self.faults is None else self.faults.sample(num_workers, self.rng)
        seeds = self.rng.integers(2**63, size=num_workers)
        # Dispatch in a random order: when workers share CPUs (threads, a small Ray node), the
        # queue decides who is late, and index order would make the last workers a block of
        # stragglers, the worst case for spline codes, that no real cluster would show.
        order = self.rng.permutation(num_workers).tolist()
        wall_s, timed_out = self._gather(f, inputs, collector, deadline_s, delays, faults, seeds, order)
        return collector.gathered(delays, faults, wall_s, timed_out, like=inputs)

    @abstractmethod
    def _gather(
        self, f, inputs, collector: _Collector, deadline_s, delays, faults, seeds, order
    ) -> tuple[float, bool]:
        """Run the tasks, feeding ``collector``; return ``(wall seconds, timed_out)``."""

    def close(self) -> None:  # noqa: B027 - a hook: backends without resources have nothing to free
        """Free the backend's resources (idempotent)."""

    def __enter__(self):
        return self

    def __exit__(self, *exc) -> None:
        self.close()


class _Arrivals:
    """Results held back until their injected delay has passed: a heap of release times."""

    def __init__(self):
        self._heap: list = []

    def push(self, release: float, worker: int, payload) -> None:
        heapq.heappush(self._heap, (release, worker, payload))

    def pop_due(self, now: float):
        while self._heap and self._heap[0][0] <= now:
            yield heapq.heappop(self._heap)

    def next_release(self) -> float:
        return self._heap[0][0] if self._heap else math.inf

    def __len__(self) -> int:
        return len(self._heap)


def _collect(collector: _Collector, delays, start: float, deadline_s: float, poll, resolve) -> bool:
    """The real-time wait loop shared by the thread and Ray backends; returns ``timed_out``.

    ``poll(timeout)`` waits up to ``timeout`` seconds (``None``: no limit) for tasks to
    finish and returns ``[(worker, finished_at, payload)]`` (empty on timeout), or ``None``
    once no task can finish any more. Each result is held back until ``finished_at`` plus
    the worker's injected delay, then ``resolve(payload) -> (output or exception,
    compute_s)`` hands it to ``collector``.
    """
    arrivals = _Arrivals()
    exhausted = False
    while not collector.done:
        for release, n, payload in arrivals.pop_due(time.perf_counter()):
            outcome, compute_s = resolve(payload)
            collector.arrive(n, release - start, outcome, compute_s)
            if collector.done:
                return False
        if exhausted and not len(arrivals):
            return False
        now = time.perf_counter()
        if now - start >= deadline_s:
            return True
        wait = min(arrivals.next_release(), start + deadline_s) - now
        if exhausted:
            time.sleep(max(wait, 0.0))
            continue
        finished = poll(None if math.isinf(wait) else max(wait, 0.0))
        if finished is None:
            exhausted = True
            continue
        for n, finished_at, payload in finished:
            arrivals.push(finished_at + delays[n], n, payload)
    return False


class ThreadCluster(Cluster):
    """In-process workers on a thread pool: the embedded default.

    ``num_threads`` threads compute tasks (torch and numpy release the GIL in their
    kernels). A worker's result reaches the master its compute time plus its injected
    delay after dispatch; the delay is held by the master, not slept in a thread. Workers
    whose results are not waited for are dropped: queued tasks are cancelled, running ones
    finish in the background. A task of a worker injected with ``"hang"`` is never started.
    A user ``f`` that truly hangs occupies its thread for good: give ``gather`` a
    ``deadline`` (and prefer :class:`~codedcomputing.runtime.RayCluster`, which can kill it).
    """

    name = "thread"

    def __init__(self, num_threads: int = 8, delays=None, faults=None, seed=0):
        num_threads = check_count(num_threads, "num_threads", 1, maximum=MAX_THREADS)
        super().__init__(delays, faults, seed)
        self.num_threads = num_threads
        self._pool = ThreadPoolExecutor(self.num_threads, thread_name_prefix="codedcomputing-worker")

    def _gather(self, f, inputs, collector, deadline_s, delays, faults, seeds, order):
        finished: queue.SimpleQueue = queue.SimpleQueue()
        start = time.perf_counter()
        futures = []
        for n in order:
            if faults.get(n) == "hang":
                continue
            task = self._pool.submit(
                run_task, f, _arraylib.take_rows(inputs, np.array([n])), faults.get(n), seeds[n]
            )
            task.add_done_callback(lambda fut, n=n: finished.put((n, time.perf_counter(), fut)))
            futures.append(task)
        outstanding = len(futures)

        def poll(timeout):
            nonlocal outstanding
            if outstanding == 0:
                return None
            try:
                item = finished.get(timeout=timeout)
            except queue.Empty:
                return []
            outstanding -= 1
            return [item]

        def resolve(fut):
            error = fut.exception()
            return (error, math.nan) if error is not None else fut.result()

        try:
            timed_out = _collect(collector, delays, start, deadline_s, poll, resolve)
        finally:
            for task in futures:
                task.cancel()  # not started yet: never starts
        return time.perf_counter() - start, timed_out

    def close(self) -> None:
        self._pool.shutdown(wait=False, cancel_futures=True)

    def __repr__(self) -> str:
        return (
            f"ThreadCluster(num_threads={self.num_threads}, delays={self.delays!r}, faults={self.faults!r})"
        )


def _evaluate(f, inputs, workers: list[int]) -> dict:
    """``{worker: f's output row, or the exception}``: one batch, or row by row if that fails.

    The batch is split back into rows only when ``f`` returns one row per input; if it
    raises, or returns another number of rows, each worker's input runs alone, as on a real
    worker, so that a failure stays with the rows that cause it.
    """
    if not workers:
        return {}
    try:
        batch = f(_arraylib.take_rows(inputs, np.array(workers)))
        if hasattr(batch, "shape") and len(batch.shape) > 0 and batch.shape[0] == len(workers):
            return {n: _arraylib.take_rows(batch, np.array([i])) for i, n in enumerate(workers)}
    except (Exception, SystemExit):  # retried row by row below
        pass
    outputs = {}
    for n in workers:
        try:
            outputs[n] = f(_arraylib.take_rows(inputs, np.array([n])))
        except (Exception, SystemExit) as err:  # a failing f is a failed worker, as on a thread
            outputs[n] = err
    return outputs


class SimulatedCluster(Cluster):
    """A virtual clock: worker n's latency is ``compute_s + delay_n``; nothing sleeps.

    ``f`` runs in batches on just the workers whose results are needed (the earliest
    arrivals), so N in the thousands costs little more than the results used. ``wall_s``
    and ``latency`` are virtual seconds. Faults behave as on a real cluster: ``"hang"``
    never arrives, ``"raise"`` fails at its arrival time, ``"nan"`` and ``"garbage"``
    corrupt the output.
    """

    name = "simulated"

    def __init__(self, delays=None, faults=None, seed=0, compute_s: float = 0.0):
        super().__init__(delays, faults, seed)
        self.compute_s = check_number(compute_s, "compute_s (seconds)", low=0.0)

    def _gather(self, f, inputs, collector, deadline_s, delays, faults, seeds, order):
        # No queue on a virtual clock: the dispatch order is unused.
        arrival = self.compute_s + delays
        arriving = [n for n in np.argsort(arrival, kind="stable").tolist() if faults.get(n) != "hang"]
        order = [n for n in arriving if arrival[n] <= deadline_s]
        position, clock = 0, 0.0
        while position < len(order) and not collector.done:
            # The next chunk: arrivals up to where the predicate would hold if all were usable.
            hypothetical = list(collector.alive)
            end = position
            while end < len(order) and not collector.enough(hypothetical):
                if faults.get(order[end]) != "raise":
                    hypothetical.append(order[end])
                end += 1
            end = max(end, position + 1)
            chunk = order[position:end]
            computed = [n for n in chunk if faults.get(n) != "raise"]
            outputs = _evaluate(f, inputs, computed)
            for n in chunk:
                clock = float(arrival[n])
                if faults.get(n) == "raise":
                    collector.arrive(n, clock, InjectedFault("injected fault: worker raised"))
                else:
                    out = outputs[n]
                    if faults.get(n) in ("nan", "garbage") and not isinstance(out, BaseException):
                        out = corrupt(out, faults[n], seeds[n])
                    collector.arrive(n, clock, out, 0.0)
                if collector.done:
                    break
            position = end
        # Short of results, the master waited until the deadline only if a worker that was
        # going to answer had not yet (injected hangs are known never to answer, as on the
        # real backends).
        timed_out = not collector.done and len(order) < len(arriving)
        if timed_out:
            clock = deadline_s
        return clock, timed_out

    def __repr__(self) -> str:
        return (
            f"SimulatedCluster(delays={self.delays!r}, faults={self.faults!r}, compute_s={self.compute_s:g})"
        )
