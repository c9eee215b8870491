"""The runtime: delay and fault models, the clusters' ``gather`` primitive, the executor.

Statistical checks compare many samples with closed forms (means, survival functions,
order statistics, Markov transition rates); each tolerance is a few standard errors of the
estimate, computed from the model's own variance, and every random draw has a fixed seed so
the checks are deterministic. Thread-cluster checks use :class:`cc.delays.Trace` with known
latencies 10-60 ms apart, so the arrival order is fixed. Ray is tested elsewhere.
"""

from __future__ import annotations

import csv
import itertools
import math
import threading

import numpy as np
import pytest
import torch
from scipy import integrate, stats

import codedcomputing as cc
from codedcomputing.runtime import Gathered

D = cc.delays
F = cc.faults

# -- helpers ---------------------------------------------------------------------------------


def identity(x):
    return x


def make_cluster(kind: str, **kwargs):
    if kind == "thread":
        return cc.ThreadCluster(num_threads=4, **kwargs)
    return cc.SimulatedCluster(**kwargs)


CLUSTER_KINDS = ["thread", "simulated"]


def trace(*latencies) -> D.Trace:
    """One call's fixed delays (the same on every call)."""
    return D.Trace([list(latencies)])


def rows_of(n: int, d: int = 3) -> np.ndarray:
    """``(n, d)`` inputs whose row n is ``n + [0, 0.1, 0.2, ...]``: each row names its worker."""
    return np.arange(n, dtype=np.float64)[:, None] + 0.1 * np.arange(d)[None, :]


def assert_partition(g: Gathered, num_workers: int) -> None:
    """alive, failed and dropped split the workers; latency is finite exactly where they arrived."""
    alive, failed, dropped = list(g.alive.tolist()), set(g.failed), set(g.dropped.tolist())
    assert len(alive) == len(set(alive))
    assert set(alive).isdisjoint(failed) and set(alive).isdisjoint(dropped) and failed.isdisjoint(dropped)
    assert set(alive) | failed | dropped == set(range(num_workers))
    assert g.dropped.tolist() == sorted(dropped)
    arrived = np.zeros(num_workers, dtype=bool)
    arrived[alive + sorted(failed)] = True
    assert np.all(np.isfinite(g.latency[arrived]))
    assert np.all(np.isnan(g.latency[~arrived]))
    assert g.latency.shape == g.delays.shape == (num_workers,)
    if alive:
        assert g.results.shape[0] == len(alive)
    else:
        assert g.results is None


# -- delay models ----------------------------------------------------------------------------

ALL_DELAY_MODELS = [
    D.ShiftedExponential(scale=0.01, rate=2.0),
    D.AdditiveExponential(mean=0.02),
    D.Pareto(scale=0.01, alpha=1.5),
    D.Bimodal(base=0.01, p=0.2),
    D.BurstyMarkov(base=0.01, p_slow=0.1, p_recover=0.4),
    D.Trace(np.arange(12.0).reshape(3, 4) / 100, shuffle=True),
]


@pytest.mark.parametrize("model", ALL_DELAY_MODELS, ids=repr)
def test_delay_models_are_reproducible_with_a_seed(model):
    def draw(seed):
        model.reset()
        rng = np.random.default_rng(seed)
        return np.stack([model.sample(50, rng) for _ in range(4)])

    first, again, other = draw(7), draw(7), draw(8)
    assert first.shape == (4, 50)
    assert np.all(np.isfinite(first)) and np.all(first >= 0)
    np.testing.assert_array_equal(first, again)
    assert not np.array_equal(first, other)


@pytest.mark.parametrize(
    ("make", "name"),
    [
        (lambda: D.ShiftedExponential(scale=0), "scale"),
        (lambda: D.ShiftedExponential(scale=-0.1), "scale"),
        (lambda: D.ShiftedExponential(rate=-1), "rate"),
        (lambda: D.ShiftedExponential(rate=math.inf), "rate"),
        (lambda: D.ShiftedExponential(rate="fast"), "rate"),
        (lambda: D.AdditiveExponential(mean=0), "mean"),
        (lambda: D.AdditiveExponential(mean=None), "mean"),
        (lambda: D.Pareto(alpha=math.nan), "alpha"),
        (lambda: D.Pareto(scale=-1), "scale"),
        (lambda: D.Bimodal(p=1.5), "p"),
        (lambda: D.Bimodal(p=-0.1), "p"),
        (lambda: D.Bimodal(base=0), "base"),
        (lambda: D.Bimodal(slowdown=0), "slowdown"),
        (lambda: D.Bimodal(jitter=-0.5), "jitter"),
        (lambda: D.BurstyMarkov(p_slow=2), "p_slow"),
        (lambda: D.BurstyMarkov(p_recover=math.nan), "p_recover"),
        (lambda: D.BurstyMarkov(p_slow=0, p_recover=0), "p_slow"),
        (lambda: D.BurstyMarkov(slowdown=-8), "slowdown"),
        (lambda: D.ShiftedExponential().sample(0, np.random.default_rng(0)), "num_workers"),
        (lambda: D.ShiftedExponential().sample(True, np.random.default_rng(0)), "num_workers"),
        (lambda: D.Pareto().sample(3.0, np.random.default_rng(0)), "num_workers"),
    ],
)
def test_delay_parameter_errors_name_the_parameter(make, name):
    with pytest.raises(ValueError, match=rf"^{name}\b"):
        make()


