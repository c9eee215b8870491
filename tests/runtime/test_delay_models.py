"""The delay models of :mod:`codedcomputing.delays`: seeded draws, parameter checks, the
closed-form means and survival functions, the bursty Markov chain, and replayed traces
(:class:`cc.delays.Trace`, from a table or a long-format CSV).

Statistical checks compare many samples with closed forms (means, survival functions,
Markov transition rates); each tolerance is a few standard errors of the estimate, computed
from the model's own variance, and every random draw has a fixed seed so the checks are
deterministic.
"""

from __future__ import annotations

import csv
import math

import numpy as np
import pytest

import codedcomputing as cc

D = cc.delays


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


@pytest.mark.parametrize(
    "model",
    [
        D.ShiftedExponential(scale=0.5, rate=2.0),
        D.AdditiveExponential(mean=0.3),
        D.Pareto(scale=1.0, alpha=3.5),
        D.Bimodal(base=1.0, p=0.05, slowdown=10.0, jitter=0.2),
        D.BurstyMarkov(base=1.0, p_slow=0.02, p_recover=0.2, slowdown=5.0),
        D.Trace([[0.1, 0.5, 0.2], [0.4, 0.3, 0.9]]),
    ],
    ids=lambda m: type(m).__name__,
)
def test_mean_delay_is_the_mean_of_many_draws(model):
    # the closed form against the models' own draws (BurstyMarkov: many calls, so its chain mixes)
    rng = np.random.default_rng(11)
    draws = np.concatenate([model.sample(200, rng) for _ in range(2_000)])
    spread = draws.std() / np.sqrt(draws.size)
    assert abs(draws.mean() - model.mean_delay()) < 6 * spread + 1e-12


def test_mean_delay_is_infinite_for_a_pareto_without_a_mean_and_missing_for_a_model_without_one():
    assert D.Pareto(scale=1.0, alpha=1.0).mean_delay() == np.inf

    class Mine(D.DelayModel):
        def _sample(self, num_workers, rng):
            return np.ones(num_workers)

    with pytest.raises(NotImplementedError, match="Mine defines no mean_delay"):
        Mine().mean_delay()
