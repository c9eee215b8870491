"""The simulated-clock server: hand-made event sequences, queueing by brute force, conservation,
the coded scheme against CodedExecutor.run_queries, answers against independent references."""

from __future__ import annotations

import math
import re
import textwrap
from pathlib import Path

import numpy as np
import pytest

import codedcomputing as cc
from codedcomputing import serving
from codedcomputing.runtime.delays import Bimodal, ShiftedExponential, Trace

OWN, REPLICA, HEDGE, DECODED = range(4)


def constant(*per_replica):
    """Service times fixed per replica: replica r always takes ``per_replica[r]``."""
    return Trace([list(per_replica)])


def test_two_replicas_with_deterministic_service_queue_as_computed_by_hand():
    server = serving.SimulatedServer(2, constant(1.0, 1.0), balancer="jsq", seed=3)
    record = server.run(serving.NoRedundancy(), [0.0, 0.0, 0.0, 0.5, 3.0])
    # q0, q1 start at once on the two replicas; q2 waits for one of them (1 -> 2); q3 at 0.5
    # joins the shorter queue (1 -> 2); q4 finds both idle.
    np.testing.assert_allclose(record.answered_at, [1.0, 1.0, 2.0, 2.0, 4.0])
    np.testing.assert_allclose(record.latency, [1.0, 1.0, 2.0, 1.5, 1.0])
    np.testing.assert_allclose(record.started, [0.0, 0.0, 1.0, 1.0, 3.0])
    assert record.replica[0] != record.replica[1] and record.replica[2] != record.replica[3]
    assert record.horizon_s == 4.0 and record.busy_s.sum() == 5.0
    assert record.max_load.tolist() == [2, 2]
    # load integrals: 2 + 1 on one replica, 0.5 + 1 + 1 on the other, 1 more for q4
    assert record.mean_load.sum() * record.horizon_s == pytest.approx(6.5)
    assert record.counts() == {"own": 5, "replica": 0, "hedge": 0, "decoded": 0, "failed": 0}
    assert record.extra_load == 0.0 and record.exact.all()
    assert record.load_trace is None


def test_the_load_trace_integrates_to_the_mean_load():
    service = ShiftedExponential(scale=0.5, rate=1.0)
    arrivals = serving.poisson_arrivals(500, 0.7, 3, service, rng=1)
    record = serving.SimulatedServer(3, service, seed=2).run(serving.Hedge(1.0), arrivals, trace_load=True)
    trace = record.load_trace
    assert np.all(np.diff(trace["time"]) >= 0)
    for r in range(3):
        mine = trace["replica"] == r
        times, loads = trace["time"][mine], trace["load"][mine]
        area = np.sum(loads[:-1] * np.diff(times))
        assert area == pytest.approx(record.mean_load[r] * record.horizon_s)
        assert loads.max() == record.max_load[r] and loads[-1] == 0


def test_a_hedge_goes_out_after_its_delay_and_its_work_counts():
    # replica 0 always takes 10, replica 1 always 1; two queries at 0 take one replica each
    server = serving.SimulatedServer(2, constant(10.0, 1.0), seed=0)
    record = server.run(serving.Hedge(2.0), [0.0, 0.0])
    slow = int(np.flatnonzero(record.replica == 1)[0] if record.outcome[0] == HEDGE else 1)
    fast = 1 - slow
    assert record.outcome[fast] == OWN and record.answered_at[fast] == 1.0
    assert record.outcome[slow] == HEDGE and record.answered_at[slow] == 3.0  # backup at 2, done at 3
    assert record.replica.tolist() == [1, 1]
    assert record.work_s == 12.0 and record.redundant_s == 1.0 and record.redundant_tasks == 1
    assert record.horizon_s == 10.0  # the slow primary runs to its end: no preemption
    assert record.extra_load == pytest.approx(1.0 / 11.0)


