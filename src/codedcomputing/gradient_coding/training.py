"""Distributed SGD with gradient codes on a simulated clock: every scheme of the pipelined
gradient-coding comparison, step for step reproducible from a seed.

``n`` workers, ``n`` equal data partitions, at most ``s`` stragglers. At step ``t`` the master
broadcasts ``theta_t``; worker ``i`` computes gradients on ``load_i`` partitions (``compute_s``
virtual seconds each) plus a delay drawn from a :mod:`codedcomputing.runtime.delays` model,
so it would arrive after ``compute_s * load_i + delay_i``; the master stops waiting as soon as
its scheme can decode, updates ``theta_{t+1} = theta_t - lr * g_hat`` (plain SGD on the
average gradient) and starts the next step. Schemes (:data:`SCHEMES`):

- ``dgd``: one partition each, wait for all ``n``, the exact average;
- ``gc-fr``, ``gc-cr``: gradient coding (:class:`~.codes.FractionalRepetition`,
  :class:`~.codes.CyclicRepetition`): ``s + 1`` partitions each, decode the exact sum from
  the first arrival of every group (FR) or the fastest ``n - s`` (CR);
- ``is-sgd``: one partition each, average the fastest ``n - s`` (ignore the stragglers);
- ``is-gc``: the cyclic placement with plain sums (``s + 1`` partitions each), the fastest
  ``n - s``, of which the largest set with disjoint partitions is used, averaged over the
  partitions it covers;
- ``pgc-fr``, ``pgc-cr``: pipelined gradient coding (the authors' public code): each worker
  keeps the latest gradient of each of its ``s + 1`` partitions and recomputes one per step,
  round-robin (FR: the members of a group compute the same partition in the same step;
  CR: worker ``i`` partition ``i + (t mod (s + 1))``), and sends the plain sum of all ``s + 1``
  (up to ``s`` steps stale). PGC-FR takes the first arrival of each group; PGC-CR the fastest
  ``n - s``, with ``g_hat = sum_F m_i / ((n - s)(s + 1))`` (an average, not exact decoding).
  A worker that holds no gradient yet for some of its partitions (at step 0; after its
  step-0 gradient failed; a new Ray actor) computes those too in that step, and keeps them
  however late its message (a round-robin refresh is kept only if the message arrived in
  time).

**Faulty workers.** A worker's message for a step is *usable* when it arrived, is finite and
has the parameters' shape; anything else (the gradient raised, returned NaN or the wrong
shape, the worker hung or missed the step's deadline) makes the worker a straggler of that
step, on every trainer alike. What a scheme does when its usable messages fall short:

========  ============  =====================  ==========================================
scheme    kind          waits for              fewer usable messages than that
========  ============  =====================  ==========================================
dgd       exact         all ``n``              :class:`~.codes.TooManyStragglersError`
gc-fr     exact         one per group          :class:`~.codes.TooManyStragglersError`
gc-cr     exact         the fastest ``n - s``  :class:`~.codes.TooManyStragglersError`
pgc-fr    exact decode  one per group          :class:`~.codes.TooManyStragglersError`
is-sgd    approximate   the fastest ``n - s``  a *degraded* step over the ``m`` that came
is-gc     approximate   the fastest ``n - s``  a *degraded* step over the ``m`` that came
pgc-cr    approximate   the fastest ``n - s``  a *degraded* step: ``sum / (m (s + 1))``
========  ============  =====================  ==========================================

A degraded step is flagged (``Step.degraded``) and the run warns once (``RuntimeWarning``);
with no usable message at all every scheme raises. The error carries the steps done so far
(``history``) and says which workers failed and why. So an exact scheme is exact or raises,
never silently wrong. (PGC-FR decodes its members' stored sums exactly; they are up to ``s``
steps stale by design.) A worker that returns finite wrong values (``"garbage"``) is not
detected: that is what :mod:`codedcomputing.adversaries` and the robust codes are for.

Injected faults (``faults``, both trainers): ``None``, ``{worker: kind}`` (every step), or a
:mod:`codedcomputing.runtime.faults` model (drawn per step), with kinds :data:`FAULT_KINDS`:
``"raise"`` (the worker raises instead of computing), ``"hang"`` (it never answers this step:
on threads and Ray it blocks, holding its thread, until the master closes the step; here it
never arrives), ``"nan"`` / ``"shape"`` (it computes, then sends NaN / a vector one entry
short) and ``"garbage"`` (it computes, then sends finite noise: used, undetected). A faulty
worker's fresh PGC gradients are not kept, as for any worker whose message was not used in
time; ``"garbage"`` arrives, so its (true) fresh gradients are kept. A :class:`Problem` whose
gradient raises, returns NaN or the wrong shape for a partition makes every worker that
computes that partition in that step faulty the same way.

Modelling choices (ours; the papers do not fix them): each step's delays are drawn afresh
from the delay model, which may carry state between steps (``BurstyMarkov``: persistent
slowness); a worker that has not arrived when the master moves on is cancelled, and its
step's work is lost, so under PGC its stored gradient for that partition stays as old as
it was (its slot ages grow while it stays slow) while GC and IS schemes simply lose it for
that step. On this virtual clock the master knows that a hung worker never arrives: with no
``step_timeout_s`` a step that cannot get what it waits for ends at the last arrival; with
one, a worker arriving later is a straggler and such a step ends at the deadline. The loss
recorded per step is the full training loss at ``theta``, computed off the clock.
"""