def test_zero_jitter_and_zero_probability_are_allowed():
    rng = np.random.default_rng(0)
    np.testing.assert_array_equal(D.Bimodal(base=0.5, p=0.0, jitter=0.0).sample(20, rng), np.full(20, 0.5))
    np.testing.assert_array_equal(
        D.Bimodal(base=0.5, p=1.0, slowdown=4.0, jitter=0.0).sample(20, rng), np.full(20, 2.0)
    )


def test_shifted_exponential_mean_and_minimum():
    scale, rate, n = 0.01, 2.0, 200_000
    t = D.ShiftedExponential(scale=scale, rate=rate).sample(n, np.random.default_rng(1))
    assert t.min() >= scale
    standard_error = scale / rate / math.sqrt(n)
    assert abs(t.mean() - scale * (1 + 1 / rate)) < 5 * standard_error
    # the excess over the shift is exponential: its median is scale * ln 2 / rate
    assert abs(np.median(t - scale) - scale * math.log(2) / rate) < 0.01 * scale


def test_additive_exponential_mean():
    mean, n = 0.02, 200_000
    t = D.AdditiveExponential(mean=mean).sample(n, np.random.default_rng(2))
    assert t.min() >= 0
    assert abs(t.mean() - mean) < 5 * mean / math.sqrt(n)


def test_pareto_survival_function():
    scale, alpha, n = 0.01, 1.5, 200_000
    t = D.Pareto(scale=scale, alpha=alpha).sample(n, np.random.default_rng(3))
    assert t.min() >= scale
    for multiple in (1.5, 2.0, 10.0):
        p = multiple**-alpha  # (scale / t)^alpha at t = multiple * scale
        assert abs(np.mean(t > multiple * scale) - p) < 5 * math.sqrt(p * (1 - p) / n)


def test_bimodal_slow_fraction_and_modes():
    base, p, slowdown, jitter, n = 0.01, 0.2, 8.0, 0.1, 100_000
    t = D.Bimodal(base=base, p=p, slowdown=slowdown, jitter=jitter).sample(n, np.random.default_rng(4))
    slow = t > 2 * base
    fast_t, slow_t = t[~slow], t[slow]
    assert fast_t.min() >= base and fast_t.max() <= base * (1 + jitter)
    assert slow_t.min() >= base * slowdown and slow_t.max() <= base * slowdown * (1 + jitter)
    assert abs(slow.mean() - p) < 5 * math.sqrt(p * (1 - p) / n)


def _slow_states(model, workers, calls, seed):
    rng = np.random.default_rng(seed)
    return np.stack([model.sample(workers, rng) > 2 * model.base for _ in range(calls)])


def test_bursty_markov_long_run_fraction_and_persistence():
    p_slow, p_recover = 0.05, 0.3
    model = D.BurstyMarkov(base=0.01, p_slow=p_slow, p_recover=p_recover, slowdown=8.0, jitter=0.1)
    assert model.slow_fraction == pytest.approx(p_slow / (p_slow + p_recover))
    slow = _slow_states(model, workers=2000, calls=200, seed=5)  # (calls, workers)
    pi = p_slow / (p_slow + p_recover)
    # the first call is drawn from the stationary distribution
    assert abs(slow[0].mean() - pi) < 5 * math.sqrt(pi * (1 - pi) / 2000)
    # long run: samples are correlated along time (lag-1 correlation 1 - p_slow - p_recover),
    # which inflates the variance of the mean by (1 + lam) / (1 - lam)
    lam = 1 - p_slow - p_recover
    effective = slow.size * (1 - lam) / (1 + lam)
    assert abs(slow.mean() - pi) < 5 * math.sqrt(pi * (1 - pi) / effective)
    before, after = slow[:-1], slow[1:]
    stay_slow = after[before].mean()  # P(slow at t+1 | slow at t)
    turn_slow = after[~before].mean()  # P(slow at t+1 | fast at t)
    assert abs(stay_slow - (1 - p_recover)) < 5 * math.sqrt(p_recover * (1 - p_recover) / before.sum())
    assert abs(turn_slow - p_slow) < 5 * math.sqrt(p_slow * (1 - p_slow) / (~before).sum())
    # mean burst length 1 / p_recover: far longer than independent draws would give
    assert stay_slow > 3 * pi


def test_bursty_markov_reset_restarts_the_chain():
    model = D.BurstyMarkov(p_slow=0.2, p_recover=0.2)

    def run(seed):
        rng = np.random.default_rng(seed)
        return np.stack([model.sample(100, rng) for _ in range(5)])

    first = run(11)
    continued = run(11)  # same draws, but the chain carries on from where it was
    model.reset()
    restarted = run(11)
    np.testing.assert_array_equal(first, restarted)
    assert not np.array_equal(first, continued)
    # a different number of workers starts a fresh chain of that size
    assert model.sample(7, np.random.default_rng(0)).shape == (7,)
    assert model.sample(30, np.random.default_rng(0)).shape == (30,)


def test_trace_replays_rows_cyclically_and_wraps_columns():
    table = np.arange(12.0).reshape(3, 4) / 100
    model = D.Trace(table)
    rng = np.random.default_rng(0)
    for call in range(7):
        got = model.sample(10, rng)
        expected = [table[call % 3, n % 4] for n in range(10)]
        np.testing.assert_array_equal(got, expected)
    model.reset()
    np.testing.assert_array_equal(model.sample(2, rng), table[0, :2])
    # the returned delays are a copy: editing them does not edit the trace
    got = model.sample(4, rng)
    got[:] = -1
    np.testing.assert_array_equal(model.sample(4, rng), table[2])
    assert not model.latencies.flags.writeable


