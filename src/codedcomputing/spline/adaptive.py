"""An interpolant that adapts to the data: the piecewise-linear and the natural cubic
interpolant through the same points, blended by leave-one-out.

For sorted knots ``t_1 < ... < t_n`` with values ``y_i`` (any trailing shape), ``L`` is the
piecewise-linear interpolant and ``C`` the natural cubic spline through them, both held
*constant* beyond ``[t_1, t_n]`` (extrapolating a gap's slope is what made the largest errors
at the outermost inputs when edge workers straggled). The estimate at a point ``z`` is

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
is ``1 / (d_fwd + d_bwd - diag R)``; its off-diagonals follow from the factor). So building
the decoder for a set of knots is ``O(n + len(points))`` and a decode ``O((n + len(points)) d)``.
"""

from __future__ import annotations

import numpy as np
from scipy.linalg.lapack import dpttrf, dpttrs
from scipy.sparse import csr_array

from .. import _arraylib
from .maps import SplineDecoder

__all__ = ["AdaptiveInterpolant", "blend_weight", "cubic_loo_residuals", "linear_loo_residuals"]


def linear_matrix(t: np.ndarray, z: np.ndarray) -> csr_array:
    """``(len(z), n)`` sparse matrix of the piecewise-linear interpolant through sorted knots
    ``t``, constant beyond them. No checks are performed."""
    n = t.size
    clamped = np.clip(z, t[0], t[-1])
    i = np.clip(np.searchsorted(t, clamped, side="right") - 1, 0, n - 2)
    b = (clamped - t[i]) / (t[i + 1] - t[i])
    rows = np.repeat(np.arange(z.size), 2)
    cols = np.stack([i, i + 1], axis=1).ravel()
    vals = np.stack([1.0 - b, b], axis=1).ravel()
    return csr_array((vals, (rows, cols)), shape=(z.size, n))


def linear_loo_residuals(t: np.ndarray, y: np.ndarray) -> np.ndarray:
    """``(n - 2, d)``: ``y_j`` minus the line through its neighbours, at each interior knot.
    ``t`` sorted, ``y`` of shape ``(n, d)``. No checks are performed."""
    left, right = t[1:-1] - t[:-2], t[2:] - t[1:-1]
    w = (right / (left + right))[:, None]  # the left neighbour's weight
    return y[1:-1] - (w * y[:-2] + (1.0 - w) * y[2:])


class _CubicLeaveOneOut:
    """The natural cubic interpolant's leave-one-out residuals at the interior knots of
    sorted ``t`` (at least 3), for any values. No checks are performed."""

    def __init__(self, t: np.ndarray):
        h = np.diff(t)
        diagonal, offdiagonal = (h[:-1] + h[1:]) / 3.0, h[1:-1] / 6.0
        m = diagonal.size
        z0 = _inverse_diagonal(diagonal, offdiagonal)  # Z = R^-1: Z[i, i]
        pivots, l = dpttrf(diagonal, offdiagonal)[:2] if m > 1 else (diagonal, np.zeros(0))  # R = L D L^T
        self.pivots, self.subdiagonal = pivots, l
        self.inverse_h = (1.0 / h)[:, None]
        z1 = -l * z0[1:]  # Z[i, i+1]
        z2 = l[:-1] * l[1:] * z0[2:]  # Z[i, i+2]
        # Row j of Q (interior knot j = 1..n-2) has q_a = 1/h_{j-1} at column j-2, q_b at
        # column j-1 and q_c = 1/h_j at column j (columns outside 0..m-1 do not exist).
        q_a, q_b, q_c = 1.0 / h[:-1], -1.0 / h[:-1] - 1.0 / h[1:], 1.0 / h[1:]
        cols = np.arange(m)  # column j-1 for interior knot j
        k = q_b**2 * z0
        left = cols >= 1  # column j-2 exists
        right = cols <= m - 2  # column j exists
        k[left] += q_a[left] ** 2 * z0[cols[left] - 1] + 2 * q_a[left] * q_b[left] * z1[cols[left] - 1]
        k[right] += q_c[right] ** 2 * z0[cols[right] + 1] + 2 * q_b[right] * q_c[right] * z1[cols[right]]
        both = left & right
        k[both] += 2 * q_a[both] * q_c[both] * z2[cols[both] - 1]
        self.inverse_k_diagonal = (1.0 / k)[:, None]
        self.q_b = q_b[:, None]

    def __call__(self, y: np.ndarray) -> np.ndarray:
        """``(K y)_j / K_jj`` at the interior knots, ``K y = Q R^-1 Q^T y``: a second divided
        difference, a tridiagonal solve and ``Q`` applied to the interior, in place where it can."""
        slopes = np.diff(y, axis=0)
        slopes *= self.inverse_h
        rhs = slopes[1:] - slopes[:-1]  # Q^T y
        if rhs.shape[0] == 1:
            g = rhs / self.pivots[0]
        else:
            g = dpttrs(self.pivots, self.subdiagonal, rhs)[0]  # R g = Q^T y
        q_g = self.q_b * g  # (Q g) at the interior knots: q_a g[c-1] + q_b g[c] + q_c g[c+1]
        inner = self.inverse_h[1:-1]
        q_g[1:] += inner * g[:-1]
        q_g[:-1] += inner * g[1:]
        q_g *= self.inverse_k_diagonal
        return q_g


