"""Generalised cross-validation for the smoothing spline: pick ``lambda`` from the data alone.

:func:`gcv_lambda` picks ``lambda`` for one spline fit by generalised cross-validation (no
ground truth needed); :func:`gcv_score` is the criterion itself; :func:`influence_complement`
gives the diagonal of ``I - S`` (``S`` the influence matrix) that its denominator needs, in
``O(n)``.
"""

from __future__ import annotations

import math
import warnings

import numpy as np

from .._validation import check_number
from .lambdas import MAX_LAMBDA, check_grid, lambda_grid
from .reinsch import _lapack, check_knots, check_values, fit, smoothing_matrix

__all__ = ["gcv_lambda", "gcv_score", "influence_complement"]

# Up to DENSE_GCV_LIMIT knots the influence matrix's diagonal comes from the exact dense map
# (what it always did); above, from the O(n) recurrence of _influence_complement.
DENSE_GCV_LIMIT = 400
# The previous diagonal above DENSE_GCV_LIMIT, kept as an independent check (tests, benchmark):
# the sparse map truncated at SPARSE_TOL, built DIAGONAL_ENTRIES rows x knots at a time.
SPARSE_TOL = 1e-14
DIAGONAL_ENTRIES = 2**22
# Columns per block of the banded QR (_banded_cholesky): fewer blocks against denser ones.
QR_BLOCK = 48
# The recurrence is used where its rounding error, bounded from the terms it sums, is at most
# DIAGONAL_TOL on each diagonal entry (entries lie in [0, 1]); elsewhere, where knots nearly
# coincide, the map's rows are used.
DIAGONAL_TOL = 1e-8


def _gcv_problem(knots, values) -> tuple[np.ndarray, np.ndarray]:
    t = check_knots(knots)
    if t.size < 3:
        raise ValueError(
            f"knots needs at least 3 points for cross-validation, got {t.size} "
            "(through 2 points every lambda gives the same line)"
        )
    return t, check_values(values, t.size).reshape(t.size, -1)


def _influence_diagonal(t: np.ndarray, lam: float) -> np.ndarray:
    """The diagonal of the influence matrix ``S`` (``S y`` = the fit at the knots ``t``)."""
    return 1.0 - _influence_complement(t, lam)


def _influence_complement(t: np.ndarray, lam: float) -> np.ndarray:
    """The diagonal of ``I - S`` for sorted knots ``t``: dense and exact for few knots, else
    in ``O(n)`` (:func:`influence_complement`)."""
    if t.size <= DENSE_GCV_LIMIT:
        return 1.0 - np.diag(smoothing_matrix(t, lam, t))
    out = influence_complement(t, lam)
    return out if out is not None else 1.0 - _influence_diagonal_by_rows(t, lam)


