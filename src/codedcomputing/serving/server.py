"""A discrete-event server on a virtual clock: R replicas, each a FIFO queue, and a scheme.

Queries arrive singly at the times the caller gives. A :class:`~codedcomputing.serving.Scheme`
turns each arrival into tasks (one call of ``f`` on one input) sent to replicas; a replica
serves its queue in order, one task at a time, each task taking a service time drawn from a
:class:`~codedcomputing.runtime.delays.DelayModel`. The clock only decides *when*; what the
answers *are* is computed afterwards from the real inputs (:meth:`SimulatedServer.run` with
``inputs`` and ``f``), which is equivalent because the answers depend only on which results
had arrived when each query was answered, and that the clock records.

Choices, stated once:

- **Load balancing** (``balancer``): ``"p2c"``, power of two choices (two distinct replicas
  drawn at random, the one with fewer tasks wins, ties to the first drawn), as Ray Serve
  routes; ``"jsq"``, join the shortest queue (ties broken at random). A replica's *load* is
  its tasks waiting or in service. Every scheme of a server uses the same balancer, and a
  query's redundant tasks (copies, a hedge, a group's parities) go to replicas distinct from
  each other and from the query's other tasks while there are enough replicas.
- **Service times**: replica r's j-th task takes ``draws[j, r]``, where row j is one
  ``service.sample(R, rng)`` (memoryless models draw many rows at once). The table depends on
  the seed alone, so every scheme run with the same seed sees the same service time in the
  same replica slot (paired comparisons); models with memory (bursty, trace) step once per
  row, so a replica's slow spell lasts over its consecutive tasks.
- **Cancellation** (``cancel=True``): once a query is answered, its tasks that have not
  started (a copy, a hedge, its own systematic task after a decode) are removed from their
  queues; once every query of a group is answered, the group's unstarted parity tasks are too.
  A task in service runs to its end (no preemption) and its work counts. ``cancel=False``
  keeps every task (ParM's evaluation does not cancel parities).
- **Ties in time**: completions, then timers (hedges, group closes, decode deadlines), then
  arrivals; within a kind, in the order they were scheduled.
"""

from __future__ import annotations

import heapq
import math
from collections import deque

import numpy as np

from .._validation import check_choice, check_count, check_flag, check_number, check_seed
from ..runtime.delays import (
    AdditiveExponential,
    Bimodal,
    DelayModel,
    Pareto,
    ShiftedExponential,
)
from .arrivals import check_arrivals as _check_arrivals
from .records import OUTCOMES, ServingRecord
from .schemes import COPY, HEDGE, PRIMARY, Scheme

__all__ = ["BALANCERS", "SimulatedServer"]

BALANCERS = ("p2c", "jsq")
_MEMORYLESS = (ShiftedExponential, AdditiveExponential, Pareto, Bimodal)
_QUEUED, _RUNNING, _DONE, _CANCELLED = 0, 1, 2, 3
_EXPIRE = object()  # a query's deadline timer: (_EXPIRE, query) on a run's heap
_OUTCOME_OF_ROLE = {
    PRIMARY: OUTCOMES.index("own"),
    COPY: OUTCOMES.index("replica"),
    HEDGE: OUTCOMES.index("hedge"),
}


