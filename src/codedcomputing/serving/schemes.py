"""How a query becomes tasks on the replicas: the schemes a server compares at equal resources.

Every scheme is one object with a ``name`` and three hooks the server's event loop calls:
``arrive(run, q)`` when query q arrives, ``timer(run, payload)`` when a timer it set fires, and
``done(run, task)`` when one of its tasks finishes. A task is one call of ``f`` on one input on
one replica. The same hooks drive both backends: on the virtual clock
(:class:`~codedcomputing.serving.SimulatedServer`) ``outputs(record, inputs, f)`` computes the
answers afterwards; on a live backend (``run.live``, :class:`~codedcomputing.serving.ThreadServer`)
a group's parity inputs are encoded when it closes and a decode runs when it answers, on the
results that arrived.

- :class:`NoRedundancy` (``"none"``): one task per query.
- :class:`Replication` (``"replication"``): ``copies`` tasks per query on distinct replicas,
  the first result wins. Integer copies only: a fractional rate would replicate a random
  share of the queries, which is :class:`Hedge` with delay 0 on that share.
- :class:`Hedge` (``"hedge"``): one task, and a backup on another replica if no answer came
  ``delay`` seconds after dispatch; the backup's work counts only when it is sent and runs.
- :class:`Coded` (``"coded"``): a systematic code (GCC, BACC or ManifoldGCC with
  ``systematic=True``); queries form groups in arrival order.
- :class:`ParM` (``"parm"``): learned parity models; groups of ``k`` queries and one parity
  task each.
"""

from __future__ import annotations

import inspect
import math
import time
from abc import ABC
from typing import ClassVar

import numpy as np

from .._validation import check_count, check_number, number_or_text
from ..codes import Code

__all__ = [
    "SCHEMES",
    "Coded",
    "Hedge",
    "NoRedundancy",
    "ParM",
    "Replication",
    "Scheme",
    "make_scheme",
    "parse_scheme",
]

# A task's role: the query's primary task, a replication copy, a hedge, a group's parity.
PRIMARY, COPY, HEDGE, PARITY = 0, 1, 2, 3
_DECODED = 3  # records.OUTCOMES.index("decoded")


class Scheme(ABC):
    """The common interface (module docstring). No checks are performed in the hooks.

    The hooks drive the server through ``run``, whose interface is what a backend provides:
    ``now`` (seconds), ``arrivals`` (the arrival times known so far: all of them on the
    virtual clock), ``last_query`` (the last query's index when known, else -1),
    ``num_replicas``, ``cancel_useless``, ``live``; ``pick(exclude)`` (a replica by the
    balancer), ``submit(replica, query, role, group=-1, index=-1, x=None, fn=None)`` (a task
    id; ``query`` -1 for a parity, whose input ``x`` a live backend needs, run by ``fn``
    instead of ``f`` if given), ``cancel(task)`` (if not started), ``pending(task)``,
    ``answer(query, outcome, replica, task=-1, value=None, exact=True)`` (True when this
    answered it; later calls are ignored; a live backend answers with ``task``'s output or
    ``value``), ``answered(query)``, ``schedule(time, payload)`` (calls ``timer(run,
    payload)`` then), ``outcome_of(task)``, ``late_at(task, threshold)`` (when the task is,
    or at the earliest will be, running longer than ``threshold`` or queued behind one that
    is); live only: ``input(query)``, ``output(task)``,
    ``f_zero()`` (``f`` of a zero input), ``account(kind, seconds)`` (the master's work); and
    per task ``t_replica``, ``t_query``, ``t_group``, ``t_index``, per query ``q_tasks`` (its
    tasks, its primary first). A scheme holds the state of one run (``prepare`` resets it):
    run one at a time.
    """

    name: ClassVar[str]

    def check(self, num_replicas: int) -> None:  # noqa: B027 - a hook
        """Raise ValueError if this scheme cannot run on ``num_replicas`` replicas."""

    def prepare(self, arrivals: np.ndarray) -> None:  # noqa: B027 - a hook
        """Reset the per-run state before a run over ``arrivals``."""

    def arrive(self, run, query: int) -> None:
        run.submit(run.pick(), query, PRIMARY)

    def timer(self, run, payload) -> None:  # noqa: B027 - a hook
        """A timer this scheme set fired (none by default)."""

    def done(self, run, task: int) -> None:
        run.answer(run.t_query[task], run.outcome_of(task), run.t_replica[task], task)

    def failed(self, run, task: int) -> None:  # noqa: B027 - a hook
        """Live backends: ``task`` ended without a usable result (it raised, returned an invalid
        result, or was lost with its replica)."""

    def flush(self, run) -> None:  # noqa: B027 - a hook
        """No more queries will arrive (a live backend closing): close what waits for more."""

    def recoverable(self, run, query: int) -> bool:
        """Whether unanswered ``query``, none of whose own tasks is pending, may still be answered
        (a live backend fails it otherwise: its tasks failed)."""
        return False

    def outputs(self, record, inputs, f):
        """``(estimates, exact)`` of every query: ``f`` on its own input (all exact)."""
        return _own_outputs(inputs, f), np.ones(record.num_queries, dtype=bool)

    @classmethod
    def from_options(cls, **options) -> Scheme:
        """The scheme built from named options (:func:`parse_scheme`): by default its
        constructor's parameters."""
        cls._check_options(options)
        return cls(**options)

    @classmethod
    def _check_options(cls, options, extra=()) -> None:
        accepted = [*extra, *(p for p in inspect.signature(cls).parameters if p != "self")]
        unknown = sorted(set(options) - set(accepted))
        if unknown:
            takes = ", ".join(accepted) if accepted else "no options"
            raise ValueError(f"scheme {cls.name!r} has no option {unknown[0]!r} (it takes {takes})")

    def __repr__(self) -> str:
        return f"{type(self).__name__}()"


