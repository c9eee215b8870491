"""Edge cases of the metrics: low-precision and complex estimates."""

from __future__ import annotations

import warnings

import numpy as np
import pytest
import torch

import codedcomputing as cc


def test_metrics_accept_bfloat16_tensors():
    """decode returns bfloat16 tensors for bfloat16 inputs, but metrics._as_array calls
    x.detach().cpu().numpy(): TypeError 'Got unsupported ScalarType BFloat16' (metrics.py:14)."""
    est = torch.tensor([[1.0, 2.0], [3.0, 0.0]], dtype=torch.bfloat16)
    truth = torch.tensor([[1.0, 1.0], [3.0, 1.0]], dtype=torch.bfloat16)
    assert cc.metrics.mse(est, truth) == pytest.approx(1.0)
    assert cc.metrics.relative_accuracy(est, truth) == 0.5


def test_mse_of_complex_estimates_uses_the_modulus():
    """Codes pass complex data through (encode/decode keep complex128), but mse casts to
    float64 (metrics.py:15): the imaginary part is discarded with a ComplexWarning and the
    'squared error norm' is wrong."""
    est = np.array([[1 + 1j, 0], [0, 2j]])
    truth = np.zeros((2, 2), dtype=complex)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", np.exceptions.ComplexWarning)
        value = cc.metrics.mse(est, truth)
    assert value == pytest.approx((2 + 4) / 2)
