"""Choosing the smoothing parameters: grids, generalised cross-validation and GCC tuning.

Scale of lambda. With the *mean* convention of :mod:`codedcomputing.spline`
(``(1/n) sum_i ||u(t_i) - y_i||^2 + lambda * int ||u''||^2``) and ``n`` knots spread over
``[-1, 1]`` (spacing ``h = 2 / (n - 1)``), the smoother acts like a kernel whose bandwidth
``b`` satisfies ``b^4 ~ 2 * lambda`` (Silverman's equivalent kernel for design density
``1/2``). Measured in knot spacings, ``(b / h)^4 ~ 2 * lambda / h^4``: a wiggle on the
scale of the knot spacing costs ``~ lambda / h^4`` in the penalty against ``~ 1`` in the
data term. So the dimensionless parameter is ``c = lambda / h^4``: ``c << 1`` interpolates
(``lambda = 0`` exactly), ``c ~ 1`` averages over a few neighbouring knots, and ``c >> 1``
over many. :func:`lambda_grid` is log-spaced in ``c``, so one grid serves every ``n``; for
``n ~ 100`` its smallest positive entry is ``~ 1e-13``.

:func:`gcv_lambda` picks ``lambda`` for one spline fit by generalised cross-validation (no
ground truth needed). :func:`tune` picks GCC's ``(lambda_enc, lambda_dec)`` by grid search
on a calibration batch, against the true outputs ``f(X)``.
"""

from __future__ import annotations

import contextlib
import math
import warnings
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from . import _arraylib, metrics
from ._validation import check_real_array, check_rng
from .codes import GCC
from .codes.base import MAX_LAMBDA, check_count
from .spline import check_knots, check_nonnegative, fit, smoothing_matrix

__all__ = ["TuningResult", "gcv_lambda", "gcv_score", "lambda_grid", "tune"]

# Above this many knots GCV takes the influence matrix's diagonal from the sparse, truncated
# map instead of the dense one, built a block of rows at a time: at most DIAGONAL_ENTRIES
# rows x knots per block, which bounds the memory (~50 bytes an entry) even when heavy
# smoothing makes the map dense.
DENSE_GCV_LIMIT = 400
SPARSE_TOL = 1e-14
DIAGONAL_ENTRIES = 2**22


def lambda_grid(num_knots: int, num: int = 12, low: float = 1e-6, high: float = 1e4) -> np.ndarray:
    """Smoothing parameters ``[0, c_1 h^4, ..., c_num h^4]`` for a spline with ``num_knots`` knots.

    ``h = 2 / (num_knots - 1)`` is the mean knot spacing on ``[-1, 1]`` and ``c`` runs over
    ``num`` log-spaced values in ``[low, high]``. ``c = lambda / h^4`` is the dimensionless
    smoothing strength (module docstring): roughly the fourth power of the equivalent
    kernel's bandwidth in knot spacings (``(b / h)^4 ~ 2 c``). With the defaults the grid
    runs from interpolation (``0``, and ``c = 1e-6``: bandwidth ~0.04 spacings) to heavy
    smoothing (``c = 1e4``: ~14 spacings), whatever ``num_knots``. The absolute lambdas
    shrink like ``h^4`` (for 99 knots the smallest positive one is ``~ 1.7e-13``), which is
    why a fixed, unscaled grid would be far too coarse for many knots.

    For knots spanning ``[a, b]`` rather than ``[-1, 1]``, multiply by ``((b - a) / 2)^3``
    (the penalty's scaling), as :func:`gcv_lambda` does for its default grid.
    """
    num_knots = check_count(num_knots, "num_knots", 2)
    num = check_count(num, "num", 1)
    low, high = check_nonnegative(low, "low"), check_nonnegative(high, "high")
    if not (np.isfinite(low) and low > 0):
        raise ValueError(f"low must be a finite number > 0, got {low!r}")
    if not (np.isfinite(high) and high >= low):
        raise ValueError(f"high must be a finite number >= low = {low:g}, got {high!r}")
    h = 2.0 / (num_knots - 1)
    return np.concatenate([[0.0], np.geomspace(low, high, num) * h**4])


def _check_grid(grid, name: str) -> np.ndarray:
    """``grid`` as a fresh 1-D float64 array of finite lambdas in ``[0, MAX_LAMBDA]``."""
    arr = np.array(check_real_array(grid, name))  # a copy: it is made read-only below
    if arr.ndim != 1 or arr.size == 0:
        raise ValueError(f"{name} must be a non-empty 1-D array, got shape {arr.shape}")
    if not np.all(np.isfinite(arr)):
        raise ValueError(f"{name} contains NaN or inf")
    if np.any(arr < 0) or np.any(arr > MAX_LAMBDA):
        raise ValueError(
            f"{name} entries must lie in [0, {MAX_LAMBDA:g}], got min {arr.min():g}, max {arr.max():g}"
        )
    arr.flags.writeable = False
    return arr