def test_replication_cancels_a_copy_that_has_not_started():
    arrivals = [0.0, 0.5]
    cancelling = serving.SimulatedServer(2, constant(10.0, 1.0), seed=0).run(serving.Replication(2), arrivals)
    # q0: copies on both, the fast one answers at 1; q1: queued on both, the fast replica
    # serves it 1 -> 2, and its copy behind the slow replica never starts.
    np.testing.assert_allclose(cancelling.answered_at, [1.0, 2.0])
    assert cancelling.replica.tolist() == [1, 1]
    assert cancelling.cancelled == 1 and cancelling.work_s == 12.0 and cancelling.horizon_s == 10.0
    assert cancelling.served.tolist() == [1, 2]
    keeping = serving.SimulatedServer(2, constant(10.0, 1.0), cancel=False, seed=0).run(
        serving.Replication(2), arrivals
    )
    np.testing.assert_allclose(keeping.answered_at, [1.0, 2.0])
    assert keeping.cancelled == 0 and keeping.work_s == 22.0 and keeping.horizon_s == 20.0
    assert keeping.served.tolist() == [2, 2]


def lindley(arrivals, replica, service):
    """Each replica's FIFO queue by the Lindley recursion: start = max(arrival, previous end)."""
    free = {}
    finish = np.empty(len(arrivals))
    for q, (t, r, s) in enumerate(zip(arrivals, replica, service, strict=True)):
        start = max(t, free.get(r, 0.0))
        finish[q] = free[r] = start + s
    return finish


@pytest.mark.parametrize("balancer", ["p2c", "jsq"])
def test_no_redundancy_matches_the_lindley_recursion_on_random_service_times(balancer):
    service = ShiftedExponential(scale=0.5, rate=1.0)
    arrivals = serving.poisson_arrivals(3000, 0.8, 4, service, rng=7)
    record = serving.SimulatedServer(4, service, balancer=balancer, seed=11).run(
        serving.NoRedundancy(), arrivals
    )
    tasks = record.tasks
    assert np.array_equal(tasks["query"], np.arange(3000))  # one task per query, in order
    expected = lindley(arrivals, tasks["replica"], tasks["service"])
    np.testing.assert_allclose(record.answered_at, expected, rtol=0, atol=1e-9)
    # the service times are the seed's draws, replica r's j-th task taking row j, column r
    rng = np.random.default_rng(np.random.SeedSequence(11).spawn(2)[0])
    table = service.sample(1024 * 4, rng).reshape(1024, 4)
    for r in range(4):
        mine = tasks["service"][tasks["replica"] == r]
        np.testing.assert_array_equal(mine, table[: mine.size, r])


def test_utilisation_matches_the_offered_load_on_a_long_poisson_run():
    service = ShiftedExponential(scale=0.5, rate=1.0)  # mean 1
    assert serving.mean_service(service) == 1.0
    arrivals = serving.poisson_arrivals(20_000, 0.6, 10, service, rng=2)
    record = serving.SimulatedServer(10, service, seed=5).run(serving.NoRedundancy(), arrivals)
    assert record.utilisation.mean() == pytest.approx(0.6, abs=0.02)
    assert np.all(np.abs(record.utilisation - 0.6) < 0.05)  # the balancer spreads the load
    assert record.served.sum() == 20_000 and record.work_s == pytest.approx(record.busy_s.sum())


def all_schemes():
    return [
        serving.NoRedundancy(),
        serving.Replication(2),
        serving.Hedge(1.3),
        serving.Coded(cc.BACC(6, 9, systematic=True), tau=1.2, max_group_wait=2.0),
        serving.Coded(cc.GCC(6, 9, systematic=True), tau=0.0, wait_for=7),
        serving.ParM(3, max_group_wait=2.0),
    ]