def _own_outputs(inputs, f, batch: int = 4096) -> np.ndarray:
    """``f`` on every row of ``inputs``, in batches of ``batch`` rows."""
    parts = [np.asarray(f(inputs[i : i + batch])) for i in range(0, inputs.shape[0], batch)]
    out = np.concatenate(parts)
    if out.shape[0] != inputs.shape[0]:
        raise ValueError(f"f must return one row per input row, got {out.shape[0]} for {inputs.shape[0]}")
    return out


class NoRedundancy(Scheme):
    """No redundancy: each query's one task goes to the replica the balancer picks."""

    name = "none"


class Replication(Scheme):
    """``copies`` >= 2 tasks per query on distinct replicas; the first result answers it."""

    name = "replication"

    def __init__(self, copies: int = 2):
        self.copies = check_count(copies, "copies", 2)

    def check(self, num_replicas):
        if self.copies > num_replicas:
            raise ValueError(f"copies ({self.copies}) must be at most num_replicas ({num_replicas})")

    def arrive(self, run, query):
        used: set[int] = set()
        for copy in range(self.copies):
            replica = run.pick(used)
            used.add(replica)
            run.submit(replica, query, PRIMARY if copy == 0 else COPY)

    def __repr__(self) -> str:
        return f"Replication(copies={self.copies})"


class Hedge(Scheme):
    """A backup request to another replica ``delay`` seconds after dispatch, if unanswered by then.

    Dean and Barroso's hedged requests (send the backup after about the p95 of the service
    time); the first of the two results answers the query.
    """

    name = "hedge"

    def __init__(self, delay: float):
        self.delay = check_number(delay, "delay", low=0.0)

    def check(self, num_replicas):
        if num_replicas < 2:
            raise ValueError(
                f"hedge needs num_replicas >= 2 (a backup goes to another replica), got {num_replicas}"
            )

    def arrive(self, run, query):
        run.submit(run.pick(), query, PRIMARY)
        run.schedule(run.now + self.delay, query)

    def timer(self, run, query):
        if not run.answered(query):
            first = run.t_replica[run.q_tasks[query][0]]
            run.submit(run.pick((first,)), query, HEDGE)

    def recoverable(self, run, query):
        return len(run.q_tasks[query]) < 2  # the backup is still to be sent

    def __repr__(self) -> str:
        return f"Hedge(delay={self.delay:g})"


