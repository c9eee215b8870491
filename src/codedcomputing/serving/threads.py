"""Real-time replicas on threads: the same schemes as the simulated server, on a real clock.

:class:`ThreadServer` holds R replica threads, each with the model ``f`` once and a FIFO queue
of tasks (one input row per task, served one at a time), and a *frontend* that runs the
scheme: every arrival, every replica's result and every timer (a group's maximum wait, a
decode deadline, a hedge's delay) is an event handled in turn under one lock, calling the same
:class:`~codedcomputing.serving.Scheme` hooks as :class:`~codedcomputing.serving.SimulatedServer`.
By default (``frontend="events"``) one frontend thread handles them all, every event already
queued in one batch per wake-up; ``frontend="inline"`` has a replica's own thread handle its
result as soon as it is in (no hand-back through the frontend's queue, no frontend wake-up
per task), and ``frontend="direct"`` besides has the thread that submits a query handle its
arrival (measured: neither cuts the frontend's work per query reliably; ``ThreadServer``).
Timers live on a heap (no ``threading.Timer``): the frontend thread sleeps on its event queue
until the next event or the earliest timer, and a replica that puts a new earliest timer
wakes it. A coded group's parity inputs are encoded with the code's ``encode`` when the group
closes, and a decode runs with the code's ``decode`` on the results that arrived, when it
answers; the frontend's CPU time (its whole event handling, the
encode and the decode among it, on whichever thread ran it) is measured per run
(``record.master_s``).

Choices, stated once:

- **Clock**: every time (arrivals, the schemes' delays, the record) is in units of
  ``time_unit`` seconds since :meth:`ThreadServer.start`, so one scheme object and one
  arrival sequence run on both servers (with ``time_unit=0.01``, a hedge delay of 1.2 is 12 ms).
- **Injected stragglers**: before each task a replica sleeps ``service`` draw x ``time_unit``
  (replica r's j-th task takes row j, column r of the same table as the simulated server with
  the same seed), then runs ``f``; so a task's service time is the draw plus ``f``'s own time.
  A sleep is cut short when the server closes.
- **Results are validated, in one place** (the replica's thread, :func:`_validate`): a task's
  output must be one row, numeric (integer or floating), finite, and of the **output spec**:
  the shape declared with ``output_shape``, or else the shape of the model's own output on a
  probe input of zeros of the first query's shape, computed when that query is submitted (in
  the submitting thread, never the frontend's; with one callable per replica, each distinct
  callable is probed and the shape most replicas return wins). Never the shape of whichever
  result arrives first. ParM's ``f(0)`` for short groups is that probe's output.
- **Failures**: a task whose function raises or returns a result that fails validation is a
  straggler that never returns: the scheme
  answers its query by another path (a copy, a hedge, a decode) or, once none is left, the
  query fails (its future raises :class:`QueryFailed`; the record marks it ``failed``).
  Neither the server nor other queries are disturbed.
- **Per-query deadline** (``query_timeout``, clock units): a query not answered that long after
  its submit fails with :class:`QueryTimeout`, which names the query and its tasks; its queued
  tasks are cancelled. None (the default): no limit, so a hung replica's query without
  another path waits until :meth:`ThreadServer.close` (``coded serve`` sets a finite one).
- **Closing** (:meth:`ThreadServer.close`): no new queries; a coding group still open closes
  (:meth:`~codedcomputing.serving.Scheme.flush`); every query in flight is answered or fails;
  then queued tasks are dropped and the threads stop. With a ``timeout`` the whole close
  returns within it (plus a moment): replica threads still inside ``f`` then are abandoned
  (daemon threads), and a :class:`RuntimeWarning` names them.
"""

from __future__ import annotations

import bisect
import copy
import heapq
import math
import os
import queue
import threading
import time
import warnings
from collections import deque
from collections.abc import Callable, Sequence
from concurrent.futures import Future
from dataclasses import dataclass

import numpy as np

from .._validation import check_choice, check_count, check_flag, check_number, check_seed, check_shape
from ..runtime.delays import DelayModel
from .interference import check_cores
from .records import OUTCOMES, ServingRecord
from .schemes import ParM, Scheme
from .server import (
    _CANCELLED,
    _DONE,
    _EXPIRE,
    _QUEUED,
    _RUNNING,
    BALANCERS,
    _check_arrivals,
    _Run,
    _ServiceDraws,
    _Uniforms,
)

__all__ = ["Answer", "QueryFailed", "QueryTimeout", "ReplicaLost", "ThreadServer"]

FRONTENDS = ("inline", "direct", "events")

_DECODED = OUTCOMES.index("decoded")
_ROLES = ("primary", "copy", "hedge", "parity")  # schemes.PRIMARY, COPY, HEDGE, PARITY
JOIN_GRACE_S = 0.5  # close(timeout): how long past the timeout the replica threads may take to end


class QueryFailed(RuntimeError):
    """A query no path could answer (its tasks failed), or one the server closed on."""


class QueryTimeout(QueryFailed):
    """A query not answered within the server's ``query_timeout``: its message names the query
    and its tasks (where each was: queued, running, done)."""


class ReplicaLost(RuntimeError):
    """A replica's backend lost it (a dead Ray actor, a lost node): its task did not return and
    none will."""


class _ThreadReplicas:
    """The in-process replica backend: a task runs on its replica's thread.

    A backend's interface (what :class:`_LiveRun` calls): ``start(run)`` before the replica
    threads start; ``call(replica, fn, x, delay)`` on replica ``replica``'s thread: wait
    ``delay`` seconds (cut short once ``run.halt`` is set), then ``fn(x)`` (``fn`` None:
    the replica's model) and return its output, or raise: :class:`ReplicaLost` when the
    replica is gone, any other error when the call failed; ``replace(replica)`` after a loss,
    on that replica's thread: True once a new replica serves in its place, False if none will
    (thread replicas are never lost); ``close()`` after the threads stopped."""

    def __init__(self, functions):
        self.functions = functions

    def start(self, run) -> None:
        self.halt = run.halt

    def call(self, replica, fn, x, delay):
        if delay > 0:
            self.halt.wait(delay)
        return (fn or self.functions[replica])(x)

    def replace(self, replica) -> bool:
        return False

    def close(self) -> None:
        pass