def test_trace_shuffle_draws_whole_rows_and_columns_from_that_row():
    table = np.arange(12.0).reshape(3, 4) / 100
    model = D.Trace(table, shuffle=True)
    rng = np.random.default_rng(1)
    counts = np.zeros(3, dtype=int)
    for _ in range(3000):
        got = model.sample(9, rng)
        row = int(np.flatnonzero((table == got[:4]).all(axis=1))[0])  # first W columns: a whole row
        counts[row] += 1
        assert set(got[4:].tolist()) <= set(table[row].tolist())  # extra workers: that row's values
    assert np.all(np.abs(counts - 1000) < 5 * math.sqrt(3000 * (1 / 3) * (2 / 3)))


@pytest.mark.parametrize(
    "latencies",
    [[1.0, 2.0], [[]], [[0.1, math.nan]], [[0.1, -0.2]], [[0.1, math.inf]], [[0.1], [0.1, 0.2]], "slow"],
)
def test_trace_rejects_bad_latencies(latencies):
    with pytest.raises(ValueError, match="latencies"):
        D.Trace(latencies)


def _write_csv(path, header, rows):
    with path.open("w", newline="") as handle:
        writer = csv.writer(handle)
        writer.writerow(header)
        writer.writerows(rows)
    return path


def test_trace_from_csv_reads_long_format(tmp_path):
    rows = [  # out of order; calls 9 and 5 (not consecutive); one worker that never returned
        (9, 2, "0.05"),
        (9, 0, "0.3"),
        (9, 1, "0.4"),
        (5, 1, "0.2"),
        (5, 0, "0.1"),
        (5, 2, ""),
    ]
    path = _write_csv(tmp_path / "trace.csv", ["call", "worker", "latency_s"], rows)
    model = D.Trace.from_csv(path)
    np.testing.assert_array_equal(model.latencies, [[0.1, 0.2, 0.4], [0.3, 0.4, 0.05]])
    rng = np.random.default_rng(0)
    np.testing.assert_array_equal(model.sample(3, rng), [0.1, 0.2, 0.4])
    np.testing.assert_array_equal(model.sample(3, rng), [0.3, 0.4, 0.05])
    assert D.Trace.from_csv(str(path), shuffle=True).shuffle


@pytest.mark.parametrize(
    ("header", "rows", "match"),
    [
        (["call", "worker", "latency"], [(0, 0, "0.1")], "latency_s"),
        (["call", "worker", "latency_s"], [], "latency_s"),
        (["call", "worker", "latency_s"], [(0, 0, "0.1"), (0, 2, "0.2")], "0..W-1"),
        (["call", "worker", "latency_s"], [(0, 0, "0.1"), (0, 1, "0.2"), (1, 0, "0.3")], "every worker"),
        (["call", "worker", "latency_s"], [(0, 0, "fast")], "bad trace row"),
        (["call", "worker", "latency_s"], [(0, "w0", "0.1")], "bad trace row"),
        (["call", "worker", "latency_s"], [(0, 0, ""), (0, 1, " ")], "no measured latency"),
        (["call", "worker", "latency_s"], [(0, 0, "0.1"), (0, 1, "-0.2")], "latencies"),
    ],
)
def test_trace_from_csv_errors(tmp_path, header, rows, match):
    path = _write_csv(tmp_path / "bad.csv", header, rows)
    with pytest.raises(ValueError, match=match):
        D.Trace.from_csv(path)


def test_recorded_trace_replays_the_measured_latencies(tmp_path):
    # Record a few simulated calls, write them as a trace, replay it: the same latencies.
    latencies = np.array([[0.01, 0.03, 0.02], [0.05, 0.01, 0.04]])
    cluster = cc.SimulatedCluster(delays=cc.delays.Trace(latencies), faults=cc.faults.Fixed({2: "hang"}))
    rows = []
    for call in range(2):
        rows += cluster.gather(lambda x: x, np.zeros((3, 1)), 3).trace_rows(call)
    path = tmp_path / "trace.csv"
    with path.open("w", newline="") as handle:
        writer = csv.DictWriter(handle, fieldnames=["call", "worker", "latency_s"])
        writer.writeheader()
        writer.writerows(rows)
    replayed = cc.delays.Trace.from_csv(path).latencies
    expected = latencies.copy()
    expected[:, 2] = 0.05  # the hung worker never arrived: replayed as the slowest latency
    np.testing.assert_allclose(replayed, expected)


# -- order statistics ------------------------------------------------------------------------


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


# -- faults ----------------------------------------------------------------------------------


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


def _rms(a) -> float:
    return float(np.sqrt(np.mean(np.square(np.asarray(a, dtype=np.float64)))))


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_corrupt_numpy(dtype):
    result = (np.random.default_rng(0).normal(size=(50, 40)) * 300).astype(dtype)
    nan = F.corrupt(result, "nan", seed=1)
    assert isinstance(nan, np.ndarray) and nan.shape == result.shape and nan.dtype == dtype
    assert np.all(np.isnan(nan))
    garbage = F.corrupt(result, "garbage", seed=1)
    assert isinstance(garbage, np.ndarray) and garbage.shape == result.shape and garbage.dtype == dtype
    assert np.all(np.isfinite(garbage))
    assert _rms(garbage) == pytest.approx(_rms(result), rel=0.1)  # 2000 draws: RMS within ~2%
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
    assert _rms(zeros) == pytest.approx(1.0, rel=0.05)


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
    assert _rms(garbage.numpy()) == pytest.approx(_rms(result.numpy()), rel=0.1)
    assert torch.equal(garbage, F.corrupt(result, "garbage", seed=1))
    assert not torch.equal(garbage, F.corrupt(result, "garbage", seed=2))


