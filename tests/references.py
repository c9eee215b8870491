"""Independent references for the tests: high-precision solves that share no code with the package."""

from __future__ import annotations

import mpmath
import numpy as np


def mp_reinsch_values(t: np.ndarray, y: np.ndarray, lam: float, dps: int = 50) -> np.ndarray:
    """Knot values g of the smoothing spline, from the docstring's Reinsch system solved in mpmath."""
    with mpmath.workdps(dps):
        n = t.size
        tm = [mpmath.mpf(float(v)) for v in t]
        h = [tm[i + 1] - tm[i] for i in range(n - 1)]
        Q = mpmath.zeros(n, n - 2)
        R = mpmath.zeros(n - 2, n - 2)
        for j in range(n - 2):  # column j <-> interior knot j+1
            Q[j, j] = 1 / h[j]
            Q[j + 1, j] = -1 / h[j] - 1 / h[j + 1]
            Q[j + 2, j] = 1 / h[j + 1]
            R[j, j] = (h[j] + h[j + 1]) / 3
            if j + 1 < n - 2:
                R[j, j + 1] = R[j + 1, j] = h[j + 1] / 6
        l = n * mpmath.mpf(lam)
        Y = mpmath.matrix([[mpmath.mpf(float(v)) for v in row] for row in y.reshape(n, -1)])
        M, rhs = R + l * Q.T * Q, Q.T * Y
        gamma = mpmath.zeros(n - 2, Y.cols)
        for k in range(Y.cols):  # mpmath solves one right-hand side at a time (M's LU is cached)
            gamma[:, k] = mpmath.lu_solve(M, rhs[:, k])
        g = Y - l * Q * gamma
        return np.array(g.tolist(), dtype=np.float64).reshape(y.shape)
