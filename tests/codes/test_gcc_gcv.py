"""GCC with the decoder's lambda chosen per decode by generalised cross-validation."""

from __future__ import annotations

import itertools
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
    gcv, natural = cc.GCC(20, 200, lambda_dec="gcv"), cc.GCC(20, 200, decoding="spline")
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
    gcv, natural = cc.GCC(20, 200, lambda_dec="gcv"), cc.GCC(20, 200, decoding="spline")
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


# -- the adaptive decoder (the default at lambda_dec = 0) -----------------------------------


def test_the_default_decoder_is_gap_aware_and_the_others_stay_available():
    rng = np.random.default_rng(0)
    X = rng.normal(size=(10, 4))
    alive = cc.stragglers.random(50, 20, 1)
    default, gap_aware, adaptive, spline = (
        cc.GCC(10, 50),
        cc.GCC(10, 50, decoding="gap-aware"),
        cc.GCC(10, 50, decoding="adaptive"),
        cc.GCC(10, 50, decoding="spline"),
    )
    Y = np.tanh(default.encode(X))[alive]
    details = default.decode_details(Y, alive)
    assert [c.decoding for c in (default, gap_aware, adaptive, spline)] == [
        "gap-aware",
        "gap-aware",
        "adaptive",
        "spline",
    ]
    assert not (default.linear or adaptive.linear) and spline.linear
    assert cc.GCC(10, 50, lambda_dec=1e-4).decoding == "spline"
    assert set(details.info) == {"lambda_dec", "theta", "gaps", "exact"}
    assert 0.0 <= details.info["theta"] <= 1.0
    np.testing.assert_array_equal(details.estimates, gap_aware.decode(Y, alive))
    # the points no gap re-estimates keep the adaptive blend
    touched = np.concatenate([g.points for g in default.decoder(alive).groups] or [np.zeros(0, int)])
    kept = np.setdiff1d(np.arange(10), touched)
    assert details.info["gaps"] and kept.size
    np.testing.assert_allclose(details.estimates[kept], adaptive.decode(Y, alive)[kept], rtol=1e-12)
    # with every worker back there is no gap: the adaptive blend itself
    Y_all = np.tanh(default.encode(X))
    np.testing.assert_array_equal(default.decode(Y_all, range(50)), adaptive.decode(Y_all, range(50)))
    natural = cc.spline.fit(spline.beta[alive], Y)(spline.alpha)
    np.testing.assert_allclose(spline.decode(Y, alive), natural, rtol=1e-10, atol=1e-12)
    assert "theta" not in spline.decode_details(Y, alive).info


@pytest.mark.parametrize("num_workers", [8, 10])
def test_the_gap_aware_decoder_reproduces_affine_data_for_every_alive_set(num_workers):
    """Every alive set of at least 2 of 8 (10) workers: exact within the returned workers'
    range; beyond it, exact where an end's extrapolants were fitted and otherwise held."""
    code = cc.GCC(4, num_workers, decoding="gap-aware")
    X = 0.5 + 2.0 * code.alpha[:, None] * np.array([1.0, -3.0])
    Y_all = code.encode(X) @ np.array([[1.0], [0.5]]) - 2.0
    truth = X @ np.array([[1.0], [0.5]]) - 2.0
    fitted_ends = 0
    for size in range(2, num_workers + 1):
        for alive in itertools.combinations(range(num_workers), size):
            alive = list(alive)
            details = code.decode_details(Y_all[alive], alive)
            t = code.beta[alive]
            inside = (code.alpha >= t.min()) & (code.alpha <= t.max())
            np.testing.assert_allclose(details.estimates[inside], truth[inside], rtol=1e-9, atol=1e-10)
            ends = [label for label, _ in details.info["gaps"] if label[0] == "edge"]
            fitted_ends += len(ends)
            for label in ends:
                beyond = code.alpha < t.min() if label[1] == "low" else code.alpha > t.max()
                np.testing.assert_allclose(details.estimates[beyond], truth[beyond], rtol=1e-9, atol=1e-10)
    assert fitted_ends > 0


def test_the_adaptive_decoder_reproduces_affine_data_within_the_returned_range():
    """Every alive set of 6 workers: exact at the inputs within the returned workers' range,
    and beyond it the value at the outermost returned worker (held, not extrapolated)."""
    code = cc.GCC(4, 6, decoding="adaptive")
    X = 0.5 + 2.0 * code.alpha[:, None] * np.array([1.0, -3.0])
    weights = np.array([[1.0], [0.5]])
    Y_all = code.encode(X) @ weights - 2.0  # f(u(beta_n)): affine in beta_n
    truth = X @ weights - 2.0
    for size in range(2, 7):
        for alive in itertools.combinations(range(6), size):
            alive = list(alive)
            est = code.decode(Y_all[alive], alive)
            t = code.beta[alive]
            low, high = Y_all[alive][np.argmin(t)], Y_all[alive][np.argmax(t)]
            expected = np.where(
                (code.alpha < t.min())[:, None], low, np.where((code.alpha > t.max())[:, None], high, truth)
            )
            np.testing.assert_allclose(est, expected, rtol=1e-10, atol=1e-12)


def test_adaptive_decoding_refuses_smoothing_and_unknown_decodings_are_named():
    with pytest.raises(ValueError, match="lambda_dec"):
        cc.GCC(10, 50, lambda_dec=1e-3, decoding="adaptive")
    with pytest.raises(ValueError, match="lambda_dec"):
        cc.GCC(10, 50, lambda_dec="gcv", decoding="adaptive")
    with pytest.raises(ValueError, match="lambda_dec"):
        cc.GCC(10, 50, lambda_dec=1e-3, decoding="gap-aware")
    with pytest.raises(ValueError, match="decoding"):
        cc.GCC(10, 50, decoding="berrut")
    info = cc.GCC(10, 50, lambda_dec=1e-3).decode_details(np.ones((50, 1)), range(50)).info
    assert set(info) == {"lambda_dec", "exact"} and info["lambda_dec"] == 1e-3 and not info["exact"].any()
