"""Tests for smoothing-parameter selection (codedcomputing.tuning).

``lambda_grid`` is the dimensionless grid ``lambda = c h^4``; ``gcv_lambda`` is checked against
scipy's GCV (``make_smoothing_spline(lam=None)``, whose ``lam`` is ``n`` times ours) and
against an influence matrix built independently from scipy; ``tune`` against GCC run by hand
on the same straggler patterns.
"""

from __future__ import annotations

import dataclasses
import hashlib

import numpy as np
import pytest
import torch
from scipy.interpolate import make_smoothing_spline

import codedcomputing as cc
from codedcomputing import tuning
from codedcomputing.spline import gcv


def smooth(x):
    return np.sin(3 * x) + 0.5 * np.cos(7 * x)


def knots(kind: str, n: int, rng: np.random.Generator) -> np.ndarray:
    grid = np.linspace(-1.0, 1.0, n)
    if kind == "equispaced":
        return grid
    return grid + rng.uniform(-0.3, 0.3, n) * 2 / (n - 1)  # jittered: well separated


# ---------------------------------------------------------------------------------------------
# lambda_grid
# ---------------------------------------------------------------------------------------------


def test_lambda_grid_starts_at_zero_and_increases():
    grid = tuning.lambda_grid(50)
    assert grid.shape == (13,)
    assert grid[0] == 0.0
    assert np.all(np.diff(grid) > 0)
    h = 2 / 49
    np.testing.assert_allclose(grid[1:] / h**4, np.geomspace(1e-6, 1e4, 12), rtol=1e-12)
    assert tuning.lambda_grid(50, num=4, low=1e-2, high=1e1).shape == (5,)


def test_lambda_grid_scales_like_h4():
    """Halving the spacing (n -> 2n - 1 knots) shrinks every positive lambda 16x."""
    for n in (5, 20, 100):
        np.testing.assert_allclose(
            tuning.lambda_grid(2 * n - 1)[1:], tuning.lambda_grid(n)[1:] / 16, rtol=1e-12
        )
    assert tuning.lambda_grid(100)[1] < 1e-12  # reaches the scale GCC needs at N ~ 100


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
        tuning.lambda_grid(**kwargs)


# ---------------------------------------------------------------------------------------------
# gcv_score / gcv_lambda
# ---------------------------------------------------------------------------------------------


def test_gcv_score_matches_an_independent_influence_matrix():
    """V from scipy's smoother applied to the identity (S[:, j] = fit of e_j at the knots)."""
    rng = np.random.default_rng(7)
    n = 30
    x = knots("jittered", n, rng)
    y = smooth(x) + 0.1 * rng.normal(size=n)
    for lam in (1e-7, 1e-5, 1e-3):
        s = make_smoothing_spline(x, np.eye(n), lam=n * lam)(x)
        expected = np.sum((y - s @ y) ** 2) / n / (np.trace(np.eye(n) - s) / n) ** 2
        assert tuning.gcv_score(x, y, lam) == pytest.approx(expected, rel=1e-7)
    assert tuning.gcv_score(x, y, 0.0) == np.inf  # interpolation: V undefined


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
    grid = tuning.lambda_grid(n, num=61)
    ratios = []
    for seed in range(6):
        rng = np.random.default_rng(seed)
        x = knots(kind, n, rng)
        y = smooth(x) + 0.2 * rng.normal(size=n)
        lam = tuning.gcv_lambda(x, y, grid)
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
    clean = tuning.gcv_lambda(x, smooth(x))
    grid = tuning.lambda_grid(n)
    assert 0 < clean <= grid[2]  # c <= ~1e-5: essentially interpolation
    error = np.max(np.abs(cc.spline.fit(x, smooth(x), clean)(z) - smooth(z)))
    interpolation_error = np.max(np.abs(cc.spline.fit(x, smooth(x), 0.0)(z) - smooth(z)))
    assert error < 1.001 * interpolation_error  # as good as interpolating (natural ends: ~3e-3)
    noisy = tuning.gcv_lambda(x, smooth(x) + 0.2 * np.random.default_rng(3).normal(size=n))
    assert noisy > 1e3 * clean


