"""``Code.complete(alive)``, the executor's default wait rule: every code, every subset of
a small cluster, against a reference written from each code's recovery rule."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

import codedcomputing as cc

K3 = 3
COMPLETE_CASES = {
    "gcc": (lambda: cc.GCC(K3, 7), lambda code, s: len(s) == 7),
    "bacc": (lambda: cc.BACC(K3, 7), lambda code, s: len(s) == 7),
    "robust-gcc": (lambda: cc.RobustGCC(K3, 7, 1), lambda code, s: len(s) == 7),
    "approxifer": (lambda: cc.ApproxIFER(K3, 7, 1), lambda code, s: len(s) == 7),
    "manifold-gcc": (lambda: cc.ManifoldGCC(K3, 7), lambda code, s: len(s) == 7),
    "lcc": (lambda: cc.LCC(K3, 7, degree=2), lambda code, s: len(s) >= (K3 - 1) * 2 + 1),
    "uncoded": (lambda: cc.Uncoded(K3), lambda code, s: len(s) == K3),
    "replication": (
        lambda: cc.Replication(K3, replicas=2),
        lambda code, s: {n % K3 for n in s} == set(range(K3)),
    ),
}


def test_codes_registry_shape():
    assert set(cc.CODES) == set(COMPLETE_CASES), "a new code needs a Code.complete reference here"
    for name, cls in cc.CODES.items():
        assert isinstance(cls, type) and issubclass(cls, cc.Code) and cls.name == name


@pytest.mark.parametrize("name", sorted(COMPLETE_CASES))
def test_code_complete_on_every_subset(name):
    make, reference = COMPLETE_CASES[name]
    code = make()
    assert isinstance(code, cc.CODES[name])
    n = code.num_workers
    rng = np.random.default_rng(0)
    for size in range(n + 1):
        for subset in itertools.combinations(range(n), size):
            alive = rng.permutation(np.array(subset, dtype=np.int64))  # order does not matter
            assert code.complete(alive) == reference(code, set(subset)), subset
            assert code.complete(list(subset)) == reference(code, set(subset))
    assert code.complete(np.arange(n)) and not code.complete([])


@pytest.mark.parametrize("name", sorted(COMPLETE_CASES))
def test_code_complete_rejects_bad_alive(name):
    code = COMPLETE_CASES[name][0]()
    for alive in ([0, 0], [code.num_workers], [-1], [[0, 1]]):
        with pytest.raises(ValueError, match="alive"):
            code.complete(alive)
