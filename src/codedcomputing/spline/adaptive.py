"""An interpolant that adapts to the data: the piecewise-linear and the natural cubic
interpolant through the same points, blended by leave-one-out.

For sorted knots ``t_1 < ... < t_n`` with values ``y_i`` (any trailing shape), ``L`` is the
piecewise-linear interpolant and ``C`` the natural cubic spline through them, both held
*constant* beyond ``[t_1, t_n]`` (extrapolating a gap's slope is what made the largest errors
at the outermost inputs when edge workers straggled). The estimate at a point ``z`` is ::

    u(z) = L(z) + theta * (C(z) - L(z)),    theta in [0, 1], one per call,

with ``theta`` minimising the leave-one-out error of the blend at the interior knots:
``r_L`` and ``r_C`` are the two interpolants' leave-one-out residuals there (all output
coordinates together), and ``theta = clip(<r_L, r_L - r_C> / ||r_L - r_C||^2, 0, 1)``
(1 when the two agree). Smooth data get the cubic, rough data (or data with kinks) the
linear interpolant, and most data something between.

Leave-one-out without refitting: ``L``'s residual at ``t_j`` is ``y_j`` minus the line
through its neighbours. ``C`` minimises the energy ``y^T K y`` with ``K = Q R^{-1} Q^T``
(the Reinsch matrices of :mod:`~codedcomputing.spline.reinsch`), and its residual at ``t_j``
is ``(K y)_j / K_jj``: ``K y = Q gamma`` comes from the same tridiagonal solve as the fit,
and ``K_jj`` needs only three diagonals of ``R^{-1}``, which the forward and the backward
``LDL^T`` factorisations of the tridiagonal ``R`` give in ``O(n)`` (the inverse's diagonal
is ``1 / (d_fwd + d_bwd - diag R)``; its off-diagonals follow from the factor).

Results up to :data:`SKETCH_COLUMNS` wide: a solve at every knot, ``O(n d)`` with nothing
to build (a serving master sees a new alive set at nearly every decode). Wider results are
sketched first and solved the same way (on a device, few knots, at most
:data:`DENSE_LOO_KNOTS`, take both residuals as one dense product). Many more knots than
points (more than twice ``count = max(LOO_KNOTS, len(points))`` interior ones): theta's two
sums are estimated on a weighted sample of the interior knots, fixed per set of knots
(:func:`_sampled_rows`): the knots beside the widest brackets (gaps, whose residuals
dominate) and ``count`` more in blocks of :data:`LOO_BLOCK` spread evenly. Their residuals
come from rows of ``K``: with ``R = L D L^T`` (``L`` unit lower bidiagonal,
subdiagonal ``l``), ``Z = R^{-1}`` has ``Z[i, c] = Z[c, c] prod_{k=i}^{c-1} (-l_k)`` above
its diagonal, so a row's weights decay geometrically away from ``t_j`` and are cut where
they fall below :data:`~codedcomputing.spline.maps.TRUNCATION` of the row's largest (~25
knots a side); a wide call reads only the results at the knots those rows touch (a narrow
one takes the sample's residuals from its solve at every knot). Results wider
than :data:`SKETCH_COLUMNS` are first summarised by a CountSketch (:func:`_sketch`). So
building the decoder for a set of knots is ``O(n + len(points))``, and theta costs
``O(max(LOO_KNOTS, len(points)) d)``, about what the two interpolants' decode does.

A torch tensor on a device (CUDA) is not brought to the host: the residuals come from the
residual rows as one matrix (the dense one, the sample's, or, where the host would solve at
every knot, every interior knot's truncated rows), applied on the device to the results
(sketched there in float64 when wide) divided by their largest magnitude, and only
``[scale, <r_L, r_L - r_C>, ||r_L - r_C||^2]`` is read back (:meth:`AdaptiveInterpolant.theta_terms`).
Where the host solves, theta then differs from the host's by the rows' truncation (relative
:data:`~codedcomputing.spline.maps.TRUNCATION`), else by rounding.
"""

from __future__ import annotations

import contextlib
from typing import TYPE_CHECKING, NamedTuple

import numpy as np

from .. import _arraylib
from .maps import TRUNCATION, SplineDecoder
from .reinsch import _lapack

if TYPE_CHECKING:
    from scipy.sparse import csr_array

__all__ = ["AdaptiveInterpolant", "blend_weight", "cubic_loo_residuals", "linear_loo_residuals"]

# Beyond twice max(LOO_KNOTS, len(points)) interior knots, theta's sums run over that many
# (and the widest brackets' knots), in blocks of LOO_BLOCK consecutive ones (a row of K
# reaches ~25 knots each side: a block's rows share the results they read).
LOO_KNOTS = 256
LOO_BLOCK = 64
# Up to this many knots, theta's residuals on a device are one dense product (the host solves).
DENSE_LOO_KNOTS = 64
# A bracket this many times wider than its neighbours' median is a gap: its knots are always sampled.
WIDE_BRACKET = 3.0
_ROW_CHUNK = 512  # rows of K built at a time (larger temporaries fall out of cache)
# The linear interpolant of numpy results of these dtypes, with at most this many entries, is
# gathered rather than multiplied by its sparse map (AdaptiveInterpolant.linear_values).
_GATHERED = (np.dtype(np.float32), np.dtype(np.float64))
SMALL_GATHER = 2**14


