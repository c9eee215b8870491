"""Cluster backends and their one primitive: dispatch N tasks, take the first results.

``cluster.gather(f, inputs, wait_for, deadline)`` gives worker ``n`` the task
``f(inputs[n:n+1])`` for every ``n``, takes results in the order they arrive until
``wait_for`` usable ones are in (or the workers that arrived satisfy a predicate, or
``deadline`` seconds have passed, or nothing more can come), and drops the rest. It is
:meth:`Cluster.submit` (dispatch; returns a :class:`Call`) and :meth:`Cluster.collect`
(wait) together; the two apart let a caller dispatch the next call while it still works on
this one. Everything straggler-related (:class:`~codedcomputing.runtime.CodedExecutor`, the
latency experiment, the demo) is built on it. Backends: :class:`ThreadCluster` (in-process
threads, the embedded default), :class:`~codedcomputing.runtime.RayCluster` and
:class:`SimulatedCluster` (a virtual clock).

What counts as a usable result is :mod:`~codedcomputing.runtime.collect`'s to say: anything
else makes the worker a straggler, never an error of the caller. Injected delays
(:mod:`~codedcomputing.runtime.delays`) are added to each worker's real time on the master's
side; injected faults (:mod:`~codedcomputing.runtime.faults`) replace what the worker does.
Workers run ``f`` under ``torch.no_grad()`` when it is a torch module or gets tensors:
this is coded inference, and the estimates carry no autograd history (to differentiate
through a code, call its ``encode`` and ``decode`` directly).
"""

from __future__ import annotations

import math
import queue
import time
from abc import ABC, abstractmethod
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field

import numpy as np

from .. import _arraylib
from .._validation import check_count, check_number, check_rng
from .collect import Collector, check_output_shape, wait_real_time
from .delays import DelayModel
from .faults import CORRUPTING, FaultModel, InjectedFault, corrupt
from .record import Gathered

__all__ = ["Call", "Cluster", "SimulatedCluster", "ThreadCluster", "run_task"]

WaitFor = int | Callable[[np.ndarray], bool]
MAX_THREADS = 10_000  # a pool larger than this is a typo, not a cluster


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
    with _arraylib.inference_mode(f, x):
        out = f(x)
    seconds = time.perf_counter() - start
    if fault in CORRUPTING:
        out = corrupt(out, fault, seed)
    return out, seconds


def check_wait_for(wait_for, num_workers: int) -> Callable[[list[int]], bool]:
    """``wait_for`` (a count in ``1..N`` or a predicate on the arrived workers) as a predicate."""
    if callable(wait_for):
        return _OnArrived(wait_for)
    if isinstance(wait_for, bool) or not isinstance(wait_for, (int, np.integer)):
        raise ValueError(
            f"wait_for must be an integer or a predicate on the arrived workers, got {wait_for!r}"
        )
    if not 1 <= wait_for <= num_workers:
        raise ValueError(f"wait_for must be in 1..{num_workers} (the number of workers), got {wait_for}")
    count = int(wait_for)
    return lambda arrived: len(arrived) >= count


class _OnArrived:
    """A predicate on the arrived workers (an int array, a new one per call) called with the
    collector's lists of workers. Those only grow by appending while results arrive, so when
    called with the list of the last call, grown, only its new workers are converted, not
    the whole list each time; any other list is converted afresh."""

    def __init__(self, predicate: Callable[[np.ndarray], object]):
        self.predicate = predicate
        self._list: list[int] | None = None
        self._array = np.zeros(16, dtype=np.int64)  # the list's workers in its first _known entries
        self._known = 0

    def __call__(self, arrived) -> bool:
        if not isinstance(arrived, list):
            return bool(self.predicate(np.asarray(arrived, dtype=np.int64)))
        count = len(arrived)
        if arrived is not self._list or count < self._known:
            self._list, self._known = arrived, 0
        if count > self._array.size:
            self._array = np.resize(self._array, max(count, 2 * self._array.size))
        if count > self._known:
            self._array[self._known : count] = arrived[self._known :]
            self._known = count
        return bool(self.predicate(self._array[:count].copy()))


def check_deadline(deadline) -> float:
    """``deadline`` (seconds after dispatch, or None for no deadline) as a float (inf for None)."""
    if deadline is None:
        return math.inf
    return check_number(deadline, "deadline (seconds, or None)", low=0.0, low_open=True, allow_inf=True)


