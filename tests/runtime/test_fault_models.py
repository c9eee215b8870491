"""The fault models of :mod:`codedcomputing.faults` (``Independent``, ``Fixed``) and
:func:`cc.faults.corrupt` on numpy and torch results.

Statistical checks compare many samples with closed forms (fault rates, the RMS of
garbage); each tolerance is a few standard errors of the estimate, computed from the model's
own variance, and every random draw has a fixed seed so the checks are deterministic.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
from runtime_helpers import rms

import codedcomputing as cc

F = cc.faults


def test_independent_fault_rates():
    rates = {"raise": 0.1, "nan": 0.05, "hang": 0.2, "garbage": 0.15}
    model = F.Independent(rates)
    n = 100_000
    got = model.sample(n, np.random.default_rng(0))
    assert set(got.values()) <= set(F.KINDS)
    assert all(isinstance(w, int) and 0 <= w < n for w in got)
    for kind, p in rates.items():
        count = sum(1 for v in got.values() if v == kind)
        assert abs(count / n - p) < 5 * math.sqrt(p * (1 - p) / n), kind
    assert got == model.sample(n, np.random.default_rng(0))
    assert got != model.sample(n, np.random.default_rng(1))


def test_independent_extreme_rates():
    rng = np.random.default_rng(0)
    assert F.Independent({"nan": 0.0}).sample(1000, rng) == {}
    everything = F.Independent({"raise": 0.3, "hang": 0.7}).sample(1000, rng)
    assert set(everything) == set(range(1000))
    assert F.Independent({"garbage": 1.0}).sample(5, rng) == dict.fromkeys(range(5), "garbage")


@pytest.mark.parametrize(
    ("make", "match"),
    [
        (lambda: F.Independent({}), "rates"),
        (lambda: F.Independent([("nan", 0.1)]), "rates"),
        (lambda: F.Independent({"explode": 0.1}), "fault kind"),
        (lambda: F.Independent({"nan": 1.5}), r"rates\['nan'\]"),
        (lambda: F.Independent({"nan": -0.1}), r"rates\['nan'\]"),
        (lambda: F.Independent({"nan": 0.6, "raise": 0.6}), "sum"),
        (lambda: F.Fixed([(1, "nan")]), "faults"),
        (lambda: F.Fixed({-1: "nan"}), "worker"),
        (lambda: F.Fixed({True: "nan"}), "worker"),
        (lambda: F.Fixed({1.0: "nan"}), "worker"),
        (lambda: F.Fixed({0: "slow"}), "fault kind"),
        (lambda: F.Fixed({}).sample(0, np.random.default_rng(0)), "num_workers"),
    ],
)
def test_fault_validation(make, match):
    with pytest.raises(ValueError, match=match):
        make()


def test_fixed_faults_ignore_workers_beyond_the_cluster():
    model = F.Fixed({3: "hang", 7: "raise", np.int64(1): "nan"})
    rng = np.random.default_rng(0)
    assert model.sample(5, rng) == {3: "hang", 1: "nan"}
    assert model.sample(8, rng) == {3: "hang", 7: "raise", 1: "nan"}
    assert model.sample(1, rng) == {}
    assert all(type(w) is int for w in model.faults)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_corrupt_numpy(dtype):
    result = (np.random.default_rng(0).normal(size=(50, 40)) * 300).astype(dtype)
    nan = F.corrupt(result, "nan", seed=1)
    assert isinstance(nan, np.ndarray) and nan.shape == result.shape and nan.dtype == dtype
    assert np.all(np.isnan(nan))
    garbage = F.corrupt(result, "garbage", seed=1)
    assert isinstance(garbage, np.ndarray) and garbage.shape == result.shape and garbage.dtype == dtype
    assert np.all(np.isfinite(garbage))
    assert rms(garbage) == pytest.approx(rms(result), rel=0.1)  # 2000 draws: RMS within ~2%
    assert not np.allclose(garbage, result)
    np.testing.assert_array_equal(garbage, F.corrupt(result, "garbage", seed=1))
    assert not np.array_equal(garbage, F.corrupt(result, "garbage", seed=2))
    assert np.all(np.isfinite(result))  # the input is left alone


def test_corrupt_integer_and_zero_results():
    ints = np.arange(6).reshape(2, 3)
    assert F.corrupt(ints, "nan", 0).dtype == np.float64 and np.all(np.isnan(F.corrupt(ints, "nan", 0)))
    garbage = F.corrupt(ints, "garbage", 0)
    assert garbage.dtype == np.float64 and garbage.shape == (2, 3) and np.all(np.isfinite(garbage))
    zeros = F.corrupt(np.zeros((100, 100)), "garbage", 3)  # RMS 0: noise of scale 1
    assert rms(zeros) == pytest.approx(1.0, rel=0.05)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_corrupt_torch(dtype):
    result = torch.randn(50, 40, generator=torch.Generator().manual_seed(0), dtype=dtype) * 0.01
    nan = F.corrupt(result, "nan", seed=1)
    assert isinstance(nan, torch.Tensor) and nan.shape == result.shape and nan.dtype == dtype
    assert bool(nan.isnan().all())
    garbage = F.corrupt(result, "garbage", seed=1)
    assert isinstance(garbage, torch.Tensor) and garbage.shape == result.shape and garbage.dtype == dtype
    assert garbage.device == result.device
    assert bool(garbage.isfinite().all())
    assert rms(garbage.numpy()) == pytest.approx(rms(result.numpy()), rel=0.1)
    assert torch.equal(garbage, F.corrupt(result, "garbage", seed=1))
    assert not torch.equal(garbage, F.corrupt(result, "garbage", seed=2))