def test_gcv_vector_values_sum_over_columns():
    rng = np.random.default_rng(11)
    n = 25
    x = np.linspace(-1, 1, n)
    y = np.stack([smooth(x), np.cos(2 * x)], axis=1) + 0.1 * rng.normal(size=(n, 2))
    grid = tuning.lambda_grid(n, num=20)
    for lam in grid[1::4]:
        total = tuning.gcv_score(x, y[:, 0], lam) + tuning.gcv_score(x, y[:, 1], lam)
        assert tuning.gcv_score(x, y, lam) == pytest.approx(total, rel=1e-12)
    scores = [tuning.gcv_score(x, y, g) for g in grid[1:]]
    assert tuning.gcv_lambda(x, y, grid) == grid[1 + int(np.argmin(scores))]
    assert tuning.gcv_lambda(x, y.reshape(n, 2, 1), grid) == tuning.gcv_lambda(x, y, grid)


def test_gcv_lambda_is_invariant_to_knot_order_and_scales_with_span():
    rng = np.random.default_rng(5)
    n = 30
    x = knots("jittered", n, rng)
    y = smooth(x) + 0.2 * rng.normal(size=n)
    lam = tuning.gcv_lambda(x, y)
    perm = rng.permutation(n)
    assert tuning.gcv_lambda(x[perm], y[perm]) == pytest.approx(lam, rel=1e-12)
    # Stretching the knots 3x scales the penalty by 27; the default grid follows the span.
    assert tuning.gcv_lambda(3 * x + 1, y) == pytest.approx(27 * lam, rel=1e-9)


def test_gcv_sparse_path_matches_dense(monkeypatch):
    rng = np.random.default_rng(2)
    n = 120
    x = knots("jittered", n, rng)
    y = smooth(x) + 0.2 * rng.normal(size=n)
    lams = tuning.lambda_grid(n, num=6)[1:]
    dense = [tuning.gcv_score(x, y, lam) for lam in lams]
    monkeypatch.setattr(gcv, "DENSE_GCV_LIMIT", 10)
    monkeypatch.setattr(gcv, "DIAGONAL_ENTRIES", 64 * n)  # blocks of 64 rows: two blocks
    sparse = [tuning.gcv_score(x, y, lam) for lam in lams]
    np.testing.assert_allclose(sparse, dense, rtol=1e-9)


def test_gcv_lambda_warns_when_the_minimum_is_at_the_grid_top():
    rng = np.random.default_rng(4)
    n = 40
    x = np.linspace(-1, 1, n)
    y = smooth(x) + 0.3 * rng.normal(size=n)
    grid = tuning.lambda_grid(n, num=3, low=1e-6, high=1e-4)  # far too little smoothing
    with pytest.warns(RuntimeWarning, match="largest lambda"):
        assert tuning.gcv_lambda(x, y, grid) == grid[-1]


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
        tuning.gcv_lambda(knots_, values, grid)


# ---------------------------------------------------------------------------------------------
# tune
# ---------------------------------------------------------------------------------------------

K, N, S = 8, 30, 3
W = np.random.default_rng(1).normal(size=(12, 4)) / 3


def clean_f(x):
    return np.tanh(x @ W)


def noisy_f(x, sigma=0.1):
    """clean_f plus noise that is a fixed function of each input row (reproducible)."""
    out = clean_f(x)
    for i, row in enumerate(np.ascontiguousarray(x)):
        digest = hashlib.blake2b(row.tobytes(), digest_size=8).digest()
        out[i] += sigma * np.random.default_rng(int.from_bytes(digest, "little")).normal(size=out.shape[1])
    return out


def random_stragglers(n, rng):
    return cc.stragglers.random(n, S, rng)


def batch(seed: int = 0):
    return np.random.default_rng(seed).normal(size=(K, 12))


def mean_mse(code, f, X, truth, patterns):
    coded_results = f(code.encode(X))
    return np.mean([cc.metrics.mse(code.decode(coded_results[a], a), truth) for a in patterns])


def test_tune_on_noisy_results_smooths_and_beats_interpolation_on_fresh_patterns():
    X = batch(0)
    result = tuning.tune(noisy_f, X, N, random_stragglers, trials=15, seed=0)
    assert result.lambda_dec > 0
    assert result.mse < result.grid_mse[0, 0]
    tuned, plain = result.code(), cc.GCC(K, N)
    rng = np.random.default_rng(99)  # fresh patterns
    fresh = [random_stragglers(N, rng) for _ in range(30)]
    for Xe in (X, batch(1)):  # the calibration batch and a fresh one; scored on the clean truth
        tuned_mse = mean_mse(tuned, noisy_f, Xe, clean_f(Xe), fresh)
        plain_mse = mean_mse(plain, noisy_f, Xe, clean_f(Xe), fresh)
        assert tuned_mse < 0.8 * plain_mse, (tuned_mse, plain_mse)


