"""Natural cubic smoothing splines in linear time (the Reinsch algorithm).

For knots ``t_1 < ... < t_n`` and values ``y_i`` (any trailing shape), the spline ::

    u = argmin_u  (1/n) sum_i ||u(t_i) - y_i||^2  +  lam * int ||u''(t)||^2 dt

is the natural cubic spline whose knot values ``g`` and knot second derivatives
``gamma`` solve (Reinsch 1967, with ``l = n * lam``) ::

    (R + l Q^T Q) gamma_inner = Q^T y,      g = y - l Q gamma_inner,

where ``h_i = t_{i+1} - t_i``, ``Q`` is the ``n x (n-2)`` second-difference matrix with
columns ``(1/h_{j-1}, -1/h_{j-1} - 1/h_j, 1/h_j)`` and ``R`` the ``(n-2) x (n-2)``
tridiagonal matrix with ``(h_{j-1} + h_j)/3`` on the diagonal and ``h_j/6`` beside it.
We never form ``R + l Q^T Q`` (its entries ``l / h^2`` swamp ``R`` when knots cluster):
for ``lam = 0`` it is ``R`` alone (tridiagonal, LDL^T), and for ``lam > 0`` we solve the
equivalent augmented system ``g + l Q gamma = y, Q^T g - R gamma = 0``, banded once its
unknowns are interleaved, by LU with partial pivoting and one step of iterative refinement.
Either way one ``O(n)`` factorisation serves every column of ``y``. ``lam`` follows the *mean*
convention; scipy's :func:`scipy.interpolate.make_smoothing_spline` uses the sum, so
``lam_scipy = n * lam``. ``lam = 0`` interpolates. Outside ``[t_1, t_n]`` the minimiser
is linear (natural boundary), and so is our extrapolation.

Every map here is linear in ``y``: :func:`fit` applies it in ``O(n d)``;
:func:`smoothing_matrix` returns it as a matrix, dense and exact, or sparse and truncated
(built in linear time).
"""

from __future__ import annotations

import functools
from dataclasses import dataclass

import numpy as np

from .._validation import check_number, check_real_array

__all__ = ["NaturalSpline", "evaluation_matrix", "fit", "smoothing_matrix"]


@functools.cache
def _lapack():
    """``scipy.linalg.lapack``, imported at first use so that ``import codedcomputing`` does not
    pay for scipy.linalg; cached, so a solve in a loop pays one look-up, not an import."""
    from scipy.linalg import lapack

    return lapack


def check_knots(knots, name: str = "knots") -> np.ndarray:
    """Return ``knots`` as a 1-D float64 array; raise ``ValueError`` naming ``name``
    if it has fewer than two entries, non-finite entries or duplicates."""
    t = check_real_array(knots, name)
    if t.ndim != 1:
        raise ValueError(f"{name} must be one-dimensional, got shape {t.shape}")
    if t.size < 2:
        raise ValueError(f"{name} needs at least 2 points, got {t.size}")
    if not np.all(np.isfinite(t)):
        raise ValueError(f"{name} contains NaN or inf")
    if np.unique(t).size != t.size:
        raise ValueError(f"{name} contains duplicate points; a spline needs distinct knots")
    return t