def _num_rows(inputs) -> int:
    if not hasattr(inputs, "shape") or len(inputs.shape) == 0 or inputs.shape[0] == 0:
        shape = tuple(inputs.shape) if hasattr(inputs, "shape") else type(inputs).__name__
        raise ValueError(f"inputs must be an array or tensor with one row per worker, got {shape}")
    return int(inputs.shape[0])


@dataclass(eq=False)
class Call:
    """One dispatched call (:meth:`Cluster.submit`): what was drawn for it and what its
    backend keeps while it runs. Pass it to :meth:`Cluster.collect` once.

    ``started`` is the dispatch time (``time.perf_counter()``): a deadline counts from it.
    """

    f: Callable
    inputs: object
    num_workers: int
    delays: np.ndarray
    faults: dict[int, str]
    seeds: np.ndarray
    order: list[int]
    started: float = 0.0
    state: object = None  # the backend's own: futures, object references, ...
    collected: bool = field(default=False, repr=False)


class Cluster(ABC):
    """A backend that runs one task per worker: :meth:`submit`, :meth:`collect`, :meth:`gather`.

    ``delays`` (a :class:`~codedcomputing.runtime.delays.DelayModel`) and ``faults`` (a
    :class:`~codedcomputing.runtime.faults.FaultModel`) are injected on every call, drawn
    from a generator seeded by ``seed``. Clusters are context managers; :meth:`close`
    frees their resources. A backend implements ``_dispatch(call)`` (start the tasks),
    ``_collect(call, collector, deadline_s) -> (wall seconds, timed_out)`` (feed the
    collector until it is done) and optionally ``_end(call)`` (stop what is left).
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
        check_wait_for(wait_for, _num_rows(inputs))  # before anything is dispatched
        check_deadline(deadline)
        check_output_shape(output_shape)
        return self.collect(self.submit(f, inputs), wait_for, deadline, output_shape=output_shape)

    def submit(self, f: Callable, inputs) -> Call:
        """Dispatch ``f(inputs[n:n+1])`` to every worker ``n`` and return at once: the
        :class:`Call` to :meth:`collect` (or :meth:`cancel`). Delays and faults are drawn now."""
        if not callable(f):
            raise ValueError(f"f must be callable, got {f!r}")
        num_workers = _num_rows(inputs)
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
        call = Call(f, inputs, num_workers, delays, faults, seeds, order)
        self._dispatch(call)
        return call

    def collect(
        self,
        call: Call,
        wait_for: WaitFor,
        deadline: float | None = None,
        *,
        output_shape=None,
        on_usable: Callable[[int, float, object], None] | None = None,
    ):
        """Wait on a submitted ``call`` as :meth:`gather` does, and end it: return the
        :class:`Gathered`. ``deadline`` counts from dispatch, so time spent before calling
        this counts too.

        ``on_usable(worker, latency, output)``, if given, is called once per usable result,
        the moment the master takes it, before the call checks whether it is done: on the
        thread that called ``collect`` (every backend feeds its results there, so the
        callback needs no lock of its own), in arrival order, with ``latency`` the seconds
        from dispatch (virtual seconds on a :class:`SimulatedCluster`) and ``output`` the
        worker's one-row output as it returned it (not yet converted to the inputs' kind).
        A result given out on arrival cannot wait for a majority shape, so with
        ``on_usable`` and no ``output_shape``, the first usable result's shape is the one
        the others are judged by. An exception it raises ends the call (tasks not started
        yet never run) and propagates.
        """
        if not isinstance(call, Call):
            raise ValueError(f"call must be what submit() returned, got {call!r}")
        if call.collected:
            raise ValueError("call was already collected (or cancelled): submit a new one")
        if on_usable is not None and not callable(on_usable):
            raise ValueError(
                f"on_usable must be None or a callable (worker, latency, output), got {on_usable!r}"
            )
        collector = Collector(
            call.num_workers,
            check_wait_for(wait_for, call.num_workers),
            check_output_shape(output_shape),
            on_usable=on_usable,
        )
        deadline_s = check_deadline(deadline)
        call.collected = True
        try:
            wall_s, timed_out = self._collect(call, collector, deadline_s)
        finally:
            self._end(call)
        return collector.gathered(call.delays, call.faults, wall_s, timed_out, like=call.inputs)

    def cancel(self, call: Call) -> None:
        """End a submitted ``call`` without waiting: its tasks not started yet never run."""
        if not call.collected:
            call.collected = True
            self._end(call)

    @abstractmethod
    def _dispatch(self, call: Call) -> None:
        """Start ``call``'s tasks; keep what ``_collect`` needs in ``call.state``."""

    @abstractmethod
    def _collect(self, call: Call, collector: Collector, deadline_s: float) -> tuple[float, bool]:
        """Feed ``collector`` until it is done; return ``(seconds since dispatch, timed_out)``."""

    def _end(self, call: Call) -> None:  # noqa: B027 - a hook: backends that leave nothing running
        """Stop what is left of ``call`` (tasks not started yet)."""

    def close(self) -> None:  # noqa: B027 - a hook: backends without resources have nothing to free
        """Free the backend's resources (idempotent)."""

    def __enter__(self):
        return self

    def __exit__(self, *exc) -> None:
        self.close()


