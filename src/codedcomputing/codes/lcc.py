"""Lagrange coded computing (LCC) over the reals, a baseline."""

from __future__ import annotations

import warnings

import numpy as np

from .. import _arraylib
from .._validation import check_count, check_flag
from ..errors import InsufficientResultsError
from .base import Code

__all__ = ["LCC", "lagrange_matrix"]


def lagrange_matrix(nodes: np.ndarray, points: np.ndarray) -> np.ndarray:
    """``(len(points), len(nodes))`` matrix of the polynomial interpolant through ``nodes``
    (barycentric form, scipy; its node ordering is seeded, so results are reproducible and
    numpy's global random state is left alone). No checks are performed."""
    if nodes.size == 1:
        return np.ones((points.size, 1))
    from scipy.interpolate import BarycentricInterpolator  # here: it takes ~0.2 s to load

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
    :class:`~codedcomputing.errors.InsufficientResultsError`, unless the code was built with
    ``best_effort=True``: then it returns the interpolant through the results that did arrive
    (LCC's breakdown, for plots), warns, and reports ``info["exact"]`` all False (all True at
    or above the threshold).

    Parameters
    ----------
    num_inputs, num_workers : int
        K >= 1 inputs, N >= the recovery threshold workers.
    degree : int, default 1
        The total degree of the polynomial ``f`` that decoding is exact for.
    best_effort : bool, default False
        Decode below the recovery threshold too (from one result on).
    points, alpha, beta, assignment
        As for :class:`~codedcomputing.GCC`.

    References
    ----------
    Q. Yu, S. Li, N. Raviv, S. M. M. Kalan, M. Soltanolkotabi, S. Avestimehr. Lagrange coded
    computing: optimal design for resiliency, security and privacy. AISTATS 2019.

    Examples
    --------
    >>> import numpy as np, codedcomputing as cc
    >>> code = cc.LCC(3, 8, degree=2)  # exact from any (3 - 1) * 2 + 1 = 5 results
    >>> X = np.arange(6.0).reshape(3, 2)
    >>> alive = [0, 2, 3, 6, 7]
    >>> bool(np.allclose(code.decode((code.encode(X) ** 2)[alive], alive), X**2))
    True
    """

    name = "lcc"
    description = "Lagrange coded computing: exact for polynomial f from (K-1)*degree+1 results"

    def __init__(
        self,
        num_inputs: int,
        num_workers: int,
        degree: int = 1,
        *,
        best_effort: bool = False,
        points: str = "chebyshev",
        alpha=None,
        beta=None,
        assignment: str = "natural",
    ):
        # The threshold first: it says more than the K <= N check of the base.
        num_inputs = check_count(num_inputs, "num_inputs", 1)
        num_workers = check_count(num_workers, "num_workers", self.min_workers)
        self.degree = check_count(degree, "degree", 1)
        self.best_effort = check_flag(best_effort, "best_effort")
        self.recovery_threshold = (num_inputs - 1) * self.degree + 1
        if self.recovery_threshold > num_workers:
            raise ValueError(
                f"num_workers = {num_workers} is below LCC's recovery threshold "
                f"(num_inputs - 1) * degree + 1 = {self.recovery_threshold}"
            )
        super().__init__(
            num_inputs, num_workers, points=points, alpha=alpha, beta=beta, assignment=assignment
        )
        self.assignment = assignment
        self.encoder_matrix = _arraylib.read_only(lagrange_matrix(self.alpha, self.beta))

    @property
    def min_results(self) -> int:
        """The recovery threshold; 1 with ``best_effort``."""
        return 1 if self.best_effort else self.recovery_threshold

    def _require(self, alive, needed):
        try:
            super()._require(alive, needed)
        except InsufficientResultsError as err:  # say what lets a decode through below it
            err.args = (
                f"{err.args[0]} (the recovery threshold: LCC(..., best_effort=True) decodes an "
                "inexact estimate from fewer)",
                *err.args[1:],
            )
            raise

    def complete(self, alive) -> bool:
        """True once ``alive`` reaches the recovery threshold: decoding is then exact."""
        return _arraylib.check_alive(alive, self.num_workers).size >= self.recovery_threshold

    def promised_case(self, rng):
        """A polynomial ``f`` of this code's degree, from a random set of threshold or more."""
        weights, shift = rng.normal(size=(3, 2)) / 2, rng.normal(size=(3, 2))
        X = rng.normal(size=(self.num_inputs, 3)) / 2
        size = rng.integers(self.recovery_threshold, self.num_workers + 1)
        alive = np.sort(rng.choice(self.num_workers, size, replace=False))
        return X, lambda x: (x @ weights) ** self.degree + x @ shift, alive

    def _encode(self, X):
        return _arraylib.apply_matrix(self.encoder_matrix, X)

    def _decode(self, Y, alive):
        exact = alive.size >= self.recovery_threshold
        if not exact:  # only with best_effort: min_results lets it through
            warnings.warn(
                f"LCC decoding from {alive.size} < recovery_threshold = {self.recovery_threshold} "
                "results: the estimate is not exact",
                RuntimeWarning,
                stacklevel=4,
            )
        nodes = self.beta[alive]
        if alive.size > self.recovery_threshold:
            matrix = least_squares_matrix(nodes, self.alpha, self.recovery_threshold - 1)
        else:
            matrix = lagrange_matrix(nodes, self.alpha)
        return _arraylib.apply_matrix(matrix, Y), {"exact": np.full(self.num_inputs, exact)}
