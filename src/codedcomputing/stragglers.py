"""Straggler patterns: which workers return. Each function draws the stragglers and returns
the others, the workers that do return (``alive``, sorted, as ``Code.decode`` takes it),
from an explicit seed or ``numpy.random.Generator``::

    alive = cc.stragglers.random(50, 5, rng=0)  # 45 workers: 5 random ones straggle
"""

from __future__ import annotations

import numpy as np

from ._validation import check_count, check_probability, check_rng

__all__ = ["bernoulli", "contiguous", "random"]


def _check(num_workers, num_stragglers) -> tuple[int, int]:
    num_workers = check_count(num_workers, "num_workers", 1)
    return num_workers, check_count(num_stragglers, "num_stragglers (< num_workers)", 0, num_workers - 1)


def random(num_workers: int, num_stragglers: int, rng) -> np.ndarray:
    """The ``num_workers - num_stragglers`` workers that return, sorted, when
    ``num_stragglers`` workers chosen uniformly at random straggle."""
    num_workers, num_stragglers = _check(num_workers, num_stragglers)
    rng = check_rng(rng)
    return np.sort(rng.choice(num_workers, size=num_workers - num_stragglers, replace=False))


def contiguous(num_workers: int, num_stragglers: int, rng) -> np.ndarray:
    """The ``num_workers - num_stragglers`` workers that return, sorted, when a block of
    ``num_stragglers`` consecutive workers straggles (the worst case for splines: the
    largest possible gap). Its start is uniform over the ``num_workers - num_stragglers + 1``
    positions that fit; it does not wrap around."""
    num_workers, num_stragglers = _check(num_workers, num_stragglers)
    rng = check_rng(rng)
    start = int(rng.integers(0, num_workers - num_stragglers + 1))
    return np.concatenate([np.arange(start), np.arange(start + num_stragglers, num_workers)])


def bernoulli(num_workers: int, p: float, rng) -> np.ndarray:
    """The workers that return, sorted, when each worker straggles independently with
    probability ``p`` in [0, 1) (possibly none return)."""
    num_workers = check_count(num_workers, "num_workers", 1)
    p = check_probability(p, "p", allow_one=False)
    rng = check_rng(rng)
    return np.flatnonzero(rng.random(num_workers) >= p)
