"""What each worker did on one call: one record, held by a gather's result and by a run's report."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass

import numpy as np

__all__ = ["Gathered", "WorkerRecord"]


@dataclass(frozen=True, eq=False)
class WorkerRecord:
    """Per-worker facts of one call.

    - ``latency``: ``(N,)`` seconds from dispatch to each worker's arrival (usable or
      failed), injected delay included; NaN for workers that never arrived in time.
    - ``compute_s``: ``(N,)`` seconds ``f`` ran on each worker that arrived (NaN where
      unknown; 0 on a simulated cluster).
    - ``alive``: the workers whose usable results were taken, in arrival order: row ``i`` of
      the gathered results is worker ``alive[i]``'s (a decode's ``alive`` is sorted).
    - ``failed``: ``{worker: reason}`` for workers that arrived with an exception or an
      unusable output; ``dropped``: workers that had not arrived when the call ended
      (slow, hung, or cancelled), sorted.
    - ``delays``: the injected ``(N,)`` delays; ``faults``: the injected ``{worker: kind}``.
    - ``traceback``: where the first failing worker's exception was raised (``file:line in
      function``), when there was one.
    """

    latency: np.ndarray
    compute_s: np.ndarray
    alive: np.ndarray
    failed: dict[int, str]
    dropped: np.ndarray
    delays: np.ndarray
    faults: dict[int, str]
    traceback: str = ""

    def trace_rows(self, call: int) -> list[dict]:
        """This call's latencies as rows for a replayable trace (:meth:`delays.Trace.from_csv`)."""
        return trace_rows(self.latency, call)

    def failure_summary(self) -> str:
        """The most common failure reason, how many workers gave it, and where the first
        exception was raised: what an error says when too few results arrived."""
        if not self.failed:
            return ""
        reason, count = Counter(self.failed.values()).most_common(1)[0]
        where = f" (first raised at {self.traceback})" if self.traceback else ""
        return f"most common failure: {count} of {len(self.failed)} failed with {reason}{where}"


def trace_rows(latency: np.ndarray, call: int) -> list[dict]:
    """``[{"call", "worker", "latency_s"}]``, one per worker; ``""`` for one that never arrived."""
    return [
        {"call": int(call), "worker": n, "latency_s": float(t) if np.isfinite(t) else ""}
        for n, t in enumerate(np.asarray(latency, dtype=np.float64))
    ]


class PerWorker:
    """The :class:`WorkerRecord`'s fields, read through ``self.workers``."""

    workers: WorkerRecord

    @property
    def latency(self) -> np.ndarray:
        return self.workers.latency

    @property
    def compute_s(self) -> np.ndarray:
        return self.workers.compute_s

    @property
    def alive(self) -> np.ndarray:
        return self.workers.alive

    @property
    def failed(self) -> dict[int, str]:
        return self.workers.failed

    @property
    def dropped(self) -> np.ndarray:
        return self.workers.dropped

    @property
    def delays(self) -> np.ndarray:
        return self.workers.delays

    @property
    def faults(self) -> dict[int, str]:
        return self.workers.faults

    def trace_rows(self, call: int) -> list[dict]:
        """This call's latencies as rows for a replayable trace (:meth:`delays.Trace.from_csv`)."""
        return self.workers.trace_rows(call)


@dataclass(eq=False)
class Gathered(PerWorker):
    """What one :meth:`Cluster.gather` (or :meth:`Cluster.collect`) got back.

    - ``results``: the usable outputs stacked in arrival order, ``(len(alive), ...)``, in the
      kind of the inputs sent (numpy, or torch on their device); ``None`` when nothing
      usable arrived.
    - ``workers``: the :class:`WorkerRecord`; its fields (``alive``, ``latency``,
      ``failed``, ``dropped``, ``delays``, ``faults``, ``compute_s``) read through too.
    - ``wall_s``: seconds the call took from dispatch (virtual seconds on a simulated cluster).
    - ``timed_out``: True when the deadline ended the call before ``wait_for`` was met.
    """

    results: object
    workers: WorkerRecord
    wall_s: float
    timed_out: bool = False
