"""Straggler patterns (cc.stragglers) and accuracy metrics (cc.metrics)."""

from __future__ import annotations

import numpy as np
import pytest
import torch

import codedcomputing as cc

PATTERNS = {
    "random": cc.stragglers.random,
    "contiguous": cc.stragglers.contiguous,
}


def assert_valid_alive(alive, num_workers: int) -> None:
    assert isinstance(alive, np.ndarray)
    assert alive.ndim == 1
    assert np.issubdtype(alive.dtype, np.integer)
    assert np.all((alive >= 0) & (alive < num_workers))
    assert np.all(np.diff(alive) > 0), "sorted and unique"


# == stragglers ===========================================================================


@pytest.mark.parametrize("pattern", PATTERNS)
@pytest.mark.parametrize(("n", "s"), [(10, 0), (10, 1), (10, 4), (10, 9), (1, 0), (2, 1)])
def test_pattern_size_and_validity(pattern, n, s):
    for seed in range(20):
        alive = PATTERNS[pattern](n, s, seed)
        assert_valid_alive(alive, n)
        assert alive.size == n - s


@pytest.mark.parametrize(("n", "s"), [(10, 1), (10, 4), (10, 9), (7, 3)])
def test_contiguous_stragglers_are_consecutive(n, s):
    for seed in range(30):
        alive = cc.stragglers.contiguous(n, s, seed)
        missing = np.setdiff1d(np.arange(n), alive)
        assert missing.size == s
        np.testing.assert_array_equal(missing, np.arange(missing[0], missing[0] + s))


def test_contiguous_covers_every_start_including_edges():
    n, s = 8, 3
    rng = np.random.default_rng(0)
    starts = []
    for _ in range(600):
        missing = np.setdiff1d(np.arange(n), cc.stragglers.contiguous(n, s, rng))
        starts.append(int(missing[0]))
    # n - s + 1 = 6 positions; a given one is missed in 600 draws with probability (5/6)^600 ~ 1e-48
    assert set(starts) == set(range(n - s + 1))


@pytest.mark.parametrize("pattern", PATTERNS)
def test_random_patterns_reach_every_worker(pattern):
    # over many draws every worker straggles sometimes and returns sometimes
    n, s = 9, 2
    rng = np.random.default_rng(1)
    counts = np.zeros(n, dtype=int)
    for _ in range(500):
        counts[PATTERNS[pattern](n, s, rng)] += 1
    assert np.all(counts > 0)
    assert np.all(counts < 500)


@pytest.mark.parametrize("pattern", [*PATTERNS, "bernoulli"])
def test_same_seed_same_result_int_or_generator(pattern):
    def draw(rng):
        if pattern == "bernoulli":
            return cc.stragglers.bernoulli(30, 0.3, rng)
        return PATTERNS[pattern](30, 7, rng)

    results = [draw(seed) for seed in range(10)]
    for seed in range(10):
        np.testing.assert_array_equal(draw(seed), results[seed])
        np.testing.assert_array_equal(draw(np.random.default_rng(seed)), results[seed])
    # the seed matters
    assert len({r.tobytes() for r in results}) > 1
    # a shared generator advances: successive draws are not all equal
    rng = np.random.default_rng(123)
    assert len({draw(rng).tobytes() for _ in range(10)}) > 1


def test_bernoulli_validity_and_fraction():
    n, p, draws = 50, 0.3, 400
    rng = np.random.default_rng(2)
    stragglers = 0
    for _ in range(draws):
        alive = cc.stragglers.bernoulli(n, p, rng)
        assert_valid_alive(alive, n)
        stragglers += n - alive.size
    fraction = stragglers / (n * draws)
    # 20000 Bernoulli(0.3) trials: standard deviation 0.0032; 0.02 is over 6 sigma
    assert abs(fraction - p) < 0.02


def test_bernoulli_p_zero_keeps_everyone():
    for seed in range(5):
        np.testing.assert_array_equal(cc.stragglers.bernoulli(12, 0.0, seed), np.arange(12))


@pytest.mark.parametrize("pattern", PATTERNS)
@pytest.mark.parametrize("s", [10, 11, -1, 2.5])
def test_bad_num_stragglers(pattern, s):
    with pytest.raises(ValueError, match="num_stragglers"):
        PATTERNS[pattern](10, s, 0)


@pytest.mark.parametrize("p", [1.0, 1.5, -0.1, np.nan])
def test_bernoulli_bad_p(p):
    with pytest.raises(ValueError, match=r"\bp\b"):
        cc.stragglers.bernoulli(10, p, 0)


# == metrics ==============================================================================


