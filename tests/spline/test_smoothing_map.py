"""The truncated sparse spline maps behind GCC's encoder and decoder (``smoothing_matrix(...,
tol > 0)`` and ``spline.SmoothingMap``)."""

from __future__ import annotations

import numpy as np
import pytest
import scipy.sparse
import torch

import codedcomputing as cc
from codedcomputing.spline import fit, smoothing_matrix
from codedcomputing.spline.maps import TRUNCATION, SmoothingMap


def chebyshev_subset(rng, n, extra):
    """n of the n + extra second-kind Chebyshev points, as the returned workers of a decoder."""
    total = n + extra
    keep = np.sort(rng.choice(total, size=n, replace=False))
    return np.sort(np.cos(np.pi * np.arange(total) / (total - 1)))[keep]


@pytest.mark.parametrize("lam", [0.0, 1e-9, 1e-6, 1e-3])
@pytest.mark.parametrize(("n", "num_points"), [(40, 7), (300, 30), (1200, 120), (400, 4000)])
def test_truncated_map_matches_the_exact_dense_map(n, num_points, lam):
    """Entry by entry, the sparse map differs from the exact one by less than 1e-12 of its scale."""
    rng = np.random.default_rng(n + num_points)
    knots = chebyshev_subset(rng, n, n // 10)
    points = np.sort(np.cos((2 * np.arange(1, num_points + 1) - 1) * np.pi / (2 * num_points)))
    sparse = smoothing_matrix(knots, lam, points, tol=1e-14)
    dense = smoothing_matrix(knots, lam, points)
    assert scipy.sparse.issparse(sparse)
    assert np.abs(sparse.toarray() - dense).max() < 1e-12 * np.abs(dense).max()


def test_truncated_map_handles_unsorted_knots_and_points_outside():
    """Columns follow the knots' given order; points beyond the knots extrapolate linearly."""
    rng = np.random.default_rng(1)
    knots = rng.permutation(chebyshev_subset(rng, 500, 60))
    points = np.concatenate([[-1.5, -1.0], np.linspace(-0.9, 0.9, 50), [1.0, 1.7]])
    y = rng.normal(size=(500, 3))
    got = smoothing_matrix(knots, 1e-8, points, tol=1e-14) @ y
    expected = fit(knots, y, 1e-8)(points)
    assert np.abs(got - expected).max() < 1e-11 * np.abs(expected).max()


def test_interpolating_map_is_local():
    """With lam = 0 the weights decay geometrically: rows keep a few dozen entries of 2000."""
    knots = np.linspace(-1, 1, 2000)
    points = np.linspace(-1, 1, 97)
    sparse = smoothing_matrix(knots, 0.0, points, tol=1e-14)
    per_row = np.diff(sparse.indptr)
    assert per_row.max() <= 64
    assert per_row.min() >= 1  # a point on a knot needs only that knot


def test_every_kept_weight_is_above_the_tolerance():
    """The map keeps exactly the weights of magnitude >= tol times the row's largest."""
    rng = np.random.default_rng(2)
    knots = chebyshev_subset(rng, 600, 50)
    points = np.linspace(-0.95, 0.95, 40)
    tol = 1e-6
    sparse = smoothing_matrix(knots, 0.0, points, tol=tol).toarray()
    dense = smoothing_matrix(knots, 0.0, points)
    row_max = np.abs(dense).max(axis=1, keepdims=True)
    kept = sparse != 0
    assert np.all(np.abs(dense[kept]) >= tol * np.broadcast_to(row_max, dense.shape)[kept] * (1 - 1e-9))
    dropped = np.where(kept, 0.0, np.abs(dense))
    assert np.all(dropped < tol * row_max * (1 + 1e-6))


@pytest.mark.parametrize("tol", [-1e-3, 1.0, float("nan")])
def test_bad_tolerance_is_rejected(tol):
    with pytest.raises(ValueError, match="tol"):
        smoothing_matrix(np.linspace(-1, 1, 10), 0.0, [0.0], tol=tol)


def test_gcc_maps_are_sparse_for_many_knots_and_dense_for_few():
    """A large decoder is stored sparse (and applied without densifying), a small one dense."""
    big = cc.GCC(200, 2000, decoding="spline")
    alive = cc.stragglers.random(2000, 200, 0)
    assert scipy.sparse.issparse(big.decoder(alive).matrix)
    assert scipy.sparse.issparse(big.encoder.matrix)
    small = cc.GCC(10, 50, decoding="spline")
    assert isinstance(small.decoder(cc.stragglers.random(50, 5, 0)).matrix, np.ndarray)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_sparse_map_applies_to_torch_like_numpy(dtype):
    """A sparse SmoothingMap gives the same numbers on torch tensors as on numpy arrays."""
    rng = np.random.default_rng(3)
    knots = chebyshev_subset(rng, 800, 80)
    smoothing = SmoothingMap(knots, 0.0, np.linspace(-1, 1, 80))
    assert scipy.sparse.issparse(smoothing.matrix)
    y = rng.normal(size=(800, 2, 3))
    out = smoothing(torch.as_tensor(y, dtype=dtype))
    assert isinstance(out, torch.Tensor) and out.dtype == dtype and out.shape == (80, 2, 3)
    tol = 1e-5 if dtype == torch.float32 else 1e-12
    assert np.abs(out.double().numpy() - smoothing(y)).max() < tol * np.abs(smoothing(y)).max()


def test_small_weights_are_flushed_so_float32_stays_normal():
    """No weight of a stored map lies below TRUNCATION of its row (float32 subnormals are slow)."""
    code = cc.GCC(10, 100)
    matrix = code.encoder.matrix
    nonzero = np.abs(matrix[matrix != 0])
    assert nonzero.min() >= TRUNCATION * np.abs(matrix).max() * 1e-3


@pytest.mark.parametrize("lam", [0.0, 1e-7, 1e-3])
def test_second_derivative_map_gives_the_fits_second_derivatives(lam):
    """smoothing_matrix(..., derivative=2) at the knots equals fit(...).second_derivatives,
    and it is zero beyond the end knots (the spline is linear there)."""
    rng = np.random.default_rng(4)
    knots = rng.permutation(chebyshev_subset(rng, 300, 30))
    y = rng.normal(size=(300, 2))
    spl = fit(knots, y, lam)
    for tol in (0.0, 1e-14):
        curvature = smoothing_matrix(knots, lam, np.sort(knots), tol=tol, derivative=2)
        got = np.asarray(curvature @ y)
        assert np.abs(got - spl.second_derivatives).max() < 1e-9 * np.abs(spl.second_derivatives).max()
    outside = smoothing_matrix(knots, lam, [-2.0, 3.0], derivative=2)
    assert np.all(outside == 0.0)
    with pytest.raises(ValueError, match="derivative"):
        smoothing_matrix(knots, lam, [0.0], derivative=1)


def test_evaluation_matrix_evaluates_from_values_and_second_derivatives():
    """evaluation_matrix(knots, z) @ [g; gamma] == the spline at z, inside and outside."""
    rng = np.random.default_rng(5)
    knots = rng.permutation(np.linspace(-1, 1, 25))
    spl = fit(knots, rng.normal(size=(25, 3)), 1e-4)
    z = np.concatenate([[-1.3], np.linspace(-1, 1, 41), [1.2]])
    order = np.argsort(np.argsort(knots))  # spl stores sorted knots; map back to the given order
    coefficients = np.vstack([spl.values[order], spl.second_derivatives[order]])
    matrix = cc.spline.evaluation_matrix(knots, z)
    assert matrix.shape == (z.size, 50) and np.all(np.diff(matrix.indptr) <= 4)
    assert np.abs(matrix @ coefficients - spl(z)).max() < 1e-12


@pytest.mark.parametrize("lam", [0.0, 1e-6])
def test_encoder_with_many_more_workers_than_inputs_is_applied_in_two_stages(lam):
    """N >> K: the encoder fits the knots first, then evaluates at the workers; same numbers."""
    code = cc.GCC(200, 2000, lambda_enc=lam)
    assert code.encoder.two_stage
    assert code.encoder.matrix.shape == (400, 200) and code.encoder.evaluation.shape == (2000, 400)
    X = np.random.default_rng(6).normal(size=(200, 4))
    expected = fit(code.alpha, X, lam)(code.beta)
    assert np.abs(code.encode(X) - expected).max() < 1e-10 * np.abs(expected).max()
    assert not cc.GCC(200, 300).encoder.two_stage  # few more points than knots: one map