from __future__ import annotations

import copy
import math
import threading
import warnings
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np

from .. import _arraylib
from .._validation import check_choice, check_count, check_number, check_real_array, check_rng, check_seed
from ..runtime.collect import _usable, _where
from ..runtime.delays import DelayModel
from ..runtime.faults import CORRUPTING, KINDS, FaultModel, Fixed, corrupt
from .codes import CyclicRepetition, FractionalRepetition, TooManyStragglersError

__all__ = ["EXACT_SCHEMES", "FAULT_KINDS", "SCHEMES", "Problem", "Step", "simulate"]

SCHEMES = ("dgd", "gc-fr", "gc-cr", "is-sgd", "is-gc", "pgc-fr", "pgc-cr")
EXACT_SCHEMES = ("dgd", "gc-fr", "gc-cr", "pgc-fr")  # they raise rather than decode from too few
FAULT_KINDS = KINDS  # the runtime's: codedcomputing.runtime.faults
MAX_PARTITIONS = 10_000  # one worker per partition: more is a typo, not a cluster


@dataclass(frozen=True)
class Step:
    """One step of a run: ``step`` (1-based; step 0 is the start), ``wall_time_s`` (seconds
    since the start, at the end of the step), ``step_time_s``, ``loss`` (training loss after
    the update), ``used``: the workers whose messages the master combined, in arrival order;
    ``ages``: ``(n, s + 1)`` steps since each worker's stored gradients were computed (PGC
    only, else None; ``t + 1`` at step ``t`` for a gradient never computed yet).

    ``degraded``: the step combined fewer messages than its scheme waits for (an
    approximate scheme short of ``n - s`` usable ones: module docstring); ``timed_out``: the
    step's deadline ended the wait; ``failed``: ``{worker: why}`` for the workers whose
    message was unusable (raised, NaN, wrong shape, still busy with an earlier step, dead)."""

    step: int
    wall_time_s: float
    step_time_s: float
    loss: float
    used: tuple[int, ...] = ()
    ages: np.ndarray | None = field(default=None, repr=False)
    degraded: bool = False
    timed_out: bool = False
    failed: dict[int, str] = field(default_factory=dict, repr=False, compare=False)


class Problem:
    """What is trained: ``gradient(params, partition)`` (the mean gradient of the loss over
    one partition's examples, a vector shaped like ``params``) and ``loss(params)`` (over all
    of them) for flat float64 parameter vectors; ``initial`` the starting parameters (a
    finite, non-empty 1-D real vector); ``num_partitions`` in ``1..10,000`` (one worker each).
    Build one from a torch module and a dataset with :meth:`from_torch`, or give the three
    callables directly. Arguments are checked here (``ValueError`` naming the parameter);
    what ``gradient`` returns is checked at every step (a wrong one makes its worker a
    straggler: module docstring)."""

    def __init__(self, gradient: Callable, loss: Callable, initial, num_partitions: int):
        for name, function in (("gradient", gradient), ("loss", loss)):
            if not callable(function):
                raise ValueError(f"{name} must be callable, got {function!r}")
        self.gradient, self.loss = gradient, loss
        self.initial = _check_vector(initial, "initial")
        self.num_partitions = check_count(num_partitions, "num_partitions", 1, maximum=MAX_PARTITIONS)

    @property
    def dim(self) -> int:
        """The number of parameters."""
        return int(self.initial.size)

    @classmethod
    def from_torch(cls, module, inputs, labels, num_partitions: int, seed=0):
        """Cross-entropy training of ``module`` (a ``torch.nn.Module`` with trainable
        parameters, mapping a batch of inputs to ``(batch, classes)`` logits) on ``inputs``
        (a finite real array, one example per row) and ``labels`` (integers in
        ``0..classes - 1``, one per example), split into ``num_partitions`` (at most the
        number of examples) equal shuffled partitions (seeded; the remainder dropped). One
        forward pass over two examples, on a copy of the module, checks the shapes and the
        label range at construction. The module's own parameters give ``initial``;
        gradients and losses are evaluated by ``torch.func.functional_call`` on a copy of
        the module per thread (functional_call swaps the parameters of the module it is
        given while it runs, so threads sharing one module would compute with each other's
        parameters). Thread-safe, and picklable for Ray."""
        import torch

        if not isinstance(module, torch.nn.Module):
            raise ValueError(f"module must be a torch.nn.Module, got {type(module).__name__}")
        if not any(p.requires_grad for p in module.parameters()):
            raise ValueError("module must have trainable parameters (requires_grad), it has none")
        bad = [name for name, p in module.named_parameters() if not bool(torch.isfinite(p).all())]
        if bad:
            raise ValueError(f"module's parameters must be finite, got NaN or inf in {bad[:5]}")
        x = _check_inputs(inputs)
        y = _check_labels(labels, len(x))
        num_partitions = check_count(num_partitions, "num_partitions", 1, maximum=MAX_PARTITIONS)
        if num_partitions > len(x):
            raise ValueError(
                f"num_partitions must be at most the number of examples ({len(x)}), got {num_partitions}"
            )
        rng = np.random.default_rng(check_seed(seed, "seed"))
        objective = _TorchObjective(module, x, y, num_partitions, rng)
        objective.check_shapes()
        return cls(objective.gradient, objective.loss, objective.initial(), num_partitions)


