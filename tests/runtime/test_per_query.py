"""Answers per query (:meth:`CodedExecutor.run_queries`): each input answered by its own
worker's result on arrival, the rest decoded at ``tau`` or by the wait rule.

The simulated checks replay known per-worker latencies (:class:`cc.delays.Trace`), so each
input's answer time and answering worker are worked out in the test from the latencies
alone, independently of the executor. Thread checks use latencies 50-400 ms apart, far
above scheduling noise on a loaded 2-core machine.
"""

from __future__ import annotations

import math
import time

import numpy as np
import pytest

import codedcomputing as cc
from codedcomputing.errors import InsufficientResultsError, MissingResultsError

D = cc.delays
F = cc.faults


def f(x):
    return np.tanh(1.3 * x) + 0.1 * x**2


def trace(latencies) -> D.Trace:
    return D.Trace([list(latencies)])


def inputs(num_inputs: int, dim: int = 3, seed: int = 0) -> np.ndarray:
    return np.random.default_rng(seed).normal(size=(num_inputs, dim))


def first_copies(systematic: np.ndarray, latency: np.ndarray, num_inputs: int, tau: float):
    """Reference: ``(worker, latency)`` of input k's earliest own result by ``tau``, or (-1, NaN)."""
    workers, seconds = np.full(num_inputs, -1), np.full(num_inputs, np.nan)
    for w in np.argsort(latency, kind="stable"):
        k = systematic[w]
        if k >= 0 and latency[w] <= tau and workers[k] < 0:
            workers[k], seconds[k] = w, latency[w]
    return workers, seconds


def test_replication_answers_are_each_first_copy_bit_for_bit_at_its_arrival():
    num_inputs, replicas = 5, 2
    code = cc.Replication(num_inputs, replicas)
    latency = np.array([0.3, 2.0, 0.7, 3.0, 1.5, 0.2, 2.5, 0.4, 4.0, 1.1])  # worker n: input n mod 5
    X = inputs(num_inputs)
    executor = cc.CodedExecutor(code, f, cc.SimulatedCluster(delays=trace(latency)))
    tau = 1.8
    answers = executor.run_queries(X, tau=tau)

    workers, seconds = first_copies(np.arange(10) % num_inputs, latency, num_inputs, tau)
    assert workers.tolist() == [5, -1, 7, -1, 9]  # by hand: inputs 1 and 3 have no copy by tau
    assert answers.answered_by.tolist() == workers.tolist()
    np.testing.assert_array_equal(answers.answered_s, seconds)
    own = answers.answered_by >= 0
    assert answers.exact.tolist() == own.tolist() and answers.answered.tolist() == own.tolist()
    for k in np.flatnonzero(own):
        assert answers.estimates[k].tobytes() == f(X[k : k + 1])[0].tobytes()  # the worker's own row
    assert np.isnan(answers.estimates[~own]).all() and np.isnan(answers.answered_s[~own]).all()
    # An input with no copy by tau cannot be decoded: the error says so, the others stay.
    assert isinstance(answers.error, MissingResultsError) and answers.error.report is answers.report
    assert answers.report.decoded is None and answers.report.timed_out


SYSTEMATIC_CODES = {
    "gcc": lambda k, n: cc.GCC(k, n, systematic=True),
    "bacc": lambda k, n: cc.BACC(k, n, systematic=True),
    "manifold": lambda k, n: cc.ManifoldGCC(k, n),  # systematic by default
}