@dataclass(frozen=True)
class Answer:
    """One query's answer: ``estimate`` (``f(x)`` or its decode), ``exact`` (it is ``f(x)``
    itself), ``outcome`` (a name in :data:`~codedcomputing.serving.OUTCOMES`), ``replica`` (whose
    result answered it, -1 when decoded) and ``latency`` (from submit to answer, in seconds)."""

    estimate: np.ndarray
    exact: bool
    outcome: str
    replica: int
    latency: float


class ThreadServer:
    """R model replicas on threads, each serving a FIFO queue, driven in real time by one scheme.

    Parameters
    ----------
    f : callable or sequence of callables
        The model as a batch function ``(B, ...) -> (B, ...)``, called with one row at a time;
        or R callables, replica r's model (e.g. one model copy per replica). ``f`` must be safe to
        call from R threads at once (numpy and torch inference are).
    num_replicas : int
        R >= 1 replicas.
    scheme : Scheme
        How a query becomes tasks (:mod:`codedcomputing.serving.schemes`). ParM needs its
        ``parity_f``.
    service : DelayModel or None, default None
        Injected service times in units of ``time_unit`` (module docstring); None: only ``f``'s
        own time.
    time_unit : float, default 1.0
        Seconds per unit of the server's clock.
    balancer, cancel, seed
        As for :class:`~codedcomputing.serving.SimulatedServer` (the same seed pairs the
        service draws and balancer choices with a simulated run).
    affinity : sequence of R sets of core ids, or None
        Pin replica r's thread to ``affinity[r]`` (``os.sched_setaffinity``, Linux; None in an
        entry leaves that replica free): with :class:`~codedcomputing.serving.Interference`
        on the same core, that replica straggles for real.
    query_timeout : float or None, default None
        A query not answered this many clock units after its submit fails with
        :class:`QueryTimeout` (module docstring); None: no limit.
    keep_record : bool or int, default False
        The per-query record (:meth:`record`): False, none (a running server holds only the
        queries in flight, and streams counts and a latency histogram into :meth:`stats`);
        True, every query; an int n, the latest n or more (whole groups). :meth:`run` keeps
        every query of its run unless told otherwise.
    output_shape : tuple of int or None, default None
        One answer's shape (the model's output row). None: the shape of the model's output on a
        probe input (module docstring). Results of another shape are failed tasks.
    frontend : {"events", "inline", "direct"}, default "events"
        Who runs the scheme's hooks, always one at a time under the frontend's lock:
        ``"events"``, the frontend thread, every event queued by then in one batch per
        wake-up; ``"inline"``, a replica's result on the replica's own thread as soon as it is
        in (no hand-back through the frontend's event queue, no frontend wake-up per task; the
        replica takes its next task after the hook), arrivals and timers on the frontend
        thread; ``"direct"``, as inline, and an arrival on the thread that calls
        :meth:`submit` (which then waits for the lock and the arrival's work, a group's encode
        among it). The answers, the order of each replica's queue and the timers are the
        same. Measured (``benchmarks/perf/bench_serving_threads.py --part master``, paired on the
        same streams): neither alternative cut the frontend's CPU per query reliably at
        K = 10-50, and with 75 replicas both raised the p50 in some runs, so the batched
        frontend thread is the default.

    Use as a context manager (``with ThreadServer(...) as server: server.submit(x)``), or
    :meth:`run` a whole arrival sequence.
    """

    def __init__(
        self,
        f,
        num_replicas: int,
        scheme: Scheme,
        *,
        service: DelayModel | None = None,
        time_unit: float = 1.0,
        balancer: str = "p2c",
        cancel=True,
        seed=0,
        affinity=None,
        frontend: str = "events",
        query_timeout: float | None = None,
        output_shape=None,
        keep_record: bool | int = False,
    ):
        self.num_replicas = check_count(num_replicas, "num_replicas", 1)
        if callable(f):
            functions = [f] * self.num_replicas
        elif isinstance(f, Sequence) and len(f) == self.num_replicas and all(callable(g) for g in f):
            functions = list(f)
        else:
            raise ValueError(f"f must be a batch callable or {self.num_replicas} of them, got {f!r}")
        self.functions: list[Callable] = functions
        if not isinstance(scheme, Scheme):
            raise ValueError(f"scheme must be a codedcomputing.serving scheme, got {scheme!r}")
        scheme.check(self.num_replicas)
        if isinstance(scheme, ParM) and scheme.parity_f is None:
            raise ValueError("scheme ParM needs parity_f on a live server (its parity tasks run it)")
        self.scheme = scheme
        if service is not None and not isinstance(service, DelayModel):
            raise ValueError(
                f"service must be a codedcomputing.runtime.delays model or None, got {service!r}"
            )
        self.service = service
        self.time_unit = check_number(time_unit, "time_unit", low=0.0, low_open=True)
        self.balancer = check_choice(balancer, "balancer", BALANCERS)
        self.cancel = check_flag(cancel, "cancel")
        self.seed = check_seed(seed, "seed")
        if affinity is None:
            self.affinity = [None] * self.num_replicas
        elif isinstance(affinity, Sequence) and len(affinity) == self.num_replicas:
            self.affinity = [check_cores(cores, f"affinity[{r}]") for r, cores in enumerate(affinity)]
        else:
            raise ValueError(
                f"affinity must be None or {self.num_replicas} sets of core ids, got {affinity!r}"
            )
        self.frontend = check_choice(frontend, "frontend", FRONTENDS)
        self.query_timeout = (
            None
            if query_timeout is None
            else check_number(query_timeout, "query_timeout", low=0.0, low_open=True, allow_inf=True)
        )
        self.output_shape = None if output_shape is None else check_shape(output_shape, "output_shape")
        if keep_record is True or keep_record is False:
            self.record_limit = keep_record
        else:
            self.record_limit = check_count(keep_record, "keep_record", 1)
        self._run: _LiveRun | None = None
        self._state = "new"
        self._gate = threading.Lock()  # a submit and a close do not interleave

    def _replicas(self):
        """A new replica backend for one run (the module docstring of :class:`_ThreadReplicas`)."""
        return _ThreadReplicas(self.functions)

    # --- lifecycle ---------------------------------------------------------------------
    def start(self, last_query: int = -1) -> ThreadServer:
        """Start the replica threads and the frontend (once per server)."""
        if self._state != "new":
            raise RuntimeError(f"a ThreadServer starts once; this one is {self._state}")
        self._run = _LiveRun(self, last_query)
        self._run.start()
        self._state = "running"
        return self

    def submit(self, x) -> Future:
        """Send one query (one input row, the model's input shape); a Future of its :class:`Answer`.

        Open loop: returns at once. The future raises :class:`QueryFailed` if no path could
        answer the query."""
        with self._gate:
            if self._state != "running":
                raise RuntimeError(
                    f"submit needs a running server (start it first); this one is {self._state}"
                )
            run = self._run
            first = not run.input_spec
            row = _check_input(x, run.input_spec)
            if first:
                try:
                    run.output_spec, run.zero = _probe(self, row)
                except ValueError:
                    run.input_spec.clear()  # the next submit probes again
                    raise
            return run.post_query(row)

    def close(self, timeout: float | None = None) -> None:
        """Stop taking queries, answer every query in flight, then stop the threads.

        ``timeout`` (seconds, None: no limit): queries still unanswered then fail with
        :class:`QueryFailed`, and the close returns within ``timeout`` plus
        :data:`JOIN_GRACE_S` even if a replica is stuck in ``f``: such threads are abandoned,
        named in a :class:`RuntimeWarning`."""
        with self._gate:
            if self._state != "running":
                return
            self._state = "closed"
        self._run.stop(timeout)

    def __enter__(self) -> ThreadServer:
        return self.start() if self._state == "new" else self

    def __exit__(self, *exc) -> None:
        self.close()

    # --- whole runs ----------------------------------------------------------------------
    def record(self) -> ServingRecord:
        """The record of this server's run (after :meth:`close`): every query submitted, in
        submit order; times in clock units since the start; ``estimates`` the answers (NaN
        rows for failed queries); ``master_s`` the frontend's CPU seconds (``"frontend"``, all
        of its event handling; ``"encode"`` and ``"decode"``, the parts in the code's encode and
        decode); ``failed_tasks``."""
        if self._state != "closed":
            raise RuntimeError("record needs a closed server (close it first)")
        if self._run.observer is None:
            raise RuntimeError(
                "this server kept no per-query record: construct it with keep_record=True (or a bound)"
            )
        return self._run.record(self.scheme.name)

    def stats(self) -> dict:
        """What the run streamed so far (bounded, any time after :meth:`start`): ``queries`` by
        outcome and ``failed``; ``latency_counts`` per outcome over ``latency_buckets_s`` (the
        upper bounds in seconds, a last count past them), ``latency_sum_s``; ``tasks`` dispatched;
        ``in_flight``: queries and tasks the server holds now."""
        run = self._run
        if run is None:
            raise RuntimeError("stats needs a started server")
        with run.mutex:
            snapshot = run.stats.snapshot()
            snapshot["in_flight"] = {"queries": len(run.outcome), "tasks": len(run.t_state)}
        return snapshot

    def run(self, arrivals, inputs, *, timeout: float | None = None) -> ServingRecord:
        """Serve ``inputs[q]`` at ``arrivals[q]`` (sorted clock units from the start), open loop,
        on a new server; its :meth:`record`. ``timeout`` as for :meth:`close`."""
        from .load import drive

        arrivals = _check_arrivals(arrivals)
        inputs = np.asarray(inputs)
        if inputs.ndim < 1 or inputs.shape[0] != arrivals.size:
            raise ValueError(
                f"inputs must have one row per arrival ({arrivals.size}), got shape {inputs.shape}"
            )
        if self.record_limit is False:
            self.record_limit = True  # a whole run's record: its queries are bounded by arrivals
        self.start(last_query=arrivals.size - 1)
        try:
            drive(self, arrivals, inputs)
        finally:
            self.close(timeout)
        return self.record()

    def __repr__(self) -> str:
        return (
            f"ThreadServer({self.num_replicas} replicas, {self.scheme!r}, service={self.service!r}, "
            f"time_unit={self.time_unit:g}, balancer={self.balancer!r}, cancel={self.cancel}, "
            f"seed={self.seed}, frontend={self.frontend!r})"
        )


