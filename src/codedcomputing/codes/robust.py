"""Adversarially robust GCC: a smoothing decoder that limits lying workers' influence
without locating them."""

from __future__ import annotations

import math
import warnings

import numpy as np

from .. import _arraylib
from .._validation import check_adversaries, check_choice, check_count, check_number, check_real_array
from ..spline.gaps import GapAwareInterpolant
from ..spline.gcv import gcv_lambda
from ..spline.lambdas import lambda_grid
from ..spline.reinsch import _check_points, _lapack, _Smoother, _Stencil, check_knots, check_values
from .gcc import GCC

__all__ = [
    "LAMBDA_RULES",
    "LOSSES",
    "SCHEDULES",
    "STARTS",
    "RobustGCC",
    "block_medians",
    "repeated_median_line",
    "robust_lambda",
]

SCHEDULES = ("mse", "sup")
LAMBDA_RULES = ("paper", "pilot", "gcv")
# The pilot rule's grid of lambda (mean convention, points on [-1, 1]): 1e-12 to 100, PILOT_STEP
# a decade, searched a decade at a time, then finely around the best
PILOT_STEP = 4
PILOT_GRID = 10.0 ** np.linspace(-12.0, 2.0, 14 * PILOT_STEP + 1)
LOSSES = ("squared", "huber", "tukey", "median")
STARTS = ("median", "spline")

# Tuning constants of the robust losses, in units of the residuals' robust scale (the usual
# 95%-efficiency choices for normal noise).
HUBER_C, TUKEY_C = 1.345, 4.685
# The reweighting's scale is at least this fraction of the results' own spread.
SPREAD_FLOOR = 1e-3
# Tukey's loss rejects (weight 0) at most REJECT_FACTOR * q results, those farthest from the
# fit; others beyond its cut keep SPARED_WEIGHT: with at most q liars, a steep stretch of
# honest results must not be cut out wholesale.
REJECT_FACTOR, SPARED_WEIGHT = 2, 1e-3
# Tukey's first weights also leave out the q results farthest from the median of each
# result's LOCAL_WIDTH neighbours (scattered liars, which the start's wide blocks blur);
# _running_medians is written for 5.
LOCAL_WIDTH = 5
# The schedule's constant by loss: smoothing over the liars (squared) against down-weighting
# them and fitting the rest closely (Huber, Tukey). `coded experiment adversarial`'s
# calibration (N = 200, q = 10) picked squared 1 on x sin x and 1e-8 on LeNet-5, Huber 1e-4
# and 1e-8, Tukey 0 on both (README, "Adversarial workers").
DEFAULT_SCALES = {"squared": 1.0, "huber": 1e-8, "tukey": 0.0, "median": 1.0}  # median: unused


def robust_lambda(num_adversaries: int, num_points: int, schedule: str = "mse", scale: float = 1.0) -> float:
    r"""The smoothing parameter (mean convention, points on [-1, 1]) for ``q`` corrupted
    results among ``n``, by the schedule of the adversarially robust smoothing-spline
    analysis, with ``q = n^b``::

        "mse": lambda = n^(-4/5)  if b <= 0.4,  else (q / n)^(4/3)
        "sup": lambda = n^(-4/5)  if b <= 1/2,  else (q / n)^(6/5)

    times ``scale``. ``q = 0`` (no adversary) gives ``n^(-4/5)``. The mean convention is
    the one for which ``n^(-4/5)`` is the classical rate-optimal lambda of a cubic smoothing
    spline (an equivalent kernel of width ``lambda^(1/4) = n^(-1/5)``); in the sum
    convention the same schedule would smooth over ``n^(-9/20)``, narrower than the noise
    needs. ``scale`` absorbs the constants the rates leave free (the function's roughness,
    the domain's length); :class:`RobustGCC`'s default ``scale`` depends on its loss
    (``DEFAULT_SCALES``: 0 for its default, the Tukey loss; 1 for the squared loss), as
    calibrated by ``coded experiment adversarial`` (N = 200, q = 10; ``docs/adversaries.rst``).
    """
    q = check_count(num_adversaries, "num_adversaries", 0)
    n = check_count(num_points, "num_points", 2)
    if q > n:
        raise ValueError(f"num_adversaries must be at most num_points = {n}, got {q}")
    schedule = check_choice(schedule, "schedule", SCHEDULES)
    scale = check_number(scale, "scale", low=0.0)
    b = math.log(q) / math.log(n) if q >= 1 else 0.0
    switch, power = (0.4, 4.0 / 3.0) if schedule == "mse" else (0.5, 6.0 / 5.0)
    lam = n ** (-0.8) if b <= switch else (q / n) ** power
    return scale * lam