# -- gather: arrival order, latency, deadlines -----------------------------------------------

DELAYS_5 = (0.06, 0.0, 0.045, 0.015, 0.03)  # arrival order 1, 3, 4, 2, 0
ORDER_5 = [1, 3, 4, 2, 0]


@pytest.mark.parametrize("kind", CLUSTER_KINDS)
@pytest.mark.parametrize("k", [1, 3, 5])
def test_gather_takes_the_first_k_in_arrival_order(kind, k):
    X = rows_of(5)
    with make_cluster(kind, delays=trace(*DELAYS_5)) as cluster:
        g = cluster.gather(identity, X, wait_for=k)
    assert g.alive.tolist() == ORDER_5[:k]
    np.testing.assert_array_equal(g.results, X[ORDER_5[:k]])
    assert g.dropped.tolist() == sorted(ORDER_5[k:])
    assert g.failed == {} and g.faults == {} and not g.timed_out
    np.testing.assert_array_equal(g.delays, DELAYS_5)
    assert_partition(g, 5)
    kth = DELAYS_5[ORDER_5[k - 1]]
    if kind == "simulated":
        assert g.wall_s == kth
        np.testing.assert_array_equal(g.latency[ORDER_5[:k]], np.array(DELAYS_5)[ORDER_5[:k]])
        np.testing.assert_array_equal(g.compute_s[ORDER_5[:k]], 0.0)
    else:
        assert kth <= g.wall_s < kth + 0.05


def test_thread_latency_is_close_to_the_injected_delays():
    delays = (0.0, 0.01, 0.02, 0.03)
    with cc.ThreadCluster(num_threads=4, delays=trace(*delays)) as cluster:
        g = cluster.gather(np.sin, rows_of(4), wait_for=4)
    assert g.alive.tolist() == [0, 1, 2, 3]
    assert np.all(g.latency >= np.array(delays))
    assert np.all(g.latency < np.array(delays) + 0.05)
    assert np.all(g.compute_s >= 0) and np.all(g.compute_s <= g.latency)
    assert 0.03 <= g.wall_s < 0.03 + 0.05
    np.testing.assert_allclose(g.results, np.sin(rows_of(4)))


@pytest.mark.parametrize("kind", CLUSTER_KINDS)
def test_deadline_returns_what_arrived_and_sets_timed_out(kind):
    delays = (0.0, 5.0, 0.02, 5.0, 0.05, 0.0)
    with make_cluster(kind, delays=trace(*delays)) as cluster:
        g = cluster.gather(identity, rows_of(6), wait_for=5, deadline=0.2)
    assert sorted(g.alive.tolist()) == [0, 2, 4, 5]
    assert g.alive.tolist()[2:] == [2, 4]
    assert g.dropped.tolist() == [1, 3]
    assert g.timed_out
    assert_partition(g, 6)
    if kind == "simulated":
        assert g.wall_s == 0.2
    else:
        assert 0.2 <= g.wall_s < 0.2 + 0.1


@pytest.mark.parametrize("kind", CLUSTER_KINDS)
def test_deadline_not_reached_is_not_a_timeout(kind):
    with make_cluster(kind, delays=trace(0.0, 0.01, 0.02)) as cluster:
        g = cluster.gather(identity, rows_of(3), wait_for=2, deadline=5.0)
    assert g.alive.tolist() == [0, 1] and not g.timed_out
    assert g.wall_s < 1.0


@pytest.mark.parametrize("kind", CLUSTER_KINDS)
def test_gather_returns_early_once_every_worker_answered(kind):
    # gather's contract: "It also returns early when every worker has answered or failed."
    # Workers 1..5 raise; all six answer within 50 ms, so a 10 s deadline is never reached.
    faults = F.Fixed({n: "raise" for n in range(1, 6)})
    with make_cluster(kind, delays=trace(0.0, 0.01, 0.02, 0.03, 0.04, 0.05), faults=faults) as cluster:
        g = cluster.gather(identity, rows_of(6), wait_for=3, deadline=10.0)
    assert g.alive.tolist() == [0]
    assert set(g.failed) == {1, 2, 3, 4, 5}
    assert not g.timed_out
    assert g.wall_s < 1.0


@pytest.mark.parametrize("kind", CLUSTER_KINDS)
def test_faults_become_stragglers_never_errors(kind):
    X = rows_of(6, 200) + 1.0
    faults = F.Fixed({1: "raise", 2: "hang", 3: "nan", 4: "garbage"})
    seen: list[float] = []
    lock = threading.Lock()

    def f(x):
        with lock:
            seen.extend(x[:, 0].tolist())
        return 2 * x

    delays = trace(0.0, 0.01, 0.02, 0.03, 0.04, 0.05)
    with make_cluster(kind, delays=delays, faults=faults, seed=4) as cluster:
        g = cluster.gather(f, X, wait_for=6)
    assert g.faults == {1: "raise", 2: "hang", 3: "nan", 4: "garbage"}
    assert sorted(g.alive.tolist()) == [0, 4, 5]
    assert set(g.failed) == {1, 3}
    assert "InjectedFault" in g.failed[1]
    assert "NaN" in g.failed[3]
    assert g.dropped.tolist() == [2]
    assert not g.timed_out
    assert_partition(g, 6)
    # raising and hanging workers never run f
    assert 2.0 not in seen and 3.0 not in seen
    # garbage is accepted as a result: finite, same shape, at the result's scale, but wrong
    by_worker = dict(zip(g.alive.tolist(), g.results, strict=True))
    np.testing.assert_array_equal(by_worker[0], 2 * X[0])
    np.testing.assert_array_equal(by_worker[5], 2 * X[5])
    garbage = by_worker[4]
    assert garbage.shape == X[4].shape and np.all(np.isfinite(garbage))
    assert not np.allclose(garbage, 2 * X[4])
    assert 0.7 < _rms(garbage) / _rms(2 * X[4]) < 1.3