class ThreadCluster(Cluster):
    """In-process workers on a thread pool: the embedded default.

    ``num_threads`` threads compute tasks (torch and numpy release the GIL in their
    kernels). A worker's result reaches the master its compute time plus its injected
    delay after dispatch; the delay is held by the master, not slept in a thread. Workers
    whose results are not waited for are dropped: queued tasks are cancelled, running ones
    finish in the background. A task of a worker injected with ``"hang"`` is never started.
    A user ``f`` that truly hangs occupies its thread for good (no backend can stop a
    running Python function safely): give ``gather`` a ``deadline`` so the call returns.
    """

    name = "thread"

    def __init__(self, num_threads: int = 8, delays=None, faults=None, seed=0):
        num_threads = check_count(num_threads, "num_threads", 1, maximum=MAX_THREADS)
        super().__init__(delays, faults, seed)
        self.num_threads = num_threads
        self._pool = ThreadPoolExecutor(self.num_threads, thread_name_prefix="codedcomputing-worker")

    def _dispatch(self, call: Call) -> None:
        finished: queue.SimpleQueue = queue.SimpleQueue()
        futures = []
        call.started = time.perf_counter()
        for n in call.order:
            if call.faults.get(n) == "hang":
                continue
            row = _arraylib.take_rows(call.inputs, np.array([n]))
            task = self._pool.submit(run_task, call.f, row, call.faults.get(n), call.seeds[n])
            task.add_done_callback(lambda fut, n=n: finished.put((n, time.perf_counter(), fut)))
            futures.append(task)
        call.state = (futures, finished)

    def _collect(self, call: Call, collector: Collector, deadline_s: float) -> tuple[float, bool]:
        futures, finished = call.state
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

        timed_out = wait_real_time(collector, call.delays, call.started, deadline_s, poll, resolve)
        return time.perf_counter() - call.started, timed_out

    def _end(self, call: Call) -> None:
        for task in call.state[0]:
            task.cancel()  # not started yet: never starts

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
        with _arraylib.inference_mode(f, inputs):
            batch = f(_arraylib.take_rows(inputs, np.array(workers)))
        if hasattr(batch, "shape") and len(batch.shape) > 0 and batch.shape[0] == len(workers):
            return {n: _arraylib.take_rows(batch, np.array([i])) for i, n in enumerate(workers)}
    except (Exception, SystemExit):  # retried row by row below
        pass
    outputs = {}
    for n in workers:
        try:
            with _arraylib.inference_mode(f, inputs):
                outputs[n] = f(_arraylib.take_rows(inputs, np.array([n])))
        except (Exception, SystemExit) as err:  # a failing f is a failed worker, as on a thread
            outputs[n] = err
    return outputs


class SimulatedCluster(Cluster):
    """A virtual clock: worker n's latency is ``compute_s + delay_n``; nothing sleeps.

    ``f`` runs, at :meth:`collect`, in batches on just the workers whose results are needed
    (the earliest arrivals), so N in the thousands costs little more than the results used.
    ``wall_s`` and ``latency`` are virtual seconds from dispatch. Faults behave as on a real
    cluster: ``"hang"`` never arrives, ``"raise"`` fails at its arrival time, ``"nan"``,
    ``"shape"`` and ``"garbage"`` corrupt the output.
    """

    name = "simulated"

    def __init__(self, delays=None, faults=None, seed=0, compute_s: float = 0.0):
        super().__init__(delays, faults, seed)
        self.compute_s = check_number(compute_s, "compute_s (seconds)", low=0.0)

    def _dispatch(self, call: Call) -> None:
        call.state = self.compute_s + call.delays  # when each worker arrives; nothing runs yet

    def _collect(self, call: Call, collector: Collector, deadline_s: float) -> tuple[float, bool]:
        # No queue on a virtual clock: the dispatch order is unused.
        f, inputs, faults, seeds, arrival = call.f, call.inputs, call.faults, call.seeds, call.state
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
                    if faults.get(n) in CORRUPTING and not isinstance(out, BaseException):
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