class SimulatedServer:
    """R model replicas on a virtual clock, each serving a FIFO queue; run any scheme on them.

    Parameters
    ----------
    num_replicas : int
        R >= 1 replicas (equal resources: compare schemes at the same R).
    service : DelayModel
        Each task's service time in virtual seconds (e.g. ``Bimodal(base=1.0, p=0.01,
        slowdown=10)`` for rare heavy stragglers).
    balancer : {"p2c", "jsq"}, default "p2c"
        Where a task goes (module docstring).
    cancel : bool, default True
        Remove a query's or group's unstarted tasks once they are useless (module docstring).
    seed : int, default 0
        Every run draws its service times and its balancer's choices from this seed afresh
        (two independent streams), so runs of different schemes are paired.
    query_timeout : float or None, default None
        A query not answered this many virtual seconds after its arrival fails, as on a live
        server (:class:`~codedcomputing.serving.ThreadServer`): ``record.failed`` marks it, its
        ``answered_at`` is when it failed, its queued tasks are cancelled, and its estimate
        (with ``inputs`` and ``f``) is NaN. None: no limit.
    """

    def __init__(
        self,
        num_replicas: int,
        service: DelayModel,
        *,
        balancer: str = "p2c",
        cancel=True,
        seed=0,
        query_timeout: float | None = None,
    ):
        self.num_replicas = check_count(num_replicas, "num_replicas", 1)
        if not isinstance(service, DelayModel):
            raise ValueError(f"service must be a codedcomputing.runtime.delays model, got {service!r}")
        self.service = service
        self.balancer = check_choice(balancer, "balancer", BALANCERS)
        self.cancel = check_flag(cancel, "cancel")
        self.seed = check_seed(seed, "seed")
        self.query_timeout = (
            None
            if query_timeout is None
            else check_number(query_timeout, "query_timeout", low=0.0, low_open=True, allow_inf=True)
        )

    def run(self, scheme: Scheme, arrivals, *, inputs=None, f=None, trace_load=False) -> ServingRecord:
        """Serve one query per entry of ``arrivals`` (sorted virtual seconds) with ``scheme``.

        With ``inputs`` (``(Q, ...)``, row q the query arriving at ``arrivals[q]``) and ``f``
        (a batch callable), the record holds the answers: ``f`` on the queries' own inputs
        (one batched pass over all of them: the clock is virtual, so when ``f`` runs does not
        matter), and each decoded query's decode from exactly the results its group had when
        it was decoded. Without them the run is timing only. ``trace_load=True`` records every
        change of a replica's load (``record.load_trace``).
        """
        if not isinstance(scheme, Scheme):
            raise ValueError(f"scheme must be a codedcomputing.serving scheme, got {scheme!r}")
        arrivals = _check_arrivals(arrivals)
        if (inputs is None) != (f is None):
            raise ValueError("inputs and f go together: give both to compute answers, or neither")
        if f is not None:
            if not callable(f):
                raise ValueError(f"f must be a batch callable, got {f!r}")
            inputs = np.asarray(inputs)
            if inputs.ndim < 1 or inputs.shape[0] != arrivals.size:
                raise ValueError(
                    f"inputs must have one row per arrival ({arrivals.size}), got shape {inputs.shape}"
                )
            if np.issubdtype(inputs.dtype, np.number) and not np.all(np.isfinite(inputs)):
                raise ValueError("inputs contain NaN or inf")
        scheme.check(self.num_replicas)
        service_rng, balance_rng = np.random.SeedSequence(self.seed).spawn(2)
        run = _Run(
            self.num_replicas,
            _ServiceDraws(self.service, self.num_replicas, np.random.default_rng(service_rng)),
            _Uniforms(np.random.default_rng(balance_rng)),
            self.balancer,
            self.cancel,
            arrivals,
            check_flag(trace_load, "trace_load"),
        )
        run.query_timeout = self.query_timeout
        scheme.prepare(arrivals)
        run.simulate(scheme)
        failed = np.array(run.outcome, dtype=np.int64) == -2
        run.outcome = [o if o >= 0 else -1 for o in run.outcome]
        record = run.record(scheme.name)
        record.failed = failed
        if f is not None:
            record.estimates, exact = scheme.outputs(record, inputs, f)
            record.estimates[failed] = np.nan
            record.exact = np.asarray(exact, dtype=bool) & ~failed
        else:
            record.exact = (record.outcome != OUTCOMES.index("decoded")) & ~failed
        return record

    def __repr__(self) -> str:
        return (
            f"SimulatedServer({self.num_replicas} replicas, {self.service!r}, balancer={self.balancer!r}, "
            f"cancel={self.cancel}, seed={self.seed})"
        )


