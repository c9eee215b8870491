"""What one serving run recorded: per query, per replica, and the scheme's extra load."""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

__all__ = ["OUTCOMES", "ServingRecord"]

#: How a query was answered (``ServingRecord.outcome`` holds the index into this tuple):
#: ``"own"`` its primary task's result (the one task of ``none``, the first copy of
#: ``replication``, the first request of ``hedge``, the systematic task of ``coded`` and
#: ``parm``); ``"replica"`` another replication copy; ``"hedge"`` the hedged backup;
#: ``"decoded"`` its group's decode (``coded``: the code's decoder; ``parm``: parity minus
#: the others).
OUTCOMES = ("own", "replica", "hedge", "decoded")


@dataclass(eq=False)
class ServingRecord:
    """One run of a :class:`~codedcomputing.serving.SimulatedServer`; times are virtual seconds.

    Per query (arrays of length Q, in arrival order):

    - ``arrival``; ``dispatched`` (when its primary task was sent to a replica: its arrival
      in every scheme here); ``started`` (when the primary task began service, NaN if it
      was cancelled before it started); ``answered_at``; ``latency = answered_at - arrival``;
    - ``outcome``: an index into :data:`OUTCOMES`; ``replica``: the replica whose result
      answered it (-1 when decoded); ``exact``: the answer is ``f(x)`` itself (every outcome
      but ``"decoded"``, and decodes the code reports exact); ``group``: its coding group
      (-1 for schemes without groups);
    - ``estimates``: ``(Q, ...)`` answers when the run computed outputs (``f`` given), else None.

    Per replica (length R): ``busy_s`` (service seconds spent), ``utilisation = busy_s /
    horizon_s``, ``max_load`` and ``mean_load`` (tasks at the replica, waiting or in service;
    the mean is over time up to ``horizon_s``), ``served`` (tasks run).

    Work: ``work_s`` every started task's service seconds (a started task runs to its end: no
    preemption); ``redundant_s`` the part spent on tasks that were not a query's primary task
    (copies, hedges, parities, and a live run's re-dispatches: the primary work of a query is
    its first task, also when that task was lost with its replica, so a re-dispatched task,
    whatever its role, is redundant); ``extra_load = redundant_s / (work_s - redundant_s)``;
    ``redundant_tasks`` such tasks started; ``cancelled`` tasks cancelled before they started
    (they cost nothing). ``horizon_s``: the last completion (the run drains every queue).

    ``tasks``: every task, arrays in dispatch order: ``replica``, ``query`` (-1 for a parity),
    ``group``, ``role`` (0 primary, 1 copy, 2 hedge, 3 parity), ``index`` (a parity's number in
    its group), ``dispatched``, ``started`` and ``service`` (NaN for a cancelled task).
    ``failed`` (per query: it failed, past the server's ``query_timeout`` or, live, because no
    path could answer it; its ``outcome`` is -1, ``answered_at`` when it failed; None from a
    server that cannot fail a query). Live runs (:class:`~codedcomputing.serving.ThreadServer`)
    also hold ``failed_tasks``, ``master_s`` (the frontend's CPU seconds: ``"frontend"``, ``"encode"``,
    ``"decode"``), ``errors`` (scheme errors the frontend caught), ``redispatched`` (per query:
    how many times its task was re-dispatched after its replica was lost; ``tasks["lost"]``
    marks the tasks lost, ``started`` NaN for those queued behind the loss, ``service`` the
    time until the loss was seen for the one in flight: counted in ``work_s``, not in
    ``busy_s`` nor ``served``), ``lost_tasks`` (tasks lost with their replica),
    ``lost_replicas`` (the replicas lost, in the order seen) and ``replaced`` (the lost
    replicas a new one replaced, in order); times are in the server's clock units.
    ``load_trace`` (runs with ``trace_load=True``): every change of a replica's load, arrays
    ``time``, ``replica`` and ``load`` (the load from that time on), in time order.
    """

    scheme: str
    arrival: np.ndarray
    dispatched: np.ndarray
    started: np.ndarray
    answered_at: np.ndarray
    outcome: np.ndarray
    replica: np.ndarray
    exact: np.ndarray
    group: np.ndarray
    busy_s: np.ndarray
    max_load: np.ndarray
    mean_load: np.ndarray
    served: np.ndarray
    work_s: float
    redundant_s: float
    redundant_tasks: int
    cancelled: int
    horizon_s: float
    tasks: dict = field(default_factory=dict)
    load_trace: dict | None = None
    estimates: object = None
    failed: np.ndarray | None = None
    failed_tasks: int = 0
    master_s: dict | None = None
    errors: list = field(default_factory=list)
    redispatched: np.ndarray | None = None
    lost_tasks: int = 0
    lost_replicas: list = field(default_factory=list)
    replaced: list = field(default_factory=list)

    @property
    def num_queries(self) -> int:
        return int(self.arrival.size)

    @property
    def latency(self) -> np.ndarray:
        return self.answered_at - self.arrival

    @property
    def utilisation(self) -> np.ndarray:
        """``(R,)`` busy fraction of each replica over ``[0, horizon_s]``."""
        return self.busy_s / self.horizon_s if self.horizon_s > 0 else np.zeros_like(self.busy_s)

    @property
    def extra_load(self) -> float:
        """Service seconds spent on redundant tasks per second spent on primary ones."""
        primary = self.work_s - self.redundant_s
        return self.redundant_s / primary if primary > 0 else 0.0

    def counts(self) -> dict[str, int]:
        """``{outcome: number of queries}`` for every name in :data:`OUTCOMES`, and ``"failed"``."""
        answered = self.outcome >= 0
        tally = np.bincount(self.outcome[answered], minlength=len(OUTCOMES))
        counts = {name: int(n) for name, n in zip(OUTCOMES, tally, strict=True)}
        counts["failed"] = int(np.sum(~answered))
        return counts

    def percentile(self, q, outcome: str | None = None) -> float:
        """The ``q``-th percentile (0-100) of the latency, over every query or those of one outcome
        (NaN when none has it)."""
        latency = self.latency
        if outcome is not None:
            if outcome not in OUTCOMES:
                raise ValueError(f"outcome must be one of {OUTCOMES}, got {outcome!r}")
            latency = latency[self.outcome == OUTCOMES.index(outcome)]
        return float(np.percentile(latency, q)) if latency.size else float("nan")

    def summary(self) -> dict[str, float]:
        """One row: latency mean, p50, p99, p99.9 and max; the exact fraction; the outcome
        counts; mean utilisation and the extra load."""
        latency = self.latency
        row = {
            "scheme": self.scheme,
            "queries": self.num_queries,
            "mean": float(latency.mean()),
            "p50": self.percentile(50),
            "p99": self.percentile(99),
            "p99.9": self.percentile(99.9),
            "max": float(latency.max()),
            "exact_fraction": float(self.exact.mean()),
            "utilisation": float(self.utilisation.mean()),
            "extra_load": self.extra_load,
            "cancelled": self.cancelled,
        }
        row.update(self.counts())
        return row