class RobustGCC(GCC):
    r"""GCC for adversarial workers: up to ``q`` of the returned results may be corrupted
    (``|y| <= bound``), and the decoder's smoothing, not a search for the liars, limits
    their influence, at the master cost of an ordinary smoothing-spline decode (linear in N).

    Encoder: GCC's (natural cubic spline through the inputs, ``lambda_enc = 0``). Decoder:

    1. results are clipped to ``[-bound, bound]`` (unbounded garbage cannot reach the
       spline; rows with NaN or inf are erasures, as for every code). Without a ``bound``,
       each output coordinate is clipped to the hull of two ranges that the honest majority
       sets. For values ``v`` the range is ``[lo - w, hi + w]``, where ``lo`` and ``hi`` are
       their ``(q+1)``-th smallest and largest and ``w = hi - lo`` (at most ``q`` values lie
       beyond ``lo`` or ``hi``); it is taken of the results themselves, and of their
       residuals from a robust trend in the points (added back to the trend): the block
       medians below (:func:`block_medians`, blocks of ``2q + 1``) from ``4q + 2`` results
       on, Siegel's repeated-median line (:func:`repeated_median_line`) below that. With
       fewer than ``2q + 2`` results there is no honest majority and nothing is clipped. A
       result is moved only if it lies outside both ranges. Both trends reproduce results
       affine in the points exactly (the line whenever at most ``q`` of them lie), so honest
       results of an affine ``f`` are never moved, even where they lie far from most others
       (an end worker, with the rest returned near the other end: the results' own range
       alone would cut it); the results' own range keeps honest results of a curved ``f``
       that a trend extrapolates badly (``benchmarks/studies/bench_robust_clip.py``);
    2. ``loss="squared"`` (the published decoder): the smoothing spline with ``lambda_dec`` (by
       default, ``lambda_rule="paper"``, :func:`robust_lambda` of ``(q, N)``; mean convention;
       ``"pilot"`` and ``"gcv"`` pick it at every decode: see ``lambda_rule``), a linear map per alive
       set, cached and applied by banded solves or by the map (GCC's
       :class:`~codedcomputing.spline.SplineDecoder`);
    3. ``loss="tukey"`` (the default) or ``"huber"``: reweighted fits (iteratively reweighted least
       squares) from a robust start. The start (``start="median"``, the default) is each
       output coordinate's median over blocks of ``2q + 1`` neighbouring results (by their
       points), joined linearly between the blocks' centres (:func:`block_medians`): a block
       holds at most ``q`` liars, so its median lies within its honest values' range,
       whatever the liars report; ``start="spline"`` starts from the smoothing spline with
       the schedule's lambda instead. Each returned worker's residual ``r_i`` (the RMS over output
       coordinates of ``y_i`` minus the current fit) gives the weight ``min(1, c s / r_i)``
       (Huber, ``c = 1.345``) or ``(1 - (r_i / c s)^2)^2`` when ``r_i < c s`` and 0 beyond
       (Tukey's biweight, ``c = 4.685``), with the robust scale ``s = 1.4826 median(r)`` of
       the start's residuals (at least 1e-3 of the start's own range: a deterministic
       ``f`` leaves honest residuals near 0), kept fixed so that an honest
       result rejected at the start returns once the fit follows its neighbours. Then one
       weighted smoothing spline (:func:`codedcomputing.spline.fit` with ``weights``) per
       iteration, up to ``iterations``: ``O(N d)`` for the start and for each fit (at
       ``lambda_dec = 0``, a fit whose kept results differ from the previous fit's in a few
       places is re-solved only near them: the same spline to rounding). A
       worker's weight is shared by its output coordinates (a worker lies or does not).
       Tukey's loss gives weight 0 to at most ``2q`` results (those farthest from the fit;
       others beyond its cut keep a weight of 1e-3): with at most ``q`` liars, a steep
       stretch of honest results is not cut out wholesale. Its first weights also leave out
       the ``q`` results farthest from the start and the ``q`` interior ones farthest from the
       median of their five nearest neighbours (scattered liars), those beyond the spread's
       floor (a rough ``f`` makes the start's residuals, and so its scale, large enough to
       hide liars at the bound); from the first fit on the scale is that of the fit's
       residuals, at least the start's over 4.685 (so the liars left out stay out, and
       honest results left out return once the fit of the others predicts them). At ``lambda_dec =
       0`` Tukey's final estimates are GCC's default (gap-aware) decoder on the results of
       weight > 0, not the last interpolating spline, except beyond every returned result
       wherever that decoder would hold the end value (it fits an end only from four kept
       results on, with enough of them near the missing end to validate on): there, the last
       interpolating spline, linear beyond its knots, as the other losses extend. (Between
       the kept results and a returned end result of weight 0 the decoder's estimates stay.)
       Each call's final weights are in
       ``decode_details(Y, alive).info["weights"]``, one per worker of ``Decoded.alive``
       (sorted by worker index).
       Because the liars are down-weighted rather than smoothed over, these losses want a
       far smaller lambda than the squared one (a smaller ``scale``).

    The results are decoded in float64 on the host and returned in ``Y``'s type, dtype and
    device.

    Measured: ``docs/adversaries.rst`` (``coded experiment adversarial`` and
    ``benchmarks/studies/bench_robust_default.py``): the Tukey loss is the strongest decoder measured,
    hence the default; ``loss="squared"`` is the published decoder.

    Promise (tested): inputs affine in ``alpha`` through an affine ``f`` are recovered
    exactly from any two or more honest results within the bound, by every loss, whether
    or not the end workers returned (no decoder holds an end value beyond the returned
    results unless an end fit on the results chose it).

    Parameters
    ----------
    num_inputs, num_workers : int
        K >= 1 inputs, N >= 2 workers.
    num_adversaries : int, default 1
        q >= 0, the most corrupted results the decoder is set for.
    bound : float, optional
        M > 0: no honest result exceeds it in magnitude, and corrupted ones are clipped to
        it. None: the range is set from the results (step 1).
    lambda_dec : float, optional
        The decoder's lambda (mean convention), >= 0; default ``robust_lambda(q, N, schedule,
        scale)``. With ``lambda_dec = 0`` the Tukey loss interpolates the results it keeps
        (the squared and Huber losses then interpolate every result: no protection).
    schedule : {"mse", "sup"}, default "mse"
        Which schedule sets the default ``lambda_dec`` (:func:`robust_lambda`).
    scale : float or None, default None
        The schedule's constant, >= 0. None: per loss, 1 for the squared loss, 1e-8 for
        Huber and 0 for Tukey (``DEFAULT_SCALES``: a deterministic ``f`` leaves nothing to
        smooth once the liars weigh nothing; noisy honest results want a positive one); the
        constant in use is :attr:`schedule_scale`. ``scale`` is held as given (None stays
        None, in :meth:`get_params` and the repr).
    loss : {"tukey", "squared", "huber", "median"}, default "tukey"
        The decoder's loss (step 2 or 3), or ``"median"``: from ``2(2q + 1)`` results on, the
        block medians of step 3's start, joined linearly and read at ``alpha`` (a median-style
        decoder, ``O(N d)``); with fewer (one block), Siegel's repeated-median line through
        them, as step 1's trend (``O(n^2 d)``, ``n < 4q + 2``). Exact for affine results, biased
        where they curve.
    lambda_rule : {"paper", "pilot", "gcv"}, default "paper"
        How the squared loss's lambda is set: "paper", the fixed schedule (``lambda_dec``,
        ``schedule``, ``scale``); at every decode from the clipped results and ``q`` alone,
        "pilot": the lambda of ``PILOT_GRID`` (1e-12 to 100, four a decade, searched a
        decade at a time and then finely) whose spline at ``alpha`` is nearest (least
        squares) this code's Tukey decode of the same results, or "gcv": generalised
        cross-validation (a grid to ``c = 1e8``, :func:`codedcomputing.spline.gcv_lambda`).
        The pick is in ``decode_details(Y, alive).info["lambda_dec"]``. The per-decode rules
        take ``loss="squared"`` and no ``lambda_dec``; their decode costs a grid of
        smoothing-spline fits (``O(N d)`` each), not one cached map.
    start : {"median", "spline"}, default "median"
        Where the reweighting of the Huber and Tukey losses starts (step 3).
    iterations : int, default 5
        Reweighted fits for the Huber and Tukey losses.
    lambda_enc, points, alpha, beta, assignment
        As for :class:`~codedcomputing.GCC`.

    References
    ----------
    P. Moradi, H. Akbarinodehi, M. A. Maddah-Ali. Adversarially robust general coded
    computing (the seed abstract: worst-case error O((q/N)^(6/5)) with a suitable lambda).

    P. J. Huber. Robust estimation of a location parameter. Annals of Mathematical
    Statistics 35, 1964. A. E. Beaton, J. W. Tukey. The fitting of power series, meaning
    polynomials, illustrated on band-spectroscopic data. Technometrics 16, 1974.

    Examples
    --------
    >>> import numpy as np, codedcomputing as cc
    >>> code = cc.RobustGCC(9, 100, num_adversaries=5, bound=100.0)
    >>> X = np.linspace(-1, 1, 9)[:, None]
    >>> Y = np.sin(code.encode(X))
    >>> alive = np.arange(100)
    >>> attacked = cc.adversaries.Concentrated(5, bound=100.0).corrupt(code, Y, alive, rng=0)
    >>> est = code.decode(attacked.results, alive)
    >>> plain = cc.GCC(9, 100).decode(attacked.results, alive)  # interpolates the liars
    >>> bool(np.abs(est - np.sin(X)).max() < np.abs(plain - np.sin(X)).max())
    True
    """

    name = "robust-gcc"
    description = "adversarially robust GCC: clipped results, smoothing-spline decoder, no error locating"

    def __init__(
        self,
        num_inputs: int,
        num_workers: int,
        num_adversaries: int = 1,
        bound: float | None = None,
        *,
        lambda_dec: float | None = None,
        schedule: str = "mse",
        scale: float | None = None,
        loss: str = "tukey",
        lambda_rule: str = "paper",
        start: str = "median",
        iterations: int = 5,
        lambda_enc: float = 0.0,
        points: str = "chebyshev",
        alpha=None,
        beta=None,
        assignment: str = "natural",
    ):
        self.num_adversaries = check_adversaries(num_adversaries, num_workers)
        self.bound = None if bound is None else check_number(bound, "bound", low=0.0, low_open=True)
        self.schedule = check_choice(schedule, "schedule", SCHEDULES)
        self.loss = check_choice(loss, "loss", LOSSES)
        self.lambda_rule = check_choice(lambda_rule, "lambda_rule", LAMBDA_RULES)
        if self.lambda_rule != "paper" and (self.loss != "squared" or lambda_dec is not None):
            raise ValueError(
                f"lambda_rule={self.lambda_rule!r} picks the squared loss's lambda at every decode: it "
                f"takes loss='squared' and no lambda_dec, got loss={loss!r}, lambda_dec={lambda_dec!r}"
            )
        self.scale = None if scale is None else check_number(scale, "scale", low=0.0)
        self.start = check_choice(start, "start", STARTS)
        self.iterations = check_count(iterations, "iterations", 1, 100)
        num_workers = check_count(num_workers, "num_workers", self.min_workers)
        if lambda_dec is None:
            lam = robust_lambda(self.num_adversaries, num_workers, self.schedule, self.schedule_scale)
        else:
            if isinstance(lambda_dec, str):
                raise ValueError(
                    f"lambda_dec must be a number >= 0 or None (the schedule), got {lambda_dec!r}"
                )
            lam = check_number(lambda_dec, "lambda_dec", low=0.0)
        self._lambda_given = lambda_dec
        super().__init__(
            num_inputs,
            num_workers,
            lambda_enc,
            lam,
            decoding="spline",
            points=points,
            alpha=alpha,
            beta=beta,
            assignment=assignment,
        )

    @property
    def schedule_scale(self) -> float:
        """The schedule's constant in use: ``scale``, or when it is None the loss's
        (``DEFAULT_SCALES``: 1 for the squared loss, 1e-8 for Huber, 0 for Tukey)."""
        return DEFAULT_SCALES[self.loss] if self.scale is None else self.scale

    def get_params(self) -> dict:
        params = super().get_params()
        params["lambda_dec"] = self._lambda_given  # None: the schedule's, as given
        return params

    def decoder(self, alive):
        """Refused: the robust decode clips the results and (for the Huber and Tukey losses)
        reweights them, so it depends on the results, not only on ``alive``; there is no
        fixed decoder to return. Raises ``ValueError``; decode with :meth:`decode` or
        :meth:`decode_details`."""
        raise ValueError(
            "RobustGCC has no decoder(alive): its decode clips the results and reweights them, so it "
            "depends on Y as well as alive; decode with code.decode(Y, alive) or code.decode_details(Y, "
            "alive)"
        )

    @property
    def linear(self) -> bool:
        """False: clipping (and the robust losses' weights) depend on the results."""
        return False

    def promised_case(self, rng):
        """The class's promise: GCC's affine case (inputs affine in ``alpha`` through an
        affine ``f``, any two or more of the N results, end workers among them or not), scaled
        to lie within half the ``bound`` when there is one."""
        X, f, alive = super().promised_case(rng)
        if self.bound is not None:  # honest results within the bound
            peak = float(np.abs(f(self.encode(X))).max())
            if peak > 0.5 * self.bound:
                factor = 0.5 * self.bound / peak
                return X, (lambda x: factor * f(x)), alive
        return X, f, alive

    def clip(self, Y, alive):
        """The results ``Y`` of workers ``alive`` (``Y[i]`` from ``alive[i]``, ``(n, ...)``) as
        the decoder uses them (step 1): float64 ``(n, d)`` in the order given, clipped to the
        bound, or, without one, to the ranges the honest majority sets (step 1 of the class
        docstring).

        Raises ``ValueError`` naming ``Y`` or ``alive`` when they do not match, or when ``Y``
        holds NaN or inf (:meth:`decode` drops such rows as erasures; this takes finite ones).
        """
        Y, alive, erased = _arraylib.check_results(Y, alive, self.num_workers)
        if erased.size:
            raise ValueError(
                f"Y holds NaN or inf (workers {erased.tolist()[:10]}): clip takes finite results "
                "(decode drops such rows as erasures)"
            )
        by_point = np.argsort(self.beta[alive], kind="stable")
        clipped = np.empty((alive.size, int(np.prod(Y.shape[1:], dtype=np.int64))))
        clipped[by_point] = self._clip_sorted(self.beta[alive[by_point]], _arraylib.to_float64(Y)[by_point])
        return clipped

    def _clip_sorted(self, knots: np.ndarray, flat: np.ndarray) -> np.ndarray:
        """Step 1 on float64 results ``flat`` at sorted ``knots``."""
        if self.bound is not None:
            return np.clip(flat, -self.bound, self.bound)
        return self._clip_to_trend(knots, flat)

    def _clip_to_trend(self, knots: np.ndarray, flat: np.ndarray) -> np.ndarray:
        """Step 1 without a bound, for results at sorted ``knots``: each value clipped to the
        hull of two ranges the honest majority sets (:meth:`_majority_range`): around the
        values themselves, and around their residuals from a robust trend."""
        n, q = flat.shape[0], self.num_adversaries
        if q == 0 or n < 2 * q + 2 or flat.shape[1] == 0:  # no honest majority to set a range
            return flat
        if n >= 2 * (2 * q + 1):
            trend = _block_medians(knots, flat, 2 * q + 1)
        else:
            trend = _repeated_median_line(knots, flat)
        low, high = _majority_range(flat, q)
        residual = flat - trend
        residual_low, residual_high = _majority_range(residual, q, overwrite=True)
        # np.clip(flat, minimum(low, trend + residual_low), maximum(high, trend + residual_high)),
        # written into two buffers: each temporary of n x d is a pass over memory (and, above
        # the allocator's mmap threshold, fresh pages to fault in)
        lower = np.add(trend, residual_low, out=residual)
        np.minimum(lower, low, out=lower)
        upper = np.add(trend, residual_high, out=trend)
        np.maximum(upper, high, out=upper)
        np.maximum(flat, lower, out=lower)
        return np.minimum(lower, upper, out=lower)

    def _decode(self, Y, alive):
        # By point, not by worker index: every step below wants sorted knots, and beta is in
        # worker order (not sorted under assignment="golden" or an explicit beta).
        order = np.argsort(self.beta[alive], kind="stable")
        by_point = alive[order]
        knots = self.beta[by_point]
        # Column-major (each output coordinate's results contiguous): the medians, the clipping
        # ranges and the spline solves below all run along the knots, and LAPACK wants it.
        # Gathered column by column: a tenth of the time of a row gather and a transposing copy
        # (measured n = 900 and 7200, 50 columns).
        flat = _arraylib.to_float64(Y).T[:, order].T
        flat = self._clip_sorted(knots, flat)
        info = {"lambda_dec": self._lambda_dec}
        if self.loss == "squared" and self.lambda_rule != "paper":
            lam = self._picked_lambda(knots, flat, by_point)
            info["lambda_dec"] = lam
            estimates = _WeightedSpline(knots, lam, np.ones(knots.size), flat, self.alpha).estimates
        elif self.loss == "squared":
            estimates = self._decoder(by_point)(flat)
        elif self.loss == "median":
            size = 2 * self.num_adversaries + 1
            if alive.size >= 2 * size:  # two blocks or more: a line joins their medians
                estimates = _block_medians(knots, flat, size, self.alpha)
            else:  # one block would be a constant: the repeated-median line, as step 1's trend
                estimates = _repeated_median_line(knots, flat, self.alpha)
        else:
            estimates, weights = self._reweighted(knots, flat, self._ranks[by_point])
            info["weights"] = weights[np.argsort(by_point, kind="stable")]  # by worker, as Decoded.alive
        shape = (self.num_inputs, *tuple(Y.shape[1:]))
        return _arraylib.from_float64(np.ascontiguousarray(estimates), Y).reshape(shape), info

    def _reweighted(
        self, knots: np.ndarray, flat: np.ndarray, ranks: np.ndarray
    ) -> tuple[np.ndarray, np.ndarray]:
        """Iteratively reweighted smoothing splines (step 3): the estimates at ``alpha`` and
        the final weights (in the order of ``knots``, sorted; ``ranks``: the knots' positions
        among all N points). ``flat``, column-major, is overwritten."""
        lam, d = self._lambda_dec, max(flat.shape[1], 1)
        n, q = knots.size, self.num_adversaries
        if flat.shape[1] == 0:  # nothing to fit
            return np.zeros((self.num_inputs, 0)), np.ones(n)
        # Everything below is scale-invariant: in units of the largest result (|flat|'s maximum,
        # without a temporary of its size)
        unit = max(float(flat.max(initial=0.0)), -float(flat.min(initial=0.0)))
        if unit > 0 and np.isfinite(unit) and unit != 1.0:
            # in place: flat is the decode's own (gathered, then clipped) copy
            estimates, weights = self._reweighted(knots, np.divide(flat, unit, out=flat), ranks)
            return estimates * unit, weights
        if self.start == "median" and q > 0 and n >= 2 * (2 * q + 1):
            start = _block_medians(knots, flat, 2 * q + 1)
        else:
            start = _WeightedSpline(knots, max(lam, self._start_lambda), np.ones(n), flat).fitted()
        # The scale: the start's residuals' robust spread, at least SPREAD_FLOOR of the start's
        # own range (RMS over coordinates; the start is robust): a deterministic f leaves the
        # honest residuals near 0, and a scale of 0 would reject every result not fitted exactly.
        extent = np.sqrt(np.mean((start.max(axis=0) - start.min(axis=0)) ** 2))
        residual = np.sqrt(_row_squares(np.subtract(flat, start, out=start)) / d)  # the start is done with
        floor = max(SPREAD_FLOOR * float(extent), 1e-12)
        spread = start_spread = max(1.4826 * _median(residual), floor)
        weights, estimates, fit = None, None, None
        for _ in range(self.iterations):
            ratio = residual / spread
            if self.loss == "huber":
                new = np.minimum(1.0, HUBER_C / np.maximum(ratio, 1e-300))
            else:
                new = np.maximum(1.0 - (ratio / TUKEY_C) ** 2, 0.0) ** 2
                if weights is None and 0 < q < n and self._trims:  # the q farthest from the start: out
                    _leave_out(new, residual, q, floor)
                    if n > LOCAL_WIDTH:  # and the q farthest from their neighbours' median
                        local = np.sqrt(_row_squares(flat - _running_medians(flat)) / d)
                        local[:2] = local[-2:] = 0.0  # an end's window is not centred on it
                        _leave_out(new, local, q, floor)
                rejected = np.flatnonzero(new == 0.0)
                if rejected.size > REJECT_FACTOR * q:  # at most q liars: keep the rest, lightly
                    spared = rejected[np.argsort(-residual[rejected], kind="stable")[REJECT_FACTOR * q :]]
                    new[spared] = SPARED_WEIGHT
            if np.count_nonzero(new) < 2:  # nothing left to fit: keep the last weights
                break
            if weights is not None and (
                np.array_equal(new > 0, weights > 0)  # at lambda = 0 only the support counts
                if lam == 0.0
                else np.allclose(new, weights, rtol=0.0, atol=1e-6)
            ):
                break
            weights = new
            fit = _WeightedSpline(knots, lam, weights, flat, self.alpha, previous=fit)
            estimates, residual = fit.estimates, np.sqrt(fit.squares / d)
            if self.loss == "tukey" and self._trims:  # the fit's spread: liars left out stay out
                spread = max(1.4826 * _median(residual), floor, start_spread / TUKEY_C)
        if weights is None:
            weights = np.ones(n)
            estimates = _WeightedSpline(knots, lam, weights, flat, self.alpha).estimates
        if self._blends:  # the final fit: GCC's default decoder on the kept results
            keep = weights > 0
            decoder = GapAwareInterpolant(
                knots[keep], ranks[keep], self.alpha, self.num_workers, all_points=self.alpha
            )
            line = estimates  # the interpolating spline of the kept results: linear beyond them
            estimates = decoder(flat if keep.all() else _rows(flat, keep))[0]
            held = _held_ends(decoder, knots, self.alpha)
            if held.size:
                estimates = np.array(estimates, order="F")
                estimates[held] = line[held]
        return estimates, weights

    # Tukey's first weights leave out at least the q results farthest from the start, and later
    # ones take the robust scale of the fit's residuals (benchmarks/studies/bench_robust_default.py).
    _trims = True

    @property
    def _blends(self) -> bool:
        """Whether the final fit is GCC's gap-aware decoder on the kept results (Tukey's loss
        at ``lambda_dec = 0``) rather than the last weighted spline."""
        return self.loss == "tukey" and self._lambda_dec == 0.0

    def _picked_lambda(self, knots: np.ndarray, flat: np.ndarray, by_point: np.ndarray) -> float:
        """The squared loss's lambda for this decode by ``lambda_rule`` (results clipped,
        column-major, at sorted ``knots``): "gcv", generalised cross-validation on them; "pilot",
        the ``PILOT_GRID`` value whose smoothing spline at ``alpha`` is nearest (least squares)
        the Tukey decode of the same results."""
        if knots.size < 3 or flat.shape[1] == 0:
            return robust_lambda(self.num_adversaries, max(knots.size, 2), self.schedule)
        if self.lambda_rule == "gcv":  # liars call for heavy smoothing: a grid up to c = 1e8
            half_width = (knots[-1] - knots[0]) / 2.0  # the grid's scaling, as gcv_lambda's own
            with warnings.catch_warnings():  # a minimum at the grid's end is the rule's answer
                warnings.simplefilter("ignore", RuntimeWarning)
                return gcv_lambda(knots, flat, lambda_grid(knots.size, 17, high=1e8) * half_width**3)
        pilot, _ = self._pilot._reweighted(knots, np.array(flat, order="F"), self._ranks[by_point])
        ones = np.ones(knots.size)
        errors: dict[int, float] = {}

        def distance(i: int) -> float:
            if i not in errors:
                fit = _WeightedSpline(knots, float(PILOT_GRID[i]), ones, flat, self.alpha)
                errors[i] = float(np.sum((fit.estimates - pilot) ** 2))
            return errors[i]

        # one lambda a decade, then every grid value within a decade of the best (ties: the smaller)
        coarse = min(range(0, PILOT_GRID.size, PILOT_STEP), key=distance)
        fine = range(max(coarse - PILOT_STEP + 1, 0), min(coarse + PILOT_STEP, PILOT_GRID.size))
        return float(PILOT_GRID[min(fine, key=distance)])

    @property
    def _pilot(self) -> RobustGCC:
        """The Tukey decoder of the pilot rule (same points and bound)."""
        if getattr(self, "_pilot_code", None) is None:
            self._pilot_code = RobustGCC(
                self.num_inputs,
                self.num_workers,
                self.num_adversaries,
                self.bound,
                alpha=self.alpha,
                beta=self.beta,
            )
        return self._pilot_code

    @property
    def _start_lambda(self) -> float:
        """The smoothing of the spline start (``start="spline"``): the schedule's own lambda."""
        return robust_lambda(self.num_adversaries, self.num_workers, self.schedule)


