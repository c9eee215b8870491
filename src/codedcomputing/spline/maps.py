"""A spline fit as a linear map ``Y -> spline(knots, Y, lam)(points)``, built once and applied
to numpy arrays or torch tensors: what GCC's encoder and decoders are."""

from __future__ import annotations

import numpy as np
import scipy.sparse

from .. import _arraylib
from .reinsch import evaluation_matrix, smoothing_matrix

__all__ = ["DENSE_FRACTION", "SMALL_MAP", "TRUNCATION", "SmoothingMap"]

# Spline weights below TRUNCATION times their row's largest are dropped (a relative change of
# the same order: far below float32 resolution; see spline.smoothing_matrix). A map that
# keeps more than DENSE_FRACTION of its entries is stored dense.
TRUNCATION = 1e-14
DENSE_FRACTION = 0.25
SMALL_MAP = 4096  # maps with at most this many entries are built dense directly



class SmoothingMap:
    """``Y -> spline(knots, Y, lam)(points)`` applied to numpy arrays or torch tensors.

    The map is built once, in time linear in ``len(knots) + len(points)``: the weights decay
    exponentially away from each point, so it is sparse for many knots and dense for few.
    With many more points than knots (an encoder) it is applied in two stages, the knot
    values and second derivatives first (``2n`` rows), then the four-term evaluation at
    each point, which is cheaper than one map with a row of weights per point. It is applied
    in the caller's type, dtype and device. No checks are performed.
    """

    def __init__(self, knots: np.ndarray, lam: float, points: np.ndarray):
        self.knots, self.lam, self.points = knots, lam, points
        # Work on knots rescaled to [-1, 1] (lam scales by the cube of the factor, as the
        # penalty does), so that the map does not depend on the points' units.
        center, half_width = (knots.max() + knots.min()) / 2, (knots.max() - knots.min()) / 2
        knots, points = (knots - center) / half_width, (points - center) / half_width
        if lam > 0:
            with np.errstate(over="ignore", under="ignore"):
                lam = lam / half_width**3
        if not np.isfinite(lam * knots.size):
            raise ValueError("lambda is too large for points this close together")
        n = knots.size
        self.two_stage = points.size >= 2 * n and points.size * n > SMALL_MAP
        self.evaluation = None
        if self.two_stage:
            self.evaluation = evaluation_matrix(knots, points)
            values = smoothing_matrix(knots, lam, knots, tol=TRUNCATION)
            curvatures = smoothing_matrix(knots, lam, knots, tol=TRUNCATION, derivative=2)
            self.matrix = _compact(scipy.sparse.vstack([values, curvatures], format="csr"))
        elif points.size * n <= SMALL_MAP:
            self.matrix = smoothing_matrix(knots, lam, points)
            # Flush what truncation would drop: tiny weights become slow float32 subnormals.
            self.matrix[np.abs(self.matrix) < TRUNCATION * np.abs(self.matrix).max(axis=1, keepdims=True)] = 0
        else:
            self.matrix = _compact(smoothing_matrix(knots, lam, points, tol=TRUNCATION))

        _read_only(self.matrix)
        if self.evaluation is not None:
            _read_only(self.evaluation)

    @property
    def dense(self) -> bool:
        """Whether the map is applied as one dense matrix (small maps)."""
        return self.evaluation is None and isinstance(self.matrix, np.ndarray)

    @property
    def linear_map(self):
        """The whole map as one ``(len(points), len(knots))`` matrix (dense or sparse)."""
        return self.matrix if self.evaluation is None else self.evaluation @ self.matrix

    def __call__(self, y):
        if y.dtype.itemsize < 4:  # half precision: knot curvatures (~1/h^2) would overflow
            wide = self(y.float() if _arraylib.is_torch(y) else y.astype(np.float32))
            return wide.to(y.dtype) if _arraylib.is_torch(y) else wide.astype(y.dtype)
        coefficients = _arraylib.apply_matrix(self.matrix, y)
        if self.evaluation is None:
            return coefficients
        return _arraylib.apply_matrix(self.evaluation, coefficients)


def _compact(matrix):
    """Dense if it keeps more than DENSE_FRACTION of its entries, else sparse."""
    if matrix.nnz > DENSE_FRACTION * matrix.shape[0] * matrix.shape[1]:
        return matrix.toarray()
    return matrix


def _read_only(matrix) -> None:
    """Mark a map (dense or scipy.sparse) read-only, so a cached map cannot be edited."""
    (matrix.data if hasattr(matrix, "nnz") else matrix).flags.writeable = False