@pytest.mark.parametrize("name", SYSTEMATIC_CODES)
def test_systematic_codes_answer_own_inputs_on_arrival_and_decode_the_rest_at_tau(name):
    num_inputs, num_workers, tau = 6, 9, 1.0
    X = inputs(num_inputs, dim=4)
    code = SYSTEMATIC_CODES[name](num_inputs, num_workers)
    bound = code.bind(X)  # the layout the executor binds too (ManifoldGCC's depends on X)
    systematic = np.asarray(bound.systematic_inputs)
    assert sorted(systematic[systematic >= 0].tolist()) == list(range(num_inputs))
    latency = 0.2 + 0.05 * np.arange(num_workers)
    latency[np.isin(systematic, [0, 3])] = 5.0  # inputs 0 and 3: their own workers miss tau
    answers = cc.CodedExecutor(code, f, cc.SimulatedCluster(delays=trace(latency))).run_queries(X, tau=tau)

    workers, seconds = first_copies(systematic, latency, num_inputs, tau)
    assert answers.answered_by.tolist() == workers.tolist() and (workers >= 0).sum() == num_inputs - 2
    own = workers >= 0
    np.testing.assert_array_equal(answers.answered_s[own], seconds[own])
    np.testing.assert_array_equal(answers.answered_s[~own], [tau, tau])  # decoded at tau
    assert answers.report.timed_out and answers.report.wait_s == tau and answers.error is None
    assert answers.exact.tolist() == own.tolist() and answers.answered.all()
    for k in np.flatnonzero(own):
        assert answers.estimates[k].tobytes() == f(X[k : k + 1])[0].tobytes()
    alive = np.flatnonzero(latency <= tau)  # an independent decode of what arrived by tau
    expected = bound.decode(f(bound.encode(X))[alive], alive)
    np.testing.assert_allclose(answers.estimates[~own], expected[~own], rtol=1e-10, atol=1e-12)


def test_the_coverage_check_depends_on_the_list_alone():
    from codedcomputing.runtime.executor import _Coverage

    coverage = _Coverage(np.array([0, 1, -1, 0, 1]), 2)  # worker -> its input
    assert not coverage([0, 2]) and coverage([0, 2, 4])  # a longer list: counted on
    assert not coverage([2, 3]) and coverage([4, 3]) and not coverage([4])  # any other: afresh
    assert not _Coverage(np.array([0, 0, -1]), 2)([0, 1, 2])  # input 1 has no worker of its own


def test_the_call_ends_when_every_input_has_its_own_answer_and_nothing_is_decoded():
    code = cc.Uncoded(4)
    latency = np.array([0.5, 0.2, 0.9, 0.4])
    X = inputs(4)
    answers = cc.CodedExecutor(code, f, cc.SimulatedCluster(delays=trace(latency))).run_queries(X, tau=5.0)
    np.testing.assert_array_equal(answers.answered_s, latency)
    assert answers.answered_by.tolist() == [0, 1, 2, 3] and answers.exact.all()
    assert answers.report.wait_s == 0.9 and not answers.report.timed_out
    assert answers.report.decoded is None and answers.report.decode_s == 0.0 and answers.error is None
    np.testing.assert_array_equal(answers.estimates, f(X))


@pytest.mark.parametrize("make_code", [lambda: cc.GCC(4, 10), lambda: cc.BACC(4, 10)], ids=["gcc", "bacc"])
def test_non_systematic_codes_answer_every_input_at_the_decode(make_code):
    code = make_code()
    latency = np.random.default_rng(1).uniform(0.1, 2.0, size=10)
    X = inputs(4)
    cluster = cc.SimulatedCluster(delays=trace(latency))
    answers = cc.CodedExecutor(code, f, cluster).run_queries(X, tau=10.0, wait_for=7)
    seventh = np.sort(latency)[6]
    assert answers.report.wait_s == seventh
    np.testing.assert_array_equal(answers.answered_s, np.full(4, seventh))
    assert answers.answered.all() and not answers.exact.any() and (answers.answered_by == -1).all()
    alive = np.argsort(latency)[:7]  # an independent decode of the same seven results
    expected = code.decode(f(code.encode(X))[alive], alive)
    np.testing.assert_allclose(answers.estimates, expected, rtol=1e-12, atol=1e-12)
    # At tau instead: the workers arrived by then, decoded at tau.
    answers = cc.CodedExecutor(code, f, cluster).run_queries(X, tau=0.9)
    np.testing.assert_array_equal(answers.answered_s, np.full(4, 0.9))
    assert sorted(answers.report.alive.tolist()) == np.flatnonzero(latency <= 0.9).tolist()