def test_tune_grid_matches_gcc_run_by_hand():
    X = batch(2)
    lambdas_enc = tuning.lambda_grid(K, num=3)
    lambdas_dec = tuning.lambda_grid(N, num=4)
    result = tuning.tune(
        clean_f, X, N, random_stragglers, trials=6, seed=4, lambdas_enc=lambdas_enc, lambdas_dec=lambdas_dec
    )
    assert result.grid_mse.shape == (4, 5)
    np.testing.assert_array_equal(result.lambdas_enc, lambdas_enc)
    np.testing.assert_array_equal(result.lambdas_dec, lambdas_dec)
    best = np.unravel_index(np.argmin(result.grid_mse), result.grid_mse.shape)
    assert (result.lambda_enc, result.lambda_dec) == (lambdas_enc[best[0]], lambdas_dec[best[1]])
    assert result.mse == result.grid_mse.min() <= result.grid_mse[0, 0]
    rng = np.random.default_rng(4)  # the documented draw: trials patterns, in order, first
    patterns = [random_stragglers(N, rng) for _ in range(6)]
    truth = clean_f(X)
    for i, j in [(0, 0), (2, 3), (3, 1)]:
        code = cc.GCC(K, N, lambdas_enc[i], lambdas_dec[j])
        assert result.grid_mse[i, j] == pytest.approx(mean_mse(code, clean_f, X, truth, patterns), rel=1e-12)
    tuned = result.code()
    assert (tuned.lambda_enc, tuned.lambda_dec, tuned.num_inputs, tuned.num_workers) == (
        result.lambda_enc,
        result.lambda_dec,
        K,
        N,
    )
    with pytest.raises(dataclasses.FrozenInstanceError):
        result.lambda_dec = 1.0  # type: ignore[misc]
    with pytest.raises(ValueError):
        result.grid_mse[0, 0] = 0.0  # read-only


def test_tune_calls_f_once_per_encoder_lambda():
    calls = []

    def f(x):
        calls.append(x.shape[0])
        return clean_f(x)

    result = tuning.tune(f, batch(0), N, random_stragglers, trials=5, seed=0)
    # default grids: 9 encoder lambdas (lambda_grid(K, num=8)) x 9 decoder lambdas
    assert result.grid_mse.shape == (9, 9)
    assert np.array_equal(result.lambdas_enc, tuning.lambda_grid(K, num=8))
    assert np.array_equal(result.lambdas_dec, tuning.lambda_grid(N, num=8))
    assert calls == [K] + [N] * 9  # the truth, then all N coded inputs once per lambda_enc


def test_tune_is_reproducible():
    X = batch(3)
    kwargs = {"trials": 5, "lambdas_enc": [0.0, 1e-6], "lambdas_dec": tuning.lambda_grid(N, num=3)}
    a = tuning.tune(noisy_f, X, N, random_stragglers, seed=8, **kwargs)
    b = tuning.tune(noisy_f, X, N, random_stragglers, seed=8, **kwargs)
    c = tuning.tune(noisy_f, X, N, random_stragglers, seed=9, **kwargs)
    np.testing.assert_array_equal(a.grid_mse, b.grid_mse)
    assert (a.lambda_enc, a.lambda_dec, a.mse) == (b.lambda_enc, b.lambda_dec, b.mse)
    assert not np.array_equal(a.grid_mse, c.grid_mse)  # other patterns


def test_tune_with_torch_matches_numpy():
    X = batch(5)
    W_t = torch.from_numpy(W)
    seen = []

    def f_torch(x):
        seen.append(type(x))
        return torch.tanh(x @ W_t)

    kwargs = {"trials": 4, "seed": 1, "lambdas_enc": [0.0, 1e-4], "lambdas_dec": [0.0, 1e-7, 1e-5]}
    result_t = tuning.tune(f_torch, torch.from_numpy(X), N, random_stragglers, **kwargs)
    result_np = tuning.tune(clean_f, X, N, random_stragglers, **kwargs)
    assert seen and all(t is torch.Tensor for t in seen)
    np.testing.assert_allclose(result_t.grid_mse, result_np.grid_mse, rtol=1e-10)
    assert (result_t.lambda_enc, result_t.lambda_dec) == (result_np.lambda_enc, result_np.lambda_dec)


