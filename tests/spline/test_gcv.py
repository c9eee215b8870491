"""The dimensionless lambda grid and generalised cross-validation (codedcomputing.spline).

``lambda_grid`` is the dimensionless grid ``lambda = c h^4``; ``gcv_lambda`` is checked against
scipy's GCV (``make_smoothing_spline(lam=None)``, whose ``lam`` is ``n`` times ours) and
against an influence matrix built independently from scipy."""

from __future__ import annotations

import numpy as np
import pytest
from scipy.interpolate import make_smoothing_spline

import codedcomputing as cc
from codedcomputing import spline
from codedcomputing.spline import gcv


def smooth(x):
    return np.sin(3 * x) + 0.5 * np.cos(7 * x)


def knots(kind: str, n: int, rng: np.random.Generator) -> np.ndarray:
    grid = np.linspace(-1.0, 1.0, n)
    if kind == "equispaced":
        return grid
    return grid + rng.uniform(-0.3, 0.3, n) * 2 / (n - 1)  # jittered: well separated


def test_lambda_grid_starts_at_zero_and_increases():
    grid = spline.lambda_grid(50)
    assert grid.shape == (13,)
    assert grid[0] == 0.0
    assert np.all(np.diff(grid) > 0)
    h = 2 / 49
    np.testing.assert_allclose(grid[1:] / h**4, np.geomspace(1e-6, 1e4, 12), rtol=1e-12)
    assert spline.lambda_grid(50, num=4, low=1e-2, high=1e1).shape == (5,)


def test_lambda_grid_scales_like_h4():
    """Halving the spacing (n -> 2n - 1 knots) shrinks every positive lambda 16x."""
    for n in (5, 20, 100):
        np.testing.assert_allclose(
            spline.lambda_grid(2 * n - 1)[1:], spline.lambda_grid(n)[1:] / 16, rtol=1e-12
        )
    assert spline.lambda_grid(100)[1] < 1e-12  # reaches the scale GCC needs at N ~ 100


@pytest.mark.parametrize(
    ("kwargs", "name"),
    [
        ({"num_knots": 1}, "num_knots"),
        ({"num_knots": 2.5}, "num_knots"),
        ({"num_knots": 10, "num": 0}, "num"),
        ({"num_knots": 10, "low": 0.0}, "low"),
        ({"num_knots": 10, "low": 1.0, "high": 0.5}, "high"),
        ({"num_knots": 10, "high": np.inf}, "high"),
    ],
)
def test_lambda_grid_rejects_bad_input(kwargs, name):
    with pytest.raises(ValueError, match=name):
        spline.lambda_grid(**kwargs)


def test_gcv_score_matches_an_independent_influence_matrix():
    """V from scipy's smoother applied to the identity (S[:, j] = fit of e_j at the knots)."""
    rng = np.random.default_rng(7)
    n = 30
    x = knots("jittered", n, rng)
    y = smooth(x) + 0.1 * rng.normal(size=n)
    for lam in (1e-7, 1e-5, 1e-3):
        s = make_smoothing_spline(x, np.eye(n), lam=n * lam)(x)
        expected = np.sum((y - s @ y) ** 2) / n / (np.trace(np.eye(n) - s) / n) ** 2
        assert spline.gcv_score(x, y, lam) == pytest.approx(expected, rel=1e-7)
    assert spline.gcv_score(x, y, 0.0) == np.inf  # interpolation: V undefined


@pytest.mark.parametrize("kind", ["equispaced", "jittered"])
def test_gcv_lambda_fits_as_well_as_scipy_gcv(kind):
    """On smooth + Gaussian noise, our GCV choice on a fine grid fits the true function about
    as well as scipy's continuous GCV choice, and lands next to it on the grid.

    (Not Chebyshev knots: where knots cluster, GCV can have a second, deeper minimum at tiny
    lambda, which we find on the grid and scipy's bounded search does not; e.g. n = 50,
    seed 0: 2.8e-9 against scipy's 1.2e-5.)
    """
    n = 60
    z = np.linspace(-1, 1, 801)
    grid = spline.lambda_grid(n, num=61)
    ratios = []
    for seed in range(6):
        rng = np.random.default_rng(seed)
        x = knots(kind, n, rng)
        y = smooth(x) + 0.2 * rng.normal(size=n)
        lam = spline.gcv_lambda(x, y, grid)
        ref = make_smoothing_spline(x, y)  # lam=None: scipy's GCV
        ours = cc.spline.fit(x, y, lam)
        ratios.append(np.mean((ours(z) - smooth(z)) ** 2) / np.mean((ref(z) - smooth(z)) ** 2))
        # scipy's choice, read off its fit: the grid lambda whose fit is closest to it.
        distance = [np.max(np.abs(cc.spline.fit(x, y, g)(x) - ref(x))) for g in grid[1:]]
        nearest = grid[1:][int(np.argmin(distance))]
        assert nearest / 3 <= lam <= 3 * nearest, (seed, lam, nearest)  # the grid steps 1.47x
    assert max(ratios) < 1.5, ratios
    assert min(ratios) > 0.5, ratios


