"""Gradient codes: exact recovery of the full gradient from every allowed set of workers
(exhaustively for small n), the codes' structure, conditioning checks, and loud failures."""

from __future__ import annotations

import itertools
import time

import numpy as np
import pytest

from codedcomputing.gradient_coding import (
    CyclicRepetition,
    FractionalRepetition,
    TooManyStragglersError,
)


def messages_for(code, gradients):
    """Worker i's message: sum_j B[i, j] g_j."""
    return code.encoding_matrix @ gradients


@pytest.mark.parametrize(("n", "s"), [(n, s) for n in range(1, 9) for s in range(n)])
def test_cyclic_repetition_recovers_the_sum_from_every_set_of_n_minus_s(n, s):
    code = CyclicRepetition(n, s, seed=3)
    B = code.encoding_matrix
    for i in range(n):  # worker i holds partitions i..i+s (mod n)
        assert set(np.flatnonzero(B[i]).tolist()) <= set(((i + np.arange(s + 1)) % n).tolist())
        assert B[i, i] == 1.0
        assert code.partitions(i).tolist() == ((i + np.arange(s + 1)) % n).tolist()
    gradients = np.random.default_rng(n * 10 + s).normal(size=(n, 4))
    exact = gradients.sum(axis=0)
    messages = messages_for(code, gradients)
    rng = np.random.default_rng(s)
    for F in itertools.combinations(range(n), n - s):
        alive = rng.permutation(np.asarray(F))  # arrival order is any order
        a = code.decoding_weights(alive)
        np.testing.assert_allclose(a @ B[alive], np.ones(n), atol=1e-9)
        np.testing.assert_allclose(code.decode(messages[alive], alive), exact, atol=1e-8)


