"""Lagrange coded computing (LCC) over the reals, a baseline."""

from __future__ import annotations

import warnings

import numpy as np
from scipy.interpolate import BarycentricInterpolator

from .. import _arraylib
from ..points import make_points
from .base import Code, check_count, check_points

__all__ = ["LCC", "lagrange_matrix"]


def lagrange_matrix(nodes: np.ndarray, points: np.ndarray) -> np.ndarray:
    """``(len(points), len(nodes))`` matrix of the polynomial interpolant through ``nodes``
    (barycentric form, scipy). No checks are performed."""
    if nodes.size == 1:
        return np.ones((points.size, 1))
    return np.asarray(BarycentricInterpolator(nodes, np.eye(nodes.size))(points)).reshape(
        points.size, nodes.size
    )


class LCC(Code):
    r"""Lagrange coded computing with barycentric interpolation on Chebyshev points.

    Encoder: ``u(z) = sum_k x_k l_k(z)`` (Lagrange basis on ``alpha``); worker n computes
    ``f(u(beta_n))``. For ``f`` a polynomial of total degree ``degree``, ``f(u(z))`` is a
    polynomial of degree ``(K - 1) * degree``, so any ``recovery_threshold = (K - 1) * degree
    + 1`` results determine it. Decoder: the interpolating polynomial through all returned
    ``(beta_j, y_j)``, evaluated at ``alpha_k``.

    Promise (tested): exact (to rounding) for such ``f`` from any ``recovery_threshold`` or
    more results. Below the threshold ``decode`` raises
    :class:`~codedcomputing.errors.InsufficientResultsError`
    unless called with ``best_effort=True``, which returns the interpolant through the
    results that did arrive (LCC's breakdown, for plots).
    """

    name = "lcc"
    description = "Lagrange coded computing: exact for polynomial f from (K-1)*degree+1 results"

    def __init__(
        self,
        num_inputs: int,
        num_workers: int,
        degree: int = 1,
        *,
        points: str = "chebyshev",
        alpha=None,
        beta=None,
    ):
        self.num_inputs = check_count(num_inputs, "num_inputs", 1)
        self.num_workers = check_count(num_workers, "num_workers", 2)
        self.degree = check_count(degree, "degree", 1)
        self.recovery_threshold = (self.num_inputs - 1) * self.degree + 1
        if self.recovery_threshold > self.num_workers:
            raise ValueError(
                f"num_workers = {self.num_workers} is below LCC's recovery threshold "
                f"(num_inputs - 1) * degree + 1 = {self.recovery_threshold}"
            )
        self.alpha = (
            make_points(points, self.num_inputs, kind="data")
            if alpha is None
            else check_points(alpha, self.num_inputs, "alpha")
        )
        self.beta = (
            make_points(points, self.num_workers, kind="workers")
            if beta is None
            else check_points(beta, self.num_workers, "beta")
        )
        self.encoder_matrix = lagrange_matrix(self.alpha, self.beta)

    @property
    def min_results(self) -> int:
        return self.recovery_threshold

    def __repr__(self) -> str:
        return f"LCC(num_inputs={self.num_inputs}, num_workers={self.num_workers}, degree={self.degree})"

    def decode(self, Y, alive, *, best_effort: bool = False):
        """Decode; below ``recovery_threshold`` results raise unless ``best_effort``."""
        Y, alive = self._usable_results(Y, alive)
        if alive.size < self.recovery_threshold:
            if not best_effort or alive.size == 0:
                self._require(alive, self.recovery_threshold)
            warnings.warn(
                f"LCC decoding from {alive.size} < recovery_threshold = {self.recovery_threshold} "
                "results: the estimate is not exact",
                RuntimeWarning,
                stacklevel=2,
            )
        return self._decode(Y, alive)

    def _encode(self, X):
        return _arraylib.apply_matrix(self.encoder_matrix, X)

    def _decode(self, Y, alive):
        return _arraylib.apply_matrix(lagrange_matrix(self.beta[alive], self.alpha), Y)
