"""General Coded Computing (GCC) with smoothing-spline encoder and decoder."""

from __future__ import annotations

from functools import lru_cache

import numpy as np

from .. import _arraylib
from ..points import make_points
from ..spline import LinearSmoother, smoothing_matrix
from .base import Code, check_count, check_lambda, check_points

__all__ = ["GCC", "SmoothingMap"]

# A linear map rows x cols is applied as a dense matmul when rows * cols is at most this
# multiple of rows + cols, else through the O(rows + cols) banded solve. The crossover was
# measured with benchmarks/bench_core.py (see the README's performance section).
DENSE_CROSSOVER = 48


class SmoothingMap:
    """``Y -> spline(knots, Y, lam)(points)`` applied to numpy arrays or torch tensors.

    Small maps are a cached dense matrix (a matmul in the caller's dtype and device); large
    ones use the O(n) banded solve in float64 on the host. No checks are performed.
    """

    def __init__(self, knots: np.ndarray, lam: float, points: np.ndarray):
        self.knots, self.lam, self.points = knots, lam, points
        rows, cols = points.size, knots.size
        self.dense = rows * cols <= DENSE_CROSSOVER * (rows + cols)
        self._matrix = smoothing_matrix(knots, lam, points) if self.dense else None
        self._smoother = None if self.dense else LinearSmoother(knots, lam, points)

    @property
    def matrix(self) -> np.ndarray:
        """The map as a dense ``(len(points), len(knots))`` matrix (built on demand)."""
        if self._matrix is None:
            self._matrix = smoothing_matrix(self.knots, self.lam, self.points)
        return self._matrix

    def __call__(self, y):
        if self.dense:
            return _arraylib.apply_matrix(self._matrix, y)
        out = self._smoother(_arraylib.to_float64(y))
        return _arraylib.from_float64(out, y, self.points.size)


class GCC(Code):
    r"""General Coded Computing with natural cubic smoothing splines.

    Encoder (inputs ``x_k`` at data points ``alpha_k``; worker n receives ``u_enc(beta_n)``)::

        u_enc = argmin_u (1/K) sum_k ||u(alpha_k) - x_k||^2 + lambda_enc * int ||u''||^2

    Decoder (results ``y_n`` of the returned workers ``F``; estimate ``f(x_k) ~ u_dec(alpha_k)``)::

        u_dec = argmin_u (1/|F|) sum_{n in F} ||u(beta_n) - y_n||^2 + lambda_dec * int ||u''||^2

    Both lambdas use this *mean* convention (scipy's ``make_smoothing_spline`` takes
    ``lam = n * lambda``); ``lambda_enc = lambda_dec = 0`` is the natural-spline
    (interpolating) variant. Outside the returned workers' range the decoder extrapolates
    linearly, as the minimiser does.

    Defaults: ``lambda_enc = lambda_dec = 0``. On deterministic functions (random MLPs on
    Gaussian inputs, random and contiguous stragglers) every positive lambda we measured on a
    grid scaled to the knot spacing raised the MSE (``benchmarks/bench_lambda.py``). Smoothing
    pays when results are noisy or adversarial: tune it for those cases.

    Promise (tested): inputs affine in ``alpha`` pushed through an affine ``f`` are recovered
    exactly, at any lambdas, from any two or more results.

    Parameters: ``num_inputs`` K >= 1, ``num_workers`` N >= 2, ``points`` ('chebyshev' puts
    ``alpha`` at Chebyshev points of the first kind and ``beta`` at those of the second kind;
    'equispaced'), or explicit ``alpha`` / ``beta`` arrays of distinct points.
    """

    name = "gcc"

    def __init__(
        self,
        num_inputs: int,
        num_workers: int,
        lambda_enc: float = 0.0,
        lambda_dec: float = 0.0,
        *,
        points: str = "chebyshev",
        alpha=None,
        beta=None,
    ):
        self.num_inputs = check_count(num_inputs, "num_inputs", 1)
        self.num_workers = check_count(num_workers, "num_workers", 2)
        self.lambda_enc = check_lambda(lambda_enc, "lambda_enc")
        self.lambda_dec = check_lambda(lambda_dec, "lambda_dec")
        self.points = points
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
        if self.num_inputs == 1:  # one point: the minimiser is the constant x_1
            self.encoder = None
        else:
            self.encoder = SmoothingMap(self.alpha, self.lambda_enc, self.beta)
        self._decoder_for = lru_cache(maxsize=256)(self._build_decoder)

    @property
    def min_results(self) -> int:
        return 2

    def __repr__(self) -> str:
        return (
            f"GCC(num_inputs={self.num_inputs}, num_workers={self.num_workers}, "
            f"lambda_enc={self.lambda_enc:g}, lambda_dec={self.lambda_dec:g})"
        )

    def decoder(self, alive) -> SmoothingMap:
        """The decoder's linear map for the (sorted or not) set of returned workers ``alive``."""
        alive = np.sort(_arraylib.check_alive(alive, self.num_workers))
        self._require(alive, self.min_results)
        return self._decoder_for(alive.tobytes())

    def _build_decoder(self, alive_bytes: bytes) -> SmoothingMap:
        alive = np.frombuffer(alive_bytes, dtype=np.int64)
        return SmoothingMap(self.beta[alive], self.lambda_dec, self.alpha)

    def _encode(self, X):
        if self.encoder is None:
            return _arraylib.apply_matrix(np.ones((self.num_workers, 1)), X)
        return self.encoder(X)

    def _decode(self, Y, alive):
        order = np.argsort(alive, kind="stable")
        if not np.all(order[:-1] < order[1:]):
            Y = _arraylib.take_rows(Y, order)
        return self._decoder_for(alive[order].tobytes())(Y)