def _check_vector(values, name: str) -> np.ndarray:
    """``values`` as a finite, non-empty 1-D float64 vector (a copy)."""
    if _arraylib.is_torch(values):
        values = values.detach().cpu().numpy()
    vector = np.array(check_real_array(values, name), dtype=np.float64)
    if vector.ndim != 1 or vector.size == 0:
        raise ValueError(f"{name} must be a non-empty 1-D vector of parameters, got shape {vector.shape}")
    bad = np.flatnonzero(~np.isfinite(vector))
    if bad.size:
        raise ValueError(f"{name} must be finite, got NaN or inf at entries {bad[:10].tolist()}")
    return vector


def _check_inputs(inputs) -> np.ndarray:
    """``inputs`` as a numpy array of finite real numbers, one example per row (not copied)."""
    if _arraylib.is_torch(inputs):
        inputs = inputs.detach().cpu().numpy()
    try:
        x = np.asarray(inputs)
    except (TypeError, ValueError) as err:  # ragged nesting
        raise ValueError(f"inputs must be an array of real numbers: {err}") from None
    if x.dtype == object or x.dtype == bool or not np.issubdtype(x.dtype, np.number) or np.iscomplexobj(x):
        raise ValueError(f"inputs must hold real numbers, got dtype {x.dtype}")
    if x.ndim == 0 or len(x) == 0:
        raise ValueError(f"inputs must have one example per row and at least one, got shape {x.shape}")
    finite = np.isfinite(x.reshape(len(x), -1)).all(axis=1)
    if not finite.all():
        bad = np.flatnonzero(~finite)[:10].tolist()
        raise ValueError(f"inputs must be finite: NaN or inf in examples {bad}")
    return x


def _check_labels(labels, count: int) -> np.ndarray:
    """``labels`` as int64 class indices >= 0, one per example."""
    if _arraylib.is_torch(labels):
        labels = labels.detach().cpu().numpy()
    try:
        y = np.asarray(labels)
    except (TypeError, ValueError) as err:
        raise ValueError(f"labels must be a 1-D array of class indices: {err}") from None
    if y.ndim != 1:
        raise ValueError(f"labels must be a 1-D array of class indices, got shape {y.shape}")
    if len(y) != count:
        raise ValueError(f"labels must have one entry per example of inputs ({count}), got {len(y)}")
    integral = np.issubdtype(y.dtype, np.integer) or (
        np.issubdtype(y.dtype, np.floating) and bool(np.all(np.isfinite(y) & (y == np.round(y))))
    )
    if y.dtype == bool or not integral:
        raise ValueError(f"labels must be integer class indices, got dtype {y.dtype}")
    if (y < 0).any():
        raise ValueError(f"labels must be class indices >= 0, got {y[y < 0][:5].tolist()}")
    return y.astype(np.int64)