def _influence_diagonal_by_rows(t: np.ndarray, lam: float) -> np.ndarray:
    """``diag(S)`` from the truncated sparse map, a block of rows at a time: the previous
    implementation (time ``O(n w)`` for a map ``w`` knots wide), kept as a check."""
    n = t.size
    chunk = max(64, DIAGONAL_ENTRIES // n)
    blocks = []
    for a in range(0, n, chunk):
        rows = smoothing_matrix(t, lam, t[a : a + chunk], tol=SPARSE_TOL)
        blocks.append(rows[:, a : a + chunk].diagonal())
    return np.concatenate(blocks)


def influence_complement(t: np.ndarray, lam: float) -> np.ndarray | None:
    """The diagonal of ``I - S`` (``S`` the influence matrix at sorted, distinct knots ``t``,
    ``lam > 0``, mean convention) in ``O(n)``, or ``None`` where that would not be accurate
    to :data:`DIAGONAL_TOL` (or ``n lam`` over the knots' half-span cubed overflows).

    With the Reinsch matrices of :mod:`~codedcomputing.spline.reinsch` and ``l = n lam``,
    ``I - S = l Q M^{-1} Q^T`` with ``M = R + l Q^T Q``, and row ``i`` of ``Q`` has three
    entries on consecutive columns, so the diagonal needs only the band ``|j - k| <= 2`` of
    ``M^{-1}`` (Hutchinson & de Hoog 1985). That band follows from a banded factor ``M = U^T
    U`` by Takahashi's recurrence, ``U Sigma = U^{-T}`` read from the bottom row up (here one
    banded triangular solve). ``M`` is never formed: its entries ``l / h^2`` swamp ``R`` where
    knots cluster (the loss the Reinsch solver avoids too). ``U`` is the triangular factor of
    a QR factorisation of ``[sqrt(l) Q; C^T]`` with ``R = C C^T`` (de Hoog & Hutchinson 1987),
    computed with Householder reflections on blocks of :data:`QR_BLOCK` columns. Working on
    ``I - S`` rather than ``S`` keeps the light-smoothing end, where ``S ~ I`` and GCV's
    denominator ``tr(I - S)`` is small, accurate to its own size.

    What this cannot avoid is cancellation in ``q_i^T Sigma q_i``: where two knots nearly
    coincide, ``q_i`` has entries ``+-1/h`` with a tiny ``h`` and the sum is far smaller than
    its terms. Its rounding error is bounded by ``4 eps l sum |q_a Sigma_ab q_b|``, whose
    largest value over the knots has exceeded the largest error measured in every case
    (Chebyshev, uniform, random and paired knots, ``c = lam / h^4`` from 1e-8 to 1e10); where
    it is above ``DIAGONAL_TOL`` this returns ``None``. Measured: Chebyshev knots (GCC's
    workers) stay below 1e-9 up to ``c = 1e4`` at ``n = 8000``; random knots, whose smallest
    gaps are ~1e-3 of the mean, pass it for ``c <= 1`` only. No checks are performed.
    """
    n = t.size
    center, half_width = (t[0] + t[-1]) / 2.0, (t[-1] - t[0]) / 2.0
    with np.errstate(over="ignore"):
        l = n * lam / half_width**3  # on knots rescaled to [-1, 1]: the penalty scales by the cube
    if not np.isfinite(l):
        return None
    h = np.diff((t - center) / half_width)
    sigma = _inverse_band(_banded_cholesky(h, l))  # (3, m): Sigma[j, j], Sigma[j, j+1], Sigma[j, j+2]
    # Row i of Q: 1/h_{i-1} at column i-2, -(1/h_{i-1} + 1/h_i) at i-1, 1/h_i at i (where they exist).
    m = n - 2
    inv = 1.0 / h
    q = np.zeros((3, n))
    q[0, 2:] = inv[1:]
    q[1, 1 : n - 1] = -(inv[:-1] + inv[1:])
    q[2, : n - 2] = inv[: n - 2]
    i = np.arange(n)
    total, magnitude = np.zeros(n), np.zeros(n)
    for a in range(3):
        for b in range(a, 3):
            first, offset = i - 2 + a, b - a  # Sigma[first, first + offset]
            valid = (first >= 0) & (first + offset <= m - 1)
            term = np.zeros(n)
            term[valid] = (1.0 if a == b else 2.0) * q[a, valid] * q[b, valid] * sigma[offset, first[valid]]
            total += term
            magnitude += np.abs(term)
    if 4.0 * np.finfo(float).eps * l * magnitude.max() > DIAGONAL_TOL:
        return None
    return np.clip(l * total, 0.0, 1.0)  # I - S has its eigenvalues in [0, 1]


def _banded_cholesky(h: np.ndarray, l: float) -> np.ndarray:
    """``U`` (as its band: ``(3, m)``, ``U[j, j + k]`` at ``[k, j]``) with ``U^T U = R + l Q^T Q``
    for knot spacings ``h`` (``m = len(h) - 1`` interior knots), from the QR factorisation of
    ``B = [sqrt(l) Q; C^T]`` (``R = C C^T``), block by block: each block gathers the rows of
    ``B`` whose first entry lies in its columns, plus the two rows the previous block's
    factorisation left over, and reflects them to triangular form. No checks are performed."""
    m = h.size - 1
    # R = L D L^T (L unit lower bidiagonal), so C^T = D^(1/2) L^T: row j has sqrt(d_j) at column j
    # and sqrt(d_j) e_j at column j + 1.
    diagonal, offdiagonal = (h[:-1] + h[1:]) / 3.0, h[1:-1] / 6.0
    if m > 1:
        d, e = _lapack().dpttrf(diagonal, offdiagonal)[:2]
    else:
        d, e = diagonal, np.zeros(0)
    root = np.sqrt(d)
    # The rows of B as (first column, values on it and the next two). Row r of sqrt(l) Q has
    # 1/h_{r-1}, -(1/h_{r-1} + 1/h_r), 1/h_r on columns r-2, r-1, r (those in 0..m-1), so rows
    # 0 and 1 start at column 0 with their entries shifted left.
    n = m + 2
    inv = 1.0 / h
    q_vals = np.zeros((n, 3))
    q_vals[2:, 0] = inv[1:]
    q_vals[1 : n - 1, 1] = -(inv[:-1] + inv[1:])
    q_vals[: n - 2, 2] = inv[: n - 2]
    q_vals[0] = [q_vals[0, 2], 0.0, 0.0]
    q_vals[1] = [q_vals[1, 1], q_vals[1, 2], 0.0]
    q_vals *= np.sqrt(l)
    q_first = np.maximum(np.arange(n) - 2, 0)
    c_vals = np.zeros((m, 3))
    c_vals[:, 0] = root
    c_vals[:-1, 1] = root[:-1] * e
    first = np.concatenate([q_first, np.arange(m)])
    vals = np.concatenate([q_vals, c_vals])
    order = np.argsort(first, kind="stable")
    first, vals = first[order], vals[order]
    starts = np.searchsorted(first, np.arange(0, m + QR_BLOCK, QR_BLOCK))
    upper = np.zeros((3, m))
    carry = np.zeros((0, 2))  # rows left by the previous block, on its next two columns
    for block, c0 in enumerate(range(0, m, QR_BLOCK)):
        c1 = min(c0 + QR_BLOCK, m)
        width = min(c1 + 2, m) - c0
        lo, hi = starts[block], starts[block + 1]
        rows = np.zeros((carry.shape[0] + hi - lo, width))
        rows[: carry.shape[0], : min(2, width)] = carry[:, : min(2, width)]
        local = first[lo:hi] - c0
        for k in range(3):
            cols = local + k
            ok = cols < width
            rows[carry.shape[0] + np.flatnonzero(ok), cols[ok]] = vals[lo:hi][ok, k]
        triangle = np.linalg.qr(rows, mode="r")
        size = c1 - c0
        for k in range(3):
            j = np.arange(size)
            j = j[j + k < width]
            upper[k, c0 + j] = triangle[j, j + k]
        carry = triangle[size : size + 2, size : size + 2]
        if carry.shape[1] < 2:
            carry = np.zeros((0, 2))
    return upper


def _inverse_band(upper: np.ndarray) -> np.ndarray:
    """The band ``|j - k| <= 2`` of ``(U^T U)^{-1}`` for upper triangular ``U`` of bandwidth 2
    (given as its band), by Takahashi's recurrence: the entries ``(j, j)``, ``(j, j+1)``,
    ``(j, j+2)`` of ``U Sigma = U^{-T}``, which involve only that band, ordered by ``j``,
    form one upper triangular system with four superdiagonals, solved in ``O(m)``."""
    m = upper.shape[1]
    size = 3 * m
    u0, u1, u2 = upper
    # Unknown 3j + k is Sigma[j, j + k]; equation 3j + k is entry (j, j + k) of U Sigma = U^{-T}.
    ab = np.zeros((5, size))  # ab[4 + row - col, col] = A[row, col]

    def put(row: np.ndarray, col: np.ndarray, value: np.ndarray) -> None:
        ok = col < size
        ab[4 + row[ok] - col[ok], col[ok]] = value[ok]

    j = np.arange(m)
    for k in range(3):
        put(3 * j + k, 3 * j + k, u0)
    put(3 * j, 3 * j + 1, u1)  # (j, j): U[j, j+1] Sigma[j+1, j] = U[j, j+1] Sigma[j, j+1]
    put(3 * j, 3 * j + 2, u2)  # U[j, j+2] Sigma[j+2, j]
    put(3 * j + 1, 3 * j + 3, u1)  # (j, j+1): U[j, j+1] Sigma[j+1, j+1]
    put(3 * j + 1, 3 * j + 4, u2)  # U[j, j+2] Sigma[j+2, j+1] = U[j, j+2] Sigma[j+1, j+2]
    put(3 * j + 2, 3 * j + 4, u1)  # (j, j+2): U[j, j+1] Sigma[j+1, j+2]
    put(3 * j + 2, 3 * j + 6, u2)  # U[j, j+2] Sigma[j+2, j+2]
    rhs = np.zeros(size)
    rhs[3 * j] = 1.0 / u0
    from scipy.linalg import solve_banded

    x = solve_banded((0, 4), ab, rhs, check_finite=False)
    return x.reshape(m, 3).T


def _gcv(t: np.ndarray, y: np.ndarray, lam: float) -> float:
    """V(lam) for checked knots and ``(n, d)`` values; ``inf`` where ``tr(I - S) = 0``."""
    n = t.size
    if lam == 0.0:
        return math.inf  # interpolation: zero residual over zero degrees of freedom
    free = float(np.sum(_influence_complement(t, lam))) / n  # (1/n) tr(I - S)
    if not free > 0.0:
        return math.inf
    residual = y - fit(t, y, lam)(t)
    return float(np.sum(residual**2)) / n / free**2


def gcv_score(knots, values, lam: float) -> float:
    """The GCV criterion ``V(lam) = (1/n) ||(I - S) y||_F^2 / ((1/n) tr(I - S))^2``.

    ``S`` is the influence matrix of the smoothing spline (``S y`` = the fit at the
    knots), ``y = values`` of shape ``(n, ...)``, its columns summed in the norm (one
    shared lambda). ``lam = 0`` interpolates, so ``tr(I - S) = 0`` and ``V`` is undefined
    there: this returns ``inf``.
    """
    t, y = _gcv_problem(knots, values)
    lam = check_number(lam, "lam", low=0.0)
    if lam > MAX_LAMBDA:
        raise ValueError(f"lam must be at most {MAX_LAMBDA:g}, got {lam:g}")
    return _gcv(t, y, lam)


def gcv_lambda(knots, values, grid=None) -> float:
    """The ``lambda`` in ``grid`` minimising generalised cross-validation (:func:`gcv_score`).

    Fits the natural cubic smoothing spline of :mod:`codedcomputing.spline` (mean
    convention) through ``values`` (shape ``(n, ...)``, ``n >= 3``) at distinct ``knots``
    (any order). ``grid`` defaults to ``lambda_grid(n)`` rescaled to the knots' span
    (times ``((max - min) / 2)^3``), i.e. the same dimensionless grid as for knots on
    ``[-1, 1]``. ``lambda = 0`` (interpolation) has no GCV score and is never chosen; ties
    go to the earliest grid entry. The influence matrix's trace comes from its diagonal,
    dense for ``n <= 400`` and above that in ``O(n)`` (:func:`influence_complement`), so a
    lambda costs ``O(n d)`` whatever the smoothing (measured on alive Chebyshev knots,
    ``benchmarks/perf/bench_decode_cost.py``: ~4 ms per lambda at ``n = 2000``, ~30 ms at ``n =
    16000``, where the previous row-by-row diagonal took 0.035-0.3 s and 0.25-2.3 s at ``n =
    2000`` and ``8000``). Where knots nearly coincide and the recurrence would lose accuracy
    it takes the diagonal from the map's rows, as before (time ``O(n w)`` for a map ``w``
    knots wide).

    GCV estimates the prediction error without knowing the noise level; for noise-free
    data it tends to the smallest positive lambda offered. Where knots cluster (Chebyshev
    points) its curve can have a second, deeper minimum at tiny lambda, which a grid
    search finds and scipy's bounded continuous search may not. The default grid stops at
    ``c = 1e4`` (a bandwidth of ~14 knot spacings); many knots on smooth, noisy data can
    call for more (``n = 2000``: scipy picks ``c ~ 1e6``), so a minimum at the grid's
    largest lambda warns (``RuntimeWarning``): pass a wider grid then.
    """
    t, y = _gcv_problem(knots, values)
    if grid is None:
        half_width = (t.max() - t.min()) / 2.0
        grid = lambda_grid(t.size) * half_width**3
    grid = check_grid(grid, "grid")
    if not np.any(grid > 0):
        raise ValueError("grid must contain a positive lambda (lambda = 0 has no GCV score)")
    scores = np.array([_gcv(t, y, float(lam)) for lam in grid])
    best = int(np.argmin(scores))
    if grid[best] == grid.max() and np.sum(grid > 0) > 1:
        warnings.warn(
            f"gcv_lambda: the GCV minimum is at the grid's largest lambda ({grid[best]:g}); the optimum "
            "may lie beyond it: pass a grid reaching further (e.g. lambda_grid(n, high=1e8))",
            RuntimeWarning,
            stacklevel=2,
        )
    return float(grid[best])
