"""Systematic codes: ``systematic_inputs`` / ``systematic_workers``, ``info["exact"]`` on every
decode, systematic GCC and BACC (points, encode, decode bit for bit), bad input."""

from __future__ import annotations

import numpy as np
import pytest
import torch

import codedcomputing as cc


def test_non_systematic_codes_report_no_systematic_worker():
    for code in (cc.GCC(4, 10), cc.BACC(4, 10), cc.LCC(3, 8), cc.ApproxIFER(3, 20), cc.RobustGCC(3, 12)):
        assert code.systematic_inputs.tolist() == [-1] * code.num_workers
        assert code.systematic_workers.tolist() == [-1] * code.num_inputs
        with pytest.raises(ValueError):
            code.systematic_inputs[0] = 0  # read-only
    unbound = cc.ManifoldGCC(4, 10)  # the layout is the batch's: see the bound code
    assert (unbound.systematic_inputs == -1).all()


def test_uncoded_and_replication_name_each_workers_input():
    assert cc.Uncoded(3).systematic_inputs.tolist() == [0, 1, 2]
    assert cc.Uncoded(3).systematic_workers.tolist() == [0, 1, 2]
    code = cc.Replication(3, replicas=2)
    assert code.systematic_inputs.tolist() == [0, 1, 2, 0, 1, 2]
    assert code.systematic_workers.tolist() == [0, 1, 2]


def test_exact_is_a_mask_of_the_inputs_returned_raw():
    rng = np.random.default_rng(0)
    code = cc.Replication(3, replicas=2, fill=np.nan)
    Y = rng.normal(size=(6, 2))
    details = code.decode_details(Y[[4, 0, 3]], [4, 0, 3])  # input 0 twice: worker 0 first in alive
    assert details.info["exact"].tolist() == [True, True, False]
    np.testing.assert_array_equal(details.estimates[:2], Y[[0, 4]])
    assert np.isnan(details.estimates[2]).all()
    assert details.info["missing"] == [2]
    # approximate decodes: all False, shape (K,)
    gcc = cc.GCC(4, 10)
    exact = gcc.decode_details(rng.normal(size=(10, 2)), range(10)).info["exact"]
    assert exact.dtype == bool and exact.shape == (4,) and not exact.any()
    with pytest.raises(ValueError):
        exact[0] = True


def test_lcc_exact_at_the_threshold_and_not_below():
    code = cc.LCC(3, 8, best_effort=True)
    Y = code.encode(np.random.default_rng(1).normal(size=(3, 2)))
    assert code.decode_details(Y[:3], range(3)).info["exact"].tolist() == [True] * 3
    with pytest.warns(RuntimeWarning):
        assert code.decode_details(Y[:2], range(2)).info["exact"].tolist() == [False] * 3


def test_uncoded_torch_rows_bit_for_bit():
    code = cc.Uncoded(3, fill=0.0)
    Y = torch.randn(2, 4, dtype=torch.float32)
    details = code.decode_details(Y, [2, 0])
    assert torch.equal(details.estimates[[0, 2]], Y[[1, 0]])
    assert details.info["exact"].tolist() == [True, False, True]
