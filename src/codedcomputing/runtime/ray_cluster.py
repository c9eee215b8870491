"""Ray backend: one stateless Ray task per worker; hung tasks force-cancelled."""

from __future__ import annotations

import math
import time

import numpy as np

from .. import _arraylib
from .clusters import Cluster, _collect, _Collector, run_task

__all__ = ["RayCluster"]

_remote_task = None
# In each Ray worker process: the functions already fetched, by object-store reference.
_fetched: dict = {}
_FETCHED_MAX = 8


def _ray():
    try:
        import ray
    except ImportError:
        raise ImportError(
            "RayCluster needs Ray: pip install 'codedcomputing[ray]' (or pip install ray)"
        ) from None
    return ray


def _run_shared(f_box: list, x, fault, seed):
    """A worker's task: fetch ``f`` from the object store (once per process), then :func:`run_task`.

    ``f`` travels as a reference nested in a list, which Ray does not resolve for the
    task: each worker process fetches and deserialises ``f`` once, not once per task, and
    the task has no object-store dependency to wait for.
    """
    (ref,) = f_box
    key = ref.hex()
    f = _fetched.get(key)
    if f is None:
        f = _ray().get(ref)
        if len(_fetched) >= _FETCHED_MAX:
            _fetched.pop(next(iter(_fetched)))
        _fetched[key] = f
    return run_task(f, x, fault, seed)


def _task():
    """:func:`_run_shared` as a Ray remote function (defined once per process, on first use).

    ``max_retries=0``: a worker whose process dies is a straggler, not a task to rerun.
    """
    global _remote_task
    if _remote_task is None:
        _remote_task = _ray().remote(max_retries=0)(_run_shared)
    return _remote_task


class RayCluster(Cluster):
    """Workers as Ray tasks, on an existing Ray cluster or a local one.

    - ``address``: a running cluster's address (``"auto"``, ``"ray://host:10001"``), or
      ``None`` to start a local Ray (``num_cpus`` CPUs, default all; no dashboard). If Ray
      is already initialised in this process, that instance is used as is.
    - ``f`` is put into the object store once per cluster (:meth:`share`), and every task
      gets the reference, not a fresh copy of ``f``.
    - Each worker is a stateless task with ``max_retries=0`` (a worker whose process dies
      is a straggler). When :meth:`gather` returns, hung tasks are force-cancelled (their
      processes are killed, freeing the CPUs; Ray starts fresh ones, ~1 s each on a small
      node). Slow tasks finish in the background, their results discarded: see
      :meth:`_cancel` for why they are not cancelled too.
    - Injected delays are held by the master as on :class:`ThreadCluster`.

    :meth:`close` shuts Ray down only if this cluster started it.
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
    ):
        ray = _ray()
        super().__init__(delays, faults, seed)
        self.address = address
        self._started = False
        if not ray.is_initialized():
            ray.init(
                address=address,
                num_cpus=num_cpus if address is None else None,
                include_dashboard=False,
                log_to_driver=False,
                configure_logging=False,
            )
            self._started = True
        self._shared: dict[int, tuple[object, object]] = {}

    def share(self, f):
        """``f``'s object-store reference, putting it there on first use."""
        ray = _ray()
        key = id(f)
        entry = self._shared.get(key)
        if entry is not None and entry[0] is f:
            return entry[1]
        ref = ray.put(f)
        self._shared[key] = (f, ref)  # keeps f alive, so its id is not reused meanwhile
        return ref

    def _gather(self, f, inputs, num_workers, enough, deadline_s, delays, faults, seeds, order):
        ray = _ray()
        task = _task()
        f_ref = self.share(f)
        if _arraylib.is_torch(inputs):
            inputs = inputs.detach().cpu()
        collector = _Collector(num_workers, enough)
        start = time.perf_counter()
        worker_of = {}
        for n in order:
            ref = task.remote(
                [f_ref], _arraylib.take_rows(inputs, np.array([n])), faults.get(n), int(seeds[n])
            )
            worker_of[ref] = n
        pending = list(worker_of)
        # Injected hangs are known here: stop waiting once only they are left (a real hang in
        # f is not known; give a deadline for that).
        hung = {ref for ref, n in worker_of.items() if faults.get(n) == "hang"}

        def poll(timeout):
            nonlocal pending
            if hung.issuperset(pending):
                return None
            ready, pending = ray.wait(pending, num_returns=1, timeout=timeout)
            finished_at = time.perf_counter()
            return [(worker_of[ref], finished_at, ref) for ref in ready]

        def resolve(ref):
            try:
                return ray.get(ref)
            except Exception as err:  # task errors, crashed workers: stragglers
                cause = getattr(err, "cause", None)  # a RayTaskError wraps f's own exception
                return (cause if isinstance(cause, Exception) else err), math.nan

        try:
            timed_out = _collect(collector, delays, start, deadline_s, poll, resolve)
        finally:
            self._cancel(pending, hung)
        wall = time.perf_counter() - start
        return collector.gathered(num_workers, delays, faults, wall, timed_out)

    def _cancel(self, pending: list, hung: set) -> None:
        """Force-cancel the hung tasks among those unfinished; leave the others to finish.

        A hung task never finishes, so force-cancelling it cannot race its completion.
        Cancelling tasks that may be finishing, with ``force=True`` (and, less often,
        ``force=False``), crashed Ray 2.60's driver ("Tried to complete task that was not
        pending", a fatal check in its task manager) within 30 calls in our stress runs,
        with or without object-store dependencies, so slow stragglers are not cancelled:
        on a small node they delay the next call's queue until they finish.
        """
        ray = _ray()
        for ref in pending:
            if ref in hung:
                ray.cancel(ref, force=True)

    def close(self) -> None:
        self._shared.clear()
        if self._started:
            ray = _ray()
            if ray.is_initialized():
                ray.shutdown()
            self._started = False

    def __repr__(self) -> str:
        return f"RayCluster(address={self.address!r}, delays={self.delays!r}, faults={self.faults!r})"
