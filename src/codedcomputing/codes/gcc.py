"""General Coded Computing (GCC) with smoothing-spline encoder and decoder."""

from __future__ import annotations

import numpy as np

from .. import _arraylib
from ..spline import SmoothingMap, check_lambda, gcv_lambda
from .base import Code, check_count, resolve_points

__all__ = ["GCC"]

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

    ``lambda_dec="gcv"`` picks the decoder's lambda at every decode by generalised
    cross-validation on the returned results (:func:`codedcomputing.spline.gcv_lambda`; the
    choice is in ``last_lambda_dec``): for noisy results, at the cost of a few spline fits
    per decode.

    Promise (tested): inputs affine in ``alpha`` pushed through an affine ``f`` are recovered
    exactly, at any lambdas, from any two or more results.

    Parameters: ``num_inputs`` K >= 1, ``num_workers`` N >= 2, ``points`` ('chebyshev' puts
    ``alpha`` at Chebyshev points of the first kind and ``beta`` at those of the second kind;
    'equispaced'), or explicit ``alpha`` / ``beta`` arrays of distinct points.
    """

    name = "gcc"
    description = "General Coded Computing: smoothing-spline encoder and decoder (Moradi et al.)"

    def __init__(
        self,
        num_inputs: int,
        num_workers: int,
        lambda_enc: float = 0.0,
        lambda_dec: float | str = 0.0,
        *,
        points: str = "chebyshev",
        alpha=None,
        beta=None,
    ):
        self.num_inputs = check_count(num_inputs, "num_inputs", 1)
        self.num_workers = check_count(num_workers, "num_workers", 2)
        self._lambda_enc = check_lambda(lambda_enc, "lambda_enc")
        if isinstance(lambda_dec, str) and lambda_dec != "gcv":
            raise ValueError(f"lambda_dec must be a number >= 0 or 'gcv', got {lambda_dec!r}")
        self.gcv = lambda_dec == "gcv"
        self._lambda_dec = 0.0 if self.gcv else check_lambda(lambda_dec, "lambda_dec")
        self.last_lambda_dec = self._lambda_dec  # the lambda_dec of the latest decode
        for name, lam, n in (
            ("lambda_enc", self._lambda_enc, self.num_inputs),
            ("lambda_dec", self._lambda_dec, self.num_workers),
        ):
            if not np.isfinite(lam * n):
                raise ValueError(f"{name} = {lam:g} is too large (the spline weight n * {name} overflows)")
        self.points = points
        self._set_points(*resolve_points(points, alpha, beta, self.num_inputs, self.num_workers))
        if self.num_inputs == 1:  # one point: the minimiser is the constant x_1
            self.encoder = None
        else:
            self.encoder = SmoothingMap(self.alpha, self.lambda_enc, self.beta)

    @property
    def lambda_enc(self) -> float:
        return self._lambda_enc

    @property
    def lambda_dec(self) -> float | str:
        """The decoder's lambda, or ``"gcv"`` when each decode picks its own (then see
        ``last_lambda_dec``)."""
        return "gcv" if self.gcv else self._lambda_dec

    @property
    def min_results(self) -> int:
        return 2

    def __repr__(self) -> str:
        return (
            f"GCC(num_inputs={self.num_inputs}, num_workers={self.num_workers}, "
            f"lambda_enc={self.lambda_enc:g}, lambda_dec={self.lambda_dec!r})"
        )

    def decoder(self, alive) -> SmoothingMap:
        """The decoder's linear map for the (sorted or not) set of returned workers ``alive``.

        With ``lambda_dec="gcv"`` the map depends on the results, not only on ``alive``:
        there is none to return, and this raises ``ValueError``.
        """
        if self.gcv:
            raise ValueError(
                "lambda_dec='gcv' picks the decoder's lambda from the results at every decode, so "
                "decoder(alive) has no fixed map; build GCC with a number for lambda_dec"
            )
        alive = np.sort(_arraylib.check_alive(alive, self.num_workers))
        self._require(alive, self.min_results)
        return self._decoder(alive)

    def _build_decoder(self, alive_sorted: np.ndarray) -> SmoothingMap:
        # With GCV this serves only two results, where every lambda gives the same line.
        return SmoothingMap(self.beta[alive_sorted], self._lambda_dec, self.alpha)

    def _encode(self, X):
        if self.encoder is None:
            return _arraylib.apply_matrix(np.ones((self.num_workers, 1)), X)
        return self.encoder(X)

    def _decode(self, Y, alive):
        order = np.argsort(alive, kind="stable")
        if not np.all(order[:-1] < order[1:]):
            Y = _arraylib.take_rows(Y, order)
        if self.gcv and alive.size >= 3:
            knots = self.beta[alive[order]]
            self.last_lambda_dec = gcv_lambda(knots, _arraylib.to_float64(Y))
            return SmoothingMap(knots, self.last_lambda_dec, self.alpha)(Y)
        return self._decoder(alive[order])(Y)