@pytest.mark.parametrize("kind", CLUSTER_KINDS)
def test_all_hang_returns_nothing(kind):
    with make_cluster(kind, faults=F.Independent({"hang": 1.0})) as cluster:
        g = cluster.gather(identity, rows_of(4), wait_for=2)
    assert g.results is None and g.alive.tolist() == [] and g.dropped.tolist() == [0, 1, 2, 3]
    assert_partition(g, 4)


@pytest.mark.parametrize("kind", CLUSTER_KINDS)
def test_f_raising_for_some_rows_fails_only_those_workers(kind):
    def f(x):
        if np.any(x[:, 0] == 3):
            raise ArithmeticError("row 3 is bad")
        return x

    with make_cluster(kind, delays=trace(*(np.arange(10) * 0.01))) as cluster:
        g = cluster.gather(f, rows_of(10), wait_for=9)
    assert list(g.failed) == [3]
    assert "ArithmeticError" in g.failed[3] and "row 3 is bad" in g.failed[3]
    assert sorted(g.alive.tolist()) == [0, 1, 2, 4, 5, 6, 7, 8, 9]
    np.testing.assert_array_equal(g.results, rows_of(10)[g.alive])
    assert_partition(g, 10)


def test_thread_misshaped_output_fails():
    def f(x):
        if x[0, 0] == 4:
            return x[:, :2]  # the slowest worker answers with a different shape
        if x[0, 0] == 2:
            return x[0]  # no row axis
        return x

    with cc.ThreadCluster(num_threads=4, delays=trace(0.0, 0.01, 0.02, 0.03, 0.04)) as cluster:
        g = cluster.gather(f, rows_of(5), wait_for=5)
    assert sorted(g.alive.tolist()) == [0, 1, 3]
    assert set(g.failed) == {2, 4}
    assert "shape" in g.failed[2] and "shape" in g.failed[4]
    np.testing.assert_array_equal(g.results, rows_of(5)[g.alive])


@pytest.mark.parametrize("kind", CLUSTER_KINDS)
@pytest.mark.parametrize(
    "f",
    [lambda x: x[:-1], lambda x: np.repeat(x, 2, axis=0), lambda x: "not an array"],
    ids=["fewer-rows", "two-rows-per-input", "string"],
)
def test_outputs_without_one_row_per_input_fail(kind, f):
    # worker n's task is f(inputs[n:n+1]): an output that is not one row is unusable, however
    # the backend batches the calls
    with make_cluster(kind, delays=trace(*(np.arange(6) * 0.005))) as cluster:
        g = cluster.gather(f, rows_of(6), wait_for=3)
    assert g.alive.tolist() == []
    assert g.results is None
    assert set(g.failed) == set(range(6))


@pytest.mark.parametrize("kind", CLUSTER_KINDS)
def test_wait_for_predicate(kind):
    calls: list[np.ndarray] = []

    def both_even_workers_in(alive):
        calls.append(alive)
        return {2, 4} <= set(alive.tolist())

    delays = trace(0.0, 0.02, 0.04, 0.06, 0.08, 0.1)
    with make_cluster(kind, delays=delays) as cluster:
        g = cluster.gather(identity, rows_of(6), wait_for=both_even_workers_in)
    assert g.alive.tolist() == [0, 1, 2, 3, 4]
    assert all(isinstance(a, np.ndarray) and a.dtype == np.int64 for a in calls)
    # a predicate that never holds: everything arrives, nothing more can come
    with make_cluster(kind, delays=delays) as cluster:
        g = cluster.gather(identity, rows_of(6), wait_for=lambda alive: False)
    assert g.alive.tolist() == [0, 1, 2, 3, 4, 5] and not g.timed_out


@pytest.mark.parametrize("kind", CLUSTER_KINDS)
def test_torch_inputs_and_outputs(kind):
    X = torch.arange(12, dtype=torch.float32).reshape(4, 3)
    with make_cluster(kind, delays=trace(0.06, 0.0, 0.04, 0.02)) as cluster:
        g = cluster.gather(torch.cos, X, wait_for=3)
    assert isinstance(g.results, torch.Tensor) and g.results.dtype == torch.float32
    assert g.alive.tolist() == [1, 3, 2]
    torch.testing.assert_close(g.results, torch.cos(X[[1, 3, 2]]))


@pytest.mark.parametrize("kind", CLUSTER_KINDS)
def test_same_seed_same_draws(kind):
    model = D.ShiftedExponential(scale=0.001, rate=1.0)
    faults = F.Independent({"raise": 0.2, "nan": 0.2})
    runs = []
    for seed in (3, 3, 4):
        with make_cluster(kind, delays=model, faults=faults, seed=seed) as cluster:
            runs.append(cluster.gather(identity, rows_of(20), wait_for=5))
    assert np.array_equal(runs[0].delays, runs[1].delays) and runs[0].faults == runs[1].faults
    assert not np.array_equal(runs[0].delays, runs[2].delays)
    if kind == "simulated":
        assert runs[0].alive.tolist() == runs[1].alive.tolist()


