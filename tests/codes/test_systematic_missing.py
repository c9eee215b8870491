"""A systematic GCC decodes only the inputs whose systematic worker did not return: its cached
decoder holds just their points, and gives there what the decoder of all K inputs gives."""

from __future__ import annotations

import numpy as np
import pytest
import torch

import codedcomputing as cc


def missing_case(code, rng, lost_inputs, lost_parity):
    k, n = code.num_inputs, code.num_workers
    systematic = code.systematic_workers
    parity = np.setdiff1d(np.arange(n), systematic)
    gone = np.r_[
        rng.choice(systematic, lost_inputs, replace=False), rng.choice(parity, lost_parity, replace=False)
    ]
    alive = np.setdiff1d(np.arange(n), gone)
    missing = np.flatnonzero(~np.isin(systematic, alive))
    X = rng.normal(size=(k, 3))
    return X, alive, missing


@pytest.mark.parametrize(
    "kwargs",
    [
        {},
        {"decoding": "adaptive"},
        {"decoding": "spline"},
        {"lambda_dec": 1e-6},
        {"lambda_dec": "gcv"},
        {"parity": "nearest"},
    ],
)
def test_the_missing_inputs_get_what_the_full_decoder_gives(kwargs):
    rng = np.random.default_rng(30)
    code = cc.GCC(50, 75, systematic=True, **kwargs)
    for lost_inputs, lost_parity in [(2, 5), (12, 3), (1, 0)]:
        X, alive, missing = missing_case(code, rng, lost_inputs, lost_parity)
        Y = np.tanh(code.encode(X))[alive]
        details = code.decode_details(Y, alive)
        if code.lambda_dec == "gcv":  # no fixed map: the same lambda through a spline decoder at all K
            full = cc.spline.SplineDecoder(code.beta[alive], details.info["lambda_dec"], code.alpha)(Y)
        else:
            full, _ = code.decoder(alive).decode(Y)
            assert code.decoder(alive) is not code._decoder(alive)  # public: all K, uncached
            assert code._decoder(alive).points.size == missing.size
        np.testing.assert_allclose(details.estimates[missing], full[missing], rtol=1e-10, atol=1e-12)
        returned = np.setdiff1d(np.arange(50), missing)
        np.testing.assert_array_equal(details.estimates[returned], np.tanh(X[returned]))
        assert details.info["exact"].tolist() == [k not in missing for k in range(50)]


def test_nothing_missing_decodes_nothing_and_torch_keeps_its_type():
    rng = np.random.default_rng(31)
    code = cc.GCC(20, 40, systematic=True)
    X = rng.normal(size=(20, 2))
    Y = np.sin(code.encode(X))
    alive = np.setdiff1d(np.arange(40), [25, 30])  # parity workers only
    details = code.decode_details(Y[alive], alive)
    np.testing.assert_array_equal(details.estimates, np.sin(X))
    assert code._decoders == {} and details.info["lambda_dec"] == 0.0
    alive = np.setdiff1d(np.arange(40), [3, 4, 25])
    tensor = code.decode(torch.tensor(Y[alive]), alive)
    assert isinstance(tensor, torch.Tensor) and tensor.dtype == torch.float64
    np.testing.assert_allclose(tensor.numpy(), code.decode(Y[alive], alive), rtol=1e-12)


def test_a_large_systematic_code_samples_theta_as_the_full_decoder_does():
    """K = 300: theta's sample is sized by all K points, not by the few missing ones."""
    rng = np.random.default_rng(32)
    code = cc.GCC(300, 1200, systematic=True, decoding="adaptive")
    X, alive, missing = missing_case(code, rng, 3, 40)
    Y = np.cos(code.encode(X))[alive]
    estimates, info = code.decoder(alive).decode(Y)
    details = code.decode_details(Y, alive)
    assert details.info["theta"] == pytest.approx(info["theta"], rel=1e-12)
    np.testing.assert_allclose(details.estimates[missing], estimates[missing], rtol=1e-10, atol=1e-12)