class _Grouped(Scheme):
    """Shared by the schemes whose queries form groups with parity tasks.

    Groups form online, in arrival order: a group opens at a query that finds none open and
    closes at its ``group_size``-th query, or ``max_group_wait`` after its first (an arrival
    exactly then opens the next group), or, with an infinite wait, at the last query (when
    the backend knows it) or at :meth:`flush`.
    """

    group_size: int
    max_group_wait: float

    def num_parities(self, size: int) -> int:
        raise NotImplementedError

    # Per-query and per-group state, by id: a live server drops a group's entries once it is
    # done (:meth:`retire`), so that a long run holds only the groups in flight.
    _PER_QUERY = ("group_of", "position")
    _PER_GROUP = ("members", "closed", "unanswered", "arrived", "results", "parity_tasks")

    def prepare(self, arrivals):
        self.group_of: dict[int, int] = {}
        self.position: dict[int, int] = {}
        self.members: dict[int, list[int]] = {}
        self.closed: dict[int, bool] = {}
        self.unanswered: dict[int, int] = {}
        self.arrived: dict[int, list[int]] = {}  # positions; parity j is m + j
        self.results: dict[int, list] = {}  # live: the outputs, in the order of ``arrived``
        self.parity_tasks: dict[int, list[int]] = {}
        self.decode_alive: dict[int, tuple[int, ...]] = {}  # query -> its group's results at its decode
        self.open = -1  # the group taking arrivals
        self.groups = 0  # groups opened so far

    def holds(self, group: int) -> bool:
        """Whether ``group`` may still get tasks (it is open): a live server keeps it until not."""
        return group in self.closed and not self.closed[group]

    def retire(self, group: int) -> None:
        """Forget ``group`` (a live server: it is closed, answered, and none of its tasks pending).
        ``decode_alive`` is kept only for the simulated clock's ``outputs``."""
        for query in self.members.pop(group, ()):
            for name in self._PER_QUERY:
                getattr(self, name).pop(query, None)
            self.decode_alive.pop(query, None)
        for name in self._PER_GROUP[1:]:
            getattr(self, name).pop(group, None)

    def _open(self, run):
        group = self.groups
        self.groups += 1
        self.members[group], self.arrived[group] = [], []
        self.results[group], self.parity_tasks[group] = [], []
        self.closed[group] = False
        self.unanswered[group] = 0
        self.open = group
        self._opened(run, group)
        return group

    def _opened(self, run, group):
        """A group just opened."""

    def arrive(self, run, query):
        group = self.open
        first = group < 0
        if first:
            group = self._open(run)
        members = self.members[group]
        members.append(query)
        self.group_of[query] = group
        self.position[query] = len(members) - 1
        self.unanswered[group] += 1
        run.submit(run.pick(), query, PRIMARY, group)
        wait = self.max_group_wait
        if len(members) == self.group_size or (math.isinf(wait) and query == run.last_query):
            self._close(run, group)
        elif first and math.isfinite(wait):
            fills = query + self.group_size - 1  # does the group fill before the wait? (if known)
            if fills >= len(run.arrivals) or run.arrivals[fills] >= run.now + wait:
                run.schedule(run.now + wait, ("close", group))

    def timer(self, run, payload):
        kind, which = payload
        if which not in self.closed:  # retired: its queries are answered
            return
        if kind == "close":
            if not self.closed[which]:
                self._close(run, which)
        else:
            self._deadline(run, which)

    def flush(self, run):
        if self.open >= 0:
            self._close(run, self.open)

    def recoverable(self, run, query):
        group = self.group_of[query]
        if not self.closed[group] or self._waiting(group):
            return True
        tasks = self.parity_tasks[group] + [run.q_tasks[q][0] for q in self.members[group]]
        return any(run.pending(task) for task in tasks)

    def _waiting(self, group) -> bool:
        """Whether a timer of ``group`` that may answer it is still to fire."""
        return False

    def _close(self, run, group):
        self.closed[group] = True
        if self.open == group:
            self.open = -1
        # apart from each other, and from the group's own tasks still queued or running while
        # enough replicas remain for that (a parity behind the task it covers is of no use)
        count = self.num_parities(len(self.members[group]))
        if not self.unanswered[group] and run.cancel_useless:
            count = 0  # every query already has its own answer: the parities are useless
        used = {
            run.t_replica[run.q_tasks[q][0]] for q in self.members[group] if run.pending(run.q_tasks[q][0])
        }
        if len(used) + count > run.num_replicas:
            used = set()
        inputs = self._parity_inputs(run, group, count) if run.live and count else [(None, None)] * count
        for j, (x, fn) in enumerate(inputs):
            replica = run.pick(used)
            used.add(replica)
            self.parity_tasks[group].append(run.submit(replica, -1, PARITY, group, j, x, fn))
        self._closed(run, group)

    def _parity_inputs(self, run, group, count):
        """Live backends: ``count`` pairs ``(x, fn)``, each parity task's input and function."""
        raise NotImplementedError

    def _closed(self, run, group):
        """The group just closed and its parities are out."""

    def _deadline(self, run, group):
        """The group's decode deadline fired (schemes with one)."""

    def done(self, run, task):
        group = run.t_group[task]
        query = run.t_query[task]
        if query >= 0:
            self.arrived[group].append(self.position[query])
            if run.live:
                self.results[group].append(run.output(task))
            if run.answer(query, run.outcome_of(task), run.t_replica[task], task):
                self._answered(run, group)
        else:
            self.arrived[group].append(len(self.members[group]) + run.t_index[task])
            if run.live:
                self.results[group].append(run.output(task))
        if self.closed[group] and self.unanswered[group]:
            self._try_decode(run, group)

    def _answered(self, run, group):
        self.unanswered[group] -= 1
        if not self.unanswered[group] and run.cancel_useless:
            for task in self.parity_tasks[group]:
                run.cancel(task)

    def _try_decode(self, run, group):
        raise NotImplementedError

    def _decode(self, run, group, queries):
        """Answer ``queries`` of ``group`` by a decode of the results arrived so far (a live
        backend computes it now, once for the group)."""
        alive = tuple(self.arrived[group])
        queries = [query for query in queries if not run.answered(query)]
        if not queries:
            return
        values = exact = None
        if run.live:
            start = time.thread_time()
            values, exact = self._decode_live(run, group, queries)
            run.account("decode", time.thread_time() - start)
        for i, query in enumerate(queries):
            done = (
                run.answer(query, _DECODED, -1, value=values[i], exact=bool(exact[i]))
                if run.live
                else run.answer(query, _DECODED, -1)
            )
            if done:
                self.decode_alive[query] = alive
                self._answered(run, group)

    def _decode_live(self, run, group, queries):
        """``(values, exact)`` of ``queries`` from the results of ``group`` arrived so far."""
        raise NotImplementedError

    def _decodes(self, record):
        """``{(group, alive): [queries]}``: the decodes the answers need, one per group and set."""
        needed: dict[tuple[int, tuple[int, ...]], list[int]] = {}
        for query, alive in self.decode_alive.items():
            if record.outcome[query] == _DECODED:
                needed.setdefault((int(self.group_of[query]), alive), []).append(query)
        return needed


