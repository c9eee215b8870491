"""GCC with the decoder's lambda chosen per decode by generalised cross-validation."""

from __future__ import annotations

import pickle

import numpy as np
import pytest

import codedcomputing as cc


def noisy_round(code, rng, noise):
    """One coded computation of a smooth f whose workers add Gaussian noise to their results."""
    w = np.random.default_rng(0).normal(size=(16, 4)) / 4
    X = np.random.default_rng(1).normal(size=(code.num_inputs, 16))
    coded = code.encode(X)
    alive = cc.stragglers.random(code.num_workers, code.num_workers // 10, rng)
    results = np.tanh(coded[alive] @ w) + noise * rng.normal(size=(alive.size, 4))
    details = code.decode_details(results, alive)
    return details.estimates, np.tanh(X @ w), details.info["lambda_dec"]


def test_gcv_decoder_beats_interpolation_on_noisy_results():
    """With noisy workers, GCV smooths (lambda > 0) and lowers the error against f(x)."""
    gcv, natural = cc.GCC(20, 200, lambda_dec="gcv"), cc.GCC(20, 200)
    errors_gcv, errors_natural, chosen = [], [], []
    for seed in range(8):
        est, truth, lam = noisy_round(gcv, np.random.default_rng(seed), noise=0.05)
        errors_gcv.append(cc.metrics.mse(est, truth))
        chosen.append(lam)
        est, truth, _ = noisy_round(natural, np.random.default_rng(seed), noise=0.05)
        errors_natural.append(cc.metrics.mse(est, truth))
    assert min(chosen) > 0
    assert np.median(errors_gcv) < 0.75 * np.median(errors_natural)  # measured: ~0.57


def test_gcv_decoder_barely_smooths_clean_results():
    """Without noise GCV picks a tiny lambda, and the error stays close to interpolation's."""
    gcv, natural = cc.GCC(20, 200, lambda_dec="gcv"), cc.GCC(20, 200)
    est, truth, lam = noisy_round(gcv, np.random.default_rng(3), noise=0.0)
    reference, _, fixed = noisy_round(natural, np.random.default_rng(3), noise=0.0)
    assert 0 < lam < 1e-8 and fixed == 0.0
    assert cc.metrics.mse(est, truth) < 10 * cc.metrics.mse(reference, truth) + 1e-12


def test_gcv_mode_is_reported_and_survives_pickling():
    code = cc.GCC(10, 50, lambda_dec="gcv")
    assert code.lambda_dec == "gcv" and "gcv" in repr(code)
    again = pickle.loads(pickle.dumps(code))
    est, truth, _ = noisy_round(again, np.random.default_rng(0), noise=0.05)
    assert est.shape == truth.shape and np.isfinite(est).all()


def test_unknown_lambda_mode_is_rejected():
    with pytest.raises(ValueError, match="lambda_dec"):
        cc.GCC(10, 50, lambda_dec="auto")


def test_two_threads_decoding_with_one_gcv_code_each_get_their_own_lambda():
    """The lambda GCV picks is returned with each call (Decoded.info), never kept on the code,
    so concurrent decodes cannot read each other's choice."""
    from concurrent.futures import ThreadPoolExecutor

    code = cc.GCC(20, 200, lambda_dec="gcv")
    rounds = [(np.random.default_rng(seed), noise) for seed, noise in enumerate([0.0, 0.1] * 8)]
    alone = [
        noisy_round(code, np.random.default_rng(seed), noise)[2] for seed, (_, noise) in enumerate(rounds)
    ]
    with ThreadPoolExecutor(4) as pool:
        together = list(pool.map(lambda r: noisy_round(code, r[0], r[1])[2], rounds))
    assert together == alone
    assert min(alone[1::2]) > 100 * max(alone[0::2])  # noisy rounds smooth far more than clean ones
    assert not hasattr(code, "last_lambda_dec")
