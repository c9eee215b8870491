"""GCC tuning (codedcomputing.tuning.tune), against GCC run by hand on the same straggler
patterns."""

from __future__ import annotations

import dataclasses
import hashlib

import numpy as np
import pytest
import torch

import codedcomputing as cc
from codedcomputing import tuning

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
    lambdas_enc = cc.spline.lambda_grid(K, num=3)
    lambdas_dec = cc.spline.lambda_grid(N, num=4)
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
    assert np.array_equal(result.lambdas_enc, cc.spline.lambda_grid(K, num=8))
    assert np.array_equal(result.lambdas_dec, cc.spline.lambda_grid(N, num=8))
    assert calls == [K] + [N] * 9  # the truth, then all N coded inputs once per lambda_enc


def test_tune_is_reproducible():
    X = batch(3)
    kwargs = {"trials": 5, "lambdas_enc": [0.0, 1e-6], "lambdas_dec": cc.spline.lambda_grid(N, num=3)}
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