@pytest.mark.parametrize("cancel", [True, False])
def test_every_query_is_answered_once_and_no_task_is_lost(cancel):
    service = Bimodal(base=1.0, p=0.05, slowdown=10.0)
    arrivals = serving.poisson_arrivals(2000, 0.5, 9, service, rng=4)
    server = serving.SimulatedServer(9, service, cancel=cancel, seed=1)
    for scheme in all_schemes():
        record = server.run(scheme, arrivals)
        assert np.all(np.isfinite(record.answered_at)) and np.all(record.latency >= 0), scheme
        assert sum(record.counts().values()) == 2000
        decoded = record.outcome == DECODED
        assert np.all(record.replica[decoded] == -1) and np.all(record.replica[~decoded] >= 0)
        tasks = record.tasks
        ran = ~np.isnan(tasks["service"])
        assert ran.sum() == record.served.sum()  # every task ran or was cancelled
        assert (~ran).sum() == record.cancelled and (cancel or record.cancelled == 0)
        # an answer by a task is that task's end on that replica
        own = ~decoded
        for q in np.flatnonzero(own)[:200]:
            mine = np.flatnonzero((tasks["query"] == q) & ran)
            ends = tasks["started"][mine] + tasks["service"][mine]
            assert record.answered_at[q] == ends.min()
            assert record.replica[q] == tasks["replica"][mine[np.argmin(ends)]]


def test_runs_are_reproducible_from_the_seed():
    service = Bimodal(base=1.0, p=0.05, slowdown=10.0)
    arrivals = serving.poisson_arrivals(500, 0.5, 9, service, rng=4)
    scheme = serving.Coded(cc.BACC(6, 9, systematic=True), tau=1.2, max_group_wait=2.0)
    first = serving.SimulatedServer(9, service, seed=1).run(scheme, arrivals)
    again = serving.SimulatedServer(9, service, seed=1).run(scheme, arrivals)
    other = serving.SimulatedServer(9, service, seed=2).run(scheme, arrivals)
    assert np.array_equal(first.answered_at, again.answered_at)
    assert np.array_equal(first.outcome, again.outcome) and first.work_s == again.work_s
    assert not np.array_equal(first.answered_at, other.answered_at)
    a = serving.poisson_arrivals(100, 0.5, 9, service, rng=4)
    assert np.array_equal(a, serving.poisson_arrivals(100, 0.5, 9, service, rng=4))


def test_under_rare_heavy_stragglers_at_half_load_the_coded_scheme_cuts_the_tail():
    service = Bimodal(base=1.0, p=0.02, slowdown=10.0)
    arrivals = serving.poisson_arrivals(10_000, 0.5, 15, service, rng=0)
    server = serving.SimulatedServer(15, service, seed=0)
    none = server.run(serving.NoRedundancy(), arrivals)
    coded = server.run(serving.Coded(cc.BACC(10, 15, systematic=True), tau=1.5, max_group_wait=5.0), arrivals)
    assert none.percentile(99.9) > 10.0  # a heavy straggler is the tail
    assert coded.percentile(99.9) < none.percentile(99.9) / 3
    assert coded.extra_load == pytest.approx(0.5, abs=0.1)  # N/K - 1 parity work


def zero_load_groups(num_groups, size, spacing=100.0):
    """Groups of ``size`` queries arriving together, far apart: every task starts at its group's arrival."""
    return np.repeat(np.arange(num_groups) * spacing, size)