class _TorchObjective:
    """Cross-entropy of a torch module over shuffled partitions of a dataset, for flat float64
    parameter vectors; a private copy of the module per thread (rebuilt after unpickling)."""

    def __init__(self, module, inputs, labels, num_partitions: int, rng):
        import torch

        count = len(inputs) // num_partitions * num_partitions
        order = rng.permutation(len(inputs))[:count]
        self.x = torch.as_tensor(np.asarray(inputs)[order], dtype=torch.float32)
        self.y = torch.as_tensor(np.asarray(labels)[order], dtype=torch.long)
        self.parts = list(zip(self.x.chunk(num_partitions), self.y.chunk(num_partitions), strict=True))
        self.module = module
        named = list(module.named_parameters())
        self.names = [name for name, _ in named]
        self.shapes = [p.shape for _, p in named]
        self.sizes = [p.numel() for _, p in named]
        self._local = threading.local()

    def __getstate__(self):
        state = dict(self.__dict__)
        del state["_local"]
        return state

    def __setstate__(self, state):
        self.__dict__.update(state)
        self._local = threading.local()

    def check_shapes(self) -> None:
        """One forward pass on a copy of the module (BatchNorm statistics untouched): the
        inputs fit the module, the output is ``(batch, classes)``, the labels are classes."""
        import torch

        probe = copy.deepcopy(self.module)
        x = self.x[: min(2, len(self.x))]
        try:
            with torch.no_grad():
                out = probe(x)
        except Exception as err:  # any failure of the user's module on the given inputs
            raise ValueError(
                f"inputs do not fit module: module(inputs[:{len(x)}]) with examples of shape "
                f"{tuple(x.shape[1:])} raised {type(err).__name__}: {err}"
            ) from err
        if not isinstance(out, torch.Tensor) or out.ndim != 2 or out.shape[0] != len(x):
            shape = tuple(out.shape) if isinstance(out, torch.Tensor) else type(out).__name__
            raise ValueError(
                f"module must map a batch of {len(x)} inputs to (batch, classes) logits for "
                f"cross-entropy, got {shape}"
            )
        classes = int(out.shape[1])
        largest = int(self.y.max())
        if largest >= classes:
            raise ValueError(
                f"labels must be in 0..{classes - 1} (the module's {classes} outputs), got {largest}"
            )

    def initial(self) -> np.ndarray:
        import torch

        vector = torch.nn.utils.parameters_to_vector(self.module.parameters())
        return vector.detach().double().numpy().copy()

    def _call(self, weights, x):
        import torch

        module = getattr(self._local, "module", None)
        if module is None:
            module = self._local.module = copy.deepcopy(self.module)
        return torch.func.functional_call(module, weights, (x,))

    def _unpack(self, flat, requires_grad=False):
        import torch

        pieces = torch.as_tensor(flat, dtype=torch.float32).split(self.sizes)
        pairs = zip(pieces, self.shapes, strict=True)
        tensors = [p.reshape(shape).clone().requires_grad_(requires_grad) for p, shape in pairs]
        return dict(zip(self.names, tensors, strict=True)), tensors

    def gradient(self, flat, partition) -> np.ndarray:
        import torch

        weights, leaves = self._unpack(flat, requires_grad=True)
        xs, ys = self.parts[partition]
        loss = torch.nn.functional.cross_entropy(self._call(weights, xs), ys)
        grads = torch.autograd.grad(loss, leaves, allow_unused=True)  # an unused parameter: zeros
        pairs = zip(grads, leaves, strict=True)
        flat_grads = [(torch.zeros_like(x) if g is None else g).reshape(-1) for g, x in pairs]
        return torch.cat(flat_grads).double().numpy()

    def loss(self, flat) -> float:
        import torch

        weights, _ = self._unpack(flat)
        with torch.no_grad():
            return float(torch.nn.functional.cross_entropy(self._call(weights, self.x), self.y))


# ---------------------------------------------------------------------------------------
# What both trainers share: the checked run, the workers' messages, the master's rule.


