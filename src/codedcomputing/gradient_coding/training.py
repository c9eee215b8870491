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
  At step 0 every worker computes all ``s + 1`` (its stored gradients start at ``theta_0``).

Modelling choices (ours; the papers do not fix them): each step's delays are drawn afresh
from the delay model, which may carry state between steps (``BurstyMarkov``: persistent
slowness); a worker that has not arrived when the master moves on is cancelled, and its
step's work is lost, so under PGC its stored gradient for that partition stays as old as
it was (its slot ages grow while it stays slow) while GC and IS schemes simply lose it for
that step. The loss recorded per step is the full training loss at ``theta``, computed off
the clock.
"""

from __future__ import annotations

import copy
import threading
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np

from .._validation import check_choice, check_count, check_number, check_rng
from ..runtime.delays import DelayModel
from .codes import CyclicRepetition, FractionalRepetition

__all__ = ["SCHEMES", "Problem", "Step", "simulate"]

SCHEMES = ("dgd", "gc-fr", "gc-cr", "is-sgd", "is-gc", "pgc-fr", "pgc-cr")


@dataclass(frozen=True)
class Step:
    """One step of a run: ``step`` (1-based; step 0 is the start), ``wall_time_s`` (virtual
    seconds since the start, at the end of the step), ``step_time_s``, ``loss`` (training
    loss after the update), ``used``: the workers whose messages the master combined, in
    arrival order; ``ages``: ``(n, s + 1)`` steps since each worker's stored gradients were
    computed (PGC only, else None)."""

    step: int
    wall_time_s: float
    step_time_s: float
    loss: float
    used: tuple[int, ...] = ()
    ages: np.ndarray | None = field(default=None, repr=False)


class Problem:
    """What is trained: ``gradient(params, partition)`` (the mean gradient of the loss over
    one partition's examples) and ``loss(params)`` (over all of them) for flat float64
    parameter vectors; ``initial`` the starting parameters. Build one from a torch module and
    a dataset with :meth:`from_torch`, or give the three callables directly."""

    def __init__(self, gradient: Callable, loss: Callable, initial: np.ndarray, num_partitions: int):
        self.gradient, self.loss = gradient, loss
        self.initial = np.asarray(initial, dtype=np.float64)
        self.num_partitions = check_count(num_partitions, "num_partitions", 1)

    @classmethod
    def from_torch(cls, module, inputs: np.ndarray, labels: np.ndarray, num_partitions: int, seed: int = 0):
        """Cross-entropy training of ``module`` on ``inputs``/``labels``, split into
        ``num_partitions`` equal shuffled partitions (seeded; the remainder dropped). The
        module's own parameters give ``initial``; gradients and losses are evaluated by
        ``torch.func.functional_call`` on a copy of the module per thread (functional_call
        swaps the parameters of the module it is given while it runs, so threads sharing one
        module would compute with each other's parameters). Thread-safe, and picklable for
        Ray."""
        count = len(inputs) // num_partitions * num_partitions
        if count == 0:
            raise ValueError(f"inputs: {len(inputs)} examples cannot fill {num_partitions} partitions")
        objective = _TorchObjective(module, inputs, labels, num_partitions, seed)
        return cls(objective.gradient, objective.loss, objective.initial(), num_partitions)


class _TorchObjective:
    """Cross-entropy of a torch module over shuffled partitions of a dataset, for flat float64
    parameter vectors; a private copy of the module per thread (rebuilt after unpickling)."""

    def __init__(self, module, inputs, labels, num_partitions: int, seed: int):
        import torch

        count = len(inputs) // num_partitions * num_partitions
        order = np.random.default_rng(seed).permutation(len(inputs))[:count]
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
        grads = torch.autograd.grad(loss, leaves)
        return torch.cat([g.reshape(-1) for g in grads]).double().numpy()

    def loss(self, flat) -> float:
        import torch

        weights, _ = self._unpack(flat)
        with torch.no_grad():
            return float(torch.nn.functional.cross_entropy(self._call(weights, self.x), self.y))


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
) -> list[Step]:
    """Run ``scheme`` for ``steps`` steps on ``problem.num_partitions`` workers (one partition
    each by index) on the virtual clock (module docstring); return the steps, the start
    (step 0, the initial loss) first."""
    scheme, n, s, steps, lr, rng = check_run(scheme, problem, num_stragglers, steps, lr, delays, seed)
    compute_s = check_number(compute_s, "compute_s", low=0.0)
    if delays is not None:
        delays.reset()  # a model with memory (bursty Markov) starts afresh: seeded runs repeat
    fr = FractionalRepetition(n, s) if scheme in ("gc-fr", "pgc-fr") else None
    cr = CyclicRepetition(n, s, code_seed) if scheme == "gc-cr" else None
    support = [(i + np.arange(s + 1)) % n for i in range(n)]  # the cyclic placement
    if fr is not None:
        support = [fr.partitions(i) for i in range(n)]
    pipelined = scheme.startswith("pgc")
    theta = problem.initial.copy()
    stored = stamps = None
    history = [Step(0, 0.0, 0.0, float(problem.loss(theta)))]
    wall = 0.0
    for t in range(steps):
        delay = np.zeros(n) if delays is None else np.asarray(delays.sample(n, rng), dtype=np.float64)
        if scheme in ("dgd", "is-sgd"):
            load = np.ones(n)
        elif pipelined:
            load = np.full(n, s + 1.0) if t == 0 else np.ones(n)
        else:
            load = np.full(n, s + 1.0)
        arrival = compute_s * load + delay
        order = [int(i) for i in np.argsort(arrival, kind="stable")]
        used, end = _wait(scheme, order, arrival, n, s, fr)
        done = [i for i in order if arrival[i] <= end]
        cache: dict[int, np.ndarray] = {}

        def grad(partition, theta=theta, cache=cache):
            if partition not in cache:
                cache[partition] = problem.gradient(theta, int(partition))
            return cache[partition]

        if pipelined:
            if t == 0:
                stored = [{int(j): grad(j) for j in support[i]} for i in range(n)]
                stamps = np.zeros((n, s + 1), dtype=np.int64)
            else:
                for i in done:  # the workers that finished recompute one partition each
                    slot = t % (s + 1)
                    j = int(support[i][slot])
                    stored[i][j] = grad(j)
                    stamps[i, slot] = t
        messages = np.stack([_message(scheme, i, support, grad, stored, fr, cr) for i in used])
        estimate, used = combine(scheme, messages, used, n, s, fr, cr)
        theta = theta - lr * estimate
        wall += end
        ages = (t - stamps) if pipelined else None
        history.append(Step(t + 1, wall, end, float(problem.loss(theta)), tuple(used), ages))
    return history


def check_run(scheme, problem, num_stragglers, steps, lr, delays, seed):
    """The arguments every training run shares, checked: ``(scheme, n, s, steps, lr, rng)``."""
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
    return scheme, n, s, steps, lr, check_rng(seed, "seed")


def _message(scheme, worker, support, grad, stored, fr, cr) -> np.ndarray:
    """What ``worker`` sends (``grad(partition)``: this step's gradient): its own partition's
    gradient (DGD, IS-SGD), the code's combination of its partitions' (GC), their plain sum
    (IS-GC), or the sum of its stored gradients (PGC)."""
    if scheme in ("dgd", "is-sgd"):
        return grad(worker)
    if stored is not None:
        return sum(stored[worker].values())
    code = fr if scheme == "gc-fr" else cr
    weights = code.encoding_matrix[worker] if code is not None else None
    return sum((1.0 if weights is None else weights[j]) * grad(j) for j in support[worker])


def combine(scheme, messages, alive, n, s, fr, cr) -> tuple[np.ndarray, list[int]]:
    """The master's gradient estimate from the arrived ``messages`` (rows follow ``alive``, the
    arrival order) and the workers it used, by the scheme's rule (module docstring); ``fr``
    and ``cr`` are the FR and CR codes where the scheme has one. Shared by both trainers."""
    if scheme == "dgd":
        return messages.sum(axis=0) / n, alive
    if scheme == "is-sgd":
        used = alive[: n - s]
        return messages[: len(used)].sum(axis=0) / len(used), used
    if scheme in ("gc-fr", "pgc-fr"):
        weights = fr.decoding_weights(alive)
        used = [w for w, a in zip(alive, weights, strict=True) if a]
        return weights @ messages / n, used
    first = alive[: n - s]
    if scheme == "gc-cr":
        return cr.decode(messages[: len(first)], first) / n, first
    if scheme == "is-gc":
        support = [(i + np.arange(s + 1)) % n for i in range(n)]
        chosen = _disjoint(first, support, n)
        rows = [alive.index(i) for i in chosen]
        return messages[rows].sum(axis=0) / (len(chosen) * (s + 1)), chosen
    return messages[: len(first)].sum(axis=0) / ((n - s) * (s + 1)), first  # pgc-cr


def _wait(scheme, order, arrival, n, s, fr) -> tuple[list[int], float]:
    """The workers the master combines (in arrival order) and when it stops waiting."""
    if scheme == "dgd":
        return order, float(arrival[order[-1]])
    if scheme in ("gc-fr", "pgc-fr"):
        used, groups = [], set()
        for i in order:
            if fr.group(i) not in groups:
                groups.add(fr.group(i))
                used.append(i)
                if len(groups) == fr.num_groups:
                    return used, float(arrival[i])
    first = order[: n - s]
    return first, float(arrival[first[-1]])


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