def linear_matrix(t: np.ndarray, z: np.ndarray) -> csr_array:
    """``(len(z), n)`` sparse matrix of the piecewise-linear interpolant through sorted knots
    ``t``, constant beyond them. No checks are performed."""
    n = t.size
    clamped = np.clip(z, t[0], t[-1])
    i = np.clip(np.searchsorted(t, clamped, side="right") - 1, 0, n - 2)
    b = (clamped - t[i]) / (t[i + 1] - t[i])
    cols = np.stack([i, i + 1], axis=1).ravel()
    vals = np.stack([1.0 - b, b], axis=1).ravel()
    from scipy.sparse import csr_array

    return csr_array((vals, cols, np.arange(0, 2 * z.size + 1, 2)), shape=(z.size, n))


def linear_loo_residuals(t: np.ndarray, y: np.ndarray) -> np.ndarray:
    """``(n - 2, d)``: ``y_j`` minus the line through its neighbours, at each interior knot.
    ``t`` sorted, ``y`` of shape ``(n, d)``. No checks are performed."""
    left, right = t[1:-1] - t[:-2], t[2:] - t[1:-1]
    w = (right / (left + right))[:, None]  # the left neighbour's weight
    return y[1:-1] - (w * y[:-2] + (1.0 - w) * y[2:])