@pytest.mark.parametrize("code_name", ["bacc", "gcc"])
def test_coded_at_zero_load_answers_as_run_queries_does_on_the_same_delays(code_name):
    k, n, tau = 5, 8, 1.2
    code = {"bacc": cc.BACC, "gcc": cc.GCC}[code_name](k, n, systematic=True)
    service = Bimodal(base=1.0, p=0.2, slowdown=10.0)
    rng = np.random.default_rng(0)
    groups = 30
    inputs = rng.standard_normal((groups * k, 3))
    weights = rng.standard_normal((3, 2))

    def f(x):
        return np.tanh(x @ weights)

    server = serving.SimulatedServer(n, service, balancer="jsq", seed=2)
    record = server.run(serving.Coded(code, tau=tau), zero_load_groups(groups, k), inputs=inputs, f=f)
    tasks = record.tasks
    assert np.all(tasks["started"][~np.isnan(tasks["started"])] % 100.0 == 0)  # nothing queued
    # each group's per-worker delays, in the code's worker order, replayed by a simulated cluster
    parity_workers = np.flatnonzero(code.systematic_inputs < 0)
    rows = np.full((groups, n), np.inf)
    for t in range(tasks["replica"].size):
        g, q = tasks["group"][t], tasks["query"][t]
        worker = code.systematic_workers[q - g * k] if q >= 0 else parity_workers[tasks["index"][t]]
        rows[g, worker] = tasks["service"][t]
    assert np.all(np.isfinite(rows)), "a cancelled task at zero load"
    executor = cc.CodedExecutor(code, f, cc.SimulatedCluster(delays=Trace(rows)))
    for g in range(groups):
        mine = slice(g * k, (g + 1) * k)
        answers = executor.run_queries(inputs[mine], tau=tau)
        np.testing.assert_allclose(record.latency[mine], answers.answered_s, rtol=0, atol=1e-12)
        assert np.array_equal(record.outcome[mine] == DECODED, answers.decoded)
        np.testing.assert_allclose(record.estimates[mine], answers.estimates, rtol=1e-12, atol=1e-12)
        assert np.array_equal(record.exact[mine], answers.exact)
    assert 0 < (record.outcome == DECODED).sum() < groups * k
    # the frontier's per-query arithmetic: own result if back by tau, else decoded at tau
    own = rows[:, code.systematic_workers].ravel()
    np.testing.assert_allclose(record.latency, np.minimum(own, tau))


def test_decoded_answers_are_exact_where_the_code_reproduces_f():
    # inputs on a line along the code's points and a linear f: the natural spline (GCC's
    # spline decoder at lambda 0, linear beyond the ends) reproduces linear data, so every
    # decode is f(x) to rounding
    k, n, groups = 6, 9, 40
    code = cc.GCC(k, n, decoding="spline", systematic=True)
    rng = np.random.default_rng(1)
    offsets, slopes = rng.standard_normal((groups, 1, 4)), rng.standard_normal((groups, 1, 4))
    inputs = (offsets + slopes * code.alpha[None, :, None]).reshape(groups * k, 4)
    weights = rng.standard_normal((4, 3))

    def f(x):
        return x @ weights

    service = Bimodal(base=1.0, p=0.1, slowdown=10.0)
    arrivals = serving.poisson_arrivals(groups * k, 0.4, n, service, rng=3)
    record = serving.SimulatedServer(n, service, seed=4).run(
        serving.Coded(code, tau=1.2), arrivals, inputs=inputs, f=f
    )
    decoded = record.outcome == DECODED
    assert decoded.sum() >= 5
    np.testing.assert_allclose(record.estimates, f(inputs), rtol=0, atol=1e-9)
    assert np.array_equal(record.estimates[~decoded], f(inputs)[~decoded])  # bit for bit
    assert not record.exact[decoded].any() and record.exact[~decoded].all()


def test_parm_subtracts_the_others_from_the_parity_output():
    rng = np.random.default_rng(2)
    weights = rng.standard_normal((4, 3))

    def f(x):
        return x @ weights

    def parity_f(groups):  # the addition encoder with F_P = F: exact for a linear F
        return f(groups.sum(axis=1))

    inputs = rng.standard_normal((600, 4))
    service = Bimodal(base=1.0, p=0.1, slowdown=10.0)
    arrivals = serving.poisson_arrivals(600, 0.4, 8, service, rng=5)
    scheme = serving.ParM(3, max_group_wait=1.0, parity_f=parity_f)
    record = serving.SimulatedServer(8, service, seed=6).run(scheme, arrivals, inputs=inputs, f=f)
    decoded = record.outcome == DECODED
    assert decoded.sum() >= 10 and np.any(np.bincount(record.group)[record.group[decoded]] < 3)
    np.testing.assert_allclose(record.estimates, f(inputs), rtol=0, atol=1e-9)
    assert np.bincount(record.group[decoded]).max() == 1  # one parity decodes one query per group
    assert record.redundant_tasks <= record.group.max() + 1