def block_medians(knots, values, size: int, points=None) -> np.ndarray:
    """A robust local level of ``values`` (``(n, ...)``, at ``knots``: ``n >= 1`` distinct
    finite points, sorted ascending) at ``points`` (default: the knots; any finite points):
    the coordinate-wise median of each block of ``size`` (``>= 1``; above ``n``, one block)
    consecutive results (the last block takes the rest), placed at the block's median knot and joined linearly
    (extended linearly beyond the outer blocks). With at most ``(size - 1) / 2`` corrupted
    results in all, every block's median lies within its honest values' range; values affine
    in the knots are reproduced exactly (a block's median is then the value at its median
    knot). ``O(n d)``. Returns ``(len(points), d)`` float64, ``d`` the product of ``values``'
    trailing dimensions."""
    knots, flat = _checked(knots, values, ordered=True)
    size = min(check_count(size, "size", 1), knots.size)  # one block at most
    if points is not None and np.ndim(points) != 1:
        raise ValueError(f"points must be one-dimensional, got shape {np.shape(points)}")
    points = knots if points is None else _check_points(points)
    return np.ascontiguousarray(_block_medians(knots, flat, size, points))


def _block_medians(knots: np.ndarray, values: np.ndarray, size: int, points: np.ndarray | None = None):
    """:func:`block_medians` on float64 ``(n, d)`` values; no checks are performed."""

    points = knots if points is None else points
    n = knots.size
    blocks = max(n // size, 1)
    head = (blocks - 1) * size  # blocks of exactly `size`, then the last one with the rest
    d = values.shape[1]
    starts = np.arange(blocks) * size
    counts = np.full(blocks, size)
    counts[-1] = n - head
    centres = (knots[starts + (counts - 1) // 2] + knots[starts + counts // 2]) / 2  # sorted knots
    # Transposed, a row per column: for column-major values (the decoder's) the blocks are
    # contiguous runs, and the joined medians come out column-major too.
    medians = np.empty((d, blocks))
    if blocks > 1:  # blocks of odd size 2q + 1: the middle order statistic, by one partition
        middle = size // 2
        grouped = values.T[:, :head].reshape(d, blocks - 1, size)
        if size % 2:
            medians[:, :-1] = np.partition(grouped, middle, axis=2)[:, :, middle]
        else:
            medians[:, :-1] = np.median(grouped, axis=2)
    medians[:, -1] = _median(values[head:])
    if blocks == 1:
        return np.repeat(medians, points.size, axis=1).T
    where = np.clip(np.searchsorted(centres, points) - 1, 0, blocks - 2)
    share = (points - centres[where]) / (centres[where + 1] - centres[where])
    joined = medians[:, where]  # (1 - share) * left + share * right, in two buffers
    joined *= 1.0 - share
    right = medians[:, where + 1]
    right *= share
    joined += right
    return joined.T


def _checked(knots, values, *, ordered: bool) -> tuple[np.ndarray, np.ndarray]:
    """``(knots, values)`` as the spline checks them (finite, distinct knots; one finite row of
    values per knot), a single knot allowed; knots sorted where ``ordered``; values as
    float64 ``(n, d)``."""
    knots = check_real_array(knots, "knots")
    if knots.shape == (1,):  # one knot: a constant, nothing to fit
        if not np.isfinite(knots[0]):
            raise ValueError("knots contains NaN or inf")
    else:
        knots = check_knots(knots)
    if ordered and np.any(np.diff(knots) < 0):
        raise ValueError("knots must be sorted ascending")
    return knots, _arraylib.to_float64(check_values(values, knots.size))


def _majority_range(values: np.ndarray, q: int, overwrite: bool = False) -> tuple[np.ndarray, np.ndarray]:
    """Per column, ``[lo - w, hi + w]``: ``lo`` and ``hi`` the ``(q+1)``-th smallest and
    largest of the ``n > 2q`` values, ``w = hi - lo``. ``overwrite``: ``values`` may be
    reordered in place."""
    n = values.shape[0]
    ordered = values if overwrite else values.copy(order="K")
    # One order statistic per partition (the second reorders the first's result): numpy's
    # partition for two at once costs 10-15x one and grows faster than n (measured n =
    # 900..7200, 50 columns).
    ordered.partition(q, axis=0)
    low = ordered[q].copy()
    ordered.partition(n - 1 - q, axis=0)
    high = ordered[n - 1 - q]
    width = high - low
    return low - width, high + width


def repeated_median_line(knots, values) -> np.ndarray:
    """Siegel's repeated-median line through ``values`` (``(n, ...)``, at ``n >= 1`` distinct
    finite ``knots``, any order), per column (of the trailing dimensions flattened), read at the
    knots: ``(n, d)`` float64. See :func:`_repeated_median_line`."""
    return _repeated_median_line(*_checked(knots, values, ordered=False))


def _repeated_median_line(
    knots: np.ndarray, values: np.ndarray, points: np.ndarray | None = None
) -> np.ndarray:
    """Siegel's repeated-median line through ``values`` (``(n, d)``, at distinct ``knots``),
    per column, read at ``points`` (default: the knots): slope ``median_i median_{j != i}
    (v_j - v_i) / (t_j - t_i)``, intercept ``median_i (v_i - slope t_i)``. With at most
    ``n / 2 - 1`` corrupted values it reproduces values affine in the knots exactly, whatever
    the corrupted ones are (breakdown point 1/2). ``O(n^2 d)`` time, ``O(n d)`` memory: for
    small ``n``. No checks are performed."""
    n = knots.size
    points = knots if points is None else points
    if n < 2:
        return np.repeat(values, points.size, axis=0)
    slopes = np.empty_like(values)
    for i in range(n):
        others = np.r_[0:i, i + 1 : n]
        slopes[i] = _median((values[others] - values[i]) / (knots[others] - knots[i])[:, None])
    slope = _median(slopes)
    intercept = _median(values - knots[:, None] * slope)
    return intercept + points[:, None] * slope


def _median(values: np.ndarray):
    """The median along the first axis by one partition (numpy's ``median`` checks for NaN
    and dispatches first: a third of a small robust decode's time)."""
    n = values.shape[0]
    middle = np.partition(values, n // 2, axis=0)  # one order statistic (see _majority_range)
    upper = middle[n // 2]
    lower = upper if n % 2 else middle[: n // 2].max(axis=0)  # the largest below the middle
    centre = (lower + upper) / 2
    return float(centre) if np.ndim(centre) == 0 else centre


def _held_ends(decoder: GapAwareInterpolant, knots: np.ndarray, points: np.ndarray) -> np.ndarray:
    """The ``points`` (their indices) beyond the sorted ``knots`` (those of every returned
    result, a range that holds the decoder's) where the gap-aware ``decoder`` holds the end
    value: those in none of its fitted end groups (it fits one only from four knots on, with
    enough of them near a missing end to validate on)."""
    beyond = (points < knots[0]) | (points > knots[-1])
    if beyond.any():
        for group in decoder.groups:
            if group.label[0] == "edge":
                beyond[group.points] = False
    return np.flatnonzero(beyond)


def _leave_out(weights: np.ndarray, distance: np.ndarray, count: int, floor: float) -> None:
    """Zero the ``weights`` of the ``count`` largest ``distance`` values, those above ``floor``
    (a result its reference fits to rounding is never left out)."""
    farthest = np.argpartition(-distance, count - 1)[:count]
    weights[farthest[distance[farthest] > floor]] = 0.0


def _running_medians(values: np.ndarray) -> np.ndarray:
    """Each row's median with its four nearest neighbours (``LOCAL_WIDTH = 5`` consecutive rows
    of ``values`` ``(n, d)``, ``n >= 5``, centred on it; the first and last windows at the ends),
    by min and max alone: the median of ``a..e`` is the median of ``e``, ``max(min(a, b),
    min(c, d))`` and ``min(max(a, b), max(c, d))``."""
    n = values.shape[0]
    rows = values.T  # (d, n): contiguous runs for the decoder's column-major values
    a, b, c, d, e = (rows[:, i : i + n - 4] for i in range(5))
    low, high = np.minimum(a, b), np.minimum(c, d)
    np.maximum(low, high, out=low)  # max(min(a, b), min(c, d))
    top = np.maximum(a, b)
    np.minimum(top, np.maximum(c, d, out=high), out=top)  # min(max(a, b), max(c, d))
    out = np.empty_like(rows)
    middle = out[:, 2:-2]
    np.minimum(np.maximum(low, top, out=high), e, out=middle)
    np.maximum(middle, np.minimum(low, top, out=low), out=middle)
    out[:, :2], out[:, -2:] = middle[:, :1], middle[:, -1:]
    return out.T


def _row_squares(x: np.ndarray) -> np.ndarray:
    """Each row's sum of squares."""
    return np.einsum("ij,ij->i", x, x)


# A change of the knots moves the interpolating spline's second derivatives by at most
# 2^(1 - m) of the change's own size m knots away (the system R gamma = Q^T y is tridiagonal
# with off-diagonals summing to half the diagonal, whatever the spacing: |R^-1_ij| <=
# 2^(1 - |i - j|) / R_jj, a Neumann series). Re-solved on windows this far beyond the changes
# (the second derivatives at their ends held), a refit agrees with the full solve far below
# rounding (2^-63 of the change).
REFIT_MARGIN = 64


class _WeightedSpline:
    """The weighted smoothing spline of column-major ``flat`` ``(n, d)`` at sorted, distinct
    ``knots`` with ``weights``: :func:`codedcomputing.spline.fit` without its checks (the
    decoder's inner loop). Zero weights leave their knots out; at ``lam = 0`` the spline
    interpolates the rest.

    Holds the second derivatives at the kept knots' interior (column-major; the natural
    ends' are 0), the knot values ``g`` (None when interpolating: the results themselves),
    ``estimates``, the spline at ``points`` (if given), and ``squares``, each knot's squared
    residual summed over the columns: 0 at a kept knot when interpolating, so only the
    left-out knots are evaluated (with the points, by one stencil). Given the ``previous``
    interpolating fit of the same results, an interpolating fit whose kept knots differ from
    it in few places re-solves only windows of ``REFIT_MARGIN`` knots around the changes and
    takes the previous second derivatives elsewhere (the same spline to rounding)."""

    def __init__(self, knots, lam, weights, flat, points=None, previous: _WeightedSpline | None = None):
        self.all_knots, self.flat = knots, flat
        self.keep = keep = weights > 0
        self.all_kept = bool(keep.all())
        self.kept = np.arange(keep.size) if self.all_kept else np.flatnonzero(keep)  # their indices
        if not self.all_kept:
            lam = lam * knots.size / self.kept.size
            knots, weights = knots[keep], weights[keep]
        self.knots = knots
        self.interpolates = knots.size == 2 or lam == 0.0
        self.smoother = _Smoother(knots, 0.0 if self.interpolates else knots.size * lam, weights)
        windows = self._refit_windows(previous)
        self.g = None
        if windows is not None:
            self.curvature = self._refit(previous, windows)
        else:
            kept_values = flat if self.all_kept else _rows(flat, keep)
            if self.interpolates:
                self.curvature = _interpolating_curvature(self.smoother, kept_values)
            else:
                self.g, self.curvature = _solve_columns(self.smoother, kept_values)
        self.squares = np.zeros(keep.size)
        if not self.interpolates:  # interpolated: no residual at the kept knots
            self.squares[keep] = _row_squares(kept_values - self.g)
        left_out = np.flatnonzero(~keep)
        points = np.empty(0) if points is None else points
        fitted = self.at(np.concatenate([self.all_knots[left_out], points]))
        self.estimates = fitted[left_out.size :]
        if left_out.size:
            fitted = fitted[: left_out.size]
            self.squares[left_out] = _row_squares(np.subtract(_rows(flat, left_out), fitted, out=fitted))

    def fitted(self) -> np.ndarray:
        """The spline at every knot (``(n, d)``, a new array)."""
        if self.all_kept:
            return np.array(self.flat if self.g is None else self.g, order="F")
        return self.at(self.all_knots)

    def at(self, points: np.ndarray) -> np.ndarray:
        """The spline at ``points``: ``(len(points), d)``, column-major."""
        stencil = _Stencil.build(self.knots, points)
        i, w = stencil.index, stencil.weights
        m = self.knots.size
        # (d, m) rows: gathers along them are contiguous
        if self.g is None:  # interpolating: the knot values are the results at the kept knots
            g, left, right = self.flat.T, self.kept[i], self.kept[i + 1]
        else:
            g, left, right = self.g.T, i, i + 1
        curvature = self.curvature.T
        gamma_left = np.zeros((g.shape[0], points.size))  # second derivatives at knots i, i + 1
        inner = (i >= 1) & (i <= m - 2)
        gamma_left[:, inner] = curvature[:, i[inner] - 1]
        gamma_right = np.zeros((g.shape[0], points.size))
        inner = i + 1 <= m - 2
        gamma_right[:, inner] = curvature[:, i[inner]]
        return (w[:, 0] * g[:, left] + w[:, 1] * g[:, right] + w[:, 2] * gamma_left + w[:, 3] * gamma_right).T

    def _refit_windows(self, previous: _WeightedSpline | None) -> list[tuple[int, int]] | None:
        """The windows ``(a, b)`` (positions among the kept knots, ends included) to re-solve
        for a refit of the interpolating ``previous``, or None for a full solve."""
        if previous is None or not (previous.interpolates and self.interpolates):
            return None
        m = self.knots.size
        if m < 3 or previous.knots.size < 3:
            return None
        changed = np.flatnonzero(previous.keep != self.keep)
        if changed.size == 0 or changed.size > m:
            return None
        at = np.searchsorted(self.kept, changed)  # where each change lies among the kept knots
        lows, highs = np.maximum(at - REFIT_MARGIN, 0), np.minimum(at + REFIT_MARGIN, m - 1)
        # both ascending: a window starts where a change's reach begins past the last one's end
        starts = np.flatnonzero(np.r_[True, lows[1:] > highs[:-1]])
        ends = np.r_[starts[1:] - 1, lows.size - 1]
        lows, highs = lows[starts], highs[ends]
        if np.sum(highs - lows) > m // 2:
            return None
        return list(zip(lows.tolist(), highs.tolist(), strict=True))

    def _refit(self, previous, windows) -> np.ndarray:
        """The interior second derivatives ``(m - 2, d)`` of the interpolating fit: those of
        ``previous`` at the same knots, re-solved on ``windows`` with the second derivatives at
        their ends held."""
        m, kept, values, curvature = self.knots.size, self.kept, self.flat, previous.curvature
        before = np.full(self.keep.size, -1)  # each knot's curvature row in the previous fit
        before[previous.keep] = np.arange(previous.knots.size) - 1
        # Knots that were not interior before lie inside the windows (their rows are replaced)
        rows = np.clip(before[kept[1:-1]], 0, curvature.shape[0] - 1)
        out = curvature.T[:, rows].T
        h = self.smoother.h
        for a, b in windows:  # knots a and b held, a + 1 .. b - 1 solved
            if b - a < 2:
                continue
            y = values.T[:, kept[a : b + 1]].T  # (b - a + 1, c)
            slope = np.diff(y, axis=0) / h[a:b, None]
            rhs = np.diff(slope, axis=0)  # rows a + 1 .. b - 1
            if a > 0:
                rhs[0] -= h[a] / 6.0 * out[a - 1]
            if b < m - 1:
                rhs[-1] -= h[b - 1] / 6.0 * out[b - 1]
            diagonal = (h[a : b - 1] + h[a + 1 : b]) / 3.0
            if diagonal.size == 1:
                solved = rhs / diagonal[0]
            else:
                factor, offdiagonal, _ = _lapack().dpttrf(diagonal, h[a + 1 : b - 1] / 6.0)
                solved = _lapack().dpttrs(factor, offdiagonal, np.asfortranarray(rhs), overwrite_b=True)[0]
            out[a : b - 1] = solved
        return out


def _interpolating_curvature(smoother: _Smoother, y: np.ndarray) -> np.ndarray:
    """The interior second derivatives ``(n - 2, d)`` of the natural cubic spline through
    column-major ``y`` at the knots of ``smoother`` (``lam = 0``): ``R gamma = Q^T y`` as
    :meth:`_Smoother.solve` solves it (the same operations), with two temporaries of ``y``'s
    size instead of five."""
    if smoother.t.size <= 2:
        return np.zeros((0, y.shape[1]), order="F")
    diagonal, offdiagonal = smoother.tridiagonal
    slope = np.subtract(y[1:], y[:-1])
    slope /= smoother.h[:, None]
    rhs = np.subtract(slope[1:], slope[:-1])  # Q^T y: second divided differences
    if offdiagonal is None:
        return rhs / diagonal[0]
    return _lapack().dpttrs(diagonal, offdiagonal, rhs, overwrite_b=True)[0]


def _rows(x: np.ndarray, index) -> np.ndarray:
    """``x[index]`` for a column-major ``x``, column-major (numpy's row gather returns rows)."""
    return x.T[:, index].T


def _solve_columns(smoother: _Smoother, y: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``smoother.solve(y)`` (``lam > 0``, three or more knots) for column-major ``y``, in its
    layout: ``g`` and the interior second derivatives, by the same banded LU and step of
    refinement, with no transposing copies of ``y``, of the right-hand side or of the solution
    (each a pass over ``n d`` strided entries)."""
    n, d = y.shape
    kl, ku = smoother._KL, smoother._KU
    rhs = np.zeros((d, 2 * n - 2))  # transposed: a row per column of y
    rhs[:, smoother.g_pos] = (y * smoother.weights[:, None]).T
    lu, pivots = smoother.factorise(transposed=True)
    x = _lapack().dgbtrs(lu, kl, ku, rhs.T, pivots, trans=1)[0]  # column-major (2n - 2, d)
    product = np.empty_like(rhs)
    for column in range(d):  # the sparse product column by column: each contiguous
        product[column] = smoother.augmented @ x[:, column]
    x += _lapack().dgbtrs(
        lu, kl, ku, np.subtract(rhs, product, out=product).T, pivots, trans=1, overwrite_b=True
    )[0]
    return x.T[:, smoother.g_pos].T, x.T[:, smoother.gamma_pos].T