def _gcv_problem(knots, values) -> tuple[np.ndarray, np.ndarray]:
    t = check_knots(knots)
    if t.size < 3:
        raise ValueError(
            f"knots needs at least 3 points for cross-validation, got {t.size} "
            "(through 2 points every lambda gives the same line)"
        )
    y = check_real_array(values, "values")
    if y.ndim == 0 or y.shape[0] != t.size:
        raise ValueError(
            f"values must have leading dimension {t.size} (one row per knot), got shape {y.shape}"
        )
    if not np.all(np.isfinite(y)):
        raise ValueError("values contains NaN or inf")
    return t, y.reshape(t.size, -1)


def _influence_diagonal(t: np.ndarray, lam: float) -> np.ndarray:
    """The diagonal of the influence matrix ``S`` (``S y`` = the fit at the knots ``t``)."""
    n = t.size
    if n <= DENSE_GCV_LIMIT:
        return np.diag(smoothing_matrix(t, lam, t))
    chunk = max(64, DIAGONAL_ENTRIES // n)
    blocks = []
    for a in range(0, n, chunk):
        rows = smoothing_matrix(t, lam, t[a : a + chunk], tol=SPARSE_TOL)
        blocks.append(rows[:, a : a + chunk].diagonal())
    return np.concatenate(blocks)


def _gcv(t: np.ndarray, y: np.ndarray, lam: float) -> float:
    """V(lam) for checked knots and ``(n, d)`` values; ``inf`` where ``tr(I - S) = 0``."""
    n = t.size
    if lam == 0.0:
        return math.inf  # interpolation: zero residual over zero degrees of freedom
    diagonal = _influence_diagonal(t, lam)
    free = float(np.sum(1.0 - diagonal)) / n  # (1/n) tr(I - S)
    if not free > 0.0:
        return math.inf
    residual = y - fit(t, y, lam)(t)
    return float(np.sum(residual**2)) / n / free**2


def gcv_score(knots, values, lam: float) -> float:
    """The GCV criterion ``V(lam) = (1/n) ||(I - S) y||_F^2 / ((1/n) tr(I - S))^2``.

    ``S`` is the influence matrix of the smoothing spline (``S y`` = the fit at the
    knots), ``y = values`` of shape ``(n, ...)``, its columns summed in the norm (one
    shared lambda). ``lam = 0`` interpolates, so ``tr(I - S) = 0`` and ``V`` is undefined
    there: this returns ``inf``.
    """
    t, y = _gcv_problem(knots, values)
    lam = check_nonnegative(lam, "lam")
    if lam > MAX_LAMBDA:
        raise ValueError(f"lam must be at most {MAX_LAMBDA:g}, got {lam:g}")
    return _gcv(t, y, lam)


def gcv_lambda(knots, values, grid=None) -> float:
    """The ``lambda`` in ``grid`` minimising generalised cross-validation (:func:`gcv_score`).

    Fits the natural cubic smoothing spline of :mod:`codedcomputing.spline` (mean
    convention) through ``values`` (shape ``(n, ...)``, ``n >= 3``) at distinct ``knots``
    (any order). ``grid`` defaults to ``lambda_grid(n)`` rescaled to the knots' span
    (times ``((max - min) / 2)^3``), i.e. the same dimensionless grid as for knots on
    ``[-1, 1]``. ``lambda = 0`` (interpolation) has no GCV score and is never chosen; ties
    go to the earliest grid entry. The influence matrix's trace comes from its diagonal,
    dense for ``n <= 400`` and sparse (truncated at ``1e-14``) above, built a block of rows
    at a time: time ``O(n d)`` per lambda plus ``O(n w)`` for a map ``w`` knots wide, which
    is linear in ``n`` for light smoothing but quadratic once the bandwidth is a fixed
    fraction of the span (``n = 2000``: ~0.05 s for ``c <= 1e-2``, ~1.3 s for ``c >= 1e4``;
    ``n = 8000``: ~0.2 s and ~6-20 s).

    GCV estimates the prediction error without knowing the noise level; for noise-free
    data it tends to the smallest positive lambda offered. Where knots cluster (Chebyshev
    points) its curve can have a second, deeper minimum at tiny lambda, which a grid
    search finds and scipy's bounded continuous search may not. The default grid stops at
    ``c = 1e4`` (a bandwidth of ~14 knot spacings); many knots on smooth, noisy data can
    call for more (``n = 2000``: scipy picks ``c ~ 1e6``), so a minimum at the grid's
    largest lambda warns (``RuntimeWarning``): pass a wider grid then.
    """
    t, y = _gcv_problem(knots, values)
    if grid is None:
        half_width = (t.max() - t.min()) / 2.0
        grid = lambda_grid(t.size) * half_width**3
    grid = _check_grid(grid, "grid")
    if not np.any(grid > 0):
        raise ValueError("grid must contain a positive lambda (lambda = 0 has no GCV score)")
    scores = np.array([_gcv(t, y, float(lam)) for lam in grid])
    best = int(np.argmin(scores))
    if grid[best] == grid.max() and np.sum(grid > 0) > 1:
        warnings.warn(
            f"gcv_lambda: the GCV minimum is at the grid's largest lambda ({grid[best]:g}); the optimum "
            "may lie beyond it: pass a grid reaching further (e.g. lambda_grid(n, high=1e8))",
            RuntimeWarning,
            stacklevel=2,
        )
    return float(grid[best])


@dataclass(frozen=True, eq=False)
class TuningResult:
    """The outcome of :func:`tune`.

    ``lambda_enc``, ``lambda_dec``: the best pair; ``mse``: its mean MSE over the trials;
    ``grid_mse[i, j]``: mean MSE of ``(lambdas_enc[i], lambdas_dec[j])`` (read-only);
    ``num_inputs``, ``num_workers``, ``points``: the code's shape. :meth:`code` builds the
    tuned GCC.
    """

    lambda_enc: float
    lambda_dec: float
    mse: float
    grid_mse: np.ndarray
    lambdas_enc: np.ndarray
    lambdas_dec: np.ndarray
    num_inputs: int
    num_workers: int
    points: str = "chebyshev"

    def code(self) -> GCC:
        """``GCC(K, N, lambda_enc, lambda_dec, points=points)`` with the tuned lambdas."""
        return GCC(self.num_inputs, self.num_workers, self.lambda_enc, self.lambda_dec, points=self.points)


def _check_batch(X):
    """``X`` as given (numpy array or torch tensor), checked: at least 1 row, all finite."""
    if not _arraylib.is_torch(X):
        try:
            X = np.asarray(X)
        except (TypeError, ValueError) as err:
            raise ValueError(f"X must be an array of numbers: {err}") from None
        if X.dtype == object or not (np.issubdtype(X.dtype, np.number) or X.dtype == bool):
            raise ValueError(f"X must hold numbers, got dtype {X.dtype}")
    if X.ndim == 0 or X.shape[0] < 1:
        raise ValueError(f"X must have at least 1 row (shape (K, ...)), got shape {tuple(X.shape)}")
    return _arraylib.check_inputs(X, X.shape[0], "X")


def _check_batches(X) -> list:
    """``X`` (one batch) or a list/tuple of arrays (several batches) as a list of checked batches.

    A list of plain numbers or lists is one batch, as ``np.asarray`` reads it; a list whose
    items are numpy arrays or torch tensors is a list of batches, which must share one shape.
    """
    if not (
        isinstance(X, (list, tuple))
        and X
        and all(isinstance(b, np.ndarray) or _arraylib.is_torch(b) for b in X)
    ):
        return [_check_batch(X)]
    batches = [_check_batch(batch) for batch in X]
    shapes = {tuple(batch.shape) for batch in batches}
    if len(shapes) > 1:
        raise ValueError(f"X's batches must all have one shape (K, ...), got shapes {sorted(shapes)}")
    if len({_arraylib.is_torch(batch) for batch in batches}) > 1:
        raise ValueError("X's batches must be all numpy arrays or all torch tensors")
    return batches


def _all_finite(y) -> bool:
    if _arraylib.is_torch(y):
        return bool(y.isfinite().all())
    return bool(np.all(np.isfinite(np.asarray(y))))


def tune(
    f: Callable,
    X,
    num_workers: int,
    stragglers: Callable[[int, np.random.Generator], np.ndarray],
    *,
    trials: int = 20,
    seed=0,
    lambdas_enc=None,
    lambdas_dec=None,
    points: str = "chebyshev",
    progress: bool = False,
) -> TuningResult:
    """Grid search for GCC's ``(lambda_enc, lambda_dec)`` on a calibration batch ``X``.

    Minimises the mean, over ``trials`` straggler patterns, of ``metrics.mse(estimate,
    f(X))``, where ``estimate`` is ``GCC(K, N, lambda_enc, lambda_dec,
    points=points).decode(f(coded)[alive], alive)``, ``K = len(X)`` and ``N =
    num_workers``. Returns a :class:`TuningResult` (ties go to the earliest pair, row by
    row).

    ``X`` may also be a list (or tuple) of ``B`` calibration batches, numpy arrays or torch
    tensors of one shape ``(K, ...)``: trial ``t`` then codes batch ``t % B``, so the pair chosen must do well
    across inputs, not just on one batch (with one batch, a pair can win by fitting that
    batch's quirks). Use at least as many trials as batches.

    - ``f``: a batch callable, as for the codes: numpy in, numpy out, or (when ``X`` is a
      torch tensor) torch in, torch out (run under ``torch.no_grad()``). Its results are
      kept as it returns them; results with NaN or inf are erasures (``decode`` drops them
      with a warning), but ``f(X)`` itself must be finite.
    - ``stragglers(N, rng) -> alive``: draws one pattern, e.g.
      ``lambda n, rng: cc.stragglers.random(n, 5, rng)``. The ``trials`` patterns are drawn
      once, before anything else, as ``[stragglers(N, rng) for _ in range(trials)]`` with
      ``rng = np.random.default_rng(seed)``, and every lambda pair sees the same ones.
    - Grids: 1-D, finite, ``>= 0``, kept in the order given. Defaults:
      ``lambda_grid(K, num=8)`` for the encoder (``[0]`` for ``K <= 2``, where every lambda
      gives the same encoder) and ``lambda_grid(N, num=8)`` for the decoder: 9 x 9 pairs,
      ``c`` from ``1e-6`` to ``1e4`` in steps of ~27x, coarser than ``lambda_grid``'s
      default to keep the cost down.

    Cost: ``f`` is called once on each batch and once per (encoder lambda, batch) on all
    ``N`` coded inputs; each (decoder lambda, pattern) decoder is built once and applied to the
    results of every encoder lambda. ``progress=True`` shows a rich progress bar over the
    encoder lambdas.
    """
    if not callable(f):
        raise ValueError(f"f must be callable, got {f!r}")
    if not callable(stragglers):
        raise ValueError(f"stragglers must be callable (num_workers, rng) -> alive, got {stragglers!r}")
    batches = _check_batches(X)
    num_inputs = int(batches[0].shape[0])
    num_workers = check_count(num_workers, "num_workers", 2)
    trials = check_count(trials, "trials", 1)
    if trials < len(batches):
        raise ValueError(f"trials must be at least the number of batches ({len(batches)}), got {trials}")
    if lambdas_enc is None:
        lambdas_enc = lambda_grid(num_inputs, num=8) if num_inputs > 2 else [0.0]
    if lambdas_dec is None:
        lambdas_dec = lambda_grid(num_workers, num=8)
    lambdas_enc = _check_grid(lambdas_enc, "lambdas_enc")
    lambdas_dec = _check_grid(lambdas_dec, "lambdas_dec")
    # Build every code up front: this validates points and the lambdas' sizes before f runs.
    encoders = [GCC(num_inputs, num_workers, lam, 0.0, points=points) for lam in lambdas_enc]
    decoders = [GCC(num_inputs, num_workers, 0.0, lam, points=points) for lam in lambdas_dec]

    rng = check_rng(seed, "seed")
    patterns = []
    for trial in range(trials):
        try:
            alive = _arraylib.check_alive(stragglers(num_workers, rng), num_workers)
        except ValueError as err:
            raise ValueError(f"stragglers returned an invalid alive set (trial {trial}): {err}") from None
        if alive.size < 2:
            raise ValueError(
                f"stragglers returned {alive.size} workers (trial {trial}); GCC needs at least 2"
            )
        patterns.append(np.sort(alive))
    for code in decoders:  # keep every pattern's decoder: each is reused once per encoder lambda
        code.decoder_cache_size = max(type(code).decoder_cache_size, trials)

    no_grad = contextlib.nullcontext()
    if _arraylib.is_torch(batches[0]):
        import torch

        no_grad = torch.no_grad()
    grid_mse = np.empty((lambdas_enc.size, lambdas_dec.size))
    with no_grad:
        truths = [f(batch) for batch in batches]
        if not all(_all_finite(truth) for truth in truths):
            raise ValueError("f(X) contains NaN or inf: no ground truth to tune against")
        rows = enumerate(encoders)
        if progress:
            from rich.progress import track

            rows = track(list(rows), description="tuning GCC lambdas", total=len(encoders))
        for i, encoder in rows:
            results = [f(encoder.encode(batch)) for batch in batches]
            for j, code in enumerate(decoders):
                errors = [
                    metrics.mse(
                        code.decode(_arraylib.take_rows(results[t % len(batches)], alive), alive),
                        truths[t % len(batches)],
                    )
                    for t, alive in enumerate(patterns)
                ]
                grid_mse[i, j] = np.mean(errors)
    best = np.unravel_index(int(np.argmin(np.where(np.isnan(grid_mse), np.inf, grid_mse))), grid_mse.shape)
    grid_mse.flags.writeable = False
    return TuningResult(
        lambda_enc=float(lambdas_enc[best[0]]),
        lambda_dec=float(lambdas_dec[best[1]]),
        mse=float(grid_mse[best]),
        grid_mse=grid_mse,
        lambdas_enc=lambdas_enc,
        lambdas_dec=lambdas_dec,
        num_inputs=num_inputs,
        num_workers=num_workers,
        points=points,
    )