def test_groups_close_at_k_queries_or_after_the_maximum_wait():
    arrivals = [0.0, 0.1, 0.2, 5.0, 5.1, 9.0, 20.0]
    scheme = serving.Coded(cc.BACC(3, 5, systematic=True), tau=math.inf, max_group_wait=1.0)
    record = serving.SimulatedServer(5, constant(*[0.5] * 5), cancel=False, seed=0).run(scheme, arrivals)
    assert record.group.tolist() == [0, 0, 0, 1, 1, 2, 3]
    parities = record.tasks["role"] == 3
    np.testing.assert_allclose(record.tasks["dispatched"][parities], np.repeat([0.2, 6.0, 10.0, 21.0], 2))
    assert record.counts()["decoded"] == 0  # tau = inf: every query waits for its own result
    np.testing.assert_allclose(record.latency, 0.5)
    # a group whose queries are all answered before the wait closes it sends no parity
    record = serving.SimulatedServer(5, constant(*[0.5] * 5), seed=0).run(scheme, [0.0, 3.0])
    assert record.redundant_tasks == 0 and record.tasks["replica"].size == 2
    keeping = serving.SimulatedServer(5, constant(*[0.5] * 5), cancel=False, seed=0).run(scheme, [0.0, 3.0])
    assert keeping.redundant_tasks == 4


def test_summary_and_percentiles():
    record = serving.SimulatedServer(2, constant(1.0, 1.0), seed=0).run(
        serving.NoRedundancy(), [0.0, 0.0, 0.0]
    )
    row = record.summary()
    assert row["scheme"] == "none" and row["queries"] == 3 and row["own"] == 3
    assert row["p50"] == 1.0 and row["max"] == 2.0 and row["exact_fraction"] == 1.0
    assert math.isnan(record.percentile(99, "decoded"))
    with pytest.raises(ValueError, match="outcome"):
        record.percentile(50, "lost")


@pytest.mark.parametrize(
    ("build", "name"),
    [
        (lambda: serving.SimulatedServer(0, constant(1.0)), "num_replicas"),
        (lambda: serving.SimulatedServer(2, 1.0), "service"),
        (lambda: serving.SimulatedServer(2, constant(1.0), balancer="random"), "balancer"),
        (lambda: serving.SimulatedServer(2, constant(1.0), seed=-1), "seed"),
        (lambda: serving.Replication(1), "copies"),
        (lambda: serving.Hedge(-1.0), "delay"),
        (lambda: serving.Hedge(math.nan), "delay"),
        (lambda: serving.Coded(cc.BACC(3, 5), tau=1.0), "systematic"),
        (lambda: serving.Coded(cc.BACC(3, 5, systematic=True), tau=-1.0), "tau"),
        (
            lambda: serving.Coded(cc.BACC(3, 5, systematic=True), tau=1.0, max_group_wait=0.0),
            "max_group_wait",
        ),
        (lambda: serving.Coded(cc.BACC(3, 5, systematic=True), tau=1.0, wait_for=6), "wait_for"),
        (lambda: serving.Coded("bacc", tau=1.0), "code"),
        (lambda: serving.ParM(0), "k"),
        (lambda: serving.make_scheme("fastest"), "scheme"),
        (lambda: serving.poisson_arrivals(10, 0.0, 2, constant(1.0), rng=0), "utilisation"),
        (lambda: serving.poisson_arrivals(10, 0.5, 2, constant(1.0), rng=None), "rng"),
    ],
)
def test_bad_arguments_raise_value_errors_naming_them(build, name):
    with pytest.raises(ValueError, match=name):
        build()


