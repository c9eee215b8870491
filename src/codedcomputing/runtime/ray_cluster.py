"""Ray backend: one stateless Ray task per worker; tasks of an answered call skip ``f``.

Nothing here calls ``ray.cancel``: on Ray 2.60, cancelling tasks that may be finishing
crashed the driver in our stress runs. Tasks stop themselves instead: when a call ends, the
master opens the call's *gate* (:class:`_CallBoard`); tasks not started yet see it and
return at once, injected hangs end, and a task already running ``f`` finishes in the
background, its result discarded. The measurements and the designs tried are in
``docs/design/ray-cancellation.md``.
"""

from __future__ import annotations

import asyncio
import itertools
import math
import time
from dataclasses import dataclass

import numpy as np

from .. import _arraylib
from .._validation import check_number
from .clusters import Cluster, run_task
from .collect import wait_real_time

__all__ = ["RayCluster"]

_remote_task = None
_remote_board = None
# In each Ray worker process: the functions already fetched, by object-store reference.
_fetched: dict = {}
_FETCHED_MAX = 8
# In each Ray worker process: the last gates seen, by object id. Holding a gate keeps Ray
# telling this process its state; a task's own copy of the reference, new to the process
# when the task starts, reads "not ready" for a while after the gate opened.
_gates: dict = {}
_GATES_MAX = 4
_HANG_POLL_S = 0.02


def _ray():
    try:
        import ray
    except ImportError:
        raise ImportError(
            "RayCluster needs Ray: pip install 'codedcomputing[ray]' (or pip install ray)"
        ) from None
    return ray


class _Skipped:
    """What a task returns instead of running ``f`` once its call is over."""


class CallOver(RuntimeError):
    """The outcome the master records for a :class:`_Skipped` task (never a result)."""


def _call_over(gate) -> bool:
    """Whether the call's gate (:class:`_CallBoard`) has opened; a failed gate has not.

    While the call is open, a look asks the master (an RPC; with the nested reference's
    bookkeeping 0.5-1.5 ms a task on a 2-CPU node); once Ray has told this process that
    the gate is ready, a look is a local lookup.
    """
    ray = _ray()
    ready, _ = ray.wait([gate], timeout=0, fetch_local=False)
    if not ready:
        return False
    try:
        return ray.get(ready[0]) is True
    except Exception:  # the board died: compute, as without skipping
        return False


def _run_shared(refs: list, x, fault, seed):
    """A worker's task: ``_Skipped()`` if its call is over, else :func:`run_task` on ``f``.

    ``refs`` is ``[f's reference, the call's gate or None]``, nested in a list, which Ray
    does not resolve for the task: the task has no object-store dependency to wait for,
    and each worker process fetches and deserialises ``f`` once, not once per task.
    """
    f_ref, gate = refs
    if gate is not None:
        gate = _kept(_gates, gate.hex(), lambda: gate, _GATES_MAX)
        if fault == "hang":
            return _hang_until_over(gate)
        if _call_over(gate):
            return _Skipped()
    f = _kept(_fetched, f_ref.hex(), lambda: _ray().get(f_ref), _FETCHED_MAX)
    return run_task(f, x, fault, seed)


def _kept(cache: dict, key: str, make, limit: int):
    """``cache[key]``, made by ``make()`` on first use; the oldest entry goes past ``limit``."""
    value = cache.get(key)
    if value is None:
        value = cache[key] = make()
        if len(cache) > limit:
            cache.pop(next(iter(cache)))
    return value


def _hang_until_over(gate) -> _Skipped:
    """An injected hang: hold the task's CPU, computing nothing, until the call is over.

    It looks at the gate every 20 ms, without blocking in Ray (a task blocked in ``ray.get``
    or ``ray.wait`` lends its CPU to other tasks, which a hung worker does not). A gate
    that failed (the board died) also ends the hang: the master then records a failure.
    """
    ray = _ray()
    while not ray.wait([gate], timeout=0, fetch_local=False)[0]:
        time.sleep(_HANG_POLL_S)
    return _Skipped()