class Coded(_Grouped):
    r"""A systematic code over groups of ``K`` queries: each query's own task at its arrival,
    the group's ``N - K`` parity tasks at its close, a decode for the stragglers.

    A group closes at its K-th query or ``max_group_wait`` seconds after its first; its
    inputs are then encoded and the parity tasks dispatched (to replicas apart from each
    other and from the group's tasks still queued or running). Query q is answered by the
    first of

    - its own (systematic) task's result: ``f(x_q)``, exact;
    - a decode of its group from every result of the group arrived by then (systematic and
      parity), once the group is closed and holds at least the code's ``min_results``
      results, when the **rule** says q is due; or once ``wait_for`` results of the group are
      in (``None``: no such early decode). A query due while too few results are in is
      decoded at the result that makes it possible.

    ``rule="straggling"`` (the default, queue-aware): q is due once its own task is *visibly
    straggling*, running for longer than ``tau`` or queued behind a task that is
    (the run's ``late_at``), and ``tau`` has passed since
    the group's close (the parities' time to come back); a query whose own task failed is
    due at once. Queueing alone never makes a query due: 64 queries at once on 4 replicas,
    with no straggler, are all answered by their own tasks (the group rule decoded 47 of them).
    ``rule="group"`` (the rule before it): every unanswered query of the group is due ``tau``
    after the group's close, whatever its own task is doing; that is
    :meth:`~codedcomputing.runtime.CodedExecutor.run_queries`' rule with its clock starting
    when the group's last tasks go out. ``tau`` is in the server's clock units: with the
    straggling rule, about 1.5 times a normal task's service time separates stragglers from
    normal tasks (the experiments' setting; ``docs/serving.rst``). ``tau = math.inf`` decodes
    only the queries whose own task failed.

    A group closed with m < K queries uses the same code built for ``m`` inputs and
    ``m + N - K`` workers (``type(code)(**code.get_params())`` with those counts, cached),
    so the parity count stays ``N - K``, its points the code's family's for those counts
    (explicit ``alpha`` and ``beta`` are not carried over). ManifoldGCC lays out each decoded group afresh
    (:meth:`~codedcomputing.codes.Code.bind`). Answers: each decoded query gets row q of
    ``code.decode`` on its group's results at its decode, ``exact`` as the decode reports.
    On a live server the frontend goes through the codes' public fast path: a group's parity
    inputs are one product with :meth:`~codedcomputing.codes.base.Code.encoder_rows` (cached
    by the code; a batch-adaptive code binds and encodes each group), and a decode is
    :meth:`~codedcomputing.codes.base.Code.decode_rows` with ``trusted=True`` on the replicas'
    validated results (the same estimates and ``exact`` as ``decode_details``, no argument
    checks, only the rows of the queries waiting).
    """

    name = "coded"

    RULES = ("straggling", "group")

    def __init__(
        self,
        code: Code,
        tau: float,
        *,
        max_group_wait: float = math.inf,
        wait_for: int | None = None,
        rule: str = "straggling",
    ):
        if not isinstance(code, Code):
            raise ValueError(f"code must be a codedcomputing code, got {code!r}")
        if code.get_params().get("systematic") is not True:
            raise ValueError(
                f"code must be systematic (GCC, BACC or ManifoldGCC with systematic=True): a "
                f"non-systematic code would hold every query until its group's decode, got {code!r}"
            )
        if code.num_inputs >= code.num_workers:
            raise ValueError(
                f"code needs at least one parity (num_workers > num_inputs), got {code.num_workers} "
                f"workers for {code.num_inputs} inputs: with none, use NoRedundancy"
            )
        self.code = code
        self.group_size = code.num_inputs
        self.parities = code.num_workers - code.num_inputs
        self.tau = check_number(tau, "tau", low=0.0, allow_inf=True)
        self.max_group_wait = check_number(
            max_group_wait, "max_group_wait", low=0.0, low_open=True, allow_inf=True
        )
        if wait_for is not None:
            wait_for = check_count(wait_for, "wait_for", max(1, code.min_results), code.num_workers)
        self.wait_for = wait_for
        if rule not in self.RULES:
            raise ValueError(f"rule must be one of {self.RULES}, got {rule!r}")
        self.rule = rule
        self._codes: dict[int, Code] = {code.num_inputs: code}

    @classmethod
    def from_options(cls, **options) -> Coded:
        """``code`` a systematic code's name (``bacc``, the default, ``gcc`` or
        ``manifold-gcc``) or a code; ``k`` queries per group (4) and ``parities`` parity tasks
        (2; ``N = k + parities``) for a named code; the rest as for the constructor (``tau``,
        default 1.5, ``max_group_wait``, ``wait_for``, ``rule``)."""
        cls._check_options(options, extra=("k", "parities"))
        code = options.pop("code", "bacc")
        k, parities = options.pop("k", 4), options.pop("parities", 2)
        if isinstance(code, str):
            from ..codes import CODES

            names = ("bacc", "gcc", "manifold-gcc")
            if code not in names:
                raise ValueError(f"scheme 'coded': code must be one of {', '.join(names)}, got {code!r}")
            k = check_count(k, "k", 1)
            code = CODES[code](k, k + check_count(parities, "parities", 1), systematic=True)
        options.setdefault("tau", 1.5)
        return cls(code, **options)

    def check(self, num_replicas):
        if num_replicas < self.parities + 1:
            raise ValueError(
                f"a code with {self.parities} parities needs num_replicas >= {self.parities + 1} (each "
                f"parity on its own replica, and one replica free of them), got {num_replicas}"
            )

    def code_for(self, size: int) -> Code:
        """The code of a group of ``size`` queries (this scheme's ``code`` for a full group)."""
        if size not in self._codes:
            params = dict(self.code.get_params(), num_inputs=size, num_workers=size + self.parities)
            for points in ("alpha", "beta"):  # the family's points for the new counts
                if points in params:
                    params[points] = None
            try:
                self._codes[size] = type(self.code)(**params)
            except (TypeError, ValueError) as err:
                raise ValueError(
                    f"a group closed with {size} queries, and {type(self.code).__name__} cannot be "
                    f"built for {size} inputs and {size + self.parities} workers ({err}): use "
                    "max_group_wait=math.inf"
                ) from None
        return self._codes[size]

    def num_parities(self, size):
        return self.parities

    def prepare(self, arrivals):
        super().prepare(arrivals)
        self.min_results: dict[int, int] = {}
        self.due: dict[int, bool] = {}  # rule "group": the group's deadline passed
        self.late: set[int] = set()  # rule "straggling": queries seen straggling, not yet answered
        self.closed_at: dict[int, float] = {}
        self.checking: set[int] = set()  # rule "straggling": groups with a check still to fire
        self.bound: dict[int, tuple] = {}  # live: group -> (its bound code, its parity workers)
        self._plans: dict[int, tuple] = {}  # live: group size -> its encode plan (``_plan``)

    def retire(self, group):
        self.late.difference_update(self.members.get(group, ()))
        super().retire(group)
        for table in (self.min_results, self.due, self.closed_at, self.bound):
            table.pop(group, None)
        self.checking.discard(group)

    def _opened(self, run, group):
        self.min_results[group] = 0
        self.due[group] = False
        self.closed_at[group] = math.nan

    def _waiting(self, group):
        if self.rule == "straggling":
            return group in self.checking
        return math.isfinite(self.tau) and not self.due[group]

    def _plan(self, size):
        """``(code, parity workers, parity matrix)`` of a group of ``size`` queries, cached:
        the parity rows of the code's encoder (:meth:`~codedcomputing.codes.base.Code.encoder_rows`),
        or None for a batch-adaptive code (its layout, hence its encoder, depends on the group)."""
        plan = self._plans.get(size)
        if plan is None:
            code = self.code_for(size)
            if code.batch_adaptive:
                return None
            workers = np.flatnonzero(np.asarray(code.systematic_inputs) < 0)
            plan = self._plans[size] = (code, workers, code.encoder_rows(workers))
        return plan

    def _parity_inputs(self, run, group, count):
        start = time.thread_time()
        members = self.members[group]
        inputs = np.stack([run.input(q) for q in members])
        plan = self._plan(len(members))
        if plan is None:
            code = self.code_for(len(members)).bind(inputs)
            workers = np.flatnonzero(np.asarray(code.systematic_inputs) < 0)
            coded = np.asarray(code.encode(inputs))[workers]
        else:  # the frontend's own inputs, checked at submit: one product, no re-validation
            code, workers, matrix = plan
            dtype = inputs.dtype if np.issubdtype(inputs.dtype, np.floating) else np.float64
            coded = matrix.astype(dtype, copy=False) @ inputs.reshape(len(members), -1).astype(
                dtype, copy=False
            )
            coded = coded.reshape(workers.size, *inputs.shape[1:])
        self.bound[group] = (code, workers)
        run.account("encode", time.thread_time() - start)
        return [(coded[j], None) for j in range(count)]

    def _decode_live(self, run, group, queries):
        code, workers = self.bound[group]
        m = len(self.members[group])
        systematic = code.systematic_workers
        arrived, results = self.arrived[group], self.results[group]
        worker_of = [int(systematic[i]) if i < m else int(workers[i - m]) for i in arrived]
        order = sorted(range(len(arrived)), key=worker_of.__getitem__)  # the rows in worker order
        stacked = np.stack([results[j] for j in order])
        if not np.issubdtype(stacked.dtype, np.floating):
            stacked = stacked.astype(np.float64)
        # The results are the replicas' validated outputs (finite, one shape) and the workers the
        # frontend's own, distinct: the code's trusted fast path, only the rows of the queries
        # waiting (BACC: a fraction of the whole decode); a query's own result is kept bit for bit.
        alive = np.array([worker_of[j] for j in order], dtype=np.int64)
        positions = np.array([self.position[q] for q in queries], dtype=np.intp)
        values, exact = code.decode_rows(stacked, alive, positions, trusted=True)
        return np.asarray(values), exact

    def _closed(self, run, group):
        self.min_results[group] = self.code_for(len(self.members[group])).min_results
        self.closed_at[group] = run.now
        if self.rule == "straggling":
            if self.unanswered[group]:
                self._check(run, group)
            return
        if math.isfinite(self.tau):
            run.schedule(run.now + self.tau, ("deadline", group))
        if self.unanswered[group]:
            self._try_decode(run, group)

    def _deadline(self, run, group):
        if self.rule == "straggling":
            self.checking.discard(group)
            if self.unanswered[group]:
                self._check(run, group)
            return
        self.due[group] = True
        if self.unanswered[group]:
            self._try_decode(run, group)

    def failed(self, run, task):
        group, query = run.t_group[task], run.t_query[task]
        if self.rule == "straggling" and query >= 0 and self.closed[group] and not run.answered(query):
            self._check(run, group)  # its own task is gone: late now

    def _check(self, run, group):
        """Rule ``"straggling"``: mark the group's unanswered queries whose own task is visibly
        straggling (:meth:`late_at` by ``tau``), decode them if the group's results allow it,
        and set a check for when the next of the others could be."""
        upcoming = math.inf
        opens = self.closed_at[group] + self.tau  # the parities' time to come back
        for query in self.members[group]:
            if run.answered(query) or query in self.late:
                continue
            at = run.late_at(run.q_tasks[query][0], self.tau)
            if at > -math.inf:  # a query whose task failed is due at once; others wait for the parities
                at = max(at, opens)
            if at <= run.now:
                self.late.add(query)
            else:
                upcoming = min(upcoming, at)
        if math.isfinite(upcoming):
            self.checking.add(group)
            run.schedule(upcoming, ("deadline", group))
        self._try_decode(run, group)

    def _try_decode(self, run, group):
        count = len(self.arrived[group])
        if count < self.min_results[group]:
            return
        if self.wait_for is not None and count >= self.wait_for:
            self._decode(run, group, self.members[group])
        elif self.rule == "group":
            if self.due[group]:
                self._decode(run, group, self.members[group])
        else:
            late = [query for query in self.members[group] if query in self.late]
            if late:
                self.late.difference_update(late)
                self._decode(run, group, late)

    def outputs(self, record, inputs, f):
        own = _own_outputs(inputs, f)
        estimates = own.astype(np.result_type(own.dtype, np.float64), copy=True)
        exact = record.outcome != _DECODED
        needed = self._decodes(record)
        bound, parity_rows, offset = {}, [], {}
        total = 0
        for group in {group for group, _ in needed}:  # encode, then one f call over all parities
            members = self.members[group]
            code = self.code_for(len(members)).bind(inputs[members])
            workers = np.flatnonzero(np.asarray(code.systematic_inputs) < 0)
            bound[group] = (code, workers)
            offset[group] = total
            parity_rows.append(np.asarray(code.encode(inputs[members]))[workers])
            total += workers.size
        parity_out = _own_outputs(np.concatenate(parity_rows), f) if parity_rows else None
        for (group, alive), queries in needed.items():
            members = self.members[group]
            code, workers = bound[group]
            m = len(members)
            rows = [own[members[i]] if i < m else parity_out[offset[group] + i - m] for i in alive]
            workers_alive = [int(code.systematic_workers[i]) if i < m else int(workers[i - m]) for i in alive]
            result = code.decode_details(np.stack(rows), np.array(workers_alive))
            positions = [self.position[q] for q in queries]
            estimates[queries] = np.asarray(result.estimates)[positions]
            exact[queries] = np.asarray(result.info["exact"])[positions]
        return estimates, exact

    def __repr__(self) -> str:
        return (
            f"Coded({self.code!r}, tau={self.tau:g}, max_group_wait={self.max_group_wait:g}, "
            f"wait_for={self.wait_for}, rule={self.rule!r})"
        )