@dataclass(eq=False)
class Run:
    """A checked run of ``scheme`` on ``n`` workers: its code, placement and rules (shared
    by :func:`simulate` and :func:`~codedcomputing.gradient_coding.train_on_cluster`)."""

    scheme: str
    problem: Problem
    n: int
    s: int
    steps: int
    lr: float
    rng: np.random.Generator
    fr: FractionalRepetition | None
    cr: CyclicRepetition | None
    faults: object  # None, {worker: kind}, or a FaultModel
    fault_rng: np.random.Generator | None = None
    # Each worker's partitions and coefficients: fixed for the run, read on every message (not
    # through the codes' public methods, which check their arguments on every call).
    support: list[np.ndarray] = field(init=False, repr=False)
    weights: list[np.ndarray] = field(init=False, repr=False)

    def __post_init__(self):
        workers = range(self.n)
        if self.scheme in ("dgd", "is-sgd"):
            self.support = [np.array([i]) for i in workers]
        elif self.fr is not None:
            self.support = [self.fr._partitions(i) for i in workers]
        else:
            self.support = [(i + np.arange(self.s + 1)) % self.n for i in workers]
        if self.cr is not None:
            self.weights = [self.cr.encoding_matrix[i, self.support[i]] for i in workers]
        else:
            self.weights = [np.ones(parts.size) for parts in self.support]

    @property
    def pipelined(self) -> bool:
        return self.scheme.startswith("pgc")

    @property
    def dim(self) -> int:
        return self.problem.dim

    def partitions(self, worker: int) -> np.ndarray:
        """The partitions ``worker`` holds: its own (DGD, IS-SGD), its FR group's, or the cyclic
        ``worker..worker + s``."""
        return self.support[worker]

    def coefficients(self, worker: int) -> np.ndarray:
        """The weights of its partitions' gradients in its message (GC-CR: its row of ``B``)."""
        return self.weights[worker]

    def step_inputs(self, delays: DelayModel | None, t: int) -> tuple[np.ndarray, dict[int, str], np.ndarray]:
        """Step ``t``'s ``(delays, injected faults, noise seeds)``, drawn in that order (a seeded
        run repeats on every trainer)."""
        n = self.n
        delay = np.zeros(n) if delays is None else np.asarray(delays.sample(n, self.rng), dtype=np.float64)
        return delay, self.step_faults(), self.noise_seeds(t)

    def step_faults(self) -> dict[int, str]:
        """This step's injected faults, ``{worker: kind}``."""
        if self.faults is None:
            return {}
        if isinstance(self.faults, dict):
            return self.faults
        return self.faults.sample(self.n, self.fault_rng)

    def noise_seeds(self, t: int) -> np.ndarray:
        """This step's seed per worker for ``"garbage"`` noise (from the faults' own stream)."""
        if self.fault_rng is not None:
            return self.fault_rng.integers(2**63, size=self.n)
        return t * self.n + np.arange(self.n)

    def enough(self, alive) -> bool:
        """Whether the usable messages of ``alive`` are all the scheme waits for (``O(len(alive))``:
        a trainer that asks after every arrival keeps a :meth:`tally` instead)."""
        tally = self.tally()
        for worker in alive:
            tally.add(worker)
        return tally.enough

    def tally(self) -> Tally:
        """An empty :class:`Tally` of a step's usable messages."""
        return Tally(self)

    def combine(self, messages, alive: list[int]) -> tuple[np.ndarray, list[int], bool]:
        """``(g_hat, the workers used, degraded)`` from the usable ``messages`` (rows follow
        ``alive``, the arrival order) by the scheme's rule (module docstring). Raises
        :class:`TooManyStragglersError` (without the step's context) when the scheme cannot."""
        n, s, scheme = self.n, self.s, self.scheme
        if not alive and scheme not in ("gc-fr", "gc-cr", "pgc-fr"):  # the codes say what is missing
            raise TooManyStragglersError(
                "no usable message arrived", missing=list(range(n)) if scheme == "dgd" else n - s
            )
        messages = np.asarray(messages, dtype=np.float64).reshape(len(alive), self.dim)
        if scheme == "dgd":
            if len(alive) < n:
                missing = sorted(set(range(n)) - set(alive))
                raise TooManyStragglersError(
                    f"dgd needs every worker's gradient, partitions {missing} are missing", missing=missing
                )
            return messages.sum(axis=0) / n, alive, False
        if self.fr is not None:
            weights = self.fr._weights(np.asarray(alive, dtype=np.int64))
            used = [w for w, a in zip(alive, weights, strict=True) if a]
            return weights @ messages / n, used, False
        first = alive[: n - s]
        degraded = len(first) < n - s
        if scheme == "gc-cr":
            weights = self.cr._weights(np.asarray(first, dtype=np.int64))
            return np.tensordot(weights, messages[: len(first)], axes=1) / n, first, False
        if scheme == "is-sgd":
            return messages[: len(first)].sum(axis=0) / len(first), first, degraded
        if scheme == "is-gc":
            chosen = _disjoint(first, self.support, n)
            rows = [alive.index(i) for i in chosen]
            return messages[rows].sum(axis=0) / (len(chosen) * (s + 1)), chosen, degraded
        return messages[: len(first)].sum(axis=0) / (len(first) * (s + 1)), first, degraded  # pgc-cr

    def decode(
        self, t: int, messages, alive, failed, late, deadline_s, history
    ) -> tuple[np.ndarray, list[int], bool]:
        """:meth:`combine` for step ``t``; its :class:`TooManyStragglersError` says which step,
        what came and why not (:func:`shortfall`), and carries ``history``."""
        try:
            return self.combine(messages, alive)
        except TooManyStragglersError as err:
            raise TooManyStragglersError(
                shortfall(self, t + 1, err, alive, failed, late, deadline_s),
                missing=err.missing,
                history=history,
            ) from err

    def close_step(
        self, history, theta, estimate, step_s, used, ages, degraded, timed_out, failed
    ) -> np.ndarray:
        """End a step: ``theta - lr * estimate``, with its :class:`Step` appended to ``history``
        (``ages``: the PGC ages, else None); returns the new ``theta``."""
        theta = theta - self.lr * estimate
        wall = history[-1].wall_time_s + step_s
        loss = float(self.problem.loss(theta))
        history.append(Step(len(history), wall, step_s, loss, tuple(used), ages, degraded, timed_out, failed))
        return theta