class _ServiceDraws:
    """``next(r)``: replica r's next service time, from a table grown in blocks of rows."""

    BLOCK = 1024

    def __init__(self, model: DelayModel, num_replicas: int, rng: np.random.Generator):
        self.model, self.num_replicas, self.rng = model, num_replicas, rng
        model.reset()
        self.table = np.empty((0, num_replicas))
        self.used = [0] * num_replicas

    def next(self, replica: int) -> float:
        j = self.used[replica]
        self.used[replica] = j + 1
        if j >= self.table.shape[0]:
            self._grow()
        return float(self.table[j, replica])

    def _grow(self) -> None:
        rows, width = self.BLOCK, self.num_replicas
        if isinstance(self.model, _MEMORYLESS):
            block = self.model.sample(rows * width, self.rng).reshape(rows, width)
        else:  # one call per row: models with memory step once per row
            block = np.stack([self.model.sample(width, self.rng) for _ in range(rows)])
        self.table = np.vstack([self.table, block])


class _Uniforms:
    """Uniform draws on [0, 1) for the balancer, fetched from the generator in blocks."""

    def __init__(self, rng: np.random.Generator):
        self.rng, self.block, self.i = rng, [], 0

    def __call__(self) -> float:
        if self.i >= len(self.block):
            self.block, self.i = self.rng.random(4096).tolist(), 0
        self.i += 1
        return self.block[self.i - 1]