def test_a_decode_rule_of_the_caller_s_decides_when_the_rest_is_decoded():
    code = cc.GCC(4, 7, systematic=True)
    systematic = np.asarray(code.systematic_inputs)
    latency = np.where(systematic >= 0, 0.1, 0.0) + 0.1 * np.arange(7)
    latency[np.isin(systematic, [1, 3])] = 5.0  # their own workers are slow
    seen = []

    def two_parities(alive):  # decode once two parity workers are in
        seen.append(alive)
        return (systematic[alive] < 0).sum() >= 2

    answers = cc.CodedExecutor(code, f, cc.SimulatedCluster(delays=trace(latency))).run_queries(
        inputs(4), tau=3.0, wait_for=two_parities
    )
    second_parity = np.sort(latency[systematic < 0])[1]
    np.testing.assert_array_equal(answers.answered_s[[1, 3]], [second_parity] * 2)
    own = np.flatnonzero(systematic >= 0)[[0, 2]]
    np.testing.assert_array_equal(answers.answered_s[[0, 2]], latency[own])
    assert answers.report.wait_s == second_parity and not answers.report.timed_out
    assert all(isinstance(alive, np.ndarray) and alive.dtype == np.int64 for alive in seen)


def test_lcc_at_its_threshold_is_exact_at_the_decode():
    code = cc.LCC(3, 8, degree=2)  # threshold (3 - 1) * 2 + 1 = 5
    latency = np.random.default_rng(2).permutation(np.arange(1, 9) / 10)
    answers = cc.CodedExecutor(code, lambda x: x**2, cc.SimulatedCluster(delays=trace(latency))).run_queries(
        inputs(3), tau=10.0
    )
    np.testing.assert_array_equal(answers.answered_s, np.full(3, 0.5))  # the 5th arrival
    assert answers.exact.all() and (answers.answered_by == -1).all()


def test_decode_failure_keeps_the_inputs_answered_by_their_own_workers():
    # GCC answers nothing on its own; with no result by tau nothing is answered, nothing raised.
    answers = cc.CodedExecutor(cc.GCC(3, 6), f, cc.SimulatedCluster(delays=trace([1.0] * 6))).run_queries(
        inputs(3), tau=0.5
    )
    assert isinstance(answers.error, InsufficientResultsError)
    assert answers.estimates is None and not answers.answered.any() and np.isnan(answers.answered_s).all()
    # Uncoded with one worker failing: the other three answered, the error names the missing one.
    cluster = cc.SimulatedCluster(delays=trace([0.1, 0.2, 0.3, 0.4]), faults=F.Fixed({2: "raise"}))
    answers = cc.CodedExecutor(cc.Uncoded(4), f, cluster).run_queries(inputs(4), tau=1.0)
    assert answers.answered.tolist() == [True, True, False, True]
    assert isinstance(answers.error, MissingResultsError) and "[2]" in str(answers.error)
    assert 2 in answers.report.failed


def test_inputs_a_filling_code_fills_in_are_not_answered():
    cluster = cc.SimulatedCluster(delays=trace([0.1, 0.2, 0.3, 0.4]), faults=F.Fixed({1: "nan"}))
    calls = []
    answers = cc.CodedExecutor(cc.Uncoded(4, fill=-7.0), f, cluster).run_queries(
        inputs(4), tau=1.0, on_answer=lambda k, e, x, s: calls.append(k)
    )
    assert answers.answered.tolist() == [True, False, True, True] and calls == [0, 2, 3]
    assert np.isnan(answers.answered_s[1]) and not answers.exact[1] and answers.error is None
    assert (answers.estimates[1] == -7.0).all()  # the code's fill, marked unanswered