def _check_input(x, spec: list) -> np.ndarray:
    """One query's input row: numeric, finite, the shape of the first query's."""
    try:
        row = np.asarray(x)
    except (TypeError, ValueError):
        raise ValueError(f"x must be a numeric array, got {type(x).__name__}") from None
    if not (np.issubdtype(row.dtype, np.number) or row.dtype == bool):
        raise ValueError(f"x must be a numeric array, got dtype {row.dtype}")
    if not np.all(np.isfinite(row)):
        raise ValueError("x contains NaN or inf")
    if spec and (row.shape, row.dtype) != spec[0]:
        raise ValueError(
            f"x must have shape {spec[0][0]} and dtype {spec[0][1]} (the first query's), "
            f"got {row.shape} {row.dtype}"
        )
    if not spec:
        spec.append((row.shape, row.dtype))
    return row


_NUMERIC = "iuf"  # the dtype kinds a result may have: integer, unsigned, floating


def _validate(output, spec: tuple) -> tuple[np.ndarray | None, str | None]:
    """``(row, None)``: a task's output as one answer row of the output spec ``(shape, dtype)``
    (``dtype`` None: the result's own; else a floating dtype the row is cast to);
    or ``(None, why)`` when it is not one: not one row, not numeric, not finite, another shape."""
    try:
        out = np.asarray(output)
    except Exception as err:  # an object numpy cannot read
        return None, f"returned {type(output).__name__}, not an array ({type(err).__name__})"
    if out.dtype.kind not in _NUMERIC:
        return None, f"returned a non-numeric result (dtype {out.dtype})"
    if out.ndim < 1 or out.shape[0] != 1:
        return None, f"returned shape {out.shape} for one input row"
    shape, dtype = spec
    if out.shape[1:] != shape:
        return None, f"returned a row of shape {out.shape[1:]}, expected {shape}"
    if out.dtype.kind == "f" and not np.all(np.isfinite(out)):
        return None, "returned NaN or inf"
    row = out[0]
    if dtype is not None and row.dtype != dtype:  # a floating model's own precision
        row = row.astype(dtype)
    return row, None


