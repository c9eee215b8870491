"""Bad arguments the fuzzer found, one per parameter: each raises ValueError naming it."""

from __future__ import annotations

import numpy as np
import pytest

import codedcomputing as cc

BAD_ARGUMENTS = [
    (lambda: cc.BACC(17, 2**63), "num_workers"),
    (lambda: cc.GCC(2**63, 4), "num_inputs"),
    (lambda: cc.Uncoded(2**63), "num_inputs"),
    (lambda: cc.Replication(3, 2**40), "replicas"),
    (lambda: cc.GCC(4, 8, lambda_enc=10**400), "lambda_enc"),
    (lambda: cc.GCC(4, 8, lambda_dec=-(10**400)), "lambda_dec"),
    (lambda: cc.GCC(3, 5, alpha=[0.1j, 0.2, 0.3]), "alpha"),
    (lambda: cc.BACC(3, 4, beta=["a", "b", "c", "d"]), "beta"),
    (lambda: cc.GCC(3, 5).decode(np.ones((2, 1)), [[0, 1], [2]]), "alive"),
    (lambda: cc.stragglers.random(5, 1, "abc"), "rng"),
    (lambda: cc.stragglers.random(5, 1, -1), "rng"),
    (lambda: cc.stragglers.contiguous(5, 1, None), "rng"),
    (lambda: cc.stragglers.random(5, None, 0), "num_stragglers"),
    (lambda: cc.stragglers.bernoulli(5, False, 0), "p"),
    (lambda: cc.stragglers.bernoulli(5, "0.5", 0), "p"),
    (lambda: cc.metrics.mse(np.zeros((0, 3)), np.zeros((0, 3))), "est"),
    (lambda: cc.metrics.relative_accuracy(np.zeros((2, 0)), np.zeros((2, 0))), "est"),
    (lambda: cc.metrics.accuracy(np.eye(2), ["a", "b"]), "labels"),
    (lambda: cc.Uncoded(3, fill="x"), "fill"),
    (lambda: cc.ThreadCluster(num_threads=10**9), "num_threads"),
    (lambda: cc.SimulatedCluster(seed="abc"), "seed"),
    (lambda: cc.SimulatedCluster(compute_s=True), "compute_s"),
    (lambda: cc.SimulatedCluster().gather(np.sin, np.ones((3, 1)), 2, deadline="1"), "deadline"),
    (lambda: cc.delays.ShiftedExponential(scale="0.1"), "scale"),
    (lambda: cc.spline.fit([0.0, 1.0, 2.0], [[1], [2], ["x"]]), "values"),
    (lambda: cc.spline.smoothing_matrix([0.0, 1.0, 2.0], 0.0, [0.5j]), "points"),
    (lambda: cc.tuning.tune(np.sin, np.ones((3, 2)), 6, lambda n, r: np.arange(n), seed=-1), "seed"),
]


@pytest.mark.parametrize(("call", "name"), BAD_ARGUMENTS, ids=[name for _, name in BAD_ARGUMENTS])
def test_bad_arguments_raise_value_error_naming_them(call, name):
    with pytest.raises(ValueError, match=name):
        call()
