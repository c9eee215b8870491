"""The coded scheme's live encode and decode (no re-validation of the frontend's own inputs and
results) against the code's public ``encode`` and ``decode_details``."""

from __future__ import annotations

import numpy as np
import pytest

import codedcomputing as cc
from codedcomputing import serving


class _Frontend:
    """What ``Coded``'s live encode and decode ask of a server: the queries' inputs, accounting."""

    live = True

    def __init__(self, inputs):
        self.inputs = inputs
        self.master = {"encode": 0.0, "decode": 0.0}

    def input(self, query):
        return self.inputs[query]

    def account(self, kind, seconds):
        self.master[kind] += seconds


CODES = [
    cc.BACC(6, 9, systematic=True),
    cc.GCC(6, 9, systematic=True),
    cc.GCC(6, 9, systematic=True, lambda_enc=1e-3, lambda_dec=1e-4, decoding="spline"),
    cc.ManifoldGCC(6, 9),  # batch-adaptive: each group bound and encoded by the code itself
]


@pytest.mark.parametrize("code", CODES, ids=repr)
@pytest.mark.parametrize("size", [6, 4])  # a full group, and one closed short (its own code)
def test_live_encode_and_decode_match_the_codes_checked_ones(code, size):
    rng = np.random.default_rng(size)
    scheme = serving.Coded(code, tau=1.0)
    scheme.prepare(None)
    inputs = rng.normal(size=(size, 2, 3)).astype(np.float32)
    run = _Frontend(inputs)
    group = 0
    scheme.members[group] = list(range(size))
    scheme.position.update((q, q) for q in range(size))
    for table in (scheme.arrived, scheme.results):
        table[group] = []
    parities = scheme.parities
    coded = np.stack([x for x, _ in scheme._parity_inputs(run, group, parities)])
    bound, workers = scheme.bound[group]
    reference = np.asarray(bound.encode(inputs))
    assert coded.dtype == reference.dtype == np.float32
    np.testing.assert_allclose(coded, reference[workers], rtol=1e-5, atol=1e-6)

    def f(x):
        return np.tanh(x.reshape(x.shape[0], -1) @ np.linspace(-1, 1, 12).reshape(6, 2))

    outputs = f(np.concatenate([inputs, coded]))  # rows: the systematic results, then parities
    for _ in range(20):
        count = int(rng.integers(bound.min_results, size + parities + 1))
        arrived = rng.permutation(size + parities)[:count].tolist()  # in arrival order
        scheme.arrived[group] = arrived
        scheme.results[group] = [outputs[i] for i in arrived]
        values, exact = scheme._decode_live(run, group, list(range(size)))
        alive = [bound.systematic_workers[i] if i < size else workers[i - size] for i in arrived]
        expected = bound.decode_details(outputs[arrived], alive)
        np.testing.assert_allclose(values, expected.estimates, rtol=1e-9, atol=1e-12)
        np.testing.assert_array_equal(exact, expected.info["exact"])
        own = [i for i in arrived if i < size]
        np.testing.assert_array_equal(values[own], outputs[own])  # a returned query's own result, bit for bit
        assert set(np.flatnonzero(exact)) == set(own)
