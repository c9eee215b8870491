"""GCV at its edges (two results, bfloat16) and BACC's maps for many inputs."""

from __future__ import annotations

import numpy as np
import pytest
import torch

import codedcomputing as cc

K, N = 4, 12


def test_gcv_decodes_from_two_results_and_has_no_fixed_decoder_map():
    code = cc.GCC(K, N, lambda_dec="gcv")
    y = np.array([[1.0, 2.0], [3.0, -2.0]])
    est = code.decode(y, [0, N - 1])  # the line through the two results
    slope = (y[1] - y[0]) / (code.beta[-1] - code.beta[0])
    np.testing.assert_allclose(est, y[0] + (code.alpha - code.beta[0])[:, None] * slope, rtol=1e-12)
    with pytest.raises(ValueError, match="lambda_dec"):
        code.decoder([0, 1, 2])


def test_bfloat16_results_decode_with_gcv():
    code = cc.GCC(K, N, lambda_dec="gcv")
    X = np.random.default_rng(0).normal(size=(K, 3))
    y = torch.as_tensor(np.tanh(code.encode(X)[:, :2]), dtype=torch.bfloat16)
    est = code.decode(y, torch.arange(N))
    assert est.dtype == torch.bfloat16 and est.shape == (K, 2) and bool(est.isfinite().all())


def test_bacc_builds_wide_maps_without_a_k_by_k_identity():
    """Building the encoder of ``BACC(100_000, 50)`` once asked for a 74.5 GiB identity."""
    with pytest.warns(cc.errors.MoreInputsThanWorkersWarning, match="num_inputs = 100000"):
        code = cc.BACC(100_000, 50)
    assert code.encoder_matrix.shape == (50, 100_000)
    np.testing.assert_allclose(code.encode(np.ones((100_000, 2))), 1.0, rtol=1e-12)  # constants