def test_an_exception_in_on_answer_ends_the_call_and_propagates():
    def on_answer(k, estimate, exact, seconds):
        raise KeyError("the caller's own bug")

    executor = cc.CodedExecutor(cc.Uncoded(2), f, cc.SimulatedCluster(delays=trace([0.1, 0.2])))
    with pytest.raises(KeyError, match="own bug"):
        executor.run_queries(inputs(2), tau=1.0, on_answer=on_answer)


@pytest.mark.parametrize("kind", ["raise", "nan", "hang"])
def test_a_failing_systematic_worker_is_a_straggler_its_copy_answers(kind):
    code = cc.Replication(3, 2)  # workers 0-2 and 3-5 hold inputs 0-2
    latency = [0.1, 0.2, 0.3, 0.6, 0.7, 0.8]
    cluster = cc.SimulatedCluster(delays=trace(latency), faults=F.Fixed({1: kind}))
    X = inputs(3)
    answers = cc.CodedExecutor(code, f, cluster).run_queries(X, tau=5.0)
    assert answers.answered_by.tolist() == [0, 4, 2]
    np.testing.assert_array_equal(answers.answered_s, [0.1, 0.7, 0.3])
    assert answers.estimates[1].tobytes() == f(X[1:2])[0].tobytes() and answers.error is None
    assert (1 in answers.report.failed) == (kind != "hang")


def test_on_threads_a_raising_or_nan_f_is_a_straggler_and_the_other_inputs_are_answered():
    X = inputs(4)
    X[1, 0], X[2, 0] = 1000.0, -1000.0  # f raises on input 1 and returns NaN on input 2

    def fragile(x):
        if (x[:, 0] > 500).any():
            raise RuntimeError("worker crashed")
        return np.where(x[:, :1] < -500, np.nan, f(x))

    with cc.ThreadCluster(num_threads=4, delays=trace([0.01, 0.02, 0.03, 0.04])) as cluster:
        answers = cc.CodedExecutor(cc.Uncoded(4), fragile, cluster).run_queries(X, tau=2.0)
    assert answers.answered.tolist() == [True, False, False, True]
    assert set(answers.report.failed) == {1, 2} and "worker crashed" in answers.report.failed[1]
    np.testing.assert_array_equal(answers.estimates[[0, 3]], f(X[[0, 3]]))
    assert isinstance(answers.error, MissingResultsError) and answers.report.wait_s < 1.0  # no wait for tau


def test_a_worker_of_the_wrong_shape_is_refused_when_the_shape_is_declared():
    code = cc.Replication(2, 2)
    cluster = cc.SimulatedCluster(delays=trace([0.1, 0.2, 0.3, 0.4]), faults=F.Fixed({0: "shape"}))
    X = inputs(2)
    answers = cc.CodedExecutor(code, f, cluster, output_shape=(3,)).run_queries(X, tau=5.0)
    assert answers.answered_by.tolist() == [2, 1] and 0 in answers.report.failed
    np.testing.assert_array_equal(answers.estimates, f(X))


def test_on_answer_fires_at_arrival_on_threads_before_the_call_ends():
    code = cc.Replication(3, 2)  # inputs 0, 1 answered early; input 2's copies both come late
    latency = [0.05, 0.15, 0.9, 0.4, 0.5, 0.9]
    calls = []
    start = time.perf_counter()

    def on_answer(k, estimate, exact, seconds):
        calls.append((k, time.perf_counter() - start, exact, seconds, estimate))

    X = inputs(3)
    with cc.ThreadCluster(num_threads=4, delays=trace(latency)) as cluster:
        answers = cc.CodedExecutor(code, f, cluster).run_queries(X, tau=0.6, on_answer=on_answer)
    ended = time.perf_counter() - start
    assert [c[0] for c in calls] == [0, 1]  # input 2 missed tau and cannot be decoded
    assert isinstance(answers.error, MissingResultsError)
    for (k, at, exact, seconds, estimate), due in zip(calls, [0.05, 0.15], strict=True):
        assert exact and due <= seconds < due + 0.1 and seconds == answers.answered_s[k]
        assert at < ended - 0.3  # delivered during the wait, not after it
        assert estimate.shape == (3,) and estimate.tobytes() == f(X[k : k + 1])[0].tobytes()
    assert 0.6 <= ended < 1.5


