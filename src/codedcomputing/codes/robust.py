"""Adversarially robust GCC: a smoothing decoder that limits lying workers' influence
without locating them."""

from __future__ import annotations

import math

import numpy as np

from .. import _arraylib
from .._validation import check_adversaries, check_choice, check_count, check_number, check_real_array
from ..spline.reinsch import _check_points, _Smoother, _Stencil, check_knots, check_values
from .gcc import GCC

__all__ = [
    "LOSSES",
    "SCHEDULES",
    "STARTS",
    "RobustGCC",
    "block_medians",
    "repeated_median_line",
    "robust_lambda",
]

SCHEDULES = ("mse", "sup")
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
    the domain's length); :class:`RobustGCC`'s default was tuned by
    ``benchmarks/bench_robust.py``.
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
       that a trend extrapolates badly (``benchmarks/bench_robust_clip.py``);
    2. ``loss="squared"`` (the default): the smoothing spline with ``lambda_dec`` (by
       default :func:`robust_lambda` of ``(q, N)``; mean convention), a linear map per alive
       set, cached and applied by banded solves or by the map (GCC's
       :class:`~codedcomputing.spline.SplineDecoder`);
    3. ``loss="huber"`` or ``"tukey"``: reweighted fits (iteratively reweighted least
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
       iteration, up to ``iterations``: ``O(N d)`` for the start and for each fit. A
       worker's weight is shared by its output coordinates (a worker lies or does not).
       Tukey's loss gives weight 0 to at most ``2q`` results (those farthest from the fit;
       others beyond its cut keep a weight of 1e-3): with at most ``q`` liars, a steep
       stretch of honest results is not cut out wholesale. Each call's final weights are in
       ``decode_details(Y, alive).info["weights"]``, one per worker of ``Decoded.alive``
       (sorted by worker index).
       Because the liars are down-weighted rather than smoothed over, these losses want a
       far smaller lambda than the squared one (a smaller ``scale``).

    The results are decoded in float64 on the host and returned in ``Y``'s type, dtype and
    device.

    Measured (``coded experiment adversarial``, K = 9, N = 50 to 2000, q = ceil(N^a), five
    attacks, x sin x and LeNet-5): the Tukey loss's MSE falls with N at least as fast as
    (q/N)^(6/5) for every a and attack, and at N = 200, q = 10 concentrated liars it is
    under 1/10 of plain GCC's, BACC's and the error locator's; the squared loss meets the
    slope for 8 of 20 settings on x sin x and 17 of 20 on LeNet-5. Prefer ``loss="tukey"``
    when honest results are exact (a deterministic ``f``).

    Promise (tested): inputs affine in ``alpha`` through an affine ``f`` are recovered
    exactly from any two or more honest results within the bound, as by GCC.

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
    scale : float, optional
        The schedule's constant, >= 0; default 1 for the squared loss, 1e-8 for Huber and 0
        for Tukey (``DEFAULT_SCALES``: a deterministic ``f`` leaves nothing to smooth once
        the liars weigh nothing; noisy honest results want a positive one).
    loss : {"squared", "huber", "tukey", "median"}, default "squared"
        The decoder's loss (step 2 or 3), or ``"median"``: the block medians of step 3's
        start, joined linearly and read at ``alpha`` (a median-style decoder, ``O(N d)``;
        exact for affine results, biased where they curve).
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
    >>> code = cc.RobustGCC(9, 100, num_adversaries=5, bound=100.0, loss="tukey", scale=1e-4)
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
        loss: str = "squared",
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
        self._scale_given = scale
        scale = DEFAULT_SCALES[self.loss] if scale is None else scale
        self.scale = check_number(scale, "scale", low=0.0)
        self.start = check_choice(start, "start", STARTS)
        self.iterations = check_count(iterations, "iterations", 1, 100)
        num_workers = check_count(num_workers, "num_workers", self.min_workers)
        if lambda_dec is None:
            lam = robust_lambda(self.num_adversaries, num_workers, self.schedule, self.scale)
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

    def get_params(self) -> dict:
        params = super().get_params()
        params["lambda_dec"], params["scale"] = self._lambda_given, self._scale_given
        return params

    @property
    def linear(self) -> bool:
        """False: clipping (and the robust losses' weights) depend on the results."""
        return False

    def promised_case(self, rng):
        X, f, alive = super().promised_case(rng)
        q = self.num_adversaries
        need = 2
        if self.loss == "median":  # two blocks of 2q + 1, so that a line joins their medians
            need = max(need, 2 * (2 * q + 1))
            if need > self.num_workers:
                return None
        if alive.size < need:
            alive = np.sort(rng.choice(self.num_workers, min(need, self.num_workers), replace=False))
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
        residual_low, residual_high = _majority_range(flat - trend, q)
        return np.clip(flat, np.minimum(low, trend + residual_low), np.maximum(high, trend + residual_high))

    def _decode(self, Y, alive):
        # By point, not by worker index: every step below wants sorted knots, and beta is in
        # worker order (not sorted under assignment="golden" or an explicit beta).
        order = np.argsort(self.beta[alive], kind="stable")
        by_point = alive[order]
        knots = self.beta[by_point]
        flat = self._clip_sorted(knots, _arraylib.to_float64(_arraylib.take_rows(Y, order)))
        info = {"lambda_dec": self._lambda_dec}
        if self.loss == "squared":
            estimates = self._decoder(by_point)(flat)
        elif self.loss == "median":
            size = min(2 * self.num_adversaries + 1, alive.size)
            estimates = _block_medians(knots, flat, size, self.alpha)
        else:
            estimates, weights = self._reweighted(knots, flat)
            info["weights"] = weights[np.argsort(by_point, kind="stable")]  # by worker, as Decoded.alive
        shape = (self.num_inputs, *tuple(Y.shape[1:]))
        return _arraylib.from_float64(np.asarray(estimates), Y).reshape(shape), info

    def _reweighted(self, knots: np.ndarray, flat: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Iteratively reweighted smoothing splines (step 3): the estimates at ``alpha`` and
        the final weights (in the order of ``knots``, sorted)."""
        lam, d = self._lambda_dec, max(flat.shape[1], 1)
        n, q = knots.size, self.num_adversaries
        if flat.shape[1] == 0:  # nothing to fit
            return np.zeros((self.num_inputs, 0)), np.ones(n)
        unit = float(np.abs(flat).max(initial=0.0))  # everything below is scale-invariant:
        if unit > 0 and np.isfinite(unit) and unit != 1.0:  # in units of the largest result
            estimates, weights = self._reweighted(knots, flat / unit)
            return estimates * unit, weights
        if self.start == "median" and q > 0 and n >= 2 * (2 * q + 1):
            start = _block_medians(knots, flat, 2 * q + 1)
        else:
            start = _spline_at(knots, flat, max(lam, self._start_lambda), np.ones(n), knots)
        residual = _rms_rows(flat - start, d)
        # The scale: the start's residuals' robust spread, at least SPREAD_FLOOR of the start's
        # own range (RMS over coordinates; the start is robust): a deterministic f leaves the
        # honest residuals near 0, and a scale of 0 would reject every result not fitted exactly.
        extent = np.sqrt(np.mean((start.max(axis=0) - start.min(axis=0)) ** 2))
        floor = max(SPREAD_FLOOR * float(extent), 1e-12)
        spread = max(1.4826 * _median(residual), floor)  # fixed from the start on
        weights, estimates = None, None
        points = np.concatenate([knots, self.alpha])  # one fit: the residuals and the estimates
        for _ in range(self.iterations):
            ratio = residual / spread
            if self.loss == "huber":
                new = np.minimum(1.0, HUBER_C / np.maximum(ratio, 1e-300))
            else:
                new = np.maximum(1.0 - (ratio / TUKEY_C) ** 2, 0.0) ** 2
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
            both = _spline_at(knots, flat, lam, weights, points)
            estimates = both[n:]
            residual = _rms_rows(flat - both[:n], d)
        if weights is None:
            weights = np.ones(n)
            estimates = _spline_at(knots, flat, lam, weights, self.alpha)
        return estimates, weights

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
    return _block_medians(knots, flat, size, points)


def _block_medians(knots: np.ndarray, values: np.ndarray, size: int, points: np.ndarray | None = None):
    """:func:`block_medians` on float64 ``(n, d)`` values; no checks are performed."""

    points = knots if points is None else points
    n = knots.size
    blocks = max(n // size, 1)
    head = (blocks - 1) * size  # blocks of exactly `size`, then the last one with the rest
    d = values.shape[1]
    starts = np.arange(blocks) * size
    counts = np.r_[np.full(blocks - 1, size), n - head]
    centres = (knots[starts + (counts - 1) // 2] + knots[starts + counts // 2]) / 2  # sorted knots
    medians = np.empty((blocks, d))
    if blocks > 1:  # blocks of odd size 2q + 1: the middle order statistic, by one partition
        middle = size // 2
        grouped = values[:head].reshape(blocks - 1, size, d)
        if size % 2:
            medians[:-1] = np.partition(grouped, middle, axis=1)[:, middle]
        else:
            medians[:-1] = np.median(grouped, axis=1)
    medians[-1] = _median(values[head:])
    if blocks == 1:
        return np.repeat(medians, points.size, axis=0)
    where = np.clip(np.searchsorted(centres, points) - 1, 0, blocks - 2)
    share = ((points - centres[where]) / (centres[where + 1] - centres[where]))[:, None]
    return (1.0 - share) * medians[where] + share * medians[where + 1]


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


def _majority_range(values: np.ndarray, q: int) -> tuple[np.ndarray, np.ndarray]:
    """Per column, ``[lo - w, hi + w]``: ``lo`` and ``hi`` the ``(q+1)``-th smallest and
    largest of the ``n > 2q`` values, ``w = hi - lo``."""
    n = values.shape[0]
    ordered = np.partition(values, [q, n - 1 - q], axis=0)
    low, high = ordered[q], ordered[n - 1 - q]
    width = high - low
    return low - width, high + width


def repeated_median_line(knots, values) -> np.ndarray:
    """Siegel's repeated-median line through ``values`` (``(n, ...)``, at ``n >= 1`` distinct
    finite ``knots``, any order), per column (of the trailing dimensions flattened), read at the
    knots: ``(n, d)`` float64. See :func:`_repeated_median_line`."""
    return _repeated_median_line(*_checked(knots, values, ordered=False))


def _repeated_median_line(knots: np.ndarray, values: np.ndarray) -> np.ndarray:
    """Siegel's repeated-median line through ``values`` (``(n, d)``, at distinct ``knots``),
    per column, read at the knots: slope ``median_i median_{j != i} (v_j - v_i) / (t_j - t_i)``,
    intercept ``median_i (v_i - slope t_i)``. With at most ``n / 2 - 1`` corrupted values
    it reproduces values affine in the knots exactly, whatever the corrupted ones are
    (breakdown point 1/2). ``O(n^2 d)`` time, ``O(n d)`` memory: for small ``n``. No checks
    are performed."""
    n = knots.size
    if n < 2:
        return values.copy()
    slopes = np.empty_like(values)
    for i in range(n):
        others = np.r_[0:i, i + 1 : n]
        slopes[i] = _median((values[others] - values[i]) / (knots[others] - knots[i])[:, None])
    slope = _median(slopes)
    intercept = _median(values - knots[:, None] * slope)
    return intercept + knots[:, None] * slope


def _median(values: np.ndarray):
    """The median along the first axis by one partition (numpy's ``median`` checks for NaN
    and dispatches first: a third of a small robust decode's time)."""
    n = values.shape[0]
    middle = np.partition(values, [(n - 1) // 2, n // 2], axis=0)
    centre = (middle[(n - 1) // 2] + middle[n // 2]) / 2
    return float(centre) if np.ndim(centre) == 0 else centre


def _rms_rows(x: np.ndarray, d: int) -> np.ndarray:
    """Each row's root mean square over its ``d`` columns."""
    return np.sqrt(np.einsum("ij,ij->i", x, x) / d)


def _spline_at(knots: np.ndarray, values: np.ndarray, lam: float, weights: np.ndarray, points: np.ndarray):
    """The weighted smoothing spline of ``values`` (``(n, d)`` float64 at sorted, distinct
    ``knots``) at ``points``: :func:`codedcomputing.spline.fit` without its checks (the
    decoder's inner loop). Zero weights leave their knots out; at ``lam = 0`` the spline
    interpolates the rest."""
    keep = weights > 0
    if not keep.all():
        lam = lam * knots.size / np.count_nonzero(keep)
        knots, values, weights = knots[keep], values[keep], weights[keep]
    if knots.size == 2 or lam == 0.0:
        g, gamma = _Smoother(knots, 0.0).solve(values)
    else:
        g, gamma = _Smoother(knots, knots.size * lam, weights).solve(values)
    return _Stencil.build(knots, points).apply(g, gamma)