def test_gcv_lambda_clean_data_picks_small_lambda_noisy_data_larger():
    n = 40
    x = np.linspace(-1, 1, n)
    z = np.linspace(-1, 1, 401)
    clean = spline.gcv_lambda(x, smooth(x))
    grid = spline.lambda_grid(n)
    assert 0 < clean <= grid[2]  # c <= ~1e-5: essentially interpolation
    error = np.max(np.abs(cc.spline.fit(x, smooth(x), clean)(z) - smooth(z)))
    interpolation_error = np.max(np.abs(cc.spline.fit(x, smooth(x), 0.0)(z) - smooth(z)))
    assert error < 1.001 * interpolation_error  # as good as interpolating (natural ends: ~3e-3)
    noisy = spline.gcv_lambda(x, smooth(x) + 0.2 * np.random.default_rng(3).normal(size=n))
    assert noisy > 1e3 * clean


def test_gcv_vector_values_sum_over_columns():
    rng = np.random.default_rng(11)
    n = 25
    x = np.linspace(-1, 1, n)
    y = np.stack([smooth(x), np.cos(2 * x)], axis=1) + 0.1 * rng.normal(size=(n, 2))
    grid = spline.lambda_grid(n, num=20)
    for lam in grid[1::4]:
        total = spline.gcv_score(x, y[:, 0], lam) + spline.gcv_score(x, y[:, 1], lam)
        assert spline.gcv_score(x, y, lam) == pytest.approx(total, rel=1e-12)
    scores = [spline.gcv_score(x, y, g) for g in grid[1:]]
    assert spline.gcv_lambda(x, y, grid) == grid[1 + int(np.argmin(scores))]
    assert spline.gcv_lambda(x, y.reshape(n, 2, 1), grid) == spline.gcv_lambda(x, y, grid)


def test_gcv_lambda_is_invariant_to_knot_order_and_scales_with_span():
    rng = np.random.default_rng(5)
    n = 30
    x = knots("jittered", n, rng)
    y = smooth(x) + 0.2 * rng.normal(size=n)
    lam = spline.gcv_lambda(x, y)
    perm = rng.permutation(n)
    assert spline.gcv_lambda(x[perm], y[perm]) == pytest.approx(lam, rel=1e-12)
    # Stretching the knots 3x scales the penalty by 27; the default grid follows the span.
    assert spline.gcv_lambda(3 * x + 1, y) == pytest.approx(27 * lam, rel=1e-9)


def test_gcv_sparse_path_matches_dense(monkeypatch):
    rng = np.random.default_rng(2)
    n = 120
    x = knots("jittered", n, rng)
    y = smooth(x) + 0.2 * rng.normal(size=n)
    lams = spline.lambda_grid(n, num=6)[1:]
    dense = [spline.gcv_score(x, y, lam) for lam in lams]
    monkeypatch.setattr(gcv, "DENSE_GCV_LIMIT", 10)
    monkeypatch.setattr(gcv, "DIAGONAL_ENTRIES", 64 * n)  # blocks of 64 rows: two blocks
    sparse = [spline.gcv_score(x, y, lam) for lam in lams]
    np.testing.assert_allclose(sparse, dense, rtol=1e-9)


def test_gcv_lambda_warns_when_the_minimum_is_at_the_grid_top():
    rng = np.random.default_rng(4)
    n = 40
    x = np.linspace(-1, 1, n)
    y = smooth(x) + 0.3 * rng.normal(size=n)
    grid = spline.lambda_grid(n, num=3, low=1e-6, high=1e-4)  # far too little smoothing
    with pytest.warns(RuntimeWarning, match="largest lambda"):
        assert spline.gcv_lambda(x, y, grid) == grid[-1]


@pytest.mark.parametrize(
    ("knots_", "values", "grid", "name"),
    [
        ([0.0, 1.0], [1.0, 2.0], None, "at least 3"),
        ([0.0, 1.0, 1.0, 2.0], [1.0, 2.0, 3.0, 4.0], None, "duplicate"),
        ([0.0, 1.0, np.nan], [1.0, 2.0, 3.0], None, "knots"),
        ([0.0, 1.0, 2.0], [1.0, 2.0], None, "values"),
        ([0.0, 1.0, 2.0], [1.0, np.inf, 3.0], None, "values"),
        ([0.0, 1.0, 2.0], [1.0, 2.0, 3.0], [0.0], "grid"),
        ([0.0, 1.0, 2.0], [1.0, 2.0, 3.0], [-1.0, 1.0], "grid"),
        ([0.0, 1.0, 2.0], [1.0, 2.0, 3.0], [[1.0]], "grid"),
        ([0.0, 1.0, 2.0], [1.0, 2.0, 3.0], [np.nan], "grid"),
    ],
)
def test_gcv_lambda_rejects_bad_input(knots_, values, grid, name):
    with pytest.raises(ValueError, match=name):
        spline.gcv_lambda(knots_, values, grid)