def test_on_answer_on_threads_then_the_decoded_inputs_in_order():
    code = cc.GCC(3, 6)
    latency = [0.05, 0.1, 0.15, 0.2, 0.25, 2.0]
    calls = []
    with cc.ThreadCluster(num_threads=6, delays=trace(latency)) as cluster:
        answers = cc.CodedExecutor(code, f, cluster).run_queries(
            inputs(3), tau=1.0, wait_for=5, on_answer=lambda k, e, x, s: calls.append((k, x, s))
        )
    assert [c[0] for c in calls] == [0, 1, 2] and not any(c[1] for c in calls)
    assert all(c[2] == answers.answered_s[c[0]] for c in calls)
    # The decode ended after the fifth arrival (0.25 s) and its own decode time.
    assert answers.report.wait_s <= answers.answered_s[0] < 0.25 + 0.5
    assert answers.report.wait_s >= 0.25 and not answers.report.timed_out


def test_torch_inputs_answer_with_tensors_bit_for_bit():
    torch = pytest.importorskip("torch")
    code = cc.Replication(2, 2)
    X = torch.linspace(-1, 1, 6, dtype=torch.float32).reshape(2, 3)
    cluster = cc.SimulatedCluster(delays=trace([0.1, 0.5, 0.3, 0.2]))
    answers = cc.CodedExecutor(code, torch.tanh, cluster).run_queries(X, tau=1.0)
    assert isinstance(answers.estimates, torch.Tensor) and answers.estimates.dtype == torch.float32
    assert answers.answered_by.tolist() == [0, 3]
    assert torch.equal(answers.estimates, torch.tanh(X))


@pytest.mark.parametrize("tau", [0, -1.0, math.nan, math.inf, -math.inf, "1", True])
def test_tau_must_be_a_positive_finite_number(tau):
    executor = cc.CodedExecutor(cc.GCC(2, 4), f, cc.SimulatedCluster())
    with pytest.raises(ValueError, match="tau") as caught:
        executor.run_queries(inputs(2), tau=tau)
    assert "inf]" not in str(caught.value)  # inf is refused, so no interval may include it


def test_bad_arguments_name_themselves():
    executor = cc.CodedExecutor(cc.GCC(2, 4), f, cc.SimulatedCluster())
    with pytest.raises(ValueError, match="wait_for"):
        executor.run_queries(inputs(2), tau=1.0, wait_for=9)
    with pytest.raises(ValueError, match="wait_for"):
        executor.run_queries(inputs(2), tau=1.0, wait_for="all")
    with pytest.raises(ValueError, match="on_answer"):
        executor.run_queries(inputs(2), tau=1.0, on_answer=3)
    attacked = cc.SimulatedCluster(faults=F.Adversarial(cc.adversaries.Random(1, bound=10.0)))
    with pytest.raises(ValueError, match="Adversarial"):
        cc.CodedExecutor(cc.GCC(2, 4), f, attacked).run_queries(inputs(2), tau=1.0)
    with pytest.raises(ValueError, match="X"):
        executor.run_queries(inputs(3), tau=1.0)


