"""How long a simulated ``gather`` waits: the k-th smallest of n latencies, against
:func:`cc.delays.expected_order_statistic` and scipy's integration of the order
statistic's density; and the simulated cluster computes only the workers it needs.

Each tolerance is a few standard errors of the mean wait, computed from the order statistic's
own variance, and every random draw has a fixed seed so the checks are deterministic.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from runtime_helpers import identity, rows_of, trace
from scipy import integrate, stats

import codedcomputing as cc

D = cc.delays
F = cc.faults


def _order_statistic_mean_by_integration(scale, rate, k, n):
    """E of the k-th smallest of n shifted exponentials, integrating its density (scipy)."""
    dist = stats.expon(loc=scale, scale=scale / rate)
    coefficient = math.factorial(n) / (math.factorial(k - 1) * math.factorial(n - k))

    def density(t):
        F_t = dist.cdf(t)
        return coefficient * F_t ** (k - 1) * (1 - F_t) ** (n - k) * dist.pdf(t)

    value, _ = integrate.quad(lambda t: t * density(t), scale, math.inf)
    return value


@pytest.mark.parametrize(("k", "n"), [(1, 1), (1, 5), (3, 5), (5, 5), (7, 20), (20, 20)])
def test_expected_order_statistic_matches_integration(k, n):
    model = D.ShiftedExponential(scale=0.01, rate=2.0)
    assert D.expected_order_statistic(model, k, n) == pytest.approx(
        _order_statistic_mean_by_integration(0.01, 2.0, k, n), rel=1e-7
    )


def test_expected_order_statistic_validation():
    model = D.ShiftedExponential()
    for k, n in [(0, 5), (6, 5), (-1, 3)]:
        with pytest.raises(ValueError, match="k"):
            D.expected_order_statistic(model, k, n)
    with pytest.raises(ValueError, match="model"):
        D.expected_order_statistic(D.Pareto(), 1, 5)


def _order_statistic_sd(scale, rate, k, n):
    return scale / rate * math.sqrt(sum(1 / i**2 for i in range(n - k + 1, n + 1)))


def _check_waits(n, k, reps, seed, scale=0.01, rate=2.0, compute_s=0.0):
    model = D.ShiftedExponential(scale=scale, rate=rate)
    cluster = cc.SimulatedCluster(delays=model, seed=seed, compute_s=compute_s)
    X = np.zeros((n, 1))
    waits = np.empty(reps)
    for r in range(reps):
        g = cluster.gather(identity, X, wait_for=k)
        # exact, call by call: the wait is the k-th smallest latency
        assert g.wall_s == pytest.approx(compute_s + np.sort(g.delays)[k - 1], abs=1e-12)
        assert len(g.alive) == k and not g.timed_out
        waits[r] = g.wall_s
    theory = compute_s + D.expected_order_statistic(model, k, n)
    standard_error = _order_statistic_sd(scale, rate, k, n) / math.sqrt(reps)
    assert abs(waits.mean() - theory) < 5 * standard_error, (n, k, waits.mean(), theory, standard_error)


@pytest.mark.parametrize("k", [1, 2, 3, 4, 5])
def test_simulated_order_statistics_small_n(k):
    _check_waits(n=5, k=k, reps=2000, seed=100 + k)


@pytest.mark.parametrize("k", [1, 1500, 2000])
def test_simulated_order_statistics_thousands_of_workers(k):
    _check_waits(n=2000, k=k, reps=100, seed=200 + k)


def test_simulated_compute_s_shifts_every_latency():
    _check_waits(n=10, k=4, reps=500, seed=3, compute_s=0.25)


def test_simulated_evaluates_f_only_on_needed_workers():
    n = 5000
    seen: list[np.ndarray] = []

    def f(x):
        seen.append(x[:, 0].copy())
        return x

    X = rows_of(n, 2)
    cluster = cc.SimulatedCluster(delays=D.ShiftedExponential(), seed=0)
    g = cluster.gather(f, X, wait_for=10)
    assert sum(len(s) for s in seen) == 10
    assert sorted(np.concatenate(seen).astype(int).tolist()) == sorted(g.alive.tolist())
    # faults: raising workers are never computed; NaN workers are computed, then fail
    seen.clear()
    faults = F.Fixed({0: "nan", 2: "nan", 5: "raise", 6: "hang"})
    cluster = cc.SimulatedCluster(delays=trace(*(np.arange(n) * 1e-3)), faults=faults)
    g = cluster.gather(f, X, wait_for=10)
    computed = np.concatenate(seen).astype(int)
    assert g.alive.tolist() == [1, 3, 4, 7, 8, 9, 10, 11, 12, 13]
    assert sorted(computed.tolist()) == sorted([0, 2, *g.alive.tolist()])
    assert set(g.failed) == {0, 2, 5}
    assert len(g.dropped) == n - 13
