"""Adversarial workers: attacks that corrupt the results of one call.

Up to ``q`` (``num_adversaries``) of the returned workers lie. An attack sees everything the
master sees (the code, the returned workers ``alive`` and their results ``Y``), chooses whom
to corrupt and how, and returns the corrupted results::

    attack = cc.adversaries.Concentrated(num_adversaries=10, bound=100.0)
    corrupted = attack.corrupt(code, Y, alive, rng=0)
    est = code.decode(corrupted.results, alive)      # corrupted.workers: whom it corrupted

Attacks (:data:`ATTACKS`, by name):

- ``"random"`` (:class:`Random`): ``q`` random returned workers report ``+bound`` in every
  output coordinate;
- ``"concentrated"`` (:class:`Concentrated`): the ``q`` returned workers around the middle
  of the code's points (by ``beta``, nearest 0) report ``+bound``: one wide corrupted
  stretch, the worst case for a smoothing decoder in the robust-spline literature;
- ``"greedy"`` (:class:`Greedy`): ``q`` rounds of: fit a smoothing spline to the current
  results, take the not yet corrupted worker whose result the fit follows best (smallest
  residual) and push it by ``bound`` away from the fit, coordinate by coordinate;
- ``"sign-flip"`` (:class:`SignFlip`): ``q`` random returned workers report ``-y``, the
  attack the error-locating baseline (ApproxIFER) was published against;
- ``"garbage"`` (:class:`Garbage`): ``q`` random returned workers report unbounded garbage:
  half of them rows of huge finite values (``+-10^10`` to ``+-1e30``), half rows mixing NaN
  with ``+-1e30``.

The bounded attacks (random, concentrated, greedy) report values in ``[-bound, bound]``:
the model of the robust-GCC analysis, ``|y| <= M``. Sign flipping is bounded by the
honest results themselves; garbage by nothing. Every attack is seeded (``rng``: an int
seed or a :class:`numpy.random.Generator`) and keeps ``Y``'s type, dtype and device.

The same attacks run inside the runtime as a fault model
(:class:`codedcomputing.runtime.faults.Adversarial`), so a
:class:`~codedcomputing.CodedExecutor` can be run on a cluster with adversarial workers.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass
from typing import ClassVar

import numpy as np

from . import _arraylib
from ._validation import check_count, check_number, check_rng
from .codes import Code
from .codes.robust import robust_lambda
from .spline import fit

__all__ = [
    "ATTACKS",
    "Attack",
    "Concentrated",
    "Corruption",
    "Garbage",
    "Greedy",
    "Random",
    "SignFlip",
    "make_attack",
]


@dataclass(frozen=True, eq=False)
class Corruption:
    """What an attack did to one call: the corrupted ``results`` (same shape, kind and order
    as the ``Y`` given) and the corrupted ``workers`` (worker indices, sorted)."""

    results: object
    workers: np.ndarray


class Attack(ABC):
    """An attack on one call's results: :meth:`corrupt`.

    Parameters
    ----------
    num_adversaries : int
        q >= 0, how many returned workers lie (all of them if fewer returned).
    bound : float, optional
        M > 0, the largest magnitude a corrupted result may have; required by the bounded
        attacks (random, concentrated, greedy), ignored by sign flipping and garbage.
    """

    name: ClassVar[str]
    bounded: ClassVar[bool] = True

    def __init__(self, num_adversaries: int, bound: float | None = None):
        self.num_adversaries = check_count(num_adversaries, "num_adversaries", 0)
        if self.bounded and bound is None:
            raise ValueError(
                f"the {self.name} attack needs bound (M > 0, the corrupted results' largest |y|)"
            )
        self.bound = None if bound is None else check_number(bound, "bound", low=0.0, low_open=True)

    def corrupt(self, code: Code, Y, alive, rng) -> Corruption:
        """The results ``Y`` of workers ``alive`` (``Y[i]`` from worker ``alive[i]``) after the
        attack; ``code`` is the code the master decodes with."""
        return self._corrupt_checked(code, Y, alive, rng, "Y")

    def _corrupt_checked(self, code: Code, Y, alive, rng, name: str) -> Corruption:
        """:meth:`corrupt`, naming ``Y`` as the caller does in its messages."""
        if not isinstance(code, Code):
            raise ValueError(f"code must be a codedcomputing code, got {code!r}")
        rng = check_rng(rng)
        values, alive, bad = _arraylib.check_results(Y, alive, code.num_workers, name)
        if bad.size:
            raise ValueError(
                f"{name} holds NaN or inf (workers {bad.tolist()[:10]}): an attack corrupts finite results"
            )
        flat = _arraylib.to_float64(values).copy()
        q = min(self.num_adversaries, alive.size)
        if q == 0:
            return Corruption(values, np.empty(0, dtype=np.intp))
        rows = np.asarray(self._corrupt(code, flat, alive, q, rng), dtype=np.intp)
        with np.errstate(over="ignore"):  # garbage beyond the dtype's range is inf: an erasure
            out = _arraylib.from_float64(flat, values)
        out = out.reshape(tuple(values.shape))
        return Corruption(out, np.sort(alive[rows]))

    @abstractmethod
    def _corrupt(self, code: Code, flat: np.ndarray, alive: np.ndarray, q: int, rng) -> np.ndarray:
        """Corrupt ``q`` rows of ``flat`` (``(len(alive), d)`` float64) in place; return them."""

    def __repr__(self) -> str:
        bound = "" if self.bound is None else f", bound={self.bound:g}"
        return f"{type(self).__name__}(num_adversaries={self.num_adversaries}{bound})"


class Random(Attack):
    """``q`` random returned workers report ``+bound`` in every coordinate."""

    name = "random"

    def _corrupt(self, code, flat, alive, q, rng):
        rows = rng.choice(alive.size, q, replace=False)
        flat[rows] = self.bound
        return rows


class Concentrated(Attack):
    """The ``q`` returned workers whose points are nearest ``at`` (default 0, the middle of
    [-1, 1]) report ``+bound``: ``q`` consecutive workers along the code's points. With an
    odd number of inputs at Chebyshev points the middle is an input's own point
    (``alpha = 0``), the worst place for the decoder; ``at`` moves the stretch elsewhere."""

    name = "concentrated"

    def __init__(self, num_adversaries: int, bound: float | None = None, *, at: float = 0.0):
        super().__init__(num_adversaries, bound)
        self.at = check_number(at, "at", low=-1.0, high=1.0)

    def _corrupt(self, code, flat, alive, q, rng):
        by_point = np.argsort(code.beta[alive], kind="stable")
        centre = int(np.argmin(np.abs(code.beta[alive][by_point] - self.at)))
        start = int(np.clip(centre - (q - 1) // 2, 0, alive.size - q))
        rows = by_point[start : start + q]
        flat[rows] = self.bound
        return rows


class Greedy(Attack):
    """``q`` rounds: fit, then push the best-fitted honest worker ``bound`` away from the fit.

    The fit is the natural cubic smoothing spline through the returned workers' points with
    the code's own ``lambda_dec`` when it is a positive number (the decoder the adversary
    plays against), else the robust schedule's lambda for ``(q, len(alive))``
    (:func:`codedcomputing.codes.robust.robust_lambda`). Each round refits on the results
    as corrupted so far (``q`` linear-time fits); with a single returned result the fit is
    that result (a constant), and it is pushed up. Corrupted values are clipped to
    ``[-bound, bound]``.
    """

    name = "greedy"

    def _corrupt(self, code, flat, alive, q, rng):
        knots = code.beta[alive]
        lam = getattr(code, "lambda_dec", 0.0)
        if (isinstance(lam, str) or not lam > 0) and alive.size >= 2:
            lam = robust_lambda(q, alive.size)
        honest = np.ones(alive.size, dtype=bool)
        rows = []
        for _ in range(q):
            residual = flat - fit(knots, flat, lam)(knots) if alive.size >= 2 else np.zeros_like(flat)
            size = np.where(honest, np.linalg.norm(residual, axis=1), np.inf)
            row = int(np.argmin(size))
            direction = np.where(residual[row] < 0, -1.0, 1.0)
            flat[row] = np.clip(flat[row] + self.bound * direction, -self.bound, self.bound)
            honest[row] = False
            rows.append(row)
        return np.asarray(rows)


class SignFlip(Attack):
    """``q`` random returned workers report ``-y``."""

    name = "sign-flip"
    bounded = False

    def _corrupt(self, code, flat, alive, q, rng):
        rows = rng.choice(alive.size, q, replace=False)
        flat[rows] *= -1.0
        return rows


class Garbage(Attack):
    """``q`` random returned workers report unbounded garbage: each, with probability 1/2,
    a row of huge finite values (``+-10^u``, ``u`` uniform in [10, 30]; some exactly
    ``+-1e30``), else a row mixing NaN with ``+-1e30`` (at least one NaN)."""

    name = "garbage"
    bounded = False

    def _corrupt(self, code, flat, alive, q, rng):
        rows = rng.choice(alive.size, q, replace=False)
        d = flat.shape[1]
        for row in rows:
            signs = rng.choice([-1.0, 1.0], d)
            if rng.random() < 0.5:
                values = signs * 10.0 ** rng.uniform(10, 30, d)
                values[rng.random(d) < 0.25] = 1e30
            else:
                values = signs * 1e30
                values[rng.random(d) < 0.5] = np.nan
                values[rng.integers(d)] = np.nan
            flat[row] = values
        return rows


ATTACKS: dict[str, type[Attack]] = {
    cls.name: cls for cls in (Random, Concentrated, Greedy, SignFlip, Garbage)
}


def make_attack(name: str, num_adversaries: int, bound: float | None = None) -> Attack:
    """The attack called ``name`` (a key of :data:`ATTACKS`)."""
    if not isinstance(name, str) or name not in ATTACKS:
        raise ValueError(f"name (the attack) must be one of {sorted(ATTACKS)}, got {name!r}")
    return ATTACKS[name](num_adversaries, bound)