class ParM(_Grouped):
    """Learned parity models (Kosaian et al., SOSP 2019): groups of ``k`` queries, one parity task.

    A group closes at its k-th query or ``max_group_wait`` after its first; its parity task
    then runs the parity model on the encoded group. One missing query is decoded as soon as
    the parity's result and every other member's result are in:
    ``F(x_j) ~ F_P(P) - sum_{i != j} F(x_i)`` (:func:`codedcomputing.models.parity.reconstruct`);
    with two or more missing, each waits for its own result. A short group is padded with
    zero inputs for the parity model, their outputs ``f(0)`` known to the frontend.

    ``parity_f``: the parity model as a batch function over groups ``(G, k, ...) -> (G, ...)``
    (:func:`codedcomputing.models.parity.parity_function`); needed only for answers.
    """

    name = "parm"

    def __init__(self, k: int, *, max_group_wait: float = math.inf, parity_f=None):
        self.group_size = check_count(k, "k", 1)
        self.max_group_wait = check_number(
            max_group_wait, "max_group_wait", low=0.0, low_open=True, allow_inf=True
        )
        if parity_f is not None and not callable(parity_f):
            raise ValueError(f"parity_f must be a batch callable over groups, got {parity_f!r}")
        self.parity_f = parity_f

    def num_parities(self, size):
        return 1

    def check(self, num_replicas):
        if num_replicas < 2:
            raise ValueError(
                f"parm needs num_replicas >= 2 (a group's parity apart from its queries), got {num_replicas}"
            )

    def _try_decode(self, run, group):
        m = len(self.members[group])
        if self.unanswered[group] == 1 and m in self.arrived[group]:  # the parity (position m) is in
            self._decode(run, group, self.members[group])

    def _parity_inputs(self, run, group, count):
        members = self.members[group]
        first = run.input(members[0])
        padded = np.zeros((self.group_size, *first.shape), dtype=first.dtype)
        for i, q in enumerate(members):
            padded[i] = run.input(q)
        return [(padded, self.parity_f)]

    def _decode_live(self, run, group, queries):
        m = len(self.members[group])
        outputs = dict(zip(self.arrived[group], self.results[group], strict=True))
        (missing,) = queries
        others = [outputs[i] for i in range(m) if i != self.position[missing]]
        value = np.asarray(outputs[m], dtype=np.float64) - np.sum(others, axis=0) if others else outputs[m]
        if m < self.group_size:
            value = value - (self.group_size - m) * np.asarray(run.f_zero(), dtype=np.float64)
        return [value], [False]

    def outputs(self, record, inputs, f):
        own = _own_outputs(inputs, f)
        estimates = own.astype(np.result_type(own.dtype, np.float64), copy=True)
        exact = record.outcome != _DECODED
        decoded = sorted(self._decodes(record).items())
        if not decoded:
            return estimates, exact
        if self.parity_f is None:
            raise ValueError("ParM needs parity_f to compute decoded answers")
        k = self.group_size
        padded = np.zeros((len(decoded), k, *inputs.shape[1:]), dtype=inputs.dtype)
        filler = _own_outputs(np.zeros((1, *inputs.shape[1:]), dtype=inputs.dtype), f)[0]
        for i, ((group, _), _) in enumerate(decoded):
            padded[i, : len(self.members[group])] = inputs[self.members[group]]
        parity_out = np.asarray(self.parity_f(padded))
        for i, ((group, _), (missing,)) in enumerate(decoded):
            others = [own[q] for q in self.members[group] if q != missing] + [filler] * (
                k - len(self.members[group])
            )
            estimates[missing] = parity_out[i] - np.sum(others, axis=0) if others else parity_out[i]
        return estimates, exact

    def __repr__(self) -> str:
        return f"ParM(k={self.group_size}, max_group_wait={self.max_group_wait:g})"