@pytest.mark.slow
def test_ray_answers_on_arrival_through_the_same_path(local_ray):
    code = cc.Replication(3, 2)  # input 2's copies both miss tau
    latency = [0.05, 0.2, 1.5, 0.6, 0.7, 1.5]
    calls = []
    start = time.perf_counter()
    X = inputs(3)
    with cc.RayCluster(delays=trace(latency), seed=0) as cluster:
        cluster.share(np.tanh)  # warm: the first call's task start-up is not the test's
        cc.CodedExecutor(code, np.tanh, cluster).run(X)
        start = time.perf_counter()
        answers = cc.CodedExecutor(code, np.tanh, cluster).run_queries(
            X, tau=1.0, on_answer=lambda k, e, x, s: calls.append((k, time.perf_counter() - start))
        )
    ended = time.perf_counter() - start
    assert answers.answered_by.tolist() == [0, 1, -1] and [k for k, _ in calls] == [0, 1]
    assert calls[0][1] < ended - 0.5  # delivered during the wait
    np.testing.assert_array_equal(answers.estimates[:2], np.tanh(X[:2]))
    assert np.all(answers.answered_s[:2] >= [0.05, 0.2]) and isinstance(answers.error, MissingResultsError)


def test_answer_times_match_the_frontier_experiment_s_closed_forms_on_the_same_draws():
    """The frontier experiment computes per-query latencies from delay draws without running
    anything; run_queries on the simulated clock must give the same times on those draws."""
    from codedcomputing.experiments import frontier

    num_inputs, num_workers, tau, calls = 10, 15, 1.2, 40
    draws = cc.delays.Bimodal(base=1.0, p=0.1, slowdown=10.0).sample(
        calls * num_workers, np.random.default_rng(5)
    )
    draws = draws.reshape(calls, num_workers)
    X = inputs(num_inputs)
    code = cc.GCC(num_inputs, num_workers, systematic=True)
    executor = cc.CodedExecutor(code, f, cc.SimulatedCluster(delays=D.Trace(draws)))
    answered = np.array([executor.run_queries(X, tau=tau).answered_s for _ in range(calls)])
    own = draws[:, code.systematic_workers]
    expected, _ = frontier.systematic_latency(own, draws, tau, code.min_results)
    np.testing.assert_array_equal(answered, expected)
    assert 0 < (answered == tau).mean() < 0.5  # both kinds of answer occur

    executor = cc.CodedExecutor(
        cc.GCC(num_inputs, num_workers), f, cc.SimulatedCluster(delays=D.Trace(draws))
    )
    answered = np.array([executor.run_queries(X, wait_for=12).answered_s for _ in range(calls)])
    np.testing.assert_array_equal(
        answered, np.repeat(frontier.wait_latency(draws, 12)[:, None], num_inputs, 1)
    )


# -- Cluster.collect(on_usable=...): the hook run_queries answers through -----------------


def _nan_at_two(x):
    """``2 x``, row by row, except NaN (an unusable result) for the row whose first value is 2."""
    return np.where(x[:, :1] == 2, np.nan, 2 * x)


def test_collect_on_usable_reports_each_usable_result_in_arrival_order_on_the_simulated_clock():
    latency = [0.3, 0.1, 0.05, 0.2, 0.9]
    rows = np.arange(5.0)[:, None] * np.ones((1, 2))
    seen = []
    cluster = cc.SimulatedCluster(delays=trace(latency))
    call = cluster.submit(_nan_at_two, rows)
    gathered = cluster.collect(call, 3, on_usable=lambda n, s, out: seen.append((n, s, out)))
    # worker 2 arrives first with NaN: a failure, never reported; the 4th usable one is not waited for
    assert [n for n, _, _ in seen] == [1, 3, 0] == gathered.alive.tolist()
    assert [s for _, s, _ in seen] == [0.1, 0.2, 0.3] == gathered.workers.latency[[1, 3, 0]].tolist()
    for n, _, out in seen:
        np.testing.assert_array_equal(out, 2 * rows[n : n + 1])
    assert 2 in gathered.workers.failed and 4 in gathered.workers.dropped


