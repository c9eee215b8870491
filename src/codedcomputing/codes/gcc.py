"""General Coded Computing (GCC) with smoothing-spline encoder and decoder."""

from __future__ import annotations

import numpy as np

from .. import _arraylib
from .._validation import check_choice
from ..spline.adaptive import AdaptiveInterpolant
from ..spline.gaps import GapAwareInterpolant
from ..spline.gcv import gcv_lambda
from ..spline.lambdas import check_lambda
from ..spline.maps import Decoder, SmoothingMap, SplineDecoder
from .base import Code

__all__ = ["DECODINGS", "GCC"]

DECODINGS = ("auto", "gap-aware", "adaptive", "spline")


class GCC(Code):
    r"""General Coded Computing: a smoothing-spline encoder, and a decoder that adapts to the
    returned results.

    Encoder (inputs ``x_k`` at data points ``alpha_k``; worker n receives ``u_enc(beta_n)``)::

        u_enc = argmin_u (1/K) sum_k ||u(alpha_k) - x_k||^2 + lambda_enc * int ||u''||^2

    Decoders (results ``y_n`` of the returned workers ``F``; estimate ``f(x_k) ~ u_dec(alpha_k)``):

    - the smoothing spline (``decoding="spline"``, and whenever ``lambda_dec > 0``)::

          u_dec = argmin_u (1/|F|) sum_{n in F} ||u(beta_n) - y_n||^2 + lambda_dec * int ||u''||^2

      extrapolated linearly outside the returned workers' range, as the minimiser is;
      ``lambda_dec = 0`` is the natural-spline (interpolating) decoder of the GCC paper;
    - the adaptive blend (``decoding="adaptive"``):
      ``u_dec = L + theta (C - L)``, with ``L`` the piecewise-linear and ``C`` the natural
      cubic interpolant through the returned results, both held constant beyond the returned
      workers' range, and one ``theta`` in [0, 1] per call minimising the blend's
      leave-one-out error on those results
      (:class:`~codedcomputing.spline.adaptive.AdaptiveInterpolant`; each call's ``theta`` is
      in ``decode_details(Y, alive).info["theta"]``). Measured (``benchmarks/studies/bench_decoders.py``,
      K = 10, N = 50, random stragglers, 200 paired trials): it beats BACC at every S from 0
      to 35 on LeNet-5, the ViT and random tanh MLPs, where the natural spline falls behind
      BACC from S = 25-35;
    - the gap-aware blend (``decoding="gap-aware"``, the default at ``lambda_dec = 0``): the
      adaptive blend, with the ``alpha_k`` that fall where a run of neighbouring workers'
      points is missing (a *gap*), or beyond an end with points missing, re-estimated by a
      blend of the linear and cubic interpolants and the results' mean (beyond an end: of
      four extrapolants) fitted by leaving out blocks of returned results as wide as the gap
      (:class:`~codedcomputing.spline.gaps.GapAwareInterpolant`; the weights are in
      ``info["gaps"]``). Where no gap is found it is the adaptive blend. Measured
      (``benchmarks/studies/bench_contiguous.py``, 200 paired trials): with a block of neighbouring
      points missing, the adaptive blend loses to BACC from 15 of 50 on; this one holds
      above BACC up to 40% of N on LeNet-5, the ViT and random MLPs, at N = 50 and 100.

    Both lambdas use the *mean* convention (scipy's ``make_smoothing_spline`` takes ``lam = n *
    lambda``). Defaults: ``lambda_enc = lambda_dec = 0``. On deterministic functions every
    positive lambda we measured on a grid scaled to the knot spacing raised the MSE
    (``benchmarks/studies/bench_lambda.py``); smoothing pays when results are noisy or adversarial.
    ``lambda_dec="gcv"`` picks the smoothing spline's lambda at every decode by generalised
    cross-validation on the returned results (:func:`codedcomputing.spline.gcv_lambda`; each
    call's choice is in ``decode_details(Y, alive).info["lambda_dec"]``).

    Promise (tested): inputs affine in ``alpha`` pushed through an affine ``f`` are recovered
    exactly from any two or more results: by the smoothing spline at any lambdas, and by the
    adaptive and gap-aware decoders wherever the ``alpha_k`` lie within the returned workers'
    range (beyond it, the adaptive one holds the end values).

    Parameters
    ----------
    num_inputs, num_workers : int
        K >= 1 inputs, N >= 2 workers (``K > N`` warns).
    lambda_enc : float, default 0
        The encoder's smoothing parameter (mean convention), >= 0.
    lambda_dec : float or "gcv", default 0
        The decoder's, or ``"gcv"`` to pick it per decode. Only the smoothing spline smooths:
        a positive value or "gcv" needs ``decoding`` "auto" or "spline".
    decoding : {"auto", "gap-aware", "adaptive", "spline"}, default "auto"
        The gap-aware or the adaptive blend of two interpolants, or the smoothing spline
        above. "auto" is resolved once, when the code is built: the gap-aware blend when
        ``lambda_dec = 0``, the smoothing spline when it is positive or "gcv". The attribute
        ``decoding`` (and :meth:`get_params`, and the repr) holds the resolved name, never
        "auto". ``decoding="spline"`` with ``lambda_dec = 0`` is the natural-spline
        (interpolating) decoder of the GCC paper.
    points : {"chebyshev", "equispaced"}, default "chebyshev"
        "chebyshev" puts ``alpha`` at Chebyshev points of the first kind and ``beta`` at those
        of the second kind (which include the ends +-1).
    alpha, beta : array_like, optional
        Explicit distinct points instead (``beta`` in worker order, used as given).
    assignment : {"natural", "golden"}, default "natural"
        Which of the family's points each worker sits at (:func:`codedcomputing.points.assignment`):
        worker n at the n-th sorted point, or at every golden-stride-th one, so that a
        block of neighbouring workers (a rack) straggling together leaves spread-out holes
        rather than one wide gap. Measured with GCC's default (gap-aware) decoder on
        LeNet-5 (``benchmarks/studies/bench_contiguous.py``, K = 10, N = 50, a block of 10
        neighbouring workers, 200 paired trials): the mean MSE of BACC with the natural
        assignment over GCC's, 1.27 [1.19, 1.35] natural (part B), 143 golden (part A).
        With ``systematic=True`` it orders the parity workers only.
    systematic : bool, default False
        Put K of the N workers at the inputs' points: worker k (k < K) is sent ``x_k``
        itself, bit for bit, and computes ``f(x_k)``; a decode returns that result as input
        k's estimate, bit for bit, whenever worker k is in ``alive`` (``info["exact"]``),
        and decodes only the others (from every result, the systematic ones included; the
        decoder is built at the missing inputs' points alone, so its cost follows their number).
        ``systematic_workers`` is then ``0..K-1``; with explicit ``beta``, the workers whose
        point is an ``alpha_k`` (every ``alpha_k`` must be one; without ``alpha``, the inputs
        go to the ``beta`` points nearest the family's data points). Needs ``K <= N``.
        With ``lambda_enc > 0`` the systematic workers still get the raw inputs, not the
        smoothed curve.
    parity : {"between", "ends", "nearest"}, default "between"
        Where the ``N - K`` parity workers ``K..N-1`` sit when ``systematic``: in the gaps
        between neighbouring inputs, evenly; two at the ends +-1 and the rest between; or at
        the family's worker points that the inputs did not take
        (:func:`~codedcomputing.codes.base.systematic_points`). Measured: ``docs/codes.rst``.

    References
    ----------
    P. Moradi, B. Tahmasebi, M. A. Maddah-Ali. Coded computing for resilient distributed
    computing: a learning-theoretic framework (General Coded Computing). NeurIPS 2024.

    C. H. Reinsch. Smoothing by spline functions.
    Numerische Mathematik 10, 1967.

    Examples
    --------
    >>> import numpy as np, codedcomputing as cc
    >>> code = cc.GCC(num_inputs=4, num_workers=12)
    >>> X = np.random.default_rng(0).normal(size=(4, 3))
    >>> alive = cc.stragglers.random(12, 3, rng=0)
    >>> est = code.decode(np.tanh(code.encode(X))[alive], alive)
    >>> est.shape
    (4, 3)
    >>> code
    GCC(num_inputs=4, num_workers=12, decoding='gap-aware')
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
        decoding: str = "auto",
        points: str = "chebyshev",
        alpha=None,
        beta=None,
        assignment: str = "natural",
        systematic: bool = False,
        parity: str = "between",
    ):
        super().__init__(
            num_inputs,
            num_workers,
            points=points,
            alpha=alpha,
            beta=beta,
            assignment=assignment,
            systematic=systematic,
            parity=parity,
        )
        self.assignment = assignment
        self.systematic, self.parity = bool(systematic), parity
        self._lambda_enc = check_lambda(lambda_enc, "lambda_enc")
        self._gcv = isinstance(lambda_dec, str)
        if self._gcv and lambda_dec != "gcv":
            raise ValueError(f"lambda_dec must be a number >= 0 or 'gcv', got {lambda_dec!r}")
        self._lambda_dec = 0.0 if self._gcv else check_lambda(lambda_dec, "lambda_dec")
        self.decoding = resolve_decoding(decoding, lambda_dec)
        self._ranks = np.argsort(np.argsort(self.beta, kind="stable"), kind="stable")
        for name, lam, n in (
            ("lambda_enc", self._lambda_enc, self.num_inputs),
            ("lambda_dec", self._lambda_dec, self.num_workers),
        ):
            if not np.isfinite(lam * n):
                raise ValueError(f"{name} = {lam:g} is too large (the spline weight n * {name} overflows)")
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
        :meth:`decode_details`)."""
        return "gcv" if self._gcv else self._lambda_dec

    @property
    def min_results(self) -> int:
        return 2

    @property
    def linear(self) -> bool:
        """True only for the smoothing spline at a fixed ``lambda_dec``: the blends' weights and
        GCV's lambda are fitted to the results."""
        return self.decoding == "spline" and not self._gcv

    def promised_case(self, rng):
        """Inputs affine in ``alpha`` through an affine ``f``, from a random alive set (for the
        adaptive decoders, one holding the outermost workers: beyond them they hold their
        ends; so they promise nothing when some ``alpha_k`` lies outside every worker's
        point, as explicit points may place it: then None). For a systematic code, half the
        cases are its systematic promise instead: any inputs through any ``f``, from every
        systematic worker and random others."""
        if self.systematic and rng.integers(2):  # half the cases: the systematic promise
            return self._systematic_case(rng)
        blends = self.decoding != "spline"
        if blends and (self.alpha.min() < self.beta.min() or self.alpha.max() > self.beta.max()):
            return None
        a, b = rng.normal(size=(2, 3))
        weights, shift = rng.normal(size=(3, 2)), rng.normal(size=2)
        X = a + b * self.alpha[:, None]
        alive = rng.choice(self.num_workers, rng.integers(2, self.num_workers + 1), replace=False)
        if blends:
            alive = np.union1d(alive, [np.argmin(self.beta), np.argmax(self.beta)])
        return X, lambda x: x @ weights + shift, np.sort(alive)

    def decoder(self, alive) -> Decoder:
        """The decoder :attr:`decoding` names for the set of returned workers ``alive`` (in
        any order): the gap-aware or the adaptive interpolant, or the smoothing spline's
        (:class:`~codedcomputing.spline.SplineDecoder`, an explicit map or a banded solve,
        whichever is predicted cheaper). Each has ``decode(Y) -> (estimates, info)``
        (:class:`~codedcomputing.spline.Decoder`), ``Y``'s rows the results of ``alive``
        sorted; for a systematic code it estimates every input from them.

        With ``lambda_dec="gcv"`` the map depends on the results, not only on ``alive``:
        there is none to return, and this raises ``ValueError``.
        """
        if self._gcv:
            raise ValueError(
                "lambda_dec='gcv' picks the decoder's lambda from the results at every decode, so "
                "decoder(alive) has no fixed map; build GCC with a number for lambda_dec"
            )
        alive = np.sort(_arraylib.check_alive(alive, self.num_workers))
        self._require(alive, self.min_results)
        if self.systematic:  # the cached ones estimate only the inputs whose workers did not return
            return self._make_decoder(alive, self.alpha)
        return self._decoder(alive)

    def _missing_inputs(self, alive_sorted: np.ndarray) -> np.ndarray | None:
        """The inputs a decode estimates (sorted): for a systematic code those whose systematic
        worker is not in ``alive``, the others' results being their estimates bit for bit;
        None (all of them) for a non-systematic one."""
        if not self.systematic:
            return None
        missing = np.ones(self.num_inputs, dtype=bool)
        returned = self._systematic_inputs[alive_sorted]
        missing[returned[returned >= 0]] = False
        return np.flatnonzero(missing)

    def _build_decoder(self, alive_sorted: np.ndarray):
        missing = self._missing_inputs(alive_sorted)
        return self._make_decoder(alive_sorted, self.alpha if missing is None else self.alpha[missing])

    def _make_decoder(self, alive_sorted: np.ndarray, points: np.ndarray) -> Decoder:
        """The decoder at ``points`` (some of the ``alpha``: it gives there what the decoder at
        all of them gives)."""
        knots = self.beta[alive_sorted]
        if self.decoding == "gap-aware":
            return GapAwareInterpolant(
                knots, self._ranks[alive_sorted], points, self.num_workers, all_points=self.alpha
            )
        if self.decoding == "adaptive":
            return AdaptiveInterpolant(knots, points, num_points=self.num_inputs)
        # With GCV this serves only two results, where every lambda gives the same line.
        return SplineDecoder(knots, self._lambda_dec, points)

    def _encode(self, X):
        if self.encoder is None:
            encoded = _arraylib.apply_matrix(np.ones((self.num_workers, 1)), X)
        else:
            encoded = self.encoder(X)
        return self._copy_systematic(encoded, X)

    def _decode(self, Y, alive):
        missing = self._missing_inputs(alive)
        # GCV's info names the lambda it picks: with nothing missing it still picks one (from
        # three results on; below, the lambda is the cached decoder's, which holds no input here)
        gcv_picks = self._gcv and missing is not None and missing.size == 0 and alive.size >= 3
        if missing is None or missing.size == self.num_inputs or gcv_picks:
            return self._decode_at(Y, alive, self.alpha)
        # a systematic code: the returned inputs' rows are their results (Code.decode_details)
        estimates = _arraylib.empty_like_rows(Y, self.num_inputs, 0.0)
        if missing.size == 0:
            return estimates, {"lambda_dec": self._lambda_dec}
        decoded, info = self._decode_at(Y, alive, self.alpha[missing])
        return _arraylib.set_rows(estimates, missing, decoded), info

    def _decode_at(self, Y, alive, points):
        """``(estimates at points, info)``: ``points`` are ``alpha``, or the missing inputs' for
        a systematic code, whose cached decoder holds just those."""
        if self._gcv and alive.size >= 3:
            knots = self.beta[alive]
            lam = gcv_lambda(knots, _arraylib.to_float64(Y))
            return SplineDecoder(knots, lam, points).decode(Y)
        # (with GCV and two results the cached decoder's lambda, 0: every lambda gives that line)
        return self._decoder(alive).decode(Y)


def resolve_decoding(decoding, lambda_dec) -> str:
    """The decoder GCC's ``decoding`` names, given its ``lambda_dec`` (a number >= 0 or
    "gcv", checked): "auto" is "gap-aware" at ``lambda_dec = 0`` and "spline" otherwise; the
    blends ("gap-aware", "adaptive") interpolate, so a positive ``lambda_dec`` or "gcv" with
    either is a ``ValueError`` naming both parameters."""
    decoding = check_choice(decoding, "decoding", DECODINGS)
    smoothing = isinstance(lambda_dec, str) or lambda_dec > 0
    if decoding == "auto":
        return "spline" if smoothing else "gap-aware"
    if decoding != "spline" and smoothing:
        raise ValueError(
            f"decoding={decoding!r} blends interpolants and takes lambda_dec = 0, got "
            f"lambda_dec={lambda_dec!r}: use decoding='spline' (or 'auto') to smooth"
        )
    return decoding