class _CubicLeaveOneOut:
    """The natural cubic interpolant's leave-one-out residuals at the interior knots of
    sorted ``t`` (at least 4), for any values; or the rows of the map that gives them. No
    checks are performed."""

    def __init__(self, t: np.ndarray):
        h = t[1:] - t[:-1]
        diagonal, offdiagonal = (h[:-1] + h[1:]) / 3.0, h[1:-1] / 6.0
        m = diagonal.size
        # R = L D L^T
        pivots, l = _lapack().dpttrf(diagonal, offdiagonal)[:2] if m > 1 else (diagonal, np.zeros(0))
        z0 = _inverse_diagonal(diagonal, offdiagonal, pivots)  # Z = R^-1: Z[i, i]
        self.pivots, self.subdiagonal, self.inverse_diagonal = pivots, l, z0
        self.inverse_h = (1.0 / h)[:, None]
        # Row j of Q (interior knot j = 1..n-2, column c = j-1) has q_a = 1/h_{j-1} at column
        # c-1, q_b at c and q_c = 1/h_j at c+1; q_a = 0 and q_c = 0 where those columns do not
        # exist, and Z's entries beyond the matrix are 0.
        q_a, q_b, q_c = 1.0 / h[:-1], -1.0 / h[:-1] - 1.0 / h[1:], 1.0 / h[1:]
        q_a[0] = q_c[-1] = 0.0
        near = np.zeros((5, m))  # Z[c-1, c-1], Z[c+1, c+1], Z[c-1, c], Z[c, c+1], Z[c-1, c+1]
        near[0, 1:], near[1, :-1] = z0[:-1], z0[1:]
        near[2, 1:] = near[3, :-1] = -l * z0[1:]  # Z[i, i+1]
        near[4, 1:-1] = l[:-1] * l[1:] * z0[2:]  # Z[i, i+2]
        k = q_b**2 * z0  # K_jj = q^T Z q
        k += q_a**2 * near[0] + 2 * q_a * q_b * near[2]
        k += q_c**2 * near[1] + 2 * q_b * q_c * near[3]
        k += 2 * q_a * q_c * near[4]
        self.inverse_k_diagonal = (1.0 / k)[:, None]
        self.q_b = q_b[:, None]

    def __call__(self, y: np.ndarray) -> np.ndarray:
        """``(K y)_j / K_jj`` at the interior knots, ``K y = Q R^-1 Q^T y``: a second divided
        difference, a tridiagonal solve and ``Q`` applied to the interior, in place where it can."""
        return self.residuals_and_curvatures(y)[0]

    def curvatures(self, y: np.ndarray) -> np.ndarray:
        """``R^-1 Q^T y``: the natural cubic interpolant's second derivatives at the interior knots."""
        slopes = y[1:] - y[:-1]
        slopes *= self.inverse_h
        rhs = slopes[1:] - slopes[:-1]  # Q^T y
        if rhs.shape[0] == 1:
            return rhs / self.pivots[0]
        return _lapack().dpttrs(self.pivots, self.subdiagonal, rhs)[0]  # R g = Q^T y

    def residuals_and_curvatures(self, y: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """The residuals (:meth:`__call__`) and the curvatures ``g`` they come from."""
        g = self.curvatures(y)
        q_g = self.q_b * g  # (Q g) at the interior knots: q_a g[c-1] + q_b g[c] + q_c g[c+1]
        inner = self.inverse_h[1:-1]
        q_g[1:] += inner * g[:-1]
        q_g[:-1] += inner * g[1:]
        q_g *= self.inverse_k_diagonal
        return q_g, g

    def rows(self, targets: np.ndarray) -> csr_array:
        """``(len(targets), n)``: rows ``targets`` (interior knots, ``1..n-2``) of ``K``, each
        divided by its diagonal entry, so that ``rows @ y`` is the residual there; weights below
        :data:`~codedcomputing.spline.maps.TRUNCATION` of their row's largest are dropped."""
        weights, columns, counts = self._row_entries(targets)
        indptr = np.concatenate([[0], np.cumsum(counts)])
        from scipy.sparse import csr_array

        return csr_array((weights, columns, indptr), shape=(targets.size, self.inverse_h.shape[0] + 1))

    def _row_entries(self, targets: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """:meth:`rows` as its kept weights and their columns, row after row, and each row's
        count; built :data:`_ROW_CHUNK` rows at a time (the temporaries stay in cache)."""
        parts = [self._chunk_entries(targets[i : i + _ROW_CHUNK]) for i in range(0, targets.size, _ROW_CHUNK)]
        return tuple(np.concatenate(part) for part in zip(*parts, strict=True))

    def _chunk_entries(self, targets: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """:meth:`_row_entries` for a few rows. The reach starts at 32 knots a side (uniform
        knots need ~25) and is doubled until every row's kept weights end inside it."""
        n = self.inverse_h.shape[0] + 1
        reach = 32
        while True:
            weights = self._rows(targets, reach)  # at knots targets + s, |s| <= reach + 1
            size = np.abs(weights)
            kept = size >= TRUNCATION * size.max(axis=1, keepdims=True)  # beyond the knots: 0, dropped
            if reach >= n or not (kept[:, :2].any() or kept[:, -2:].any()):
                break
            reach *= 2
        weights *= self.inverse_k_diagonal[targets - 1]
        columns = targets[:, None] + np.arange(-reach - 1, reach + 2)
        return weights[kept], columns[kept], kept.sum(axis=1)

    def _rows(self, targets: np.ndarray, reach: int) -> np.ndarray:
        """Rows ``targets`` of ``K = Q Z Q^T`` at knots ``targets + s``, ``|s| <= reach + 1``
        (zero outside the knots), from ``u = Z q_j`` (``q_j``: row ``j`` of ``Q``, nonzero at
        columns ``c - 1, c, c + 1``, ``c = j - 1``) at the columns within ``reach`` of ``c``.
        ``R u = q_j``, so beyond those three columns ``u`` follows ``Z``'s columns:
        ``u_{c-1-s} = u_{c-1} prod_{i=c-1-s}^{c-2} (-l_i)`` and ``u_{c+1+s} = Z[c+1+s, c+1+s]
        prod_{i=c+1}^{c+s} (-l_i) u_{c+1} / Z[c+1, c+1]``."""
        m, width = self.inverse_diagonal.size, 2 * reach + 5
        pad = reach + 2
        minus_l = np.zeros(m + 2 * pad)  # minus_l[i + pad] = -l_i, 0 beyond the factor
        minus_l[pad : pad + m - 1] = -self.subdiagonal
        z = np.zeros(m + 2 * pad)  # z[i + pad] = Z[i, i], 0 beyond the matrix
        z[pad : pad + m] = self.inverse_diagonal
        inverse_h = np.zeros(m + 1 + 2 * pad)  # inverse_h[i + pad] = 1 / h_i
        inverse_h[pad : pad + m + 1] = self.inverse_h[:, 0]
        c = targets - 1 + pad  # padded index of the centre column
        q_a, q_c = inverse_h[c], inverse_h[c + 1]  # 1 / h_{j-1}, 1 / h_j (columns -1, m: z is 0)
        q_b = -q_a - q_c
        l_before, l_at = minus_l[c - 1], minus_l[c]  # -l_{c-1}, -l_c
        # offsets along axis 0 (the recurrences run over whole rows): u[k + reach + 2] at knots targets + k
        u = np.zeros((width, targets.size))
        before = q_a * z[c - 1] + q_b * l_before * z[c] + q_c * l_before * l_at * z[c + 1]  # u_{c-1}
        after_rate = q_c + q_b * l_at + q_a * l_before * l_at  # u_{c+1} / Z[c+1, c+1]
        u[reach + 1] = before
        u[reach + 2] = q_a * l_before * z[c] + q_b * z[c] + q_c * l_at * z[c + 1]
        u[reach + 3] = after_rate * z[c + 1]
        steps = np.arange(1, reach)[:, None]
        left = _running_products(minus_l[c - 1 - steps])  # u_{c-1-s} / u_{c-1}, s = 1..reach-1
        u[reach:1:-1] = left * before
        right = _running_products(minus_l[c + steps])
        right *= z[c + 1 + steps]
        u[reach + 4 : width - 2] = right * after_rate  # u_{c+1+s}
        # (Q u)_i = (U_{i+1} - U_i) / h_i - (U_i - U_{i-1}) / h_{i-1}, U at knot i = u at column i-1
        slopes = u[1:] - u[:-1]
        slopes *= inverse_h[c + np.arange(-reach - 1, reach + 3)[:, None]]  # h_{j+s}, s = -reach-2..
        return (slopes[1:] - slopes[:-1]).T


def _running_products(factors: np.ndarray) -> np.ndarray:
    """``np.cumprod(factors, axis=0)`` by doubling (``log2`` of the length in whole-row
    products: numpy's cumprod takes one element at a time, ~20x slower here)."""
    products = factors.copy()
    step = 1
    while step < products.shape[0]:
        products[step:] *= products[:-step]  # numpy buffers the overlap: the previous round's values
        step *= 2
    return products


class _ResidualRows(NamedTuple):
    """theta's residuals as one matrix: ``matrix @ values[knots]`` stacks ``r_L`` over ``r_C``
    at the interior knots ``targets`` of the sorted knots, each row scaled by ``scale`` (the
    square root of its weight in theta's sums)."""

    matrix: np.ndarray | csr_array
    knots: np.ndarray
    targets: np.ndarray
    scale: np.ndarray


def _linear_rows(t: np.ndarray, targets: np.ndarray) -> np.ndarray:
    """``(len(targets), 3)``: ``r_L = y_j - w y_{j-1} - (1 - w) y_{j+1}`` as weights of
    ``y_{j-1}, y_j, y_{j+1}``."""
    left, right = t[targets] - t[targets - 1], t[targets + 1] - t[targets]
    w = right / (left + right)
    return np.stack([-w, np.ones_like(w), w - 1.0], axis=1)


def _dense_rows(t: np.ndarray, cubic: _CubicLeaveOneOut) -> _ResidualRows:
    """Every interior knot's residuals as a dense matrix (few knots: one small product)."""
    n = t.size
    targets = np.arange(1, n - 1)
    linear = np.zeros((n - 2, n))
    linear[targets[:, None] - 1, targets[:, None] + np.arange(-1, 2)] = _linear_rows(t, targets)
    matrix = np.concatenate([linear, cubic(np.eye(n))])
    matrix.flags.writeable = False
    return _ResidualRows(matrix, np.arange(n), targets, np.ones(n - 2))


def _sample(t: np.ndarray, count: int) -> tuple[np.ndarray, np.ndarray]:
    """``(targets, scale)``: the interior knots whose residuals estimate theta's sums over all,
    and the square root of each one's weight in them.

    Two strata: the knots within two of each of the widest brackets (a bracket at least
    :data:`WIDE_BRACKET` times its four neighbours' median; the widest ones first, at most one
    per block), weight 1, since a gap's residuals outweigh hundreds of others; and blocks of
    :data:`LOO_BLOCK` consecutive knots spread evenly over the rest (the outermost ones
    included), ``count`` knots in all, each weighted by the rest's size over its sampled part.
    """
    n = t.size
    block = min(LOO_BLOCK, count)
    blocks = -(-count // block)
    h = np.diff(t)
    padded = np.concatenate([h[:1], h[:1], h, h[-1:], h[-1:]])
    low, high = np.minimum(padded[:-4], padded[1:-3]), np.maximum(padded[:-4], padded[1:-3])
    low2, high2 = np.minimum(padded[3:-1], padded[4:]), np.maximum(padded[3:-1], padded[4:])
    ratio = 2.0 * h / (np.maximum(low, low2) + np.minimum(high, high2))  # to the 4 neighbours' median
    wide = np.flatnonzero(ratio >= WIDE_BRACKET)
    wide = wide[np.argsort(-ratio[wide], kind="stable")[:blocks]]  # bracket i: knots i, i+1
    certain = np.zeros(n, dtype=bool)
    certain[np.clip((wide[:, None] + np.arange(-1, 3)).ravel(), 1, n - 2)] = True
    starts = np.linspace(1, n - 1 - block, blocks).round().astype(np.intp)
    sampled = np.zeros(n, dtype=bool)
    sampled[(starts[:, None] + np.arange(block)).ravel()] = True
    sampled &= ~certain
    targets = np.flatnonzero(certain | sampled)
    rest = (n - 2 - np.count_nonzero(certain)) / max(1, np.count_nonzero(sampled))
    return targets, np.where(certain[targets], 1.0, np.sqrt(rest))


def _sampled_rows(t: np.ndarray, cubic: _CubicLeaveOneOut, count: int, sample=None) -> _ResidualRows:
    """The residuals at the knots of :func:`_sample` (``sample``: its result, if at hand),
    weighted so that theta's sums over them estimate the sums over all, as a sparse matrix
    over the knots its rows touch."""
    n = t.size
    targets, scale = _sample(t, count) if sample is None else sample
    linear = (_linear_rows(t, targets) * scale[:, None]).ravel()
    weights, columns, counts = cubic._row_entries(targets)
    weights *= np.repeat(scale, counts)
    columns = np.concatenate([(targets[:, None] + np.arange(-1, 2)).ravel(), columns])
    used = np.zeros(n, dtype=bool)
    used[columns] = True
    knots = np.flatnonzero(used)
    from scipy.sparse import csr_array

    matrix = csr_array(  # [linear; cubic] rows, over the knots they touch
        (
            np.concatenate([linear, weights]),
            (np.cumsum(used) - 1)[columns],
            np.concatenate([np.arange(0, 3 * targets.size + 1, 3), 3 * targets.size + np.cumsum(counts)]),
        ),
        shape=(2 * targets.size, knots.size),
    )
    matrix.data.flags.writeable = False
    return _ResidualRows(matrix, knots, targets, scale)


def _inverse_diagonal(diagonal: np.ndarray, offdiagonal: np.ndarray, forward=None) -> np.ndarray:
    """The diagonal of the inverse of a symmetric positive definite tridiagonal matrix, from
    its forward and backward ``LDL^T`` pivots (``1 / (d_fwd + d_bwd - diagonal)``; the forward
    ones computed unless given)."""
    if diagonal.size == 1:
        return 1.0 / diagonal
    dpttrf = _lapack().dpttrf
    if forward is None:
        forward = dpttrf(diagonal, offdiagonal)[0]
    backward = dpttrf(diagonal[::-1], offdiagonal[::-1])[0][::-1]
    return 1.0 / (forward + backward - diagonal)


def cubic_loo_residuals(t: np.ndarray, y: np.ndarray) -> np.ndarray:
    """``(n - 2, d)``: ``y_j`` minus the natural cubic interpolant through the other knots,
    at each interior knot. ``t`` sorted (at least 3), ``y`` ``(n, d)``. No checks are performed."""
    return _CubicLeaveOneOut(t)(y)


def blend_weight(r_linear: np.ndarray, r_cubic: np.ndarray) -> float:
    """``theta`` in [0, 1] minimising ``||(1 - theta) r_linear + theta r_cubic||^2``; 1 when
    the two residuals agree."""
    scale = max(float(np.max(np.abs(r_linear), initial=0.0)), float(np.max(np.abs(r_cubic), initial=0.0)))
    if not 0.0 < scale < np.inf:
        return 1.0
    return _theta(r_linear / scale, r_cubic / scale)  # squares of 1e300 overflow


# Results wider than this are summarised for theta by a CountSketch of this many columns.
SKETCH_COLUMNS = 32
_sketches: dict[tuple[int, np.dtype], np.ndarray] = {}
# Up to this many rows the sketch is a sparse product (measured: 2x faster at 40-80 rows of
# 1,000, even at 400, 1.5x slower at 1,600), with its transposed matrix kept per width.
SPARSE_SKETCH_ROWS = 128
_sparse_sketches: dict[tuple[int, np.dtype], csr_array] = {}


def _sketch(values: np.ndarray) -> np.ndarray:
    """``values @ S`` in float64: each of the ``d`` columns added, with a random sign, to one
    of :data:`SKETCH_COLUMNS` buckets (a CountSketch, ``E[S S^T] = I``), from a generator
    seeded by ``d``, so the same width always gets the same sketch. The leave-one-out
    residuals are linear in the values, so their inner products, and theta's ratio of them,
    are kept in expectation, at one pass over the results instead of a solve per column.

    ``values`` (numpy) are summed in their own precision, float32 for float32 and narrower
    (its rounding is of the order of float32 results' own). Up to :data:`SPARSE_SKETCH_ROWS`
    rows, ``S`` as a sparse matrix (``d`` multiply-adds a row: ~2x faster at 40-80 rows of
    1,000); more, ``S`` dense: a BLAS product on one thread beats a sparse one there."""
    if values.dtype != np.float64:
        values = values.astype(np.float32, copy=False)
    d = values.shape[1]
    sketch = _sketches.get((d, values.dtype))
    if sketch is None:
        rng = np.random.default_rng([d, 0x5EED])
        buckets = rng.integers(SKETCH_COLUMNS, size=d)
        signs = rng.choice([-1.0, 1.0], size=d)
        sketch = np.zeros((d, SKETCH_COLUMNS), dtype=values.dtype)
        sketch[np.arange(d), buckets] = signs
        sketch.flags.writeable = False
        _sketches[(d, values.dtype)] = sketch
    if values.shape[0] <= SPARSE_SKETCH_ROWS:
        transposed = _sparse_sketches.get((d, values.dtype))
        if transposed is None:  # S^T, one entry a column (two threads making it make the same)
            from scipy.sparse import csr_array

            transposed = _sparse_sketches[(d, values.dtype)] = csr_array(sketch.T)
        with np.errstate(over="ignore", invalid="ignore"):
            summed = np.ascontiguousarray((transposed @ values.T).T)
    else:
        products = values.size * SKETCH_COLUMNS
        small = _arraylib.TINY_PRODUCT < products <= _arraylib.SMALL_PRODUCT
        with (
            _arraylib.one_blas_thread if small else contextlib.nullcontext(),
            np.errstate(over="ignore", invalid="ignore"),
        ):
            summed = values @ sketch
    if summed.dtype != np.float64 and not np.isfinite(summed).all():  # float32 overflowed
        return _sketch(values.astype(np.float64))
    return summed.astype(np.float64, copy=False)


def _device_sketch(values):
    """:func:`_sketch` of a torch tensor, on its device, in float64 (the sketch's matrix is
    copied there once per width)."""
    import torch

    d = values.shape[1]
    sketch = _sketches.get((d, np.dtype(np.float64)))
    if sketch is None:
        _sketch(np.zeros((1, d)))  # builds and keeps it
        sketch = _sketches[(d, np.dtype(np.float64))]
    return values.to(torch.float64) @ _arraylib.device_copies.get(sketch, torch.float64, values.device)


def _device_rescaled(values):
    """``(values / scale, scale)`` for a float64 tensor, ``scale = max |values|`` (a 0-d
    tensor on the device); values of no positive finite scale are left as they are."""
    import torch

    scale = values.abs().amax() if values.numel() else values.new_zeros(())
    usable = (scale > 0.0) & torch.isfinite(scale)
    return values / torch.where(usable, scale, torch.ones_like(scale)), scale


def theta_from_terms(terms: list[float]) -> float:
    """``theta`` from :meth:`AdaptiveInterpolant.theta_terms` read back to the host (as
    :func:`_theta` gives it from the residuals: 1 when the results or the residuals' difference
    vanish or are not finite)."""
    scale, numerator, denominator = terms
    if not 0.0 < scale < np.inf or not denominator > 0.0:
        return 1.0
    return min(max(numerator / denominator, 0.0), 1.0)


def _theta(r_linear: np.ndarray, r_cubic: np.ndarray) -> float:
    """:func:`blend_weight` for residuals of moderate size (no overflow check)."""
    difference = np.subtract(r_linear, r_cubic, out=r_cubic)  # r_cubic is not needed after this
    denominator = float(np.vdot(difference, difference))
    if not denominator > 0.0:
        return 1.0
    return min(max(float(np.vdot(r_linear, difference)) / denominator, 0.0), 1.0)


class AdaptiveInterpolant:
    """``y -> (L(points) + theta (C(points) - L(points)), {"lambda_dec": 0.0, "theta": theta})``
    (:meth:`decode`, also its call) for distinct ``knots`` in any
    order (module docstring; row i of ``y`` belongs to ``knots[i]``), applied to numpy arrays
    or torch tensors in their own type, dtype and device.

    Built once per set of knots (the decoder GCC caches per alive set): the linear
    interpolant's terms, the cubic map at the points clamped into the knots' range, and the
    leave-one-out pieces. What only repeated calls pay for (the linear map as a sparse matrix,
    theta's residual rows) is built on first use; two threads building it at once build the
    same thing, so one decoder serves many threads. ``theta`` is computed on
    the host, in float64 (wide results are sketched in their own precision first; a tensor on
    a device: on the device, see the module docstring); for torch
    tensors that require grad, autograd treats it as a constant (the gradient is the blend's
    map at that ``theta``). ``num_points`` (default ``len(points)``) sizes theta's sample: a
    decoder for some of a set's points (a systematic code's missing inputs) passes the set's
    size and gets the estimates the whole set's decoder gives there. No checks are performed.
    """

    def __init__(self, knots: np.ndarray, points: np.ndarray, *, num_points: int | None = None):
        self.knots, self.points = knots, points
        # (numpy's function wrappers cost a decoder used once more than the arithmetic on these
        # few entries: methods and ufuncs instead)
        order = knots.argsort(kind="stable")
        t = knots[order]
        self.sorted_knots = t
        self.order = None if (order[1:] > order[:-1]).all() else order
        # L's two terms a row (columns in the knots' given order), for linear_values and linear
        clamped = np.minimum(np.maximum(points, t[0]), t[-1])
        i = np.minimum(np.maximum(t.searchsorted(clamped, side="right") - 1, 0), t.size - 2)
        b = (clamped - t[i]) / (t[i + 1] - t[i])
        self.brackets, self.inside = i, clamped == points  # each point's bracket [t_i, t_i+1], if inside
        first, second = (i, i + 1) if self.order is None else (order[i], order[i + 1])
        self._linear_terms = (first, second, {}, b)  # the weights by dtype (_linear_weights)
        self._linear = None
        self._clamped, self._cubic = clamped, None
        # theta's pieces: the cubic's recurrence, or (many more knots than points) the sampled
        # residuals as one matrix, built at the first call
        self.cubic_loo = self._residual_rows = self._sample = self._sample_knots = None
        self._dense = False
        self._device_rows = None
        if t.size >= 4:
            self.cubic_loo = _CubicLeaveOneOut(t)
            left, right = t[1:-1] - t[:-2], t[2:] - t[1:-1]
            w = (right / (left + right))[:, None]
            self.linear_loo_weights = w, 1.0 - w
            count = max(LOO_KNOTS, points.size if num_points is None else num_points)
            self._dense = t.size <= DENSE_LOO_KNOTS
            if t.size - 2 > 2 * count:
                self._sample = count

    @property
    def linear(self) -> csr_array:
        """``(len(points), len(knots))``: the sparse map of ``L`` (columns in the knots' order)."""
        if self._linear is None:
            first, second = self._linear_terms[:2]
            a, b = self._linear_weights(np.dtype(np.float64))
            from scipy.sparse import csr_array

            linear = csr_array(
                (
                    np.stack([a[:, 0], b[:, 0]], axis=1).ravel(),
                    np.stack([first, second], axis=1).ravel(),
                    np.arange(0, 2 * self.points.size + 1, 2),
                ),
                shape=(self.points.size, self.knots.size),
            )
            linear.data.flags.writeable = False
            self._linear = linear
        return self._linear

    @property
    def cubic(self) -> SplineDecoder:
        """``C`` at the points clamped into the knots' range, as a decoder that picks an explicit
        map or a banded solve, whichever is predicted cheaper (built on first use)."""
        if self._cubic is None:
            self._cubic = SplineDecoder(self.knots, 0.0, self._clamped)
        return self._cubic

    def cubic_values(self, y, shared=None):
        """``C`` at the points (clamped into the knots' range). Numpy results up to
        :data:`SKETCH_COLUMNS` wide, or whose curvatures theta's solve gave (``shared``: the
        sorted float64 results and their curvatures), are solved for here and the cubic
        evaluated at the points, with nothing to build; wider results and torch tensors go
        to :attr:`cubic`, which picks a map or a solve by their predicted costs and builds
        its map once that pays."""
        if shared is not None and shared[1] is None:  # theta's values were sketched
            shared = None
        if not (
            self.cubic_loo is not None
            and isinstance(y, np.ndarray)
            and y.dtype in _GATHERED
            and y.size
            and (shared is not None or y.size <= SKETCH_COLUMNS * y.shape[0])
        ):  # wide results: the decoder's cost model may prefer its map to a solve
            return self.cubic(y)
        if shared is None:
            values = _arraylib.to_float64(y)
            if not 1e-100 < float(np.max(np.abs(values))) < 1e100:  # curvatures (~ y / h^2) overflow
                return self.cubic(y)
            if self.order is not None:
                values = values[self.order]
            shared = values, self.cubic_loo.curvatures(values)
        values, inner = shared
        t, i, z = self.sorted_knots, self.brackets, self._clamped
        h = t[i + 1] - t[i]
        a, b = (t[i + 1] - z) / h, (z - t[i]) / h
        h2 = h * h / 6.0
        curvatures = np.zeros((t.size, values.shape[1]))
        curvatures[1:-1] = inner
        estimates = a[:, None] * values[i] + b[:, None] * values[i + 1]
        estimates += ((a * a - 1.0) * a * h2)[:, None] * curvatures[i]
        estimates += ((b * b - 1.0) * b * h2)[:, None] * curvatures[i + 1]
        return estimates.astype(y.dtype, copy=False).reshape((self.points.size, *y.shape[1:]))

    @property
    def residual_rows(self) -> _ResidualRows | None:
        """theta's residuals as one matrix (few knots: dense; many more knots than points:
        sampled), or None where every call solves for the residuals at every knot
        (:meth:`weight`). Built on first use."""
        if self._residual_rows is None and self._dense:
            self._residual_rows = _dense_rows(self.sorted_knots, self.cubic_loo)
        elif self._residual_rows is None and self._sample is not None:
            self._residual_rows = _sampled_rows(self.sorted_knots, self.cubic_loo, self._sample, self.sample)
        return self._residual_rows

    @property
    def sample(self) -> tuple[np.ndarray, np.ndarray] | None:
        """theta's sample (:func:`_sample`: the knots and the square roots of their weights), or
        None where theta's sums run over every interior knot."""
        if self._sample_knots is None and self._sample is not None:
            self._sample_knots = _sample(self.sorted_knots, self._sample)
        return self._sample_knots

    @property
    def loo_rows(self) -> np.ndarray | None:
        """The rows of the results theta reads through :attr:`residual_rows`, in the order it
        reads them (None: all, as given)."""
        rows = self.residual_rows
        if rows is not None:
            return rows.knots if self.order is None else self.order[rows.knots]
        return self.order

    def weight(self, y) -> float:
        """``theta`` for results ``y`` (rows in the knots' order)."""
        return self.weight_and_curvatures(y)[0]

    def weight_and_curvatures(self, y) -> tuple[float, tuple | None]:
        """``(theta, shared)``: ``shared`` is what later steps of the call can reuse of theta's
        solve: ``(values, curvatures)``, the results at every knot in sorted order as theta
        read them (float64, sketched when wider than :data:`SKETCH_COLUMNS`), and the cubic's
        curvatures at the interior knots when they are the results' own (numpy, unsketched;
        else None); None when theta read only a sample's rows or rescaled the results.

        The route depends on the decoder and the width alone, so a decoder gives the same
        theta, bit for bit, at every call: results up to :data:`SKETCH_COLUMNS` wide, a solve
        at every knot (``O(n d)``, nothing to build, as a decoder used once wants; the
        sample's residuals picked from it where there is one); wider (sketched) results, the
        sample's :attr:`residual_rows` where there is one (the sketch reads only the knots its
        rows touch), built once, else the same solve on the sketch."""
        if self.cubic_loo is None:  # through 2 or 3 knots, leaving one out leaves a line
            return 1.0, None
        if not _arraylib.on_host(y):  # a tensor on a device: three numbers cross, not the results
            return theta_from_terms(self.theta_terms(y).tolist()), None
        flat = y.reshape(y.shape[0], -1)
        # by width alone, so that a decoder gives the same theta, bit for bit, at every call
        # (few knots: the solve at every knot; the dense rows cost a decoder used once ~20x more)
        by_rows = self._sample is not None and flat.shape[1] > SKETCH_COLUMNS
        rows = self.loo_rows if by_rows else self.order
        if rows is not None:
            flat = _arraylib.take_rows(flat, rows)
        if flat.shape[1] > SKETCH_COLUMNS:
            values = _sketch(_arraylib.convert_like(flat, self.knots))  # on the host, as numpy
        else:
            values = _arraylib.to_float64(flat)
        scale = float(np.maximum.reduce(np.abs(values), axis=None, initial=0.0))
        shareable = not by_rows and 1e-100 < scale < 1e100
        exact = shareable and isinstance(y, np.ndarray) and flat.shape[1] <= SKETCH_COLUMNS
        if not 1e-150 < scale < 1e150:  # theta is scale-free; 1e300 results overflow the solve
            if not 0.0 < scale < np.inf:
                return 1.0, None
            values = values / scale
        if by_rows:
            both = np.asarray(self._residual_rows.matrix @ values)
            theta = _theta(both[: both.shape[0] // 2], both[both.shape[0] // 2 :])
            return theta, None
        w, complement = self.linear_loo_weights  # linear_loo_residuals, its weights kept
        r_linear = values[1:-1] - (w * values[:-2] + complement * values[2:])
        r_cubic, curvatures = self.cubic_loo.residuals_and_curvatures(values)
        shared = (values, curvatures if exact else None) if shareable else None
        if self._sample is not None:  # the sample's residuals, weighted
            targets, weights = self.sample
            r_linear = r_linear[targets - 1] * weights[:, None]
            r_cubic = r_cubic[targets - 1] * weights[:, None]
        return _theta(r_linear, r_cubic), shared

    @property
    def device_rows(self) -> _ResidualRows:
        """theta's residuals as one matrix for tensors on a device, where a banded solve would
        need the host: :attr:`residual_rows` where there are any, else every interior knot's
        rows of ``K`` (truncated as :data:`~codedcomputing.spline.maps.TRUNCATION` says, so the
        residuals match the solve's to about that, relative). Built on first use."""
        rows = self.residual_rows
        if rows is None:
            if self._device_rows is None:
                n = self.sorted_knots.size
                every = (np.arange(1, n - 1), np.ones(n - 2))
                self._device_rows = _sampled_rows(self.sorted_knots, self.cubic_loo, n - 2, every)
            rows = self._device_rows
        return rows

    def theta_terms(self, y):
        """For a torch tensor ``y`` (at least 4 knots): ``[scale, <r_L, r_L - r_C>, ||r_L -
        r_C||^2]`` as a float64 tensor on ``y``'s device, the residuals of the results divided
        by ``scale = max |values|`` (sketched first when wider than :data:`SKETCH_COLUMNS`,
        in float64), all computed there; :func:`theta_from_terms` of them is ``theta``. The
        results never leave the device; autograd sees none of it (theta is a constant)."""
        import torch

        rows = self.device_rows
        flat = y.detach().reshape(y.shape[0], -1)
        flat = _arraylib.take_rows(flat, rows.knots if self.order is None else self.order[rows.knots])
        values = _device_sketch(flat) if flat.shape[1] > SKETCH_COLUMNS else flat.to(torch.float64)
        values, scale = _device_rescaled(values)
        both = _arraylib.apply_matrix(rows.matrix, values)
        half = both.shape[0] // 2
        r_linear = both[:half]
        difference = r_linear - both[half:]
        return torch.stack([scale, torch.sum(r_linear * difference), torch.sum(difference * difference)])

    def _linear_weights(self, dtype: np.dtype) -> tuple[np.ndarray, np.ndarray]:
        """``L``'s two weights a row as columns of ``dtype`` (float32 or float64), made on first
        use (two threads making them at once make the same)."""
        weights, b = self._linear_terms[2:]
        pair = weights.get(dtype)
        if pair is None:
            pair = weights[dtype] = ((1.0 - b).astype(dtype)[:, None], b.astype(dtype)[:, None])
        return pair

    def linear_values(self, y):
        """``L`` at the points: :attr:`linear` applied. Small float32 and float64 numpy results
        take its two terms a row as gathered rows, the very sums scipy's product makes,
        without its ~20 us a call."""
        small = self.points.size * int(np.prod(y.shape[1:], dtype=np.int64)) <= SMALL_GATHER
        if not (small and isinstance(y, np.ndarray) and y.dtype in _GATHERED):
            return _arraylib.apply_matrix(self.linear, y)
        first, second = self._linear_terms[:2]
        flat = y.reshape(y.shape[0], -1)
        a, b = self._linear_weights(y.dtype)
        return (a * flat[first] + b * flat[second]).reshape((self.points.size, *y.shape[1:]))

    def decode(self, y) -> tuple[object, dict]:
        """``(estimates, {"lambda_dec": 0.0, "theta": theta})``: the blend at the points and
        the call's ``theta`` (the decoder interface, :class:`~codedcomputing.spline.maps.Decoder`)."""
        theta, shared = self.weight_and_curvatures(y)
        linear = self.linear_values(y)
        if theta != 0.0:
            linear = linear + theta * (self.cubic_values(y, shared) - linear)
        return linear, {"lambda_dec": 0.0, "theta": theta}

    __call__ = decode