def test_simulated_independent_faults_are_recorded():
    n = 2000
    cluster = cc.SimulatedCluster(delays=D.ShiftedExponential(), faults=F.Independent({"raise": 0.2}), seed=9)
    g = cluster.gather(identity, np.ones((n, 1)), wait_for=n)
    assert set(g.failed) == set(g.faults) and set(g.faults.values()) == {"raise"}
    assert abs(len(g.failed) - 0.2 * n) < 5 * math.sqrt(n * 0.2 * 0.8)
    assert len(g.alive) == n - len(g.failed)
    assert g.wall_s == pytest.approx(g.delays.max())


def _bad_gather_arguments():
    X = rows_of(4)
    return [
        (dict(f=None, inputs=X, wait_for=2), "^f must"),
        (dict(f=3, inputs=X, wait_for=2), "^f must"),
        (dict(f=identity, inputs=[1.0, 2.0], wait_for=2), "^inputs"),
        (dict(f=identity, inputs=np.float64(1.0), wait_for=1), "^inputs"),
        (dict(f=identity, inputs=X, wait_for=0), "^wait_for"),
        (dict(f=identity, inputs=X, wait_for=5), "^wait_for"),
        (dict(f=identity, inputs=X, wait_for=True), "^wait_for"),
        (dict(f=identity, inputs=X, wait_for=2.0), "^wait_for"),
        (dict(f=identity, inputs=X, wait_for=None), "^wait_for"),
        (dict(f=identity, inputs=X, wait_for=2, deadline=0), "^deadline"),
        (dict(f=identity, inputs=X, wait_for=2, deadline=-1), "^deadline"),
        (dict(f=identity, inputs=X, wait_for=2, deadline=math.nan), "^deadline"),
        (dict(f=identity, inputs=X, wait_for=2, deadline="soon"), "^deadline"),
    ]


@pytest.mark.parametrize("kind", CLUSTER_KINDS)
@pytest.mark.parametrize(("kwargs", "match"), _bad_gather_arguments())
def test_gather_argument_errors_name_the_parameter(kind, kwargs, match):
    with make_cluster(kind) as cluster, pytest.raises(ValueError, match=match):
        cluster.gather(**kwargs)


@pytest.mark.parametrize(
    ("make", "match"),
    [
        (lambda: cc.SimulatedCluster(delays="fast"), "^delays"),
        (lambda: cc.SimulatedCluster(delays=F.Fixed({})), "^delays"),
        (lambda: cc.SimulatedCluster(faults={1: "nan"}), "^faults"),
        (lambda: cc.SimulatedCluster(faults=D.ShiftedExponential()), "^faults"),
        (lambda: cc.ThreadCluster(delays=0.1), "^delays"),
        (lambda: cc.ThreadCluster(faults="hang"), "^faults"),
        (lambda: cc.ThreadCluster(num_threads=0), "^num_threads"),
        (lambda: cc.ThreadCluster(num_threads=True), "^num_threads"),
        (lambda: cc.ThreadCluster(num_threads=2.0), "^num_threads"),
        (lambda: cc.SimulatedCluster(compute_s=-1.0), "^compute_s"),
        (lambda: cc.SimulatedCluster(compute_s=math.inf), "^compute_s"),
        (lambda: cc.SimulatedCluster(compute_s=math.nan), "^compute_s"),
        (lambda: cc.SimulatedCluster(compute_s=None), "^compute_s"),
        (lambda: cc.SimulatedCluster(compute_s="slow"), "^compute_s"),
    ],
    ids=[
        "sim-delays-str",
        "sim-delays-faultmodel",
        "sim-faults-dict",
        "sim-faults-delaymodel",
        "thread-delays-float",
        "thread-faults-str",
        "num_threads-0",
        "num_threads-True",
        "num_threads-float",
        "compute_s-negative",
        "compute_s-inf",
        "compute_s-nan",
        "compute_s-None",
        "compute_s-str",
    ],
)
def test_cluster_argument_errors_name_the_parameter(make, match):
    with pytest.raises(ValueError, match=match):
        make()


def test_thread_cluster_is_a_context_manager():
    with cc.ThreadCluster(num_threads=2) as cluster:
        assert isinstance(cluster, cc.ThreadCluster)
        g = cluster.gather(np.square, rows_of(3), wait_for=3)
        np.testing.assert_array_equal(g.results[np.argsort(g.alive)], np.square(rows_of(3)))
    with pytest.raises(RuntimeError):  # closed: no more tasks
        cluster.gather(identity, rows_of(3), wait_for=1)
    cluster.close()  # idempotent


# -- the executor ----------------------------------------------------------------------------


def _reference(code, f, X, alive):
    """Independent recomputation: every worker's f, decoded from the given alive set."""
    return code.decode(f(code.encode(X))[alive], alive)


def assert_report(result_or_report, num_workers):
    report = getattr(result_or_report, "report", result_or_report)
    alive = report.alive.tolist()
    assert len(alive) == len(set(alive)) and set(alive) <= set(range(num_workers))
    assert set(alive).isdisjoint(report.failed) and set(alive).isdisjoint(report.dropped.tolist())
    assert set(report.failed).isdisjoint(report.dropped.tolist())
    assert set(alive) | set(report.failed) | set(report.dropped.tolist()) == set(range(num_workers))
    assert report.latency.shape == report.delays.shape == report.compute_s.shape == (num_workers,)
    assert all(report.faults.get(n) not in ("raise", "nan", "hang") for n in alive)
    assert min(report.encode_s, report.wait_s, report.decode_s) >= 0
    assert report.total_s == pytest.approx(report.encode_s + report.wait_s + report.decode_s)
    assert report.master_s == pytest.approx(report.encode_s + report.decode_s)
    if hasattr(result_or_report, "alive"):
        assert result_or_report.alive.tolist() == sorted(alive)