SCHEMES = {scheme.name: scheme for scheme in (NoRedundancy, Replication, Hedge, Coded, ParM)}


def make_scheme(name: str, **options) -> Scheme:
    """The scheme called ``name`` (a key of :data:`SCHEMES`) built with ``options``."""
    if name not in SCHEMES:
        raise ValueError(f"scheme must be one of {sorted(SCHEMES)}, got {name!r}")
    return SCHEMES[name].from_options(**options)


def parse_scheme(spec: str, defaults=None) -> Scheme:
    """The scheme a text names, its options written in one place: ``"name"`` or
    ``"name:key=value,key=value"``, e.g. ``"coded:k=4,parities=2,tau=10"`` or
    ``"hedge:delay=12"`` (:meth:`Scheme.from_options`: a scheme's constructor parameters;
    ``coded`` also takes ``code``, ``k`` and ``parities``). A value reads as an int, else a
    float (``inf`` included), else text. ``defaults``: ``{name: {option: value}}`` under the
    text's options (what a command line fixes, e.g. ParM's ``parity_f``, or its time units).
    ValueError names an unknown scheme, an unknown option or a malformed pair."""
    if not isinstance(spec, str) or not spec.strip():
        raise ValueError(f"scheme must be a name or name:key=value,..., got {spec!r}")
    name, _, rest = spec.strip().partition(":")
    if name not in SCHEMES:
        raise ValueError(f"scheme must be one of {sorted(SCHEMES)}, got {name!r}")
    options = dict((defaults or {}).get(name, {}))
    for pair in filter(None, (part.strip() for part in rest.split(","))):
        key, equals, text = pair.partition("=")
        key = key.strip().replace("-", "_")
        if not equals or not key or not text.strip():
            raise ValueError(f"scheme options must be key=value pairs, got {pair!r} in {spec!r}")
        options[key] = number_or_text(text.strip())
    return SCHEMES[name].from_options(**options)
