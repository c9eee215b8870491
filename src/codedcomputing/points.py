"""Evaluation points on Omega = [-1, 1], returned sorted ascending.

Data points (where input ``k`` sits, ``alpha``) default to Chebyshev points of the
first kind, worker points (``beta``) to Chebyshev points of the second kind, which
include the end points +-1 so that no returned result needs extrapolating when no
edge worker straggles.
"""

from __future__ import annotations

import numpy as np

from ._validation import check_choice, check_count

__all__ = ["assignment", "chebyshev_first", "chebyshev_second", "equispaced", "golden_stride"]


def chebyshev_first(n: int) -> np.ndarray:
    """``cos((2k - 1) pi / (2n))`` for ``k = 1..n``, sorted ascending (interior of [-1, 1])."""
    _check_count(n, 1)
    return np.sort(np.cos((2 * np.arange(1, n + 1) - 1) * np.pi / (2 * n)))


def chebyshev_second(n: int) -> np.ndarray:
    """``cos((j - 1) pi / (n - 1))`` for ``j = 1..n``, sorted ascending (includes +-1)."""
    _check_count(n, 2)
    return np.sort(np.cos(np.arange(n) * np.pi / (n - 1)))


def equispaced(n: int) -> np.ndarray:
    """``n`` equally spaced points on [-1, 1], ends included (the midpoint 0 for ``n = 1``)."""
    _check_count(n, 1)
    return np.zeros(1) if n == 1 else np.linspace(-1.0, 1.0, n)


POINT_FAMILIES = ("chebyshev", "equispaced")
ASSIGNMENTS = ("natural", "golden")


def golden_stride(n: int) -> int:
    """The integer nearest ``n / phi`` (phi the golden ratio) that is coprime with ``n``
    (1 for ``n <= 2``)."""
    _check_count(n, 1)
    phi = (1.0 + 5.0**0.5) / 2.0
    for p in sorted(range(1, n), key=lambda p: (abs(p - n / phi), p)):
        if np.gcd(p, n) == 1:
            return p
    return 1


def assignment(n: int, kind: str) -> np.ndarray:
    """Which sorted point each of ``n`` workers sits at: worker ``i`` at ``perm[i]``.

    ``kind`` has no default: the codes' ``assignment`` parameter defaults to ``"natural"``
    except :class:`~codedcomputing.ManifoldGCC`'s, which defaults to ``"golden"``, so a caller
    names the one it means.

    - ``"natural"``: worker ``i`` at the ``i``-th point (neighbouring workers, neighbouring
      points);
    - ``"golden"``: worker ``i`` at point ``i p mod n``, ``p`` the golden stride
      (:func:`golden_stride`). Any block of neighbouring workers (a rack, a switch, a slow
      host) then lands on points spread over the whole design, so its loss leaves no wide
      gap: for ``n = 50``, blocks of up to 10 neighbouring workers never remove two
      neighbouring points. A pattern of random stragglers is exchangeable, so it is
      unaffected.
    """
    _check_count(n, 1)
    check_choice(kind, "assignment", ASSIGNMENTS)
    index = np.arange(n)
    return index if kind == "natural" else index * golden_stride(n) % n


def make_points(family: str, n: int, *, kind: str) -> np.ndarray:
    """Points of ``family`` ('chebyshev' or 'equispaced') for ``kind`` 'data' or 'workers'."""
    check_choice(family, "points", POINT_FAMILIES)
    if family == "chebyshev":
        return chebyshev_first(n) if kind == "data" else chebyshev_second(n)
    return equispaced(n)


def _check_count(n, minimum: int) -> None:
    check_count(n, "n", minimum)
