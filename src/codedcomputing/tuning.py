"""Tuning GCC: :func:`tune` picks ``(lambda_enc, lambda_dec)`` by grid search on a
calibration batch, against the true outputs ``f(X)``.

The lambda grids and generalised cross-validation (GCC's ``lambda_dec="gcv"``) are the
spline's: :func:`codedcomputing.spline.lambda_grid`, :func:`codedcomputing.spline.gcv_lambda`
and :func:`codedcomputing.spline.gcv_score`.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from . import _arraylib, metrics
from ._progress import progress as show_progress
from ._validation import check_count, check_rng
from .codes import GCC
from .spline import check_grid, lambda_grid

__all__ = ["TuningResult", "tune"]


@dataclass(frozen=True, eq=False)
class TuningResult:
    """The outcome of :func:`tune`.

    ``lambda_enc``, ``lambda_dec``: the best pair; ``mse``: its mean MSE over the trials;
    ``grid_mse[i, j]``: mean MSE of ``(lambdas_enc[i], lambdas_dec[j])`` (read-only);
    ``num_inputs``, ``num_workers``, ``points``, ``decoding``: the code's shape and decoder.
    :meth:`code` builds the tuned GCC.
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
    decoding: str = "auto"

    def code(self) -> GCC:
        """``GCC(K, N, lambda_enc, lambda_dec, decoding=..., points=...)`` with the tuned lambdas."""
        return GCC(
            self.num_inputs,
            self.num_workers,
            self.lambda_enc,
            self.lambda_dec,
            decoding=self.decoding,
            points=self.points,
        )


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
    decoding: str = "auto",
    progress: bool = False,
) -> TuningResult:
    """Grid search for GCC's ``(lambda_enc, lambda_dec)`` on a calibration batch ``X``.

    Minimises the mean, over ``trials`` straggler patterns, of ``metrics.mse(estimate,
    f(X))``, where ``estimate`` is ``GCC(K, N, lambda_enc, lambda_dec, decoding=decoding,
    points=points).decode(f(coded)[alive], alive)``, ``K = len(X)`` and ``N =
    num_workers`` (with the default ``decoding="auto"``, ``lambda_dec = 0`` is the gap-aware
    decoder and a positive one the smoothing spline). Returns a :class:`TuningResult` (ties
    go to the earliest pair, row by row).

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
    results of every encoder lambda. ``progress=True`` shows progress over the
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
    lambdas_enc = check_grid(lambdas_enc, "lambdas_enc")
    lambdas_dec = check_grid(lambdas_dec, "lambdas_dec")
    # Build every code up front: this validates points and the lambdas' sizes before f runs.
    encoders = [GCC(num_inputs, num_workers, lam, 0.0, points=points) for lam in lambdas_enc]
    decoders = [
        GCC(num_inputs, num_workers, 0.0, lam, decoding=decoding, points=points) for lam in lambdas_dec
    ]

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
        with show_progress("tuning GCC lambdas", len(encoders), enabled=progress) as advance:
            for i, encoder in enumerate(encoders):
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
                advance()
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
        decoding=decoding,
    )