def _make_X(lib, K=4, d=3, seed=0):
    X = np.random.default_rng(seed).uniform(-1, 1, size=(K, d))
    return torch.from_numpy(X) if lib == "torch" else X


@pytest.mark.parametrize("kind", CLUSTER_KINDS)
@pytest.mark.parametrize("lib", ["numpy", "torch"])
def test_executor_gcc_matches_decode_of_the_alive_set(kind, lib):
    code = cc.GCC(num_inputs=4, num_workers=12)
    f = torch.sin if lib == "torch" else np.sin
    X = _make_X(lib)
    faults = F.Fixed({2: "nan", 5: "raise", 7: "hang"})
    with make_cluster(kind, delays=D.ShiftedExponential(scale=0.002, rate=1.0), faults=faults, seed=1) as cl:
        result = cc.CodedExecutor(code, f, cl).run(X, wait_for=8)
    report = result.report
    assert len(report.alive) == 8
    assert not {2, 5, 7} & set(report.alive.tolist())
    assert 7 in report.dropped.tolist()
    assert_report(result, 12)
    expected = _reference(code, f, X, report.alive)
    if lib == "torch":
        assert isinstance(result.estimates, torch.Tensor) and result.estimates.dtype == torch.float64
        torch.testing.assert_close(result.estimates, expected, rtol=1e-12, atol=1e-14)
    else:
        assert isinstance(result.estimates, np.ndarray) and result.estimates.shape == (4, 3)
        np.testing.assert_allclose(result.estimates, expected, rtol=1e-12, atol=1e-14)
    # and the estimates are approximations of f(X)
    np.testing.assert_allclose(np.asarray(result.estimates), np.sin(np.asarray(X)), atol=0.2)


def _polynomial(x):
    return x**2 - 0.5 * x + 1.0


@pytest.mark.parametrize("kind", CLUSTER_KINDS)
def test_executor_default_wait_uses_code_complete(kind):
    X = _make_X("numpy", K=4, d=2, seed=3)
    model = D.ShiftedExponential(scale=0.002, rate=1.0)
    with make_cluster(kind, delays=model, seed=2) as cluster:
        uncoded = cc.CodedExecutor(cc.Uncoded(4), _polynomial, cluster).run(X)
        assert uncoded.alive.tolist() == [0, 1, 2, 3]
        np.testing.assert_array_equal(uncoded.estimates, _polynomial(X))

        replication = cc.Replication(4, replicas=3)
        result = cc.CodedExecutor(replication, _polynomial, cluster).run(X)
        arrived = result.report.alive
        assert replication.complete(arrived) and not replication.complete(arrived[:-1])
        np.testing.assert_array_equal(np.unique(replication.assignment[arrived]), [0, 1, 2, 3])
        np.testing.assert_array_equal(result.estimates, _polynomial(X))
        assert_report(result, 12)

        lcc = cc.LCC(4, 10, degree=2)  # threshold (4 - 1) * 2 + 1 = 7
        result = cc.CodedExecutor(lcc, _polynomial, cluster).run(X)
        assert len(result.alive) == 7
        np.testing.assert_allclose(result.estimates, _polynomial(X), rtol=1e-9, atol=1e-9)
        assert_report(result, 10)

        gcc = cc.GCC(4, 10)
        result = cc.CodedExecutor(gcc, _polynomial, cluster).run(X)
        assert result.alive.tolist() == list(range(10))


def test_executor_insufficient_results_gcc():
    code = cc.GCC(num_inputs=4, num_workers=10)
    X = _make_X("numpy")
    faults = F.Fixed({n: "hang" for n in range(1, 10)})
    with cc.ThreadCluster(num_threads=4, faults=faults) as cluster:
        with pytest.raises(cc.InsufficientResultsError) as info:
            cc.CodedExecutor(code, np.sin, cluster).run(X, wait_for=8, deadline=0.5)
    err = info.value
    assert err.report.alive.tolist() == [0]
    assert err.report.dropped.tolist() == list(range(1, 10))
    np.testing.assert_allclose(err.results, np.sin(code.encode(X)[[0]]))
    assert err.needed == 2
    assert_report(err.report, 10)


def test_executor_no_result_at_all():
    cluster = cc.SimulatedCluster(faults=F.Independent({"hang": 1.0}))
    with pytest.raises(cc.InsufficientResultsError) as info:
        cc.CodedExecutor(cc.BACC(4, 8), np.sin, cluster).run(_make_X("numpy"), deadline=1.0)
    assert info.value.results is None
    assert info.value.report.alive.tolist() == [] and info.value.report.dropped.tolist() == list(range(8))