@dataclass(eq=False)
class _RayCall:
    """A Ray call's state: each task's worker, the tasks not yet finished, and its number on
    the board when its tasks watch a gate (None when they do not)."""

    worker_of: dict
    pending: list
    board_call: int | None


class _CallBoard:
    """A zero-CPU actor that tells tasks their call is over.

    ``open(call)`` returns only after ``close(call)``: its result is the call's *gate*, an
    object that becomes ready when the master has its answer. The master calls ``open``
    when it dispatches a call and ``close`` when ``gather`` returns. An async actor may run
    them out of order (it did, about once in 50 calls in our stress runs), so a ``close``
    that comes first is remembered until its ``open`` comes.
    """

    def __init__(self):
        self._events: dict[int, asyncio.Event] = {}
        self._closed_early: set[int] = set()

    async def open(self, call: int) -> bool:
        if call in self._closed_early:
            self._closed_early.discard(call)
            return True
        await self._events.setdefault(call, asyncio.Event()).wait()
        return True

    async def close(self, call: int) -> None:
        event = self._events.pop(call, None)
        if event is None:
            self._closed_early.add(call)
        else:
            event.set()


def _resolve(ref):
    """A finished task's ``(output or exception, seconds f took)`` for the collector."""
    ray = _ray()
    try:
        value = ray.get(ref)
    except Exception as err:  # task errors, crashed workers: stragglers
        cause = getattr(err, "cause", None)  # a RayTaskError wraps f's own exception
        return (cause if isinstance(cause, Exception) else err), math.nan
    if isinstance(value, _Skipped):  # only once the call is over, so never seen; never a result
        return CallOver("skipped f: its call was already over"), math.nan
    return value


def _task():
    """:func:`_run_shared` as a Ray remote function (defined once per process, on first use).

    ``max_retries=0``: a worker whose process dies is a straggler, not a task to rerun.
    """
    global _remote_task
    if _remote_task is None:
        _remote_task = _ray().remote(max_retries=0)(_run_shared)
    return _remote_task


def _board_actor():
    """:class:`_CallBoard` as a Ray actor class (no CPU; restarted if its process dies)."""
    global _remote_board
    if _remote_board is None:
        _remote_board = _ray().remote(num_cpus=0, max_restarts=-1)(_CallBoard)
    return _remote_board