def _probe(server: ThreadServer, row: np.ndarray) -> tuple[tuple, np.ndarray]:
    """``(output spec, f(0))`` from the model's output on zeros of ``row``'s shape and dtype.

    Each distinct callable among the replicas' is probed once; the output shape that most
    replicas' callables give wins (ties: the first replica's). A declared ``output_shape`` fixes the
    shape: then nothing is probed, but for ParM's ``f(0)``. ValueError if no probe is usable.
    The probes run one after another in the submitting thread: a callable that hangs on zeros
    holds the first submit (declare ``output_shape`` to skip them)."""
    zeros = np.zeros((1, *row.shape), dtype=row.dtype)
    declared = server.output_shape
    if declared is not None and not isinstance(server.scheme, ParM):  # nothing to probe for
        return (declared, None), None
    holders: dict[int, int] = {}  # a callable's id -> how many replicas hold it
    for fn in server.functions:
        holders[id(fn)] = holders.get(id(fn), 0) + 1
    probed: set[int] = set()
    votes: dict[tuple, list] = {}  # (shape, dtype) -> [replicas voting, f(0)]
    problems = []
    for r, fn in enumerate(server.functions):
        if id(fn) in probed:
            continue
        probed.add(id(fn))
        try:
            out = np.asarray(fn(zeros))
        except Exception as err:  # a broken replica's probe: outvoted, not fatal
            problems.append(f"replica {r} raised {type(err).__name__}: {err}")
            continue
        shape = out.shape[1:] if out.ndim >= 1 else ()
        dtype = out.dtype if out.dtype.kind == "f" else None
        value, why = _validate(out, (declared if declared is not None else shape, dtype))
        if why is not None:
            problems.append(f"replica {r} {why}")
            continue
        vote = votes.setdefault((value.shape, dtype), [0, value])
        vote[0] += holders[id(fn)]
    if not votes:
        raise ValueError(
            f"the model's output on a probe input (zeros of shape {row.shape}) is not usable: "
            + "; ".join(problems)
        )
    (shape, dtype), (_, zero) = max(votes.items(), key=lambda item: item[1][0])
    return (shape, dtype), zero


_TASK_TABLES = (
    "t_replica",
    "t_query",
    "t_group",
    "t_role",
    "t_index",
    "t_state",
    "t_start",
    "t_dispatch",
    "t_service",
    "t_input",
    "t_fn",
    "t_output",
    "t_why",  # a failed task: why
)
# what the observer keeps of a retired query and task (a row: the id, then these)
_KEPT_QUERY = ("arrivals", "answered_at", "outcome", "by", "q_exact", "q_value", "q_redispatched", "q_tasks")
_KEPT_TASK = ("t_replica", "t_query", "t_group", "t_role", "t_index", "t_dispatch", "t_start", "t_service")
_QUERY_TABLES = (
    "q_tasks",
    "answered_at",
    "outcome",
    "by",
    "q_input",
    "q_future",
    "q_value",
    "q_exact",
    "q_redispatched",  # its tasks re-dispatched after a loss
)


class _Arrivals(dict):
    """A live run's arrival times by query, in flight only; ``len`` counts every query so far
    (the next query's id), as a scheme reads ``len(run.arrivals)``."""

    count = 0

    def __len__(self) -> int:
        return self.count


class _Stats:
    """What a run streams into fixed-size counters: queries by outcome (and failed), their
    latency in a fixed histogram, tasks and their work. Bounded whatever the run's length."""

    # latency bucket bounds in seconds: 0.1 ms to 100 s, 4 per decade (Prometheus-style, +Inf last)
    BOUNDS = tuple(float(f"{b:.4g}") for b in np.logspace(-4, 2, 25))

    def __init__(self):
        self.queries = dict.fromkeys((*OUTCOMES, "failed"), 0)
        self.latency = {o: [0] * (len(self.BOUNDS) + 1) for o in OUTCOMES}
        self.latency_sum = dict.fromkeys(OUTCOMES, 0.0)
        self.tasks = 0

    def answered(self, outcome: str, seconds: float) -> None:
        self.queries[outcome] += 1
        self.latency_sum[outcome] += seconds
        self.latency[outcome][bisect.bisect_left(self.BOUNDS, seconds)] += 1

    def snapshot(self) -> dict:
        return {
            "queries": dict(self.queries),
            "latency_buckets_s": self.BOUNDS,
            "latency_counts": {o: list(c) for o, c in self.latency.items()},
            "latency_sum_s": dict(self.latency_sum),
            "tasks": self.tasks,
        }