class _Smoother:
    """The factorised Reinsch system for sorted, distinct knots. No checks are performed.

    ``lam = 0``: ``R gamma = Q^T y`` (tridiagonal, diagonally dominant; LDL^T). ``lam > 0``:
    rather than the normal equations ``(R + l Q^T Q) gamma = Q^T y``, whose forming loses
    ``R`` to rounding when knots cluster (entries ``l / h^2`` against ``h``), we solve the
    augmented system ``g + l Q gamma = y, Q^T g - R gamma = 0`` with the unknowns
    interleaved (``g_0, g_1, gamma_1, g_2, ...``), which is banded (three diagonals each
    side) and is factorised once by LU with partial pivoting (per direction of solve: see
    :meth:`factorise`).
    """

    _KL = _KU = 3

    def __init__(self, t: np.ndarray, l: float, weights: np.ndarray | None = None):
        n = t.size
        self.t = t
        self.h = np.diff(t)
        self.l = l  # sum-convention smoothing weight, n * lam
        # Data weights w_i (all > 0 at l = 0): the g rows read w_i g_i + l (Q gamma)_i = w_i y_i.
        self.weights = weights
        if n <= 2:
            return
        h = self.h
        if l == 0.0:
            diagonal = (h[:-1] + h[1:]) / 3.0
            self.tridiagonal = _lapack().dpttrf(diagonal, h[1:-1] / 6.0)[:2] if n > 3 else (diagonal, None)
            return
        self.g_pos = np.concatenate([[0], 2 * np.arange(1, n) - 1])  # position of g_i
        self.gamma_pos = 2 * np.arange(1, n - 1)  # position of gamma_j, j = 1..n-2
        size = 2 * n - 2
        rows, cols, vals = [], [], []

        def put(r, c, v):
            rows.append(r)
            cols.append(c)
            vals.append(v)

        j = np.arange(1, n - 1)
        q = (1.0 / h[j - 1], -1.0 / h[j - 1] - 1.0 / h[j], 1.0 / h[j])  # Q[j-1, j], Q[j, j], Q[j+1, j]
        put(self.g_pos, self.g_pos, np.ones(n) if weights is None else weights)
        for offset, q_entry in zip((-1, 0, 1), q, strict=True):
            put(self.g_pos[j + offset], self.gamma_pos, l * q_entry)  # g rows: l Q gamma
            put(self.gamma_pos, self.g_pos[j + offset], q_entry)  # gamma rows: Q^T g
        put(self.gamma_pos, self.gamma_pos, -(h[j - 1] + h[j]) / 3.0)  # gamma rows: -R gamma
        put(self.gamma_pos[:-1], self.gamma_pos[1:], -h[j[:-1]] / 6.0)
        put(self.gamma_pos[1:], self.gamma_pos[:-1], -h[j[:-1]] / 6.0)
        self.entries = tuple(np.concatenate(a) for a in (rows, cols, vals))
        rows, cols, vals = self.entries
        from scipy.sparse import csr_array

        self.augmented = csr_array((vals, (rows, cols)), shape=(size, size))
        self._factors = {}  # transposed (bool) -> (lu, pivots), each built on first use

    def factorise(self, transposed: bool) -> tuple[np.ndarray, np.ndarray]:
        """Banded LU with partial pivoting of the augmented matrix ``A`` (``transposed``:
        of ``A^T``). Solves with ``A`` use the factors of ``A^T`` and solves with ``A^T`` those
        of ``A``, both through LAPACK's transposed solve, which is 1.6x faster than the plain
        one for many right-hand sides (its inner loops are dot products; measured n = 2000
        and 16000, 200 columns); one step of refinement makes either as accurate as the other."""
        factors = self._factors.get(transposed)
        if factors is None:
            rows, cols, vals = self.entries
            if transposed:
                rows, cols = cols, rows
            kl, ku = self._KL, self._KU
            ab = np.zeros((2 * kl + ku + 1, 2 * self.t.size - 2))
            ab[kl + ku + rows - cols, cols] = vals
            lu, pivots, info = _lapack().dgbtrf(ab, kl, ku)
            if info > 0:
                raise ValueError("knots: the smoothing system is singular; are some knots (nearly) equal?")
            factors = self._factors[transposed] = (lu, pivots)
        return factors

    def _augmented_solve(self, rhs: np.ndarray, trans: int = 0) -> np.ndarray:
        """Solve ``A x = rhs`` (``trans``: ``A^T x = rhs``) with the LU factors, then one step of
        iterative refinement (the residual from the unfactorised matrix), which recovers the
        digits pivoting lost."""
        lu, pivots = self.factorise(transposed=not trans)
        dgbtrs = _lapack().dgbtrs
        x, _ = dgbtrs(lu, self._KL, self._KU, rhs, pivots, trans=1)
        x = np.ascontiguousarray(x)  # LAPACK returns Fortran order; scipy's sparse product is 6x faster on C
        matrix = self.augmented.T if trans else self.augmented
        residual = rhs - matrix @ x
        x += dgbtrs(lu, self._KL, self._KU, residual, pivots, trans=1)[0]
        return x

    def solve(self, y: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Knot values ``g`` and second derivatives ``gamma`` (both ``(n, d)``) for ``y (n, d)``."""
        n = self.t.size
        if n == 2:
            return y, np.zeros_like(y)
        if self.l == 0.0:
            gamma = np.zeros_like(y)
            gamma[1:-1] = self._tridiagonal_solve(self.apply_qt(y))
            return y, gamma
        rhs = np.zeros((2 * n - 2, y.shape[1]))
        rhs[self.g_pos] = y if self.weights is None else y * self.weights[:, None]
        z = self._augmented_solve(rhs)
        gamma = np.zeros_like(y)
        gamma[1:-1] = z[self.gamma_pos]
        return z[self.g_pos], gamma

    def adjoint(self, a_g: np.ndarray, a_gamma: np.ndarray) -> np.ndarray:
        """Rows ``r`` (as columns, ``(n, P)``) with ``r . y = a_g . g + a_gamma . gamma`` for the
        spline fitted to ``y``: the evaluation functionals pulled back to the data."""
        n = self.t.size
        if n == 2:
            return a_g
        if self.l == 0.0:  # u = a_g . y + a_gamma . R^{-1} Q^T y
            return a_g + self.apply_q(self._tridiagonal_solve(a_gamma[1:-1]))
        a = np.zeros((2 * n - 2, a_g.shape[1]))
        a[self.g_pos] = a_g
        a[self.gamma_pos] = a_gamma[1:-1]
        return self._augmented_solve(a, trans=1)[self.g_pos]

    def _tridiagonal_solve(self, rhs: np.ndarray) -> np.ndarray:
        diagonal, offdiagonal = self.tridiagonal
        return rhs / diagonal[0] if offdiagonal is None else _lapack().dpttrs(diagonal, offdiagonal, rhs)[0]

    def apply_q(self, x: np.ndarray) -> np.ndarray:
        """``Q x`` (``(n, d)``) for interior values ``x (n - 2, d)``."""
        full = np.zeros((x.shape[0] + 2, *x.shape[1:]))
        full[1:-1] = x
        jumps = np.diff(full, axis=0) / self.h[:, None]
        out = np.empty_like(full)  # differences of the slope jumps, padded with zeros
        out[0] = jumps[0]
        out[1:-1] = np.diff(jumps, axis=0)
        out[-1] = -jumps[-1]
        return out

    def apply_qt(self, w: np.ndarray) -> np.ndarray:
        """``Q^T w`` (``(n - 2, d)``): second divided differences of ``w (n, d)``."""
        return np.diff(np.diff(w, axis=0) / self.h[:, None], axis=0)


@dataclass(frozen=True)
class _Stencil:
    """Evaluation of a spline (``derivative = 0``) or of its second derivative (``2``) at
    points ``z`` as four weights on ``g[i], g[i+1], gamma[i], gamma[i+1]``; the spline is
    linear beyond the end knots."""

    index: np.ndarray
    weights: np.ndarray  # (len(z), 4)

    @classmethod
    def build(cls, t: np.ndarray, z: np.ndarray, derivative: int = 0) -> _Stencil:
        n = t.size
        i = np.clip(np.searchsorted(t, z, side="right") - 1, 0, n - 2)
        h = t[i + 1] - t[i]
        a = (t[i + 1] - z) / h
        b = (z - t[i]) / h
        if derivative == 2:  # u'' is linear between knots and zero outside
            w = np.stack([np.zeros_like(a), np.zeros_like(a), a, b], axis=1)
            w[(z < t[0]) | (z > t[-1])] = 0.0
            return cls(i, w)
        w = np.stack([a, b, (a**3 - a) * h * h / 6.0, (b**3 - b) * h * h / 6.0], axis=1)
        left, right = z < t[0], z > t[-1]
        if left.any():  # g_0 + u'(t_0) (z - t_0), u'(t_0) = (g_1 - g_0)/h_0 - h_0 gamma_1 / 6
            s, hl = (z[left] - t[0]) / h[left], h[left]
            w[left] = np.stack([1.0 - s, s, np.zeros_like(s), -s * hl * hl / 6.0], axis=1)
        if right.any():  # g_{n-1} + u'(t_{n-1}) (z - t_{n-1}), u' = (g_{n-1} - g_{n-2})/h + h gamma_{n-2} / 6
            s, hr = (z[right] - t[-1]) / h[right], h[right]
            w[right] = np.stack([-s, 1.0 + s, s * hr * hr / 6.0, np.zeros_like(s)], axis=1)
        return cls(i, w)

    def apply(self, g: np.ndarray, gamma: np.ndarray) -> np.ndarray:
        i, w = self.index, self.weights
        return w[:, 0:1] * g[i] + w[:, 1:2] * g[i + 1] + w[:, 2:3] * gamma[i] + w[:, 3:4] * gamma[i + 1]


class NaturalSpline:
    """A fitted natural cubic spline: knots, knot values and knot second derivatives.

    Calling it evaluates at points ``z`` (cubic between knots, linear outside) and
    returns an array of shape ``(len(z),) + value_shape``. Build it with :func:`fit`.
    """

    def __init__(self, knots: np.ndarray, values: np.ndarray, second_derivatives: np.ndarray):
        self.knots = knots
        self.values = values
        self.second_derivatives = second_derivatives

    def __call__(self, z) -> np.ndarray:
        z = np.atleast_1d(np.asarray(z, dtype=np.float64))
        flat_values = self.values.reshape(self.knots.size, -1)
        flat_gamma = self.second_derivatives.reshape(self.knots.size, -1)
        out = _Stencil.build(self.knots, z.ravel()).apply(flat_values, flat_gamma)
        return out.reshape(z.shape + self.values.shape[1:])


def check_values(values, num_knots: int) -> np.ndarray:
    """``values`` as a float64 array of ``num_knots`` finite rows (any trailing shape)."""
    y = check_real_array(values, "values")
    if y.ndim == 0 or y.shape[0] != num_knots:
        raise ValueError(
            f"values must have leading dimension {num_knots} (one row for each of the {num_knots} knots), "
            f"got shape {y.shape}"
        )
    if not np.all(np.isfinite(y)):
        raise ValueError("values contains NaN or inf")
    return y


def _check_points(points) -> np.ndarray:
    z = check_real_array(points, "points").ravel()
    if not np.all(np.isfinite(z)):
        raise ValueError("points contains NaN or inf")
    return z


def _sorted_problem(knots, lam):
    t = check_knots(knots)
    lam = check_number(lam, "lam", low=0.0)
    if not np.isfinite(t.size * lam):
        raise ValueError(f"lam = {lam:g} is too large: n * lam overflows")
    order = np.argsort(t, kind="stable")
    return t[order], order, lam


def fit(knots, values, lam: float = 0.0, weights=None) -> NaturalSpline:
    """Fit the natural cubic smoothing spline (module docstring) to ``values`` at ``knots``.

    ``knots`` has ``n >= 2`` distinct entries in any order; ``values`` has shape
    ``(n, ...)``. ``lam >= 0`` uses the mean convention. Cost ``O(n d)``, one
    factorisation for all ``d`` columns; computed in float64.

    ``weights`` (``(n,)``, >= 0, in the knots' order) weigh the data term:
    ``(1/n) sum_i w_i ||u(t_i) - y_i||^2 + lam * int ||u''||^2`` (scipy's
    ``make_smoothing_spline(x, y, w, lam=n * lam)``). A zero weight leaves its point out of
    the fit. With ``lam = 0`` the spline interpolates the points of positive weight.
    """
    t, order, lam = _sorted_problem(knots, lam)
    y = check_values(values, t.size)
    flat = y[order].reshape(t.size, -1)
    if weights is not None:
        w = check_real_array(weights, "weights").ravel()
        if w.size != t.size or not np.all(np.isfinite(w)) or np.any(w < 0):
            raise ValueError(f"weights must be {t.size} finite numbers >= 0, got shape {w.shape}")
        w = w[order]
        if np.count_nonzero(w) < 2:
            raise ValueError("weights: at least two points need a positive weight")
        if lam == 0.0:  # the spline through the points of positive weight
            return fit(t[w > 0], y[order][w > 0])
        if np.count_nonzero(w) < w.size:  # the same minimiser without them, better conditioned:
            keep = w > 0  # (1/n) sum_{w > 0} ... + lam J = (m/n) [(1/m) sum ... + (n/m) lam J]
            return fit(t[keep], y[order][keep], lam * t.size / np.count_nonzero(keep), w[keep])
        g, gamma = _Smoother(t, t.size * float(lam), w).solve(flat)
        shape = (t.size, *y.shape[1:])
        return NaturalSpline(t, g.reshape(shape), gamma.reshape(shape))
    g, gamma = _Smoother(t, t.size * float(lam)).solve(flat)
    shape = (t.size, *y.shape[1:])
    return NaturalSpline(t, g.reshape(shape), gamma.reshape(shape))


def smoothing_matrix(knots, lam: float, points, *, tol: float = 0.0, derivative: int = 0):
    """The linear map ``S`` (``len(points) x n``) with ``S @ y = fit(knots, y, lam)(points)``.

    Rows follow ``points``, columns follow ``knots`` in the order given. ``derivative = 2``
    gives the map to the spline's second derivative at ``points`` instead.

    With ``tol = 0`` it is exact and dense, built in ``O(n len(points))`` through the adjoint
    (one banded solve with a right-hand side per point). With ``tol > 0`` it is a
    ``scipy.sparse.csr_array`` in which each row keeps only the entries of magnitude at
    least ``tol`` times the row's largest, built in time linear in ``n + len(points)``:
    a smoothing spline's weights decay exponentially away from the evaluation point, so
    each group of nearby points is solved on a window of knots that is widened until the
    weights at its edges fall below ``tol`` (the effect of cutting the window there is of
    that order).
    """
    t, order, lam = _sorted_problem(knots, lam)
    z = _check_points(points)
    tol = check_number(tol, "tol", low=0.0, high=1.0, high_open=True)
    if (
        isinstance(derivative, (bool, np.bool_))
        or not isinstance(derivative, (int, np.integer))
        or (derivative not in (0, 2))
    ):
        raise ValueError(f"derivative must be 0 or 2, got {derivative!r}")
    l = t.size * lam
    if z.size == 0:
        if tol == 0.0:
            return np.zeros((0, t.size))
        from scipy.sparse import csr_array

        return csr_array((0, t.size))
    if tol == 0.0:
        s = np.empty((z.size, t.size))
        s[:, order] = _dense_map(t, l, z, derivative)
        return s
    s = _local_map(t, l, z, tol, derivative)
    if not np.array_equal(order, np.arange(t.size)):
        s = s[:, np.argsort(order)]
    return s


def evaluation_matrix(knots, points):
    """Sparse ``(len(points), 2n)`` matrix taking a spline's knot values and knot second
    derivatives, stacked as ``[g; gamma]`` (each in the order of ``knots``), to its values at
    ``points``: four weights a row, linear beyond the end knots."""
    t, order, _ = _sorted_problem(knots, 0.0)
    z = _check_points(points)
    n = t.size
    stencil = _Stencil.build(t, z)
    rows = np.repeat(np.arange(z.size), 4)
    sorted_cols = stencil.index[:, None] + np.array([0, 1, n, n + 1])
    position = np.concatenate([order, order + n])  # sorted column -> column in the given order
    from scipy.sparse import csr_array

    return csr_array((stencil.weights.ravel(), (rows, position[sorted_cols].ravel())), shape=(z.size, 2 * n))


def _dense_map(t: np.ndarray, l: float, z: np.ndarray, derivative: int = 0) -> np.ndarray:
    """Exact ``(len(z), n)`` map for sorted knots ``t`` and sum-convention weight ``l``.

    Row p is ``a_g + Q M^{-1} (a_gamma - l Q^T a_g)`` where ``u(z_p) = a_g . g + a_gamma .
    gamma`` is the evaluation stencil (adjoint of the Reinsch solve). No checks are performed.
    """
    n, num_points = t.size, z.size
    stencil = _Stencil.build(t, z, derivative)
    cols = np.arange(num_points)
    a_g = np.zeros((n, num_points))
    a_gamma = np.zeros((n, num_points))
    a_g[stencil.index, cols] = stencil.weights[:, 0]
    a_g[stencil.index + 1, cols] = stencil.weights[:, 1]
    a_gamma[stencil.index, cols] = stencil.weights[:, 2]
    a_gamma[stencil.index + 1, cols] = stencil.weights[:, 3]
    return _Smoother(t, l).adjoint(a_g, a_gamma).T


# Window geometry for _local_map: points are grouped into tiles of knot intervals, each
# solved on its tile plus _HALO knots each side (doubled until the edge weights are < tol).
# Tile width balances per-tile overhead (~n / tile calls) against work (~points * tile).
_HALO = 32


def _tile_width(n: int, num_points: int) -> int:
    return int(np.clip(np.sqrt(8000.0 * n / max(num_points, 1)), 16, n))


def _truncated(dense: np.ndarray, tol: float):
    from scipy.sparse import csr_array

    dense[np.abs(dense) < tol * np.abs(dense).max(axis=1, keepdims=True)] = 0.0
    return csr_array(dense)


def _local_map(t: np.ndarray, l: float, z: np.ndarray, tol: float, derivative: int):
    """Truncated sparse map (see :func:`smoothing_matrix`). No checks are performed."""
    n = t.size
    tile_width = _tile_width(n, z.size)
    if n <= tile_width + 2 * _HALO + 2:
        return _truncated(_dense_map(t, l, z, derivative), tol)
    interval = np.clip(np.searchsorted(t, z, side="right") - 1, 0, n - 2)
    tile_of_point = interval // tile_width
    order = np.argsort(tile_of_point, kind="stable")
    bounds = np.searchsorted(tile_of_point[order], np.arange(tile_of_point.max() + 2))
    rows, cols, vals = [], [], []
    halo = _HALO  # carried from tile to tile: neighbouring tiles need similar windows
    for tile in range(bounds.size - 1):
        members = order[bounds[tile] : bounds[tile + 1]]
        if members.size == 0:
            continue
        first = tile * tile_width
        last = min(first + tile_width, n - 1)  # knots first..last bracket the tile's intervals
        while True:
            lo, hi = max(0, first - halo), min(n, last + 1 + halo)
            block = _dense_map(t[lo:hi], l, z[members], derivative)
            scale = tol * np.abs(block).max(axis=1)
            # The window's own natural boundary damps the weights right at a cut, so look a
            # quarter of the halo inwards: those must be negligible already.
            margin = max(2, halo // 4)
            cut_left = lo > 0 and np.any(np.abs(block[:, :margin]).max(axis=1) > scale)
            cut_right = hi < n and np.any(np.abs(block[:, -margin:]).max(axis=1) > scale)
            if not (cut_left or cut_right):
                break
            halo *= 2
            if 2 * halo >= n:  # the weights barely decay: the global map is cheaper
                return _truncated(_dense_map(t, l, z, derivative), tol)
        keep = np.abs(block) >= scale[:, None]
        r, c = np.nonzero(keep)
        rows.append(members[r])
        cols.append(c + lo)
        vals.append(block[r, c])
    rows, cols, vals = (np.concatenate(a) for a in (rows, cols, vals))
    from scipy.sparse import csr_array

    return csr_array((vals, (rows, cols)), shape=(z.size, n))