def test_executor_lcc_below_threshold_by_deadline():
    lcc = cc.LCC(4, 10, degree=2)  # threshold 7
    delays = trace(*([0.01] * 5 + [3.0] * 5))
    with pytest.raises(cc.InsufficientResultsError) as info:
        cc.CodedExecutor(lcc, _polynomial, cc.SimulatedCluster(delays=delays)).run(
            _make_X("numpy"), deadline=1.0
        )
    err = info.value
    assert err.needed == 7 and err.report.timed_out
    # the message names the deadline, what arrived and what lets a decode through below it
    assert "deadline of 1 s expired with 5 usable results in, 7 needed" in str(err)
    assert "best_effort=True" in str(err)
    assert sorted(err.report.alive.tolist()) == [0, 1, 2, 3, 4]
    assert err.results.shape == (5, 3)
    assert_report(err.report, 10)


@pytest.mark.parametrize("kind", CLUSTER_KINDS)
def test_executor_uncoded_missing_input(kind):
    delays = trace(0.0, 0.01, 3.0, 0.02)
    X = _make_X("numpy")
    with make_cluster(kind, delays=delays) as cluster:
        with pytest.raises(cc.MissingResultsError) as info:
            cc.CodedExecutor(cc.Uncoded(4), np.sin, cluster).run(X, deadline=0.15)
    err = info.value
    assert err.missing == [2]
    assert err.report.timed_out and err.report.dropped.tolist() == [2]
    np.testing.assert_allclose(err.results, np.sin(X[err.report.alive]))
    assert_report(err.report, 4)


@pytest.mark.parametrize(
    ("code", "wait_for"),
    [
        (cc.GCC(4, 10), 1),  # GCC needs 2
        (cc.GCC(4, 10), 11),
        (cc.GCC(4, 10), 0),
        (cc.GCC(4, 10), 5.0),
        (cc.GCC(4, 10), True),
        (cc.GCC(4, 10), "5"),
        (cc.LCC(4, 10, degree=2), 6),  # below the recovery threshold
        (cc.Uncoded(4), 5),
    ],
)
def test_executor_wait_for_validation(code, wait_for):
    executor = cc.CodedExecutor(code, np.sin, cc.SimulatedCluster())
    X = _make_X("numpy")
    with pytest.raises(ValueError, match=r"^wait_for"):
        executor.run(X, wait_for=wait_for)
    with pytest.raises(ValueError, match=r"^wait_for"):
        list(executor.map([X], wait_for=wait_for))


def test_executor_accepts_boundary_wait_for():
    X = _make_X("numpy")
    lcc = cc.LCC(4, 10, degree=1)  # threshold 4
    executor = cc.CodedExecutor(lcc, _polynomial, cc.SimulatedCluster(delays=D.ShiftedExponential()))
    assert len(executor.run(X, wait_for=4).alive) == 4
    assert len(executor.run(X, wait_for=np.int64(10)).alive) == 10


@pytest.mark.parametrize(
    ("args", "match"),
    [
        (("gcc", np.sin, cc.SimulatedCluster()), "^code"),
        ((cc.GCC(4, 8), "sin", cc.SimulatedCluster()), "^f"),
        ((cc.GCC(4, 8), np.sin, "local"), "^cluster"),
    ],
)
def test_executor_constructor_validation(args, match):
    with pytest.raises(ValueError, match=match):
        cc.CodedExecutor(*args)


def test_executor_map_equals_run_with_the_same_seed():
    code = cc.GCC(num_inputs=4, num_workers=12)
    batches = [_make_X("numpy", seed=s) for s in range(4)]

    def cluster():
        return cc.SimulatedCluster(
            delays=D.ShiftedExponential(), faults=F.Independent({"nan": 0.1, "raise": 0.1}), seed=5
        )

    mapped = list(cc.CodedExecutor(code, np.tanh, cluster()).map(iter(batches), wait_for=8))
    runner = cc.CodedExecutor(code, np.tanh, cluster())
    ran = [runner.run(X, wait_for=8) for X in batches]
    assert len(mapped) == len(batches)
    for X, m, r in zip(batches, mapped, ran, strict=True):
        np.testing.assert_array_equal(m.estimates, r.estimates)
        assert m.report.alive.tolist() == r.report.alive.tolist()
        assert m.report.failed == r.report.failed and m.report.wait_s == r.report.wait_s
        np.testing.assert_allclose(m.estimates, _reference(code, np.tanh, X, m.report.alive), rtol=1e-12)
        assert_report(m, 12)
    # the draws differ from batch to batch (the cluster's generator advances)
    assert mapped[0].report.alive.tolist() != mapped[1].report.alive.tolist()


def test_executor_map_on_threads_yields_in_order():
    code = cc.BACC(4, 8)
    batches = [_make_X("torch", seed=s) for s in range(3)]
    with cc.ThreadCluster(num_threads=4, delays=D.ShiftedExponential(scale=0.002), seed=0) as cluster:
        results = list(cc.CodedExecutor(code, torch.tanh, cluster).map(batches, wait_for=6))
    assert len(results) == 3
    for X, r in zip(batches, results, strict=True):
        torch.testing.assert_close(r.estimates, _reference(code, torch.tanh, X, r.report.alive))
        assert r.report.encode_s > 0
        assert_report(r, 8)


def test_executor_map_empty_iterable():
    executor = cc.CodedExecutor(cc.GCC(4, 8), np.sin, cc.SimulatedCluster())
    assert list(executor.map([])) == []
    assert list(executor.map(iter(()), wait_for=5)) == []


# -- Code.complete ---------------------------------------------------------------------------

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


def test_executor_map_checks_wait_for_when_called():
    executor = cc.CodedExecutor(cc.GCC(4, 8), lambda x: x, cc.SimulatedCluster(seed=0))
    with pytest.raises(ValueError, match="wait_for"):
        executor.map([np.zeros((4, 2))], wait_for=9)  # no next() needed