class _Run:
    """One run's state and the event loop. Schemes call ``pick``, ``submit``, ``cancel``,
    ``answer`` and ``schedule``; no checks are performed."""

    def __init__(self, num_replicas, draws, uniform, balancer, cancel, arrivals, trace_load=False):
        self.num_replicas, self.draws, self.uniform = num_replicas, draws, uniform
        self.trace: list | None = [] if trace_load else None
        self.jsq = balancer == "jsq"
        self.cancel_useless = cancel
        self.arrivals = arrivals
        self.last_query = arrivals.size - 1
        self.live = False  # the answers are computed after the run (Scheme.outputs)
        self.now = 0.0
        self.heap: list = []
        self.seq = 0
        # tasks (parallel lists, indexed by task id)
        self.t_replica: list[int] = []
        self.t_query: list[int] = []
        self.t_group: list[int] = []
        self.t_role: list[int] = []
        self.t_index: list[int] = []  # the scheme's own number (a parity's index in its group)
        self.t_state: list[int] = []
        self.t_start: list[float] = []
        self.t_dispatch: list[float] = []
        self.t_service: list[float] = []
        # replicas
        r = num_replicas
        self.queue = [deque() for _ in range(r)]
        self.running = [-1] * r
        self.load = [0] * r
        self.max_load = [0] * r
        self.area = [0.0] * r
        self.changed = [0.0] * r
        self.busy = [0.0] * r
        self.served = [0] * r
        # queries
        q = arrivals.size
        self.q_tasks: list[list[int]] = [[] for _ in range(q)]
        self.answered_at = [math.nan] * q
        self.outcome = [-1] * q  # -2: failed (a query_timeout)
        self.by = [-1] * q
        self.cancelled = 0
        self.query_timeout = None

    # --- what schemes call -------------------------------------------------------------
    def pick(self, exclude=()) -> int:
        """A replica by the balancer, not in ``exclude`` while others remain."""
        n = self.num_replicas
        if len(exclude) >= n:
            exclude = ()
        load = self.load
        if self.jsq:
            start = int(self.uniform() * n)
            best, best_load = -1, math.inf
            for i in range(n):
                r = (start + i) % n
                if load[r] < best_load and r not in exclude:
                    best, best_load = r, load[r]
            return best
        free = n - len(exclude)
        a = self._draw(exclude)
        if free == 1:
            return a
        b = a
        while b == a:
            b = self._draw(exclude)
        return b if load[b] < load[a] else a

    def _draw(self, exclude) -> int:
        while True:
            r = int(self.uniform() * self.num_replicas)
            if r not in exclude:
                return r

    def submit(self, replica, query, role, group=-1, index=-1, x=None, fn=None) -> int:
        task = len(self.t_replica)
        self.t_replica.append(replica)
        self.t_query.append(query)
        self.t_group.append(group)
        self.t_role.append(role)
        self.t_index.append(index)
        self.t_state.append(_QUEUED)
        self.t_start.append(math.nan)
        self.t_dispatch.append(self.now)
        self.t_service.append(0.0)
        if query >= 0:
            self.q_tasks[query].append(task)
        self._load(replica, 1)
        if self.running[replica] < 0:
            self._start(replica, task)
        else:
            self.queue[replica].append(task)
        return task

    def cancel(self, task: int) -> None:
        """Remove ``task`` from its queue if it has not started (else it runs to its end)."""
        if self.t_state[task] == _QUEUED:
            self.t_state[task] = _CANCELLED
            self.cancelled += 1
            self._load(self.t_replica[task], -1)

    def answer(self, query, outcome, replica, task=-1, value=None, exact=True) -> bool:
        """Answer ``query`` now, unless it already is (or failed); True when this answered it."""
        if self.outcome[query] != -1:
            return False
        self.answered_at[query], self.outcome[query], self.by[query] = self.now, outcome, replica
        if self.cancel_useless:
            for task in self.q_tasks[query]:
                self.cancel(task)
        return True

    def pending(self, task: int) -> bool:
        """Whether ``task`` is queued or in service."""
        return self.t_state[task] <= _RUNNING

    def answered(self, query: int) -> bool:
        """Answered, or failed: nothing more is to be done for it."""
        return self.outcome[query] != -1

    def expire(self, query: int) -> None:
        """``query_timeout`` after ``query``'s arrival: fail it if it is still unanswered, and
        cancel its queued tasks."""
        if self.outcome[query] != -1:
            return
        self.answered_at[query], self.outcome[query] = self.now, -2
        for task in self.q_tasks[query]:
            self.cancel(task)

    def late_at(self, task: int, threshold: float) -> float:
        """When ``task`` is (or at the earliest will be) *visibly straggling*: running for longer
        than ``threshold``, or queued behind a task that is. ``-inf`` for a task that ended
        without a usable result (failed or lost), ``inf`` for one that is done or cancelled.

        Queueing alone never makes a task late: a task queued behind tasks of normal length
        is on time, however long the queue (a burst)."""
        state = self.t_state[task]
        if state == _RUNNING:
            start = self.t_start[task]
            return (self.now if math.isnan(start) else start) + threshold
        if state == _QUEUED:
            head = self.running[self.t_replica[task]]
            if head >= 0 and head != task and not math.isnan(self.t_start[head]):
                return self.t_start[head] + threshold
            return self.now + threshold
        return math.inf if self.usable(task) else -math.inf

    def usable(self, task: int) -> bool:
        """Whether a task that is no longer pending gave a result (the simulated clock's always do)."""
        return self.t_state[task] != _CANCELLED

    def schedule(self, time: float, payload) -> None:
        heapq.heappush(self.heap, (time, 1, self.seq, payload))
        self.seq += 1

    # --- the loop ----------------------------------------------------------------------
    def _load(self, replica: int, change: int) -> None:
        self.area[replica] += self.load[replica] * (self.now - self.changed[replica])
        self.changed[replica] = self.now
        self.load[replica] += change
        if self.load[replica] > self.max_load[replica]:
            self.max_load[replica] = self.load[replica]
        if self.trace is not None and change:
            self.trace.append((self.now, replica, self.load[replica]))

    def _start(self, replica: int, task: int) -> None:
        service = self.draws.next(replica)
        self.t_state[task] = _RUNNING
        self.t_start[task] = self.now
        self.t_service[task] = service
        self.running[replica] = task
        heapq.heappush(self.heap, (self.now + service, 0, self.seq, task))
        self.seq += 1

    def simulate(self, scheme: Scheme) -> None:
        heap, arrivals = self.heap, self.arrivals.tolist()
        nxt, total = 0, len(arrivals)
        pop = heapq.heappop
        while nxt < total or heap:
            if heap and (nxt >= total or heap[0][0] <= arrivals[nxt]):
                time, kind, _, payload = pop(heap)
                self.now = time
                if kind == 0:
                    self._finish(payload, scheme)
                elif type(payload) is tuple and payload and payload[0] is _EXPIRE:
                    self.expire(payload[1])
                else:
                    scheme.timer(self, payload)
            else:
                self.now = arrivals[nxt]
                if self.query_timeout is not None and math.isfinite(self.query_timeout):
                    self.schedule(self.now + self.query_timeout, (_EXPIRE, nxt))
                scheme.arrive(self, nxt)
                nxt += 1

    def _finish(self, task: int, scheme: Scheme) -> None:
        replica = self.t_replica[task]
        self.t_state[task] = _DONE
        self.busy[replica] += self.t_service[task]
        self.served[replica] += 1
        self._load(replica, -1)
        self.running[replica] = -1
        queue, state = self.queue[replica], self.t_state
        while queue:
            following = queue.popleft()
            if state[following] == _QUEUED:
                self._start(replica, following)
                break
        scheme.done(self, task)

    def outcome_of(self, task: int) -> int:
        return _OUTCOME_OF_ROLE[self.t_role[task]]

    def record(self, name: str) -> ServingRecord:
        horizon = self.now
        for r in range(self.num_replicas):  # close the load integrals at the horizon
            self._load(r, 0)
        started = np.array(self.t_start)
        service = np.array(self.t_service)
        ran = ~np.isnan(started) if started.size else np.zeros(0, dtype=bool)
        role = np.array(self.t_role, dtype=np.int64)
        primary_start = np.full(self.arrivals.size, np.nan)
        first = [tasks[0] if tasks else -1 for tasks in self.q_tasks]
        first = np.array(first, dtype=np.int64)
        has = first >= 0
        primary_start[has] = started[first[has]]
        queries = np.array(self.t_query, dtype=np.int64)
        # redundant: every task but a query's first primary (a re-dispatched primary is redundant)
        redundant = np.ones(role.size, dtype=bool)
        redundant[first[has]] = role[first[has]] != PRIMARY
        group = np.full(self.arrivals.size, -1, dtype=np.int64)
        mine = queries >= 0
        group[queries[mine]] = np.array(self.t_group, dtype=np.int64)[mine]
        answered_at = np.array(self.answered_at)
        return ServingRecord(
            scheme=name,
            arrival=self.arrivals.copy(),
            dispatched=self.arrivals.copy(),
            started=primary_start,
            answered_at=answered_at,
            outcome=np.array(self.outcome, dtype=np.int64),
            replica=np.array(self.by, dtype=np.int64),
            exact=np.zeros(self.arrivals.size, dtype=bool),
            group=group,
            busy_s=np.array(self.busy),
            max_load=np.array(self.max_load, dtype=np.int64),
            mean_load=np.array(self.area) / horizon if horizon > 0 else np.zeros(self.num_replicas),
            served=np.array(self.served, dtype=np.int64),
            work_s=float(service[ran].sum()),
            redundant_s=float(service[ran & redundant].sum()),
            redundant_tasks=int(np.sum(ran & redundant)),
            cancelled=self.cancelled,
            horizon_s=horizon,
            load_trace=None
            if self.trace is None
            else {
                "time": np.array([t for t, _, _ in self.trace]),
                "replica": np.array([r for _, r, _ in self.trace], dtype=np.int64),
                "load": np.array([n for _, _, n in self.trace], dtype=np.int64),
            },
            tasks={
                "replica": np.array(self.t_replica, dtype=np.int64),
                "query": queries,
                "group": np.array(self.t_group, dtype=np.int64),
                "role": role,
                "index": np.array(self.t_index, dtype=np.int64),
                "dispatched": np.array(self.t_dispatch),
                "started": started,
                "service": np.where(ran, service, np.nan),
            },
        )