def _inverse_diagonal(diagonal: np.ndarray, offdiagonal: np.ndarray) -> np.ndarray:
    """The diagonal of the inverse of a symmetric positive definite tridiagonal matrix, from
    its forward and backward ``LDL^T`` pivots (``1 / (d_fwd + d_bwd - diagonal)``)."""
    if diagonal.size == 1:
        return 1.0 / diagonal
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
_sketches: dict[int, csr_array] = {}


def _sketch(values: np.ndarray) -> np.ndarray:
    """``values @ S``: each of the ``d`` columns added, with a random sign, to one of
    :data:`SKETCH_COLUMNS` buckets (a CountSketch, ``E[S S^T] = I``), from a generator seeded
    by ``d``, so the same width always gets the same sketch. The leave-one-out residuals are
    linear in the values, so their inner products, and theta's ratio of them, are kept in
    expectation, at one pass over the results instead of a solve per column."""
    d = values.shape[1]
    sketch = _sketches.get(d)
    if sketch is None:
        rng = np.random.default_rng([d, 0x5EED])
        buckets = rng.integers(SKETCH_COLUMNS, size=d)
        signs = rng.choice([-1.0, 1.0], size=d)
        sketch = _sketches[d] = csr_array((signs, (np.arange(d), buckets)), shape=(d, SKETCH_COLUMNS))
    return np.asarray(values @ sketch)


def _theta(r_linear: np.ndarray, r_cubic: np.ndarray) -> float:
    """:func:`blend_weight` for residuals of moderate size (no overflow check)."""
    difference = np.subtract(r_linear, r_cubic, out=r_cubic)  # r_cubic is not needed after this
    denominator = float(np.vdot(difference, difference))
    if not denominator > 0.0:
        return 1.0
    return float(np.clip(np.vdot(r_linear, difference) / denominator, 0.0, 1.0))


class AdaptiveInterpolant:
    """``y -> (L(points) + theta (C(points) - L(points)), theta)`` for distinct ``knots`` in any
    order (module docstring; row i of ``y`` belongs to ``knots[i]``), applied to numpy arrays
    or torch tensors in their own type, dtype and device.

    Built once per set of knots (the decoder GCC caches per alive set): the linear map, the
    cubic map at the points clamped into the knots' range, and the leave-one-out pieces.
    ``theta`` is computed in float64 on the host; for torch tensors that require grad,
    autograd treats it as a constant (the gradient is the blend's map at that ``theta``). No
    checks are performed.
    """

    def __init__(self, knots: np.ndarray, points: np.ndarray):
        self.knots, self.points = knots, points
        order = np.argsort(knots, kind="stable")
        t = knots[order]
        self.sorted_knots = t
        self.order = None if np.array_equal(order, np.arange(t.size)) else order
        # columns in the knots' given order: linear[:, order[i]] is the sorted map's column i
        self.linear = linear_matrix(t, points)[:, np.argsort(order)]
        self.linear.data.flags.writeable = False
        # an explicit map or a banded solve, whichever is predicted cheaper (SplineDecoder)
        self.cubic = SplineDecoder(knots, 0.0, np.clip(points, t[0], t[-1]))
        self.cubic_loo = _CubicLeaveOneOut(t) if t.size >= 4 else None

    def weight(self, y) -> float:
        """``theta`` for results ``y`` (rows in the knots' order)."""
        if self.cubic_loo is None:  # through 2 or 3 knots, leaving one out leaves a line
            return 1.0
        values = _arraylib.to_float64(y)
        if values.shape[1] > SKETCH_COLUMNS:
            values = _sketch(values)
        if self.order is not None:
            values = values[self.order]
        scale = float(np.max(np.abs(values), initial=0.0))
        if not 1e-150 < scale < 1e150:  # theta is scale-free; 1e300 results overflow the solve
            if not 0.0 < scale < np.inf:
                return 1.0
            values = values / scale
        return _theta(linear_loo_residuals(self.sorted_knots, values), self.cubic_loo(values))

    def __call__(self, y):
        theta = self.weight(y)
        linear = _arraylib.apply_matrix(self.linear, y)
        if theta == 0.0:
            return linear, theta
        return linear + theta * (self.cubic(y) - linear), theta