def test_collect_on_usable_runs_on_the_calling_thread_during_the_wait():
    import threading

    latency = [0.05, 0.7, 0.1]
    seen, start = [], time.perf_counter()
    with cc.ThreadCluster(num_threads=3, delays=trace(latency)) as cluster:
        call = cluster.submit(np.tanh, inputs(3))
        gathered = cluster.collect(
            call,
            3,
            on_usable=lambda n, s, out: seen.append((n, threading.get_ident(), time.perf_counter() - start)),
        )
    ended = time.perf_counter() - start
    assert [n for n, _, _ in seen] == [0, 2, 1] == gathered.alive.tolist()
    assert {ident for _, ident, _ in seen} == {threading.get_ident()}
    assert seen[0][2] < ended - 0.3  # worker 0's result reported at its arrival, not at the end


def test_collect_on_usable_raising_ends_the_call_and_propagates():
    cluster = cc.SimulatedCluster(delays=trace([0.1, 0.2, 0.3]))
    call = cluster.submit(np.tanh, inputs(3))

    def boom(n, s, out):
        raise RuntimeError(f"refused {n}")

    with pytest.raises(RuntimeError, match="refused 0"):
        cluster.collect(call, 3, on_usable=boom)
    with pytest.raises(ValueError, match="already collected"):
        cluster.collect(call, 3)


def test_collect_on_usable_must_be_callable():
    cluster = cc.SimulatedCluster()
    call = cluster.submit(np.tanh, inputs(3))
    with pytest.raises(ValueError, match="on_usable"):
        cluster.collect(call, 3, on_usable="print")
    assert cluster.collect(call, 3).alive.size == 3  # refused before the call was taken


def test_a_predicate_sees_the_arrived_workers_as_a_new_int_array_each_call():
    from codedcomputing.runtime.clusters import check_wait_for

    seen = []
    predicate = check_wait_for(lambda alive: seen.append(alive) or alive.size >= 3, 40)
    growing: list[int] = []
    for worker in (7, 2, 30):  # the collector's list, grown by appending
        growing.append(worker)
        assert predicate(growing) is (len(growing) >= 3)
    other = [5, *range(20, 37)]  # another list, longer than the buffer's first size
    assert predicate(other) and predicate([1]) is False and predicate(np.array([4, 5, 6]))
    expected = [[7], [7, 2], [7, 2, 30], other, [1], [4, 5, 6]]
    assert [a.tolist() for a in seen] == expected and all(a.dtype == np.int64 for a in seen)
    seen[1][0] = -1  # a predicate's array is its own: editing it changes nothing later
    growing.append(11)
    predicate(growing)
    assert seen[-1].tolist() == [7, 2, 30, 11]


@pytest.mark.parametrize("kind", ["numpy", "torch"])
def test_own_answers_stay_bit_for_bit_when_a_decode_fills_the_rest(kind):
    code = cc.GCC(4, 7, systematic=True)  # workers 0..3 compute inputs 0..3 raw
    latency = [0.1, 3.0, 0.3, 0.4, 0.5, 0.6, 0.7]  # input 1's own worker misses tau
    X = inputs(4).astype(np.float32)
    g = np.tanh
    if kind == "torch":
        torch = pytest.importorskip("torch")
        X, g = torch.from_numpy(X), torch.tanh
    answers = cc.CodedExecutor(code, g, cc.SimulatedCluster(delays=trace(latency))).run_queries(X, tau=1.0)
    assert answers.answered_by.tolist() == [0, -1, 2, 3]
    assert answers.exact.tolist() == [True, False, True, True]
    assert answers.report.decoded is not None and answers.answered_s.tolist() == [0.1, 1.0, 0.3, 0.4]
    estimates, truth = np.asarray(answers.estimates), np.asarray(g(X))
    assert estimates.dtype == np.float32
    assert estimates[[0, 2, 3]].tobytes() == truth[[0, 2, 3]].tobytes()
    assert not np.array_equal(estimates[1], truth[1]) and np.abs(estimates[1] - truth[1]).max() < 0.5