class Tally:
    """The usable messages of a step so far, one arrival at a time, against what the run's
    scheme waits for (:meth:`Run.enough`): all ``n`` (DGD), one per FR group, or ``n - s``."""

    def __init__(self, run: Run):
        self.run = run
        self.count = 0
        self.groups: set[int] = set()

    def add(self, worker: int) -> None:
        self.count += 1
        if self.run.fr is not None:
            self.groups.add(worker // self.run.fr.group_size)

    @property
    def enough(self) -> bool:
        run = self.run
        if run.scheme == "dgd":
            return self.count >= run.n
        if run.fr is not None:
            return len(self.groups) == run.fr.num_groups
        return self.count >= run.n - run.s


def check_run(scheme, problem, num_stragglers, steps, lr, delays, seed, code_seed=0, faults=None) -> Run:
    """The arguments every training run shares, checked (``ValueError`` naming the parameter)."""
    scheme = check_choice(scheme, "scheme", SCHEMES)
    if not isinstance(problem, Problem):
        raise ValueError(f"problem must be a codedcomputing.gradient_coding.Problem, got {problem!r}")
    n = problem.num_partitions
    s = check_count(num_stragglers, "num_stragglers", 0)
    if s >= n:
        raise ValueError(f"num_stragglers must be below the number of workers {n}, got {s}")
    steps = check_count(steps, "steps", 0)
    lr = check_number(lr, "lr", low=0.0, low_open=True)
    if delays is not None and not isinstance(delays, DelayModel):
        raise ValueError(f"delays must be a codedcomputing.delays model or None, got {delays!r}")
    rng = check_rng(seed, "seed")
    code_seed = check_seed(code_seed, "code_seed")
    if faults is not None and not isinstance(faults, FaultModel):
        faults = _check_faults(faults, n)
    fr = FractionalRepetition(n, s) if scheme in ("gc-fr", "pgc-fr") else None
    cr = CyclicRepetition(n, s, code_seed) if scheme == "gc-cr" else None
    run = Run(scheme, problem, n, s, steps, lr, rng, fr, cr, faults)
    if isinstance(faults, FaultModel):
        run.fault_rng = rng.spawn(1)[0]  # its own stream: the delays drawn stay those of a run without
    return run


def _check_faults(faults, n: int) -> dict[int, str]:
    """``faults`` as ``{worker: kind}``: checked as a :class:`~codedcomputing.runtime.faults.Fixed`
    model's, with workers in ``0..n-1``."""
    if not isinstance(faults, dict):
        raise ValueError(
            f"faults must be None, a dict {{worker: kind}} or a codedcomputing.faults model, got {faults!r}"
        )
    checked = Fixed(faults).faults
    outside = sorted(worker for worker in checked if worker >= n)
    if outside:
        raise ValueError(f"faults: workers must be in 0..{n - 1}, got {outside}")
    return checked


def check_step_timeout(step_timeout_s) -> float | None:
    """``step_timeout_s``: None (automatic or none, per trainer), or seconds > 0 (inf: none)."""
    if step_timeout_s is None:
        return None
    name = "step_timeout_s (seconds, or None)"
    return check_number(step_timeout_s, name, low=0.0, low_open=True, allow_inf=True)


class WorkerFailure(RuntimeError):
    """A worker's message for a step is unusable (raised inside the worker: a straggler)."""


def checked_gradient(problem: Problem, theta, partition: int) -> np.ndarray:
    """``problem.gradient(theta, partition)`` as a finite float64 vector of the parameters'
    shape, else :class:`WorkerFailure` saying what was wrong (the worker is a straggler)."""
    value = problem.gradient(theta, int(partition))
    try:
        gradient = np.asarray(value, dtype=np.float64)
    except (TypeError, ValueError) as err:
        raise WorkerFailure(f"gradient of partition {partition} is not an array of numbers: {err}") from None
    if gradient.shape != (problem.dim,):
        raise WorkerFailure(
            f"gradient of partition {partition} has shape {gradient.shape}, "
            f"not the parameters' ({problem.dim},)"
        )
    if not np.all(np.isfinite(gradient)):
        raise WorkerFailure(f"gradient of partition {partition} has NaN or inf")
    return gradient


def message_problem(message: np.ndarray, dim: int) -> str | None:
    """Why a simulated worker's message is unusable (not the parameters' shape, or what the
    runtime's collector refuses: NaN, inf), or None if it is usable."""
    if message.shape != (dim,):
        return f"returned shape {message.shape}, not the parameters' ({dim},)"
    return _usable(message[None])[1]


def computed_slots(missing, t: int, slots: int) -> list[int]:
    """The slots a PGC worker computes at step ``t``: each it holds no gradient for
    (``missing``), and ``t mod slots`` (round-robin)."""
    return sorted({*missing, t % slots})


class Ages:
    """The master's record of when each worker's stored PGC gradients were computed (the step
    of each slot, ``-1``: none yet), and so the slots a worker computes at step ``t``
    (:func:`computed_slots`). A worker's fresh gradients are kept only when its message
    arrived in time, its fill-ins however late (:meth:`arrived` records what was kept)."""

    def __init__(self, n: int, slots: int):
        self.stamps = np.full((n, slots), -1, dtype=np.int64)

    def missing(self, worker: int) -> list[int]:
        """The slots ``worker`` holds no gradient for."""
        return np.flatnonzero(self.stamps[worker] < 0).tolist()

    def computed(self, worker: int, t: int) -> list[int]:
        return computed_slots(self.missing(worker), t, self.stamps.shape[1])

    def arrived(self, worker: int, t: int, slots: list[int]) -> None:
        self.stamps[worker, slots] = t

    def forget(self, worker: int) -> None:
        """A replaced worker (a new Ray actor) holds nothing."""
        self.stamps[worker] = -1

    def ages(self, t: int) -> np.ndarray:
        return t - self.stamps


def shortfall(run: Run, step: int, error: Exception, alive, failed: dict, late, deadline_s) -> str:
    """The message of a step that could not decode: what the scheme needs, what came, why not."""
    parts = [f"step {step}: {run.scheme} cannot combine the usable messages of workers {list(alive)}"]
    parts[0] += f": {error}"
    if failed:
        reasons = "; ".join(f"worker {w}: {why}" for w, why in sorted(failed.items())[:6])
        parts.append(f"failed: {reasons}" + (" ..." if len(failed) > 6 else ""))
    if len(late):
        when = f" within the step deadline of {deadline_s:.3g} s (step_timeout_s)"
        when = when if np.isfinite(deadline_s) else ""
        parts.append(f"no result{when} from workers {sorted(int(w) for w in late)}")
    return "; ".join(parts)


def warn_degraded(run: Run, history: list[Step]) -> None:
    """One warning per run that had degraded steps (module docstring)."""
    degraded = [step.step for step in history if step.degraded]
    if degraded:
        warnings.warn(
            f"{run.scheme}: {len(degraded)} of {len(history) - 1} steps combined fewer than n - s = "
            f"{run.n - run.s} usable messages (steps {degraded[:10]}{' ...' if len(degraded) > 10 else ''}; "
            "Step.degraded marks them)",
            RuntimeWarning,
            stacklevel=3,
        )


def simulate(
    scheme: str,
    problem: Problem,
    num_stragglers: int,
    steps: int,
    *,
    lr: float = 0.1,
    compute_s: float = 1.0,
    delays: DelayModel | None = None,
    seed=0,
    code_seed: int = 0,
    faults=None,
    step_timeout_s: float | None = None,
) -> list[Step]:
    """Run ``scheme`` for ``steps`` steps on ``problem.num_partitions`` workers (one partition
    each by index) on the virtual clock (module docstring); return the steps, the start
    (step 0, the initial loss) first.

    ``faults``: injected worker faults (``None``, ``{worker: kind}`` or a
    :mod:`codedcomputing.runtime.faults` model; module docstring), drawn from their own stream of
    ``seed``. ``step_timeout_s``: virtual seconds after which the master stops waiting for a
    step (``None``: no deadline). Raises :class:`~.codes.TooManyStragglersError` (with
    ``history``) when an exact scheme cannot decode a step."""
    run = check_run(scheme, problem, num_stragglers, steps, lr, delays, seed, code_seed, faults)
    compute_s = check_number(compute_s, "compute_s", low=0.0)
    timeout = check_step_timeout(step_timeout_s)
    timeout = math.inf if timeout is None else timeout
    if delays is not None:
        delays.reset()  # a model with memory (bursty Markov) starts afresh: seeded runs repeat
    n = run.n
    workers = _SimulatedWorkers(run)
    theta = problem.initial.copy()
    history = [Step(0, 0.0, 0.0, float(problem.loss(theta)))]
    for t in range(run.steps):
        delay, faults, seeds = run.step_inputs(delays, t)
        workers.begin(t, theta, faults, seeds)
        arrival = compute_s * workers.load() + delay
        hung = {i for i, kind in workers.faults.items() if kind == "hang"}
        order = [i for i in np.argsort(arrival, kind="stable").tolist() if i not in hung]
        in_time = [i for i in order if arrival[i] <= timeout]
        alive, end, tally = [], None, run.tally()
        for i in in_time:
            if workers.message(i) is not None:
                alive.append(i)
                tally.add(i)
            if tally.enough:
                end = float(arrival[i])
                break
        timed_out = False
        if end is None:  # short: the deadline, or the last arrival if the master knows no more come
            if len(in_time) < len(order) or (hung and math.isfinite(timeout)):
                end, timed_out = timeout, True
            else:
                end = float(arrival[in_time[-1]]) if in_time else 0.0
        done = {i for i in in_time if arrival[i] <= end}
        for i in in_time:  # ties with the last one waited for arrived in time too
            if i in done:
                workers.message(i)
        late = [i for i in range(n) if i not in done] if timed_out else []
        messages = [workers.messages[i] for i in alive]
        estimate, used, degraded = run.decode(t, messages, alive, workers.failed, late, timeout, history)
        workers.keep(done)
        ages = workers.ages.ages(t) if run.pipelined else None
        theta = run.close_step(
            history, theta, estimate, end, used, ages, degraded, timed_out, dict(workers.failed)
        )
    warn_degraded(run, history)
    return history


class _SimulatedWorkers:
    """The workers of :func:`simulate`: what each computes and sends in a step, its stored
    PGC gradients, and the failures, with each partition's gradient computed once a step
    (the workers that need a failing one all fail)."""

    def __init__(self, run: Run):
        self.run = run
        self.support = [run.partitions(i) for i in range(run.n)]
        self.stored: list[dict[int, np.ndarray]] = [{} for _ in range(run.n)]
        self.ages = Ages(run.n, run.s + 1)

    def begin(self, t: int, theta: np.ndarray, faults: dict[int, str], seeds: np.ndarray) -> None:
        run, n = self.run, self.run.n
        self.t, self.theta = t, theta
        self.faults, self.seeds = faults, seeds
        self.slots = [self.ages.computed(i, t) for i in range(n)] if run.pipelined else None
        self.gradients: dict[int, object] = {}
        self.messages: dict[int, np.ndarray | None] = {}
        self.fresh: dict[int, object] = {}
        self.failed: dict[int, str] = {}

    def load(self) -> np.ndarray:
        """The partitions each worker computes this step."""
        n = self.run.n
        counts = [len(self.slots[i]) if self.run.pipelined else len(self.support[i]) for i in range(n)]
        return np.asarray(counts, dtype=np.float64)

    def _gradient(self, partition: int):
        if partition not in self.gradients:
            try:
                self.gradients[partition] = checked_gradient(self.run.problem, self.theta, partition)
            except Exception as err:  # the workers that need it fail, as on a real cluster
                self.gradients[partition] = err
        return self.gradients[partition]

    def _fresh(self, i: int):
        """The gradients worker ``i`` computes this step (PGC: by slot), or the exception of
        the first that failed, or None if it computes nothing (injected raise or hang)."""
        if i not in self.fresh:
            if self.faults.get(i) in ("raise", "hang"):
                self.fresh[i] = None
            else:
                support = self.support[i]
                slots = self.slots[i] if self.run.pipelined else range(len(support))
                gradients = {slot: self._gradient(int(support[slot])) for slot in slots}
                errors = [g for g in gradients.values() if isinstance(g, BaseException)]
                self.fresh[i] = errors[0] if errors else gradients
        return self.fresh[i]

    def message(self, i: int) -> np.ndarray | None:
        """Worker ``i``'s message this step, or None (its reason in ``failed``)."""
        if i in self.messages:
            return self.messages[i]
        self.messages[i] = None
        fresh = self._fresh(i)
        if fresh is None:
            self.failed[i] = "InjectedFault: injected fault: worker raised"
            return None
        if isinstance(fresh, BaseException):
            location = _where(fresh)
            self.failed[i] = f"{type(fresh).__name__}: {fresh}" + (f" (at {location})" if location else "")
            return None
        support = self.support[i]
        if self.run.pipelined:
            current = {int(support[slot]): g for slot, g in fresh.items()}
            message = sum({**self.stored[i], **current}.values())
        else:
            gradients = [fresh[slot] for slot in range(len(support))]
            message = sum(c * g for c, g in zip(self.run.coefficients(i), gradients, strict=True))
        kind = self.faults.get(i)
        if kind in CORRUPTING:
            message = corrupt(message, kind, int(self.seeds[i]))
        reason = message_problem(message, self.run.dim)
        if reason is not None:
            self.failed[i] = reason
            return None
        self.messages[i] = message
        return message

    def keep(self, done: set[int]) -> None:
        """PGC: the workers whose usable message arrived in time keep their fresh gradients;
        every worker that computed its missing ones (step 0) keeps those, however late."""
        if not self.run.pipelined:
            return
        for i in range(self.run.n):
            missing = self.ages.missing(i)
            arrived = i in done and self.messages.get(i) is not None
            if not missing and not arrived:
                continue
            fresh = self._fresh(i)
            if fresh is None or isinstance(fresh, BaseException):
                continue
            kept = list(fresh) if arrived else missing
            for slot in kept:
                self.stored[i][int(self.support[i][slot])] = fresh[slot]
            self.ages.arrived(i, self.t, kept)


def _disjoint(candidates, support, n) -> list[int]:
    """The largest set of ``candidates`` (workers) whose partitions do not overlap: greedy by
    earliest-ending arc, from every starting worker (cyclic intervals of equal length, for
    which that greedy is optimal on a line; trying each start covers the wrap-around)."""
    best: list[int] = []
    for first in candidates:
        taken, used = [first], set(int(j) for j in support[first])
        for i in sorted(candidates, key=lambda w: (w - first) % n):
            parts = set(int(j) for j in support[i])
            if i != first and not parts & used:
                taken.append(i)
                used |= parts
        if len(taken) > len(best):
            best = taken
    return sorted(best, key=list(candidates).index)