@pytest.mark.parametrize(
    ("arrivals", "scheme", "options", "name"),
    [
        ([1.0, 0.5], serving.NoRedundancy(), {}, "sorted"),
        ([0.0, math.nan], serving.NoRedundancy(), {}, "arrivals"),
        ([-1.0], serving.NoRedundancy(), {}, "arrivals"),
        ([], serving.NoRedundancy(), {}, "arrivals"),
        ([0.0], serving.Replication(3), {}, "copies"),
        ([0.0], "none", {}, "scheme"),
        ([0.0, 1.0], serving.NoRedundancy(), {"inputs": np.zeros((3, 2)), "f": np.sin}, "inputs"),
        ([0.0], serving.NoRedundancy(), {"f": np.sin}, "inputs"),
        ([0.0], serving.NoRedundancy(), {"inputs": [[math.inf]], "f": np.sin}, "inputs"),
    ],
)
def test_bad_runs_raise_value_errors_naming_the_problem(arrivals, scheme, options, name):
    server = serving.SimulatedServer(2, constant(1.0, 1.0))
    with pytest.raises(ValueError, match=name):
        server.run(scheme, arrivals, **options)


def test_make_scheme_builds_each_scheme_by_name():
    assert isinstance(serving.make_scheme("none"), serving.NoRedundancy)
    assert serving.make_scheme("hedge", delay=1.5).delay == 1.5
    assert serving.make_scheme("replication", copies=3).copies == 3
    assert set(serving.SCHEMES) == {"none", "replication", "hedge", "coded", "parm"}


def test_the_serving_page_example_runs(capsys):
    page = (Path(__file__).resolve().parents[2] / "docs" / "serving.rst").read_text(encoding="utf-8")
    block = re.search(r"^\.\. code-block:: python\n\n((?:   .*\n|\n)+)", page, re.MULTILINE).group(1)
    exec(textwrap.dedent(block), {})
    rows = capsys.readouterr().out.strip().splitlines()
    assert [row.split("'scheme': ")[1].split(",")[0] for row in rows] == ["'none'", "'hedge'", "'coded'"]


def test_manifold_gcc_serves_short_and_full_groups_with_its_own_layouts():
    rng = np.random.default_rng(3)
    weights = rng.standard_normal((6, 2))

    def f(x):
        return np.tanh(x @ weights)

    t = rng.uniform(0, 6, 240)  # inputs on a curve: a query's neighbours along it are informative
    inputs = np.stack([np.cos(t), np.sin(t), np.cos(2 * t), np.sin(2 * t), t / 3, np.ones_like(t)], axis=1)
    service = Bimodal(base=1.0, p=0.1, slowdown=10.0)
    arrivals = serving.poisson_arrivals(240, 0.4, 12, service, rng=8)
    scheme = serving.Coded(cc.ManifoldGCC(8, 12), tau=1.2, max_group_wait=2.0)
    record = serving.SimulatedServer(12, service, seed=9).run(scheme, arrivals, inputs=inputs, f=f)
    sizes = np.bincount(record.group)
    assert sizes.max() == 8 and sizes.min() < 8  # the wait closed some groups short
    decoded = record.outcome == DECODED
    assert decoded.sum() >= 5 and np.all(np.isfinite(record.estimates))
    assert np.array_equal(record.estimates[~decoded], f(inputs)[~decoded])
    # a decode approximates f: far better than guessing the mean output
    error = np.mean((record.estimates[decoded] - f(inputs)[decoded]) ** 2)
    assert error < 0.5 * np.mean((f(inputs)[decoded] - f(inputs).mean(axis=0)) ** 2)