def test_tune_single_input_and_progress_bar():
    X = batch(0)[:1]
    kwargs = {"trials": 3, "seed": 0, "lambdas_dec": [0.0, 1e-3]}
    quiet = tuning.tune(clean_f, X, 10, random_stragglers, **kwargs)
    shown = tuning.tune(clean_f, X, 10, random_stragglers, progress=True, **kwargs)
    np.testing.assert_array_equal(quiet.lambdas_enc, [0.0])  # K = 1: the encoder copies x_1
    np.testing.assert_array_equal(quiet.grid_mse, shown.grid_mse)
    assert quiet.code().num_inputs == 1


@pytest.mark.parametrize(
    ("kwargs", "name"),
    [
        ({"trials": 0}, "trials"),
        ({"trials": 2.0}, "trials"),
        ({"num_workers": 1}, "num_workers"),
        ({"X": np.empty((0, 12))}, "X"),
        ({"X": np.full((K, 12), np.nan)}, "X"),
        ({"X": np.array([["a"] * 12] * K)}, "X"),
        ({"lambdas_enc": [[0.0, 1.0]]}, "lambdas_enc"),
        ({"lambdas_enc": [-1.0]}, "lambdas_enc"),
        ({"lambdas_dec": [0.0, np.inf]}, "lambdas_dec"),
        ({"lambdas_dec": []}, "lambdas_dec"),
        ({"points": "bogus"}, "points"),
        ({"f": "not callable"}, "f"),
        ({"stragglers": lambda n, rng: [0]}, "stragglers"),
        ({"stragglers": lambda n, rng: [0, n]}, "stragglers"),
        ({"X": [batch(0), batch(1)[:, :6]]}, "shape"),
        ({"X": [batch(0), batch(1), batch(2)]}, "trials"),  # 3 batches, 2 trials
    ],
)
def test_tune_rejects_bad_input(kwargs, name):
    args = {"f": clean_f, "X": batch(0), "num_workers": N, "stragglers": random_stragglers, "trials": 2}
    args.update(kwargs)
    with pytest.raises(ValueError, match=name):
        tuning.tune(args.pop("f"), args.pop("X"), args.pop("num_workers"), args.pop("stragglers"), **args)


def test_tune_rejects_non_finite_truth():
    def f(x):
        out = clean_f(x)
        out[0, 0] = np.nan
        return out

    with pytest.raises(ValueError, match=r"f\(X\)"):
        tuning.tune(f, batch(0), N, random_stragglers, trials=2)


def test_tune_over_several_batches_scores_each_trial_on_its_own_batch():
    batches = [batch(0), batch(1), batch(2)]
    grid = {"lambdas_enc": [0.0], "lambdas_dec": [0.0, 1e-3]}
    result = tuning.tune(noisy_f, batches, N, random_stragglers, trials=6, seed=3, **grid)
    # An independent reference: the same patterns (drawn first, from the same seed), trial t
    # on batch t % 3, each pair scored by its own GCC.
    rng = np.random.default_rng(3)
    patterns = [np.sort(random_stragglers(N, rng)) for _ in range(6)]
    for j, lam in enumerate(grid["lambdas_dec"]):
        code = cc.GCC(K, N, 0.0, lam)
        expected = np.mean(
            [
                cc.metrics.mse(
                    code.decode(noisy_f(code.encode(batches[t % 3]))[a], a), noisy_f(batches[t % 3])
                )
                for t, a in enumerate(patterns)
            ]
        )
        assert result.grid_mse[0, j] == pytest.approx(expected, rel=1e-12)
    one = tuning.tune(noisy_f, batches[0], N, random_stragglers, trials=6, seed=3, **grid)
    assert not np.allclose(one.grid_mse, result.grid_mse)


def test_tune_reads_a_list_of_rows_as_one_batch():
    rows = batch(0).tolist()
    grid = {"lambdas_enc": [0.0], "lambdas_dec": [0.0]}
    a = tuning.tune(clean_f, rows, N, random_stragglers, trials=2, **grid)
    b = tuning.tune(clean_f, batch(0), N, random_stragglers, trials=2, **grid)
    assert a.num_inputs == K and a.mse == pytest.approx(b.mse, rel=1e-12)
