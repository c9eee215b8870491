"""Natural cubic smoothing splines in linear time (the Reinsch algorithm).

For knots ``t_1 < ... < t_n`` and values ``y_i`` (any trailing shape), the spline

    u = argmin_u  (1/n) sum_i ||u(t_i) - y_i||^2  +  lam * int ||u''(t)||^2 dt

is the natural cubic spline whose knot values ``g`` and knot second derivatives
``gamma`` solve (Reinsch 1967, with ``l = n * lam``)

    (R + l Q^T Q) gamma_inner = Q^T y,      g = y - l Q gamma_inner,

where ``h_i = t_{i+1} - t_i``, ``Q`` is the ``n x (n-2)`` second-difference matrix with
columns ``(1/h_{j-1}, -1/h_{j-1} - 1/h_j, 1/h_j)`` and ``R`` the ``(n-2) x (n-2)``
tridiagonal matrix with ``(h_{j-1} + h_j)/3`` on the diagonal and ``h_j/6`` beside it.
``R + l Q^T Q`` is symmetric positive definite and five-banded, so one banded Cholesky
factorisation (``O(n)``) serves every column of ``y``. ``lam`` follows the *mean*
convention; scipy's :func:`scipy.interpolate.make_smoothing_spline` uses the sum, so
``lam_scipy = n * lam``. ``lam = 0`` interpolates. Outside ``[t_1, t_n]`` the minimiser
is linear (natural boundary), and so is our extrapolation.

Every map here is linear in ``y``: :func:`smoothing_matrix` returns it as a dense
matrix for small problems, :func:`fit` applies it in ``O(n d)`` for large ones.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from scipy.linalg import cho_solve_banded, cholesky_banded

__all__ = ["NaturalSpline", "fit", "smoothing_matrix", "check_knots"]


def check_knots(knots, name: str = "knots") -> np.ndarray:
    """Return ``knots`` as a 1-D float64 array; raise ``ValueError`` naming ``name``
    if it has fewer than two entries, non-finite entries or duplicates."""
    t = np.asarray(knots, dtype=np.float64)
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
    """The factorised Reinsch system for sorted, distinct knots. No checks are performed."""

    def __init__(self, t: np.ndarray, lam: float):
        n = t.size
        self.t = t
        self.h = np.diff(t)
        self.l = n * lam  # sum-convention smoothing weight
        self.cho = None
        if n > 2:
            h = self.h
            inv = 1.0 / h
            # Column j of Q (interior knot j+1) has entries q0, q1, q2 at rows j, j+1, j+2.
            q0, q2 = inv[:-1], inv[1:]
            q1 = -q0 - q2
            ab = np.zeros((3, n - 2))  # upper banded storage for cholesky_banded
            ab[2] = (h[:-1] + h[1:]) / 3.0 + self.l * (q0 * q0 + q1 * q1 + q2 * q2)
            ab[1, 1:] = h[1:-1] / 6.0 + self.l * (q1[:-1] * q0[1:] + q2[:-1] * q1[1:])
            ab[0, 2:] = self.l * (q2[:-2] * q0[2:])
            self.cho = cholesky_banded(ab, lower=False)

    def solve(self, y: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Knot values ``g`` and second derivatives ``gamma`` (both ``(n, d)``) for ``y (n, d)``."""
        n = self.t.size
        gamma = np.zeros_like(y)
        if n == 2:
            return y, gamma
        slopes = np.diff(y, axis=0) / self.h[:, None]
        gamma[1:-1] = cho_solve_banded((self.cho, False), np.diff(slopes, axis=0), check_finite=False)
        if self.l == 0.0:
            return y, gamma
        jumps = np.diff(gamma, axis=0) / self.h[:, None]
        q_gamma = np.empty_like(y)  # Q gamma = diff of the slope jumps, padded with zeros
        q_gamma[0] = jumps[0]
        q_gamma[1:-1] = np.diff(jumps, axis=0)
        q_gamma[-1] = -jumps[-1]
        return y - self.l * q_gamma, gamma


