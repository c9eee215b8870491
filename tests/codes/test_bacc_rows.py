"""BACC's decode of chosen rows alone (a serving frontend's few waiting queries) is the same as
those rows of its whole decode."""

import numpy as np
import pytest

import codedcomputing as cc


@pytest.mark.parametrize(
    ("k", "n", "systematic"), [(4, 6, True), (10, 15, False), (50, 75, True), (200, 2000, False)]
)
def test_decoded_rows_are_the_rows_of_the_whole_decode(k, n, systematic):
    code = cc.BACC(k, n, systematic=systematic)
    rng = np.random.default_rng(k)
    for _ in range(10):
        alive = np.sort(rng.choice(n, rng.integers(1, n + 1), replace=False))  # the hooks take them sorted
        Y = rng.normal(size=(alive.size, 3))
        rows = sorted(rng.choice(k, min(k, 3), replace=False).tolist())
        whole, _ = code._decode(Y, alive)
        values, exact = code._decode_rows(Y, alive, np.asarray(rows))
        np.testing.assert_allclose(values, whole[rows], rtol=1e-12, atol=1e-12)
        assert not exact.any()
