"""Lagrange coded computing (LCC) over the reals, a baseline."""

from __future__ import annotations

import warnings

import numpy as np
from scipy.interpolate import BarycentricInterpolator

from .. import _arraylib
from .._validation import check_flag
from .base import Code, check_count, read_only, resolve_points

__all__ = ["LCC", "lagrange_matrix"]


def lagrange_matrix(nodes: np.ndarray, points: np.ndarray) -> np.ndarray:
    """``(len(points), len(nodes))`` matrix of the polynomial interpolant through ``nodes``
    (barycentric form, scipy; its node ordering is seeded, so results are reproducible and
    numpy's global random state is left alone). No checks are performed."""
    if nodes.size == 1:
        return np.ones((points.size, 1))
    interpolant = BarycentricInterpolator(nodes, np.eye(nodes.size), rng=np.random.default_rng(0))
    return np.asarray(interpolant(points)).reshape(points.size, nodes.size)


def least_squares_matrix(nodes: np.ndarray, points: np.ndarray, degree: int) -> np.ndarray:
    """``(len(points), len(nodes))`` matrix of the least-squares polynomial of ``degree``
    through ``nodes`` (Chebyshev basis, numpy), evaluated at ``points``: exact for data from
    a polynomial of that degree, and stabler than interpolating with all the nodes. No checks
    are performed."""
    basis = np.polynomial.chebyshev.chebvander(nodes, degree)
    coefficients = np.linalg.lstsq(basis, np.eye(nodes.size), rcond=None)[0]
    return np.polynomial.chebyshev.chebvander(points, degree) @ coefficients


class LCC(Code):
    r"""Lagrange coded computing with barycentric interpolation on Chebyshev points.

    Encoder: ``u(z) = sum_k x_k l_k(z)`` (Lagrange basis on ``alpha``); worker n computes
    ``f(u(beta_n))``. For ``f`` a polynomial of total degree ``degree``, ``f(u(z))`` is a
    polynomial of degree ``(K - 1) * degree``, so any ``recovery_threshold = (K - 1) * degree
    + 1`` results determine it. Decoder: the polynomial of degree ``recovery_threshold - 1``
    through the returned ``(beta_j, y_j)`` (interpolating at the threshold, least squares in a
    Chebyshev basis above it), evaluated at ``alpha_k``.

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
        self._set_points(*resolve_points(points, alpha, beta, self.num_inputs, self.num_workers))
        self.encoder_matrix = read_only(lagrange_matrix(self.alpha, self.beta))

    @property
    def min_results(self) -> int:
        return self.recovery_threshold

    def __repr__(self) -> str:
        return f"LCC(num_inputs={self.num_inputs}, num_workers={self.num_workers}, degree={self.degree})"

    def complete(self, alive) -> bool:
        """True once ``alive`` reaches the recovery threshold: decoding is then exact."""
        return _arraylib.check_alive(alive, self.num_workers).size >= self.min_results

    def decode(self, Y, alive, *, best_effort: bool = False):
        """Decode; below ``recovery_threshold`` results raise unless ``best_effort``."""
        best_effort = check_flag(best_effort, "best_effort")
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
        nodes = self.beta[alive]
        if alive.size > self.recovery_threshold:
            matrix = least_squares_matrix(nodes, self.alpha, self.recovery_threshold - 1)
        else:
            matrix = lagrange_matrix(nodes, self.alpha)
        return _arraylib.apply_matrix(matrix, Y)