class _Observer:
    """The opt-in per-query record: the rows of the latest ``limit`` retired units' queries and
    tasks (``limit`` True: every one). :meth:`ThreadServer.record` reads it."""

    def __init__(self, limit):
        self.limit = None if limit is True else int(limit)
        self.units: deque = deque()  # ([query rows], [task rows]) per retired unit, oldest first
        self.queries = 0

    def add(self, queries: list, tasks: list) -> None:
        self.units.append((queries, tasks))
        self.queries += len(queries)
        while self.limit is not None and self.queries - len(self.units[0][0]) >= self.limit:
            dropped, _ = self.units.popleft()
            self.queries -= len(dropped)


class _LiveRun(_Run):
    """One real-time run: the scheme's ``run`` interface over replica threads; the scheme is
    called and the bookkeeping mutated only under ``mutex`` (by the frontend thread, and by a
    replica thread handling its own result when ``inline``)."""

    def __init__(self, server: ThreadServer, last_query: int):
        service_seed, balance_seed = np.random.SeedSequence(server.seed).spawn(2)
        super().__init__(
            server.num_replicas,
            None,
            _Uniforms(np.random.default_rng(balance_seed)),
            server.balancer,
            server.cancel,
            np.empty(0),
        )
        self.server, self.scheme = server, server.scheme
        self.live = True
        # Every table holds the queries and tasks in flight only, by id: a unit (an ungrouped
        # query, or a group with its parities) is dropped once it is done (:meth:`retire`).
        for name in _TASK_TABLES:
            setattr(self, name, {})
        for name in _QUERY_TABLES:
            setattr(self, name, {})
        self.arrivals = _Arrivals()
        self.tasks_made = 0
        self.unit_of: dict[int, tuple] = {}  # query -> its unit: ("q", query) or ("g", group)
        self.unit_task: dict[int, tuple] = {}  # task -> its unit
        self.open: dict[tuple, int] = {}  # unit -> its unanswered queries and pending tasks
        self.unit_members: dict[tuple, list] = {}  # unit -> ([queries], [tasks])
        self.idle: set[tuple] = set()  # units with nothing open: retired at the next settle
        self.observer = _Observer(server.record_limit) if server.record_limit else None
        self.stats = _Stats()
        self.last_query = last_query
        self.unit = server.time_unit
        self.draws = (
            None
            if server.service is None
            else _ServiceDraws(server.service, server.num_replicas, np.random.default_rng(service_seed))
        )
        self.input_spec: list = []
        self.output_spec: tuple | None = None  # (shape, dtype) of an answer row: _probe
        self.zero = None  # f of a zero input: _probe
        self.query_timeout = server.query_timeout
        self.failed_tasks = 0
        self.t_lost: set[int] = set()  # tasks in flight lost with their replica
        self.dead: set[int] = set()  # replicas lost
        self.lost_replicas: list[tuple[int, float]] = []  # (replica, when the loss was seen)
        self.lost_tasks = 0
        self.replaced: list[tuple[int, float]] = []  # (replica, when its replacement was up)
        self.suspects: set[int] = set()
        self.errors: deque[str] = deque(maxlen=100)  # the latest scheme errors
        self.master = {"frontend": 0.0, "encode": 0.0, "decode": 0.0}
        self.lock = threading.Lock()  # task states, shared with the replicas
        self.draw_lock = threading.Lock()
        self.events: queue.SimpleQueue = queue.SimpleQueue()
        self.queues = [queue.SimpleQueue() for _ in range(server.num_replicas)]
        self.halt = threading.Event()  # cuts injected sleeps short at the end
        self.drained = threading.Event()
        self.closing = False
        self.stopped = False  # set under the mutex once the frontend stops: late results are dropped
        self.t0 = 0.0
        self.inline = server.frontend in ("inline", "direct")
        self.direct = server.frontend == "direct"
        self.mutex = threading.Lock()  # the scheme and the bookkeeping: one handler at a time

    def clock(self) -> float:
        return (time.perf_counter() - self.t0) / self.unit

    def start(self) -> None:
        self.backend = self.server._replicas()
        self.backend.start(self)
        self.t0 = time.perf_counter()
        self.scheme.prepare(None)
        self.threads = [
            threading.Thread(target=self.serve, args=(r,), name=f"replica-{r}", daemon=True)
            for r in range(self.num_replicas)
        ]
        self.frontend = threading.Thread(target=self.loop, name="serving-frontend", daemon=True)
        for thread in (*self.threads, self.frontend):
            thread.start()

    def post_query(self, x: np.ndarray) -> Future:
        future: Future = Future()
        future.set_running_or_notify_cancel()
        event = ("arrive", x, future, self.clock())
        if self.direct:
            self.post(event)
        else:
            self.events.put(event)
        return future

    def stop(self, timeout: float | None) -> None:
        ends = None if timeout is None else time.monotonic() + timeout
        self.events.put(("close",))
        if not self.drained.wait(timeout):
            self.events.put(("abandon",))
            self.drained.wait()
        self.halt.set()
        with self.mutex:
            self.stopped = True
        for q in self.queues:
            q.put(-1)
        self.events.put(("stop",))
        self.frontend.join()
        with self.mutex:  # what is left (queued tasks never run, hung ones): to the observer
            for unit in list(self.open):
                self.retire(unit)
        # a replica stuck in f is a daemon thread: left behind. The others see their stop at
        # once: JOIN_GRACE_S past the timeout lets an idle one wake and end, on a busy machine too
        joined_by = None if ends is None else max(ends, time.monotonic()) + JOIN_GRACE_S
        for thread in self.threads:
            thread.join(1.0 if joined_by is None else max(0.0, min(1.0, joined_by - time.monotonic())))
        stuck = [thread.name for thread in self.threads if thread.is_alive()]
        if stuck:
            warnings.warn(
                f"close abandoned {len(stuck)} replica thread(s) still inside f: {', '.join(stuck)}",
                RuntimeWarning,
                stacklevel=3,
            )
        self.backend.close()

    # --- the scheme's interface (frontend thread) ---------------------------------------
    def submit(self, replica, query, role, group=-1, index=-1, x=None, fn=None) -> int:
        task = self.tasks_made
        self.tasks_made += 1
        for table, value in (
            (self.t_replica, replica),
            (self.t_query, query),
            (self.t_group, group),
            (self.t_role, role),
            (self.t_index, index),
            (self.t_start, math.nan),
            (self.t_dispatch, self.now),
            (self.t_service, 0.0),
            (self.t_input, x),
            (self.t_fn, fn),
            (self.t_output, None),
            (self.t_why, None),
        ):
            table[task] = value
        self.t_state[task] = _QUEUED  # last: a replica thread skips a task not (yet) queued
        if query >= 0:
            self.q_tasks[query].append(task)
            unit = self.unit_of.get(query)
            if unit is None:  # its first task says whether it belongs to a group
                unit = self._join(query, ("g", group) if group >= 0 else ("q", query))
        else:
            unit = ("g", group)
        self.unit_task[task] = unit
        self.unit_members.setdefault(unit, ([], []))[1].append(task)
        self._change(unit, 1)
        self.stats.tasks += 1
        self._load(replica, 1)
        self.queues[replica].put(task)
        return task

    # --- units: what is retired together ------------------------------------------------
    def _join(self, query: int, unit: tuple) -> tuple:
        """``query`` belongs to ``unit`` (and keeps it open until answered)."""
        self.unit_of[query] = unit
        self.unit_members.setdefault(unit, ([], []))[0].append(query)
        self._change(unit, 1)
        return unit

    def _change(self, unit: tuple, by: int) -> None:
        count = self.open.get(unit, 0) + by
        self.open[unit] = count
        if count == 0:
            self.idle.add(unit)

    def _ended(self, task: int) -> None:
        """``task`` is no longer pending (done, failed, lost or cancelled)."""
        self._change(self.unit_task[task], -1)

    def retire_idle(self) -> None:
        """Drop the units with nothing open that their scheme no longer holds (a group still open
        may get tasks): their rows go to the observer, if one is kept."""
        for unit in list(self.idle):
            if self.open.get(unit, 0) != 0:
                self.idle.discard(unit)
                continue
            kind, key = unit
            if kind == "g" and self.scheme.holds(key):
                continue  # looked at again at the next settle
            self.idle.discard(unit)
            self.retire(unit)

    def retire(self, unit: tuple) -> None:
        queries, tasks = self.unit_members.pop(unit, ([], []))
        del self.open[unit]
        if self.observer is not None:
            self.observer.add(
                [(q, *(getattr(self, name)[q] for name in _KEPT_QUERY)) for q in queries],
                [(t, *(getattr(self, name)[t] for name in _KEPT_TASK), t in self.t_lost) for t in tasks],
            )
        for q in queries:
            self.unit_of.pop(q, None)
            self.arrivals.pop(q, None)
            for name in _QUERY_TABLES:
                getattr(self, name).pop(q, None)
            self.suspects.discard(q)
        for t in tasks:
            self.unit_task.pop(t, None)
            self.t_lost.discard(t)
            for name in _TASK_TABLES:
                getattr(self, name).pop(t, None)
        if unit[0] == "g" and (self.observer is None or self.observer.limit is not None):
            self.scheme.retire(unit[1])  # with every query kept, so are the groups (Scheme.outputs)

    def answered(self, query: int) -> bool:
        """Answered or failed (or retired: done with)."""
        return self.outcome.get(query, 0) != -1

    def pending(self, task: int) -> bool:
        state = self.t_state.get(task)
        return state is not None and state <= _RUNNING

    def cancel(self, task: int) -> None:
        with self.lock:
            if self.t_state.get(task) != _QUEUED:
                return
            self.t_state[task] = _CANCELLED
        self.cancelled += 1
        self._load(self.t_replica[task], -1)
        self._ended(task)

    def answer(self, query, outcome, replica, task=-1, value=None, exact=True) -> bool:
        if self.outcome.get(query, 0) != -1:
            return False
        if value is None:
            value = self.t_output[task]
        exact = outcome != _DECODED or bool(exact)
        self.answered_at[query], self.outcome[query], self.by[query] = self.now, outcome, replica
        self.q_value[query], self.q_exact[query] = value, exact
        if self.cancel_useless:
            for other in self.q_tasks[query]:
                self.cancel(other)
        latency = (self.now - self.arrivals[query]) * self.unit
        self.q_future[query].set_result(Answer(value, exact, OUTCOMES[outcome], replica, latency))
        self.stats.answered(OUTCOMES[outcome], latency)
        self._change(self.unit_of[query], -1)
        return True

    def input(self, query: int) -> np.ndarray:
        return self.q_input[query]

    def output(self, task: int):
        return self.t_output[task]

    def usable(self, task: int) -> bool:
        return self.t_output.get(task) is not None

    def f_zero(self):
        return self.zero

    def account(self, kind: str, seconds: float) -> None:
        self.master[kind] += seconds

    # --- the frontend loop --------------------------------------------------------------
    def loop(self) -> None:
        heap, events = self.heap, self.events
        while True:
            # a heap read without the mutex: a handler on a replica thread that puts a timer
            # first on the heap posts a wake-up, so a stale wait ends in time
            timeout = None if not heap else max(0.0, (heap[0][0] - self.clock()) * self.unit)
            try:
                event = events.get(timeout=timeout)
            except queue.Empty:
                event = None
            with self.mutex:
                cpu = time.thread_time()
                while True:  # every event already queued, in order, before sleeping again
                    self.now = self.clock()
                    if event is not None and event[0] == "stop":
                        return
                    self.step(event)
                    try:
                        event = events.get_nowait()
                    except queue.Empty:
                        break
                self.settle()
                self.master["frontend"] += time.thread_time() - cpu

    def settle(self) -> None:
        """After a batch of events: the queries whose tasks failed, and the drain on close."""
        if self.suspects:
            self.check_suspects()
        if self.idle:
            self.retire_idle()
        if self.closing and not self.drained.is_set() and all(o != -1 for o in self.outcome.values()):
            self.drained.set()

    def post(self, event) -> None:
        """A replica's event (a result, a loss, a replacement), or a ``direct`` arrival: handled
        at once on the calling thread under the mutex (``inline``), or queued for the frontend
        thread."""
        if not self.inline:
            self.events.put(event)
            return
        heap = self.heap
        with self.mutex:
            if self.stopped:
                return
            cpu = time.thread_time()
            first = heap[0][0] if heap else math.inf
            self.now = self.clock()
            self.step(event)
            self.settle()
            if heap and heap[0][0] < first:  # a new earliest timer: the frontend's wait is stale
                self.events.put(("wake",))
            self.master["frontend"] += time.thread_time() - cpu

    def step(self, event) -> None:
        """Handle ``event`` (None: a timer is due), then fire the timers due by now."""
        heap = self.heap
        try:
            if event is not None:
                self.handle(event)
            while heap and heap[0][0] <= self.now:
                _, _, _, payload = heapq.heappop(heap)
                if type(payload) is tuple and payload and payload[0] is _EXPIRE:
                    self.expire(payload[1])
                else:
                    self.scheme.timer(self, payload)
        except Exception as err:  # a scheme's or a code's error fails its queries, not the server
            self.errors.append(f"{type(err).__name__}: {err}")
            last = self.arrivals.count - 1
            if event is not None and event[0] == "arrive" and self.outcome.get(last) == -1:
                self.fail(last, f"the server failed on it ({self.errors[-1]})")

    def handle(self, event) -> None:
        kind = event[0]
        if kind == "arrive":
            _, x, future, arrived = event
            query = self.arrivals.count
            self.arrivals.count += 1
            for table, value in (
                (self.arrivals, arrived),
                (self.q_tasks, []),
                (self.answered_at, math.nan),
                (self.outcome, -1),
                (self.by, -1),
                (self.q_input, x),
                (self.q_future, future),
                (self.q_value, None),
                (self.q_exact, False),
                (self.q_redispatched, 0),
            ):
                table[query] = value
            if self.query_timeout is not None and math.isfinite(self.query_timeout):
                self.schedule(arrived + self.query_timeout, (_EXPIRE, query))
            try:
                self.scheme.arrive(self, query)
            finally:
                if query not in self.unit_of:  # no task for it (yet): a unit of its own
                    self._join(query, ("q", query))
        elif kind == "done":
            _, task, output, why, busy, lost = event
            replica = self.t_replica[task]
            if lost:
                self.lost_tasks += 1
                self.t_lost.add(task)
                if replica not in self.dead:
                    self.dead.add(replica)
                    self.lost_replicas.append((replica, self.now))
            self.t_state[task] = _DONE
            self.t_service[task] = busy  # a lost task: the time until its loss was seen
            if not lost:  # a lost replica's busy time and tasks served end with what it returned
                self.busy[replica] += busy
                self.served[replica] += 1
            self._load(replica, -1)
            try:
                if why is None:  # validated on the replica's thread (_validate)
                    self.t_output[task] = output
                    self.scheme.done(self, task)
                else:
                    self.failed_tasks += 1
                    self.t_why[task] = why
                    self.scheme.failed(self, task)
                    if self.t_query[task] >= 0:
                        self.suspects.add(self.t_query[task])
            finally:
                self._ended(task)
        elif kind == "close":
            self.closing = True
            self.scheme.flush(self)
        elif kind == "replaced":
            self.dead.discard(event[1])
            self.replaced.append((event[1], self.now))
        elif kind == "wake":
            pass
        elif kind == "abandon":
            for query in [q for q, outcome in self.outcome.items() if outcome == -1]:
                self.fail(query, "the server closed before it was answered")

    def check_suspects(self) -> None:
        for query in list(self.suspects):
            if self.outcome.get(query, 0) != -1:
                self.suspects.discard(query)
            elif not any(self.pending(t) for t in self.q_tasks[query]) and not self.scheme.recoverable(
                self, query
            ):
                if self.redispatch(query):
                    continue
                why = "; ".join(self.t_why[t] for t in self.q_tasks[query] if self.t_why[t] is not None)
                self.fail(query, f"its tasks failed ({why})")
                self.suspects.discard(query)

    def redispatch(self, query: int) -> bool:
        """The re-dispatch rule: a query none of whose paths is left, one of whose tasks was lost
        with its replica, gets a new task like its last lost one (same role and group) on a
        live replica picked by the balancer; at most ``num_replicas`` times per query. False
        when the rule does not apply (the query then fails)."""
        lost = [task for task in self.q_tasks[query] if task in self.t_lost]
        if not lost or self.q_redispatched[query] >= self.num_replicas or len(self.dead) >= self.num_replicas:
            return False
        task = lost[-1]
        self.q_redispatched[query] += 1
        self.submit(self.pick(), query, self.t_role[task], self.t_group[task], self.t_index[task])
        return True

    def pick(self, exclude=()) -> int:
        """The balancer's replica among the live ones (lost replicas are never picked while one
        lives), apart from ``exclude`` while others remain."""
        if not self.dead or len(self.dead) >= self.num_replicas:
            return super().pick(exclude)
        avoid = self.dead | set(exclude)
        return super().pick(avoid if len(avoid) < self.num_replicas else self.dead)

    def fail(self, query: int, why: str, error=QueryFailed) -> None:
        self.answered_at[query], self.outcome[query] = self.now, -2
        self.q_future[query].set_exception(error(f"query {query}: {why}"))
        self.stats.queries["failed"] += 1
        self._change(self.unit_of[query], -1)

    def expire(self, query: int) -> None:
        """``query_timeout`` after ``query``'s submit: fail it if it is still unanswered."""
        if self.outcome.get(query, 0) != -1:
            return
        states = {_QUEUED: "queued", _RUNNING: "running", _DONE: "done", _CANCELLED: "cancelled"}
        tasks = [
            f"task {t} ({_ROLES[self.t_role[t]]}) on replica {self.t_replica[t]}: {states[self.t_state[t]]}"
            for t in self.q_tasks[query]
        ]
        timeout = f"{self.query_timeout:g} units ({self.query_timeout * self.unit:.3g} s)"
        self.fail(query, f"not answered within query_timeout={timeout}; " + "; ".join(tasks), QueryTimeout)
        for task in self.q_tasks[query]:
            self.cancel(task)

    # --- a replica (its own thread) -----------------------------------------------------
    def serve(self, replica: int) -> None:
        tasks, backend = self.queues[replica], self.backend
        if self.server.affinity[replica] is not None:
            os.sched_setaffinity(0, self.server.affinity[replica])  # 0: this thread, on Linux
        lost = None  # why this replica is gone, once it is
        while True:
            task = tasks.get()
            if task < 0:
                return
            with self.lock:
                if self.t_state.get(task) != _QUEUED:
                    continue
                self.t_state[task] = _RUNNING
            if lost is not None:  # queued behind the loss: lost with the replica, never started
                self.post(("done", task, None, lost, 0.0, True))
                continue
            began = time.perf_counter()
            self.t_start[task] = (began - self.t0) / self.unit
            self.running[replica] = task  # read by late_at (a list item: one store, atomic)
            delay = 0.0
            if self.draws is not None:
                with self.draw_lock:
                    delay = self.draws.next(replica) * self.unit
            query = self.t_query[task]
            x = self.q_input[query] if query >= 0 else self.t_input[task]
            output, why = None, None
            try:
                output = backend.call(replica, self.t_fn[task], x[None], delay)
                output, why = _validate(output, self.output_spec)
            except ReplicaLost as err:
                lost = why = f"replica {replica} lost ({err})"
            except Exception as err:  # a failing replica is a straggler, never a crash
                why = f"raised {type(err).__name__}: {err}"
            busy = (time.perf_counter() - began) / self.unit
            self.running[replica] = -1
            self.post(("done", task, output, why, busy, lost is not None))
            if lost is not None and self.replace_lost(replica, lost):
                lost = None

    def replace_lost(self, replica: int, why: str) -> bool:
        """Replica ``replica`` was just lost: report the tasks queued on it as lost, then ask the
        backend for a new replica in its place (this thread waits for it; the others serve
        on). True when it has one: the replica serves its queue again."""
        tasks = self.queues[replica]
        while True:
            try:
                task = tasks.get_nowait()
            except queue.Empty:
                break
            if task < 0:  # the server is stopping
                tasks.put(task)
                return False
            with self.lock:
                if self.t_state.get(task) != _QUEUED:
                    continue
                self.t_state[task] = _RUNNING
            self.post(("done", task, None, why, 0.0, True))
        if self.halt.is_set() or not self.backend.replace(replica):
            return False
        self.post(("replaced", replica))
        return True

    # --- the record ---------------------------------------------------------------------
    def record(self, name: str) -> ServingRecord:
        """The record of the queries the observer kept (ids renumbered from 0 in submit order);
        pure: a view of the kept rows is closed at the horizon, the run is not touched."""
        kept_queries = sorted(row for unit in self.observer.units for row in unit[0])
        kept_tasks = sorted(row for unit in self.observer.units for row in unit[1])
        index = {row[0]: i for i, row in enumerate(kept_queries)}
        task_index = {row[0]: j for j, row in enumerate(kept_tasks)}
        view = copy.copy(self)
        columns = list(zip(*kept_queries, strict=True)) or [()] * (len(_KEPT_QUERY) + 1)
        _, arrivals, answered_at, outcome, by, exact, value, redispatched, q_tasks = columns
        view.arrivals = np.asarray(arrivals, dtype=np.float64)
        view.answered_at, view.by = list(answered_at), list(by)
        view.outcome = [o if o >= 0 else -1 for o in outcome]
        view.q_tasks = [[task_index[t] for t in tasks if t in task_index] for tasks in q_tasks]
        columns = list(zip(*kept_tasks, strict=True)) or [()] * (len(_KEPT_TASK) + 2)
        _, t_replica, t_query, t_group, t_role, t_index, t_dispatch, t_start, t_service, lost = columns
        view.t_replica, view.t_group, view.t_role, view.t_index = (
            list(t_replica),
            list(t_group),
            list(t_role),
            list(t_index),
        )
        view.t_query = [index.get(q, -1) for q in t_query]
        view.t_dispatch, view.t_start, view.t_service = list(t_dispatch), list(t_start), list(t_service)
        ends = [t + s for t, s in zip(t_start, t_service, strict=True) if not math.isnan(t)]
        view.now = max([self.now, *ends])
        view.area, view.changed = list(self.area), list(self.changed)
        failed = np.array(outcome, dtype=np.int64) == -2
        record = _Run.record(view, name)
        record.failed = failed
        record.exact = np.array(exact, dtype=bool) & ~failed
        good = [v for v in value if v is not None]
        if good:
            template = np.asarray(good[0], dtype=np.float64)
            record.estimates = np.stack(
                [
                    np.full_like(template, np.nan) if v is None else np.asarray(v, dtype=np.float64)
                    for v in value
                ]
            )
        record.master_s = dict(self.master)
        record.failed_tasks = self.failed_tasks
        record.errors = list(self.errors)
        record.tasks["lost"] = np.array(lost, dtype=bool)
        record.redispatched = np.array(redispatched, dtype=np.int64)
        record.lost_tasks = self.lost_tasks
        record.lost_replicas = [replica for replica, _ in self.lost_replicas]
        record.replaced = [replica for replica, _ in self.replaced]
        return record