def _hand_example():
    """K = 2 inputs of shape (2, 3)."""
    truth = np.zeros((2, 2, 3))
    truth[0] = [[1.0, 2.0, 0.0], [0.0, 0.0, -1.0]]
    truth[1] = [[0.5, 0.5, 0.5], [0.5, 0.5, 0.5]]
    est = np.zeros((2, 2, 3))
    est[0] = [[1.0, 0.0, 0.0], [0.0, 3.0, -1.0]]  # squared error 4 + 9 = 13
    est[1] = [[0.5, 0.5, 0.5], [0.5, 0.5, 1.5]]  # squared error 1
    return est, truth, (13.0 + 1.0) / 2


def test_mse_hand_example():
    est, truth, expected = _hand_example()
    assert cc.metrics.mse(est, truth) == pytest.approx(expected, rel=1e-15)
    assert cc.metrics.mse(truth, est) == pytest.approx(expected, rel=1e-15)
    assert cc.metrics.mse(truth, truth) == 0.0
    assert isinstance(cc.metrics.mse(est, truth), float)


def test_mse_vector_rows():
    # (K,) inputs: each row is a scalar, so the mse is the plain mean of squared errors
    assert cc.metrics.mse(np.array([1.0, 2.0, 3.0]), np.array([1.0, 0.0, 0.0])) == pytest.approx(13 / 3)


def test_mse_accepts_torch():
    est, truth, expected = _hand_example()
    for dtype in (torch.float32, torch.float64):
        got = cc.metrics.mse(torch.tensor(est, dtype=dtype), torch.tensor(truth, dtype=dtype))
        assert got == pytest.approx(expected, rel=1e-6)
    assert cc.metrics.mse(torch.tensor(est), truth) == pytest.approx(expected, rel=1e-15)
    est_grad = torch.tensor(est, requires_grad=True)
    assert cc.metrics.mse(est_grad, torch.tensor(truth)) == pytest.approx(expected, rel=1e-15)


def test_relative_accuracy_hand_example():
    truth = np.array([[0.1, 0.9, 0.0], [0.8, 0.1, 0.1], [0.2, 0.3, 0.5], [0.0, 0.0, 1.0]])
    est = np.array([[0.0, 2.0, 1.0], [0.1, 0.7, 0.2], [0.0, 0.1, 0.4], [0.3, 0.2, 0.1]])
    # argmax: truth 1, 0, 2, 2; est 1, 1, 2, 0 -> 2 of 4 match
    assert cc.metrics.relative_accuracy(est, truth) == 0.5
    assert cc.metrics.relative_accuracy(torch.tensor(est), torch.tensor(truth)) == 0.5
    assert cc.metrics.relative_accuracy(truth, truth) == 1.0
    # argmax over the flattened trailing shape
    t3 = np.zeros((2, 2, 2))
    t3[0, 1, 0] = 1.0  # flat index 2
    t3[1, 0, 1] = 1.0  # flat index 1
    e3 = t3.copy()
    e3[1, 1, 1] = 5.0  # flat index 3: mismatch
    assert cc.metrics.relative_accuracy(e3, t3) == 0.5


def test_accuracy_hand_example():
    est = np.array([[0.0, 2.0, 1.0], [0.1, 0.7, 0.2], [0.0, 0.1, 0.4], [0.3, 0.2, 0.1], [1.0, 0.0, 0.0]])
    labels = np.array([1, 0, 2, 0, 2])  # argmax 1, 1, 2, 0, 0 -> 3 of 5
    assert cc.metrics.accuracy(est, labels) == pytest.approx(0.6)
    assert cc.metrics.accuracy(torch.tensor(est), torch.tensor(labels)) == pytest.approx(0.6)
    assert cc.metrics.accuracy(est, labels.tolist()) == pytest.approx(0.6)
    assert cc.metrics.accuracy(est, np.array([1, 1, 2, 0, 0])) == 1.0


def test_metrics_reject_shape_mismatch():
    a = np.zeros((4, 3))
    for other in (np.zeros((5, 3)), np.zeros((4, 2)), np.zeros((4, 3, 2))):
        with pytest.raises(ValueError):
            cc.metrics.mse(a, other)
        with pytest.raises(ValueError):
            cc.metrics.relative_accuracy(a, other)
        with pytest.raises(ValueError):
            cc.metrics.relative_accuracy(torch.tensor(a), torch.tensor(other))
    for labels in (np.zeros(3, dtype=int), np.zeros(5, dtype=int)):
        with pytest.raises(ValueError, match="labels"):
            cc.metrics.accuracy(a, labels)
    with pytest.raises(ValueError):
        cc.metrics.mse(np.float64(1.0), np.float64(1.0))


@pytest.mark.parametrize("metric", ["mse", "relative_accuracy"])
def test_metrics_reject_same_size_different_trailing_shape(metric):
    fn = getattr(cc.metrics, metric)
    with pytest.raises(ValueError):
        fn(np.zeros((4, 2, 3)), np.ones((4, 3, 2)))
