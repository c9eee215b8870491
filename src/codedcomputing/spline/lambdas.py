"""The smoothing parameter: its limits, its checks and its dimensionless grid.

Scale of lambda. With the *mean* convention of :mod:`codedcomputing.spline`
(``(1/n) sum_i ||u(t_i) - y_i||^2 + lambda * int ||u''||^2``) and ``n`` knots spread over
``[-1, 1]`` (spacing ``h = 2 / (n - 1)``), the smoother acts like a kernel whose bandwidth
``b`` satisfies ``b^4 ~ 2 * lambda`` (Silverman's equivalent kernel for design density
``1/2``). Measured in knot spacings, ``(b / h)^4 ~ 2 * lambda / h^4``: a wiggle on the
scale of the knot spacing costs ``~ lambda / h^4`` in the penalty against ``~ 1`` in the
data term. So the dimensionless parameter is ``c = lambda / h^4``: ``c << 1`` interpolates
(``lambda = 0`` exactly), ``c ~ 1`` averages over a few neighbouring knots, and ``c >> 1``
over many. :func:`lambda_grid` is log-spaced in ``c``, so one grid serves every ``n``; for
``n ~ 100`` its smallest positive entry is ``~ 1e-13``.
"""

from __future__ import annotations

import numpy as np

from .._validation import check_count, check_number, check_real_array

__all__ = ["MAX_LAMBDA", "lambda_grid"]

MAX_LAMBDA = 1e100


def check_lambda(value, name: str) -> float:
    lam = check_number(value, name, low=0.0)
    if lam > MAX_LAMBDA:
        raise ValueError(
            f"{name} must be at most {MAX_LAMBDA:g} (far beyond that the spline is already the "
            f"least-squares line), got {value!r}"
        )
    return lam


def lambda_grid(num_knots: int, num: int = 12, low: float = 1e-6, high: float = 1e4) -> np.ndarray:
    """Smoothing parameters ``[0, c_1 h^4, ..., c_num h^4]`` for a spline with ``num_knots`` knots.

    ``h = 2 / (num_knots - 1)`` is the mean knot spacing on ``[-1, 1]`` and ``c`` runs over
    ``num`` log-spaced values in ``[low, high]``. ``c = lambda / h^4`` is the dimensionless
    smoothing strength (module docstring): roughly the fourth power of the equivalent
    kernel's bandwidth in knot spacings (``(b / h)^4 ~ 2 c``). With the defaults the grid
    runs from interpolation (``0``, and ``c = 1e-6``: bandwidth ~0.04 spacings) to heavy
    smoothing (``c = 1e4``: ~14 spacings), whatever ``num_knots``. The absolute lambdas
    shrink like ``h^4`` (for 99 knots the smallest positive one is ``~ 1.7e-13``), which is
    why a fixed, unscaled grid would be far too coarse for many knots.

    For knots spanning ``[a, b]`` rather than ``[-1, 1]``, multiply by ``((b - a) / 2)^3``
    (the penalty's scaling), as :func:`gcv_lambda` does for its default grid.
    """
    num_knots = check_count(num_knots, "num_knots", 2)
    num = check_count(num, "num", 1)
    low, high = check_number(low, "low", low=0.0), check_number(high, "high", low=0.0)
    if not (np.isfinite(low) and low > 0):
        raise ValueError(f"low must be a finite number > 0, got {low!r}")
    if not (np.isfinite(high) and high >= low):
        raise ValueError(f"high must be a finite number >= low = {low:g}, got {high!r}")
    h = 2.0 / (num_knots - 1)
    return np.concatenate([[0.0], np.geomspace(low, high, num) * h**4])


def check_grid(grid, name: str) -> np.ndarray:
    """``grid`` as a fresh 1-D float64 array of finite lambdas in ``[0, MAX_LAMBDA]``."""
    arr = np.array(check_real_array(grid, name))  # a copy: it is made read-only below
    if arr.ndim != 1 or arr.size == 0:
        raise ValueError(f"{name} must be a non-empty 1-D array, got shape {arr.shape}")
    if not np.all(np.isfinite(arr)):
        raise ValueError(f"{name} contains NaN or inf")
    if np.any(arr < 0) or np.any(arr > MAX_LAMBDA):
        raise ValueError(
            f"{name} entries must lie in [0, {MAX_LAMBDA:g}], got min {arr.min():g}, max {arr.max():g}"
        )
    arr.flags.writeable = False
    return arr