@dataclass(frozen=True)
class _Stencil:
    """Evaluation of a spline at points ``z`` as four weights on ``g[i], g[i+1],
    gamma[i], gamma[i+1]``; linear beyond the end knots."""

    index: np.ndarray
    weights: np.ndarray  # (len(z), 4)

    @classmethod
    def build(cls, t: np.ndarray, z: np.ndarray) -> "_Stencil":
        n = t.size
        i = np.clip(np.searchsorted(t, z, side="right") - 1, 0, n - 2)
        h = t[i + 1] - t[i]
        a = (t[i + 1] - z) / h
        b = (z - t[i]) / h
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
        return (
            w[:, 0:1] * g[i] + w[:, 1:2] * g[i + 1] + w[:, 2:3] * gamma[i] + w[:, 3:4] * gamma[i + 1]
        )



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


def _sorted_problem(knots, lam: float):
    t = check_knots(knots)
    if not np.isfinite(lam) or lam < 0:
        raise ValueError(f"lam must be a finite number >= 0, got {lam}")
    order = np.argsort(t, kind="stable")
    return t[order], order


def fit(knots, values, lam: float = 0.0) -> NaturalSpline:
    """Fit the natural cubic smoothing spline (module docstring) to ``values`` at ``knots``.

    ``knots`` has ``n >= 2`` distinct entries in any order; ``values`` has shape
    ``(n, ...)``. ``lam >= 0`` uses the mean convention. Cost ``O(n d)``, one
    factorisation for all ``d`` columns; computed in float64.
    """
    t, order = _sorted_problem(knots, lam)
    y = np.asarray(values, dtype=np.float64)
    if y.ndim == 0 or y.shape[0] != t.size:
        raise ValueError(f"values must have leading dimension {t.size} (one row per knot), got shape {y.shape}")
    if not np.all(np.isfinite(y)):
        raise ValueError("values contains NaN or inf")
    flat = y[order].reshape(t.size, -1)
    g, gamma = _Smoother(t, float(lam)).solve(flat)
    shape = (t.size,) + y.shape[1:]
    return NaturalSpline(t, g.reshape(shape), gamma.reshape(shape))


def smoothing_matrix(knots, lam: float, points) -> np.ndarray:
    """The matrix ``S`` (``len(points) x n``) with ``S @ y = fit(knots, y, lam)(points)``.

    Rows follow ``points``, columns follow ``knots`` in the order given. Built in
    ``O(n (n + len(points)))`` from the banded solve applied to the identity.
    """
    t, order = _sorted_problem(knots, lam)
    z = np.asarray(points, dtype=np.float64).ravel()
    if not np.all(np.isfinite(z)):
        raise ValueError("points contains NaN or inf")
    g, gamma = _Smoother(t, float(lam)).solve(np.eye(t.size))
    s_sorted = _Stencil.build(t, z).apply(g, gamma)
    s = np.empty_like(s_sorted)
    s[:, order] = s_sorted
    return s


class LinearSmoother:
    """``y -> fit(knots, y, lam)(points)`` for fixed knots and points, prepared once.

    Applies in ``O((n + len(points)) d)`` through the cached banded factorisation.
    No checks are performed: ``knots`` must be valid (:func:`check_knots`) and ``y`` a
    finite ``(n, d)`` array with rows in the order of ``knots``.
    """

    def __init__(self, knots: np.ndarray, lam: float, points: np.ndarray):
        self.order = np.argsort(knots, kind="stable")
        t = knots[self.order]
        self._sorted_identity = bool(np.all(self.order == np.arange(t.size)))
        self._smoother = _Smoother(t, float(lam))
        self._stencil = _Stencil.build(t, np.asarray(points, dtype=np.float64))

    def __call__(self, y: np.ndarray) -> np.ndarray:
        if not self._sorted_identity:
            y = y[self.order]
        g, gamma = self._smoother.solve(y)
        return self._stencil.apply(g, gamma)