@pytest.mark.parametrize(("n", "s"), [(6, 1), (6, 2), (8, 3), (12, 2), (12, 3), (4, 0)])
def test_fractional_repetition_takes_the_first_arrival_of_each_group(n, s):
    code = FractionalRepetition(n, s)
    B = code.encoding_matrix
    groups = np.arange(n) // (s + 1)
    np.testing.assert_array_equal(B, (groups[:, None] == groups[None, :]).astype(float))
    gradients = np.random.default_rng(n + s).normal(size=(n, 3))
    messages = messages_for(code, gradients)
    exact = gradients.sum(axis=0)
    rng = np.random.default_rng(0)
    for size in range(n - s, n + 1):
        for F in itertools.combinations(range(n), size):
            alive = rng.permutation(np.asarray(F))
            a = code.decoding_weights(alive)
            first = {}
            for worker in alive.tolist():
                first.setdefault(worker // (s + 1), worker)
            assert sorted(alive[a == 1].tolist()) == sorted(first.values())  # the first of each group
            np.testing.assert_allclose(code.decode(messages[alive], alive), exact, atol=1e-12)
    assert code.partitions(n - 1).tolist() == list(range(n - s - 1, n))


def test_exact_codes_fail_loudly_when_more_than_s_are_missing():
    fr = FractionalRepetition(6, 1)
    with pytest.raises(TooManyStragglersError, match=r"groups \[1\].*partitions \[2, 3\]") as caught:
        fr.decoding_weights([0, 1, 4, 5])
    assert caught.value.missing == [2, 3]
    # more than s missing but every group still present: still exact, no error
    assert fr.decoding_weights([0, 2, 4]).tolist() == [1.0, 1.0, 1.0]
    cr = CyclicRepetition(7, 2)
    message = "needs the results of n - s = 5 workers, got 4"
    with pytest.raises(TooManyStragglersError, match=message) as caught:
        cr.decoding_weights([0, 1, 2, 3])
    assert caught.value.missing == 1


def test_cyclic_repetition_uses_the_fastest_n_minus_s_and_checks_conditioning():
    code = CyclicRepetition(10, 3, seed=1)
    alive = [9, 2, 5, 0, 7, 1, 3, 8]  # 8 returned: the first 7 decode, the last gets weight 0
    a = code.decoding_weights(alive)
    assert a[-1] == 0.0 and np.count_nonzero(a[:7]) > 0
    assert 1.0 <= code.condition_number <= code.max_condition
    # the reported worst condition is the worst over every B_F (C(10, 3) = 120 <= 2000 sets)
    worst = max(np.linalg.cond(code.encoding_matrix[list(F)]) for F in itertools.combinations(range(10), 7))
    assert code.condition_number == pytest.approx(worst, rel=1e-9)
    with pytest.raises(ValueError, match="condition number above max_condition"):
        CyclicRepetition(10, 3, seed=1, max_condition=1.5, retries=3)
    big = CyclicRepetition(40, 8, seed=0, max_subsets=200)  # sampled sets and contiguous blocks
    assert np.isfinite(big.condition_number) and big.condition_number <= big.max_condition
    np.testing.assert_array_equal(CyclicRepetition(10, 3, seed=1).encoding_matrix, code.encoding_matrix)


@pytest.mark.parametrize(
    ("make", "match"),
    [
        (lambda: FractionalRepetition(6, 6), "num_stragglers must be below"),
        (lambda: FractionalRepetition(7, 1), "divide"),
        (lambda: CyclicRepetition(0, 0), "num_workers"),
        (lambda: CyclicRepetition(5, -1), "num_stragglers"),
        (lambda: CyclicRepetition(5, 1, seed=-1), "seed"),
        (lambda: CyclicRepetition(5, 1, seed=1.5), "seed"),
        (lambda: CyclicRepetition(5, 1, seed=True), "seed"),
        (lambda: CyclicRepetition(5, 1, max_subsets=0), "max_subsets"),
        (lambda: FractionalRepetition(6, 1).decoding_weights([0, 0, 2, 4]), "duplicate"),
        (lambda: FractionalRepetition(6, 1).decode(np.ones((2, 3)), [0, 2, 4]), "one row per entry"),
    ],
)
def test_bad_arguments_name_the_parameter(make, match):
    with pytest.raises(ValueError, match=match):
        make()


def test_sizes_are_checked_before_anything_is_allocated():
    """FractionalRepetition(100000, 0) asked for 74.5 GiB; CyclicRepetition(1000, 1) took
    more than 20 s (a conditioning check that grew like n^4)."""
    start = time.perf_counter()
    with pytest.raises(ValueError, match="num_workers must be at most 10,000 for FractionalRepetition"):
        FractionalRepetition(100_000, 0)
    with pytest.raises(ValueError, match="num_workers must be at most 1,000 for CyclicRepetition"):
        CyclicRepetition(1001, 1)
    large = FractionalRepetition(10_000, 1)  # decodes without building its 800 MB matrix
    assert large._matrix is None
    assert large.decoding_weights(np.arange(0, 10_000, 2)).sum() == 5000
    assert large._matrix is None
    assert time.perf_counter() - start < 2.0
    blocks = np.kron(np.eye(2), np.ones((2, 2)))
    np.testing.assert_array_equal(FractionalRepetition(4, 1).encoding_matrix, blocks)


def test_cyclic_repetition_bounds_its_conditioning_check():
    assert [CyclicRepetition(n, 1).max_subsets for n in (10, 62, 100, 200)] == [2000, 2000, 500, 62]
    start = time.perf_counter()
    code = CyclicRepetition(500, 1, seed=0)
    elapsed = time.perf_counter() - start
    assert code.max_subsets == 4 and code.checked_subsets == 4  # 2 blocks, 2 random sets
    assert elapsed < 30.0  # 4 SVDs of 499 x 500 (was 500 of them: 9.8 s on a quiet machine)
    alive = np.random.default_rng(0).permutation(500)[:499]
    np.testing.assert_allclose(code.decoding_weights(alive) @ code.encoding_matrix[alive], 1.0, atol=1e-8)
    explicit = CyclicRepetition(12, 2, max_subsets=30)  # C(12, 2) = 66 > 30: sampled, as given
    assert explicit.checked_subsets == 30


def test_workers_and_messages_are_checked_naming_them():
    """partitions and group refuse a worker that is not an integer in 0..n-1 (a string, 1.5,
    inf, a list, n, -1, True) with a ValueError naming it, and take numpy integers; decode
    refuses messages that are not a numeric array (None, a scalar, strings, objects) with a
    ValueError naming messages, and sums the gradients from valid ones."""
    fr, cr = FractionalRepetition(6, 1), CyclicRepetition(6, 1)
    for call in (fr.partitions, fr.group, cr.partitions):
        for bad in ("1", 1.5, np.inf, [1], 6, -1, True):
            with pytest.raises(ValueError, match="worker"):
                call(bad)
        assert call(np.int64(5)) is not None
    for code in (fr, cr):
        alive = np.arange(5)
        for bad in (None, 2.0, np.array(["1"] * 5), np.array([1.0] * 5, dtype=object), "abc"):
            with pytest.raises(ValueError, match="messages"):
                code.decode(bad, alive)
        G = np.random.default_rng(0).normal(size=(6, 3))
        np.testing.assert_allclose(code.decode(code.encoding_matrix[alive] @ G, alive), G.sum(axis=0))