class RayCluster(Cluster):
    """Workers as Ray tasks, on an existing Ray cluster or a local one.

    - ``address``: a running cluster's address (``"auto"``, ``"ray://host:10001"``), or
      ``None`` to start a new local Ray (``num_cpus`` CPUs, default all; no dashboard),
      even when a cluster started by ``ray start`` runs on this machine (``ray.init``'s
      ``address="local"``: without it Ray would join that cluster and refuse ``num_cpus``).
      If Ray is already initialised in this process, that instance is used as is.
    - ``f`` is put into the object store once per cluster (:meth:`share`), and every task
      gets the reference, not a fresh copy of ``f``.
    - Each worker is a stateless task with ``max_retries=0`` (a worker whose process dies
      is a straggler).
    - **Tasks of an answered call skip f.** When :meth:`gather` returns, tasks of the call
      that have not started yet return at once without running ``f`` (they look at the
      call's gate, an object a zero-CPU actor makes ready when the call ends), so a queue
      of stragglers does not delay the next call. Looking costs 0.5-1.5 ms a task on a
      small node, so it is done only when ``f`` is worth skipping: when ``f``'s median time
      in its previous call on this cluster was at least ``skip_min_s`` seconds (default
      3 ms; 0: from ``f``'s second call on; ``math.inf``: never).
    - Injected hangs hold their CPUs until :meth:`gather` returns, then end (their worker
      processes live on). Tasks already running ``f`` finish in the background, their
      results discarded. Nothing is cancelled through Ray: the module's docstring says why.
    - Injected delays are held by the master as on :class:`ThreadCluster`.

    :meth:`close` calls ``ray.shutdown`` only if this cluster initialised Ray in this process:
    a local Ray stops; a cluster joined by ``address`` is only disconnected from, and keeps
    running.
    """

    name = "ray"

    def __init__(
        self,
        address: str | None = None,
        delays=None,
        faults=None,
        seed=0,
        *,
        num_cpus: int | None = None,
        skip_min_s: float = 0.003,
    ):
        skip = check_number(skip_min_s, "skip_min_s (seconds, or inf)", low=0.0, allow_inf=True)
        ray = _ray()
        super().__init__(delays, faults, seed)
        self.address = address
        self.skip_min_s = skip
        self._started = False
        if not ray.is_initialized():
            ray.init(
                address="local" if address is None else address,
                num_cpus=num_cpus if address is None else None,
                include_dashboard=False,
                log_to_driver=False,
                configure_logging=False,
            )
            self._started = True
        self._shared: dict[int, tuple[object, object]] = {}
        self._f_seconds: dict[int, float] = {}  # by id(f), as _shared: f's median time, last call
        self._board = None
        self._calls = itertools.count()

    def share(self, f):
        """``f``'s object-store reference, putting it there on first use."""
        ray = _ray()
        key = id(f)
        entry = self._shared.get(key)
        if entry is not None and entry[0] is f:
            return entry[1]
        ref = ray.put(f)
        self._shared[key] = (f, ref)  # keeps f alive, so its id is not reused meanwhile
        self._f_seconds.pop(key, None)
        return ref

    def _open_gate(self):
        """``(call number, gate)`` for a new call: the gate is ready once the board's ``close(call)`` ran."""
        if self._board is None:
            self._board = _board_actor().remote()
        call = next(self._calls)
        return call, self._board.open.remote(call)

    def _dispatch(self, call) -> None:
        task = _task()
        f_ref = self.share(call.f)
        inputs = call.inputs.detach().cpu() if _arraylib.is_torch(call.inputs) else call.inputs
        skipping = self._f_seconds.get(id(call.f), math.nan) >= self.skip_min_s  # NaN: f not timed yet
        hanging = "hang" in call.faults.values()
        board_call, gate = self._open_gate() if skipping or hanging else (None, None)
        call.started = time.perf_counter()
        worker_of = {}
        for n in call.order:
            fault = call.faults.get(n)
            task_gate = gate if skipping or fault == "hang" else None
            row = _arraylib.take_rows(inputs, np.array([n]))
            worker_of[task.remote([f_ref, task_gate], row, fault, int(call.seeds[n]))] = n
        call.state = _RayCall(worker_of, list(worker_of), board_call if gate is not None else None)

    def _collect(self, call, collector, deadline_s):
        ray = _ray()
        state = call.state
        # Injected hangs are known here: stop waiting once only they are left (a real hang in
        # f is not known; give a deadline for that).
        hung = {ref for ref, n in state.worker_of.items() if call.faults.get(n) == "hang"}

        def poll(timeout):
            if hung.issuperset(state.pending):
                return None
            ready, state.pending = ray.wait(state.pending, num_returns=1, timeout=timeout)
            finished_at = time.perf_counter()
            return [(state.worker_of[ref], finished_at, ref) for ref in ready]

        timed_out = wait_real_time(collector, call.delays, call.started, deadline_s, poll, _resolve)
        seconds = collector.compute_s[np.isfinite(collector.compute_s)]
        if seconds.size:
            self._f_seconds[id(call.f)] = float(np.median(seconds))
        return time.perf_counter() - call.started, timed_out

    def _end(self, call) -> None:
        if call.state.board_call is not None:  # the call is over: unstarted tasks skip f, hangs end
            self._board.close.remote(call.state.board_call)

    def close(self) -> None:
        self._shared.clear()
        self._f_seconds.clear()
        ray = _ray()
        if self._board is not None and ray.is_initialized():
            try:
                ray.kill(self._board)
            except ValueError:  # a handle from an earlier Ray session: that actor is gone
                pass
        self._board = None
        if self._started:
            if ray.is_initialized():
                ray.shutdown()
            self._started = False

    def __repr__(self) -> str:
        return f"RayCluster(address={self.address!r}, delays={self.delays!r}, faults={self.faults!r})"
