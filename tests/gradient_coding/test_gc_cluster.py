"""Training on a thread cluster with stateful workers: exact schemes follow DGD's iterates,
PGC at s = 0 is DGD, a slow worker's lost work ages its stored gradients, stragglers do not
hold up the next step, failing and hung workers end as documented (never silently wrong,
never a hang), and both trainers agree on a bad partition."""

from __future__ import annotations

import time
import warnings

import numpy as np
import pytest

import codedcomputing as cc
from codedcomputing.gradient_coding import (
    EXACT_SCHEMES,
    SCHEMES,
    TooManyStragglersError,
    simulate,
    train_on_cluster,
)
from codedcomputing.gradient_coding.cluster import (
    FIRST_STEP_TIMEOUT_S,
    MIN_DEGRADED_WAIT_S,
    MIN_STEP_TIMEOUT_S,
    STEP_TIMEOUT_FACTOR,
    StepClock,
    StepDeadline,
)
from training_problems import PartitionFaults, SlowWorker, least_squares

FAST = cc.delays.AdditiveExponential(mean=0.001)


@pytest.fixture(scope="module")
def cluster():
    with cc.ThreadCluster(24, seed=0) as threads:
        yield threads


@pytest.mark.parametrize("scheme", ["gc-fr", "gc-cr", "dgd"])
def test_exact_schemes_on_threads_follow_dgd_iterates(cluster, scheme):
    problem = least_squares(12)
    reference = simulate("dgd", problem, 2, 10, lr=0.05)
    history = train_on_cluster(scheme, problem, 2, 10, cluster, lr=0.05, delays=FAST)
    np.testing.assert_allclose([s.loss for s in history], [s.loss for s in reference], rtol=1e-9)
    assert all(s.wall_time_s > 0 for s in history[1:])


@pytest.mark.parametrize("scheme", ["pgc-fr", "pgc-cr"])
def test_pgc_at_s_zero_on_threads_is_dgd(cluster, scheme):
    problem = least_squares(6)
    reference = simulate("dgd", problem, 0, 8, lr=0.05)
    history = train_on_cluster(scheme, problem, 0, 8, cluster, lr=0.05, delays=FAST)
    np.testing.assert_allclose([s.loss for s in history], [s.loss for s in reference], rtol=1e-9)


def test_every_scheme_trains_on_threads_and_uses_what_it_should(cluster):
    problem = least_squares(12)
    for scheme in SCHEMES:
        history = train_on_cluster(scheme, problem, 3, 12, cluster, lr=0.05, delays=FAST, seed=1)
        assert history[-1].loss < 0.5 * history[0].loss, scheme
        sizes = {len(step.used) for step in history[1:]}
        expected = {"dgd": {12}, "is-sgd": {9}, "gc-cr": {9}, "pgc-cr": {9}, "gc-fr": {3}, "pgc-fr": {3}}
        if scheme in expected:
            assert sizes == expected[scheme], scheme


def test_a_slow_worker_never_holds_a_step_and_its_stored_gradients_age():
    problem = least_squares(12)
    slow = SlowWorker()  # worker 0: 100 s; the others ~0.1 s: scaled down below
    slow_delays = _Scaled(slow, 0.003)  # worker 0: 0.3 s, the others ~0.3 ms
    with cc.ThreadCluster(24, seed=1) as threads:
        start = time.perf_counter()
        history = train_on_cluster("pgc-cr", problem, 2, 6, threads, lr=0.05, delays=slow_delays)
        elapsed = time.perf_counter() - start
    assert elapsed < 6 * 0.3  # no step waited for worker 0
    assert all(0 not in step.used for step in history[1:])
    assert history[-1].ages[0].min() >= 5  # its work after step 0 was all dropped
    assert history[-1].ages[1:].mean() <= 2


class _Scaled(cc.delays.DelayModel):
    def __init__(self, model, factor):
        self.model, self.factor = model, factor

    def _sample(self, num_workers, rng):
        return self.factor * self.model.sample(num_workers, rng)


def test_bad_arguments_name_the_parameter(cluster):
    problem = least_squares(12)
    with pytest.raises(ValueError, match="cluster"):
        train_on_cluster("dgd", problem, 1, 2, "threads")
    with pytest.raises(ValueError, match="scheme"):
        train_on_cluster("sgd", problem, 1, 2, cluster)
    with pytest.raises(ValueError, match="num_stragglers"):
        train_on_cluster("dgd", problem, 12, 2, cluster)
    with pytest.raises(ValueError, match="delays"):
        train_on_cluster("dgd", problem, 1, 2, cluster, delays=0.1)


# --- faulty and hung workers: no silent wrong answer, no hang -------------------------------


def test_dgd_with_a_failing_partition_raises_instead_of_dividing_by_n(cluster):
    """DGD with a partition whose worker fails raises TooManyStragglersError naming the
    partition and the worker at the first step, rather than dividing 5 partitions' gradients
    by 6."""
    broken = PartitionFaults(least_squares(6), {2: "raise"})
    with pytest.raises(TooManyStragglersError, match="partition 2 is broken") as caught:
        train_on_cluster("dgd", broken.as_problem(), 1, 5, cluster, lr=0.05)
    assert caught.value.missing == [2]
    assert str(caught.value).startswith("step 1: dgd") and "worker 2:" in str(caught.value)
    assert [step.step for step in caught.value.history] == [0]


def test_pgc_cr_short_of_n_minus_s_flags_its_steps_and_averages_what_it_used(cluster):
    """PGC-CR with two faulty workers (s = 1) combines the 4 messages it has: each step is
    flagged (``degraded``, a RuntimeWarning) and divides by 4 (s + 1), the messages used times
    (s + 1), not (n - s)(s + 1) = 10."""
    problem = least_squares(6)
    with pytest.warns(RuntimeWarning, match="3 of 3 steps combined fewer than n - s = 5"):
        history = train_on_cluster("pgc-cr", problem, 1, 3, cluster, lr=0.05, faults={0: "raise", 3: "nan"})
    assert all(step.degraded and sorted(step.used) == [1, 2, 4, 5] for step in history[1:])
    assert set(history[1].failed) <= {0, 3}
    # step 1 by hand: each worker i sends g_i + g_{i+1} at theta_0; the master averages 4 of them
    theta0 = problem.initial
    sums = [problem.gradient(theta0, i) + problem.gradient(theta0, (i + 1) % 6) for i in (1, 2, 4, 5)]
    theta1 = theta0 - 0.05 * np.sum(sums, axis=0) / (4 * 2)
    assert history[1].loss == pytest.approx(problem.loss(theta1), rel=1e-12)


def test_one_hung_worker_neither_hangs_nor_starves_the_threads():
    """IS-SGD on 8 threads with a worker whose gradient never returns: no step queues a task
    behind the hung one, which is a straggler of every step ("still computing step 1") and
    holds one thread; the 12 steps finish within 5 s and the loss falls."""
    hung = PartitionFaults(least_squares(6), {3: "hang"})
    try:
        with cc.ThreadCluster(num_threads=8, seed=0) as threads:
            start = time.perf_counter()
            history = train_on_cluster("is-sgd", hung.as_problem(), 1, 12, threads, lr=0.05)
            elapsed = time.perf_counter() - start
    finally:
        hung.release()
    assert elapsed < 5.0  # no step waited for it (the automatic deadline: 60 s, then >= MIN_STEP_TIMEOUT_S)
    assert all(3 not in step.used and len(step.used) == 5 for step in history[1:])
    assert not any(step.degraded or step.timed_out for step in history)
    assert all("still computing step 1" in step.failed[3] for step in history[2:])
    assert history[-1].loss < 0.5 * history[0].loss


def test_two_hung_workers_cost_one_deadline_then_fail_fast():
    """With 2 hung workers (s = 1) the first step waits for its deadline (0.5 s) and later
    ones not at all for the busy workers: IS-SGD finishes its degraded steps within 2.5 s, and
    GC-CR, which needs n - s results, raises at step 1."""
    hung = PartitionFaults(least_squares(6), {1: "hang", 4: "hang"})
    problem = hung.as_problem()
    try:
        with cc.ThreadCluster(num_threads=8, seed=0) as threads:
            start = time.perf_counter()
            with pytest.warns(RuntimeWarning, match="fewer than n - s"):
                history = train_on_cluster("is-sgd", problem, 1, 6, threads, lr=0.05, step_timeout_s=0.5)
            elapsed = time.perf_counter() - start
            with pytest.raises(TooManyStragglersError, match="step 1: gc-cr"):
                train_on_cluster("gc-cr", problem, 1, 6, threads, lr=0.05, step_timeout_s=0.5)
    finally:
        hung.release()
    assert elapsed < 0.5 + 2.0
    assert history[1].timed_out and not any(step.timed_out for step in history[2:])
    assert all(step.degraded and sorted(step.used) == [0, 2, 3, 5] for step in history[1:])


def test_the_automatic_deadline_follows_the_steps_so_far(cluster, monkeypatch):
    """No step_timeout_s: a worker that hangs from step 3 on is waited for max(floor, 10 x the
    median step), not forever; DGD, which needs it, then raises, naming the deadline (the
    floor lowered from 10 s to 1 s here, to keep the test short)."""
    monkeypatch.setattr(cc.gradient_coding.cluster, "MIN_STEP_TIMEOUT_S", 1.0)
    hangs_later = PartitionFaults(least_squares(6), {4: "hang"}, after=2)
    try:
        start = time.perf_counter()
        with pytest.raises(TooManyStragglersError, match=r"step 3: dgd.*step_timeout_s") as caught:
            train_on_cluster("dgd", hangs_later.as_problem(), 1, 6, cluster, lr=0.05)
        elapsed = time.perf_counter() - start
    finally:
        hangs_later.release()
    assert 1.0 <= elapsed < 6.0
    assert "from workers [4]" in str(caught.value)
    assert [step.step for step in caught.value.history] == [0, 1, 2]


def test_step_deadline_rule():
    assert StepDeadline(0.25).seconds() == 0.25
    automatic = StepDeadline(None)
    assert automatic.seconds() == FIRST_STEP_TIMEOUT_S
    automatic.record(0.01, timed_out=False)
    automatic.record(50.0, timed_out=True)  # a step that timed out does not stretch the deadline
    assert automatic.seconds() == MIN_STEP_TIMEOUT_S
    for seconds in (3.0, 4.0, 5.0):
        automatic.record(seconds, timed_out=False)
    assert automatic.seconds() == pytest.approx(STEP_TIMEOUT_FACTOR * 3.5)


def healthy_replay(problem, healthy, steps, lr):
    """The losses of IS-SGD that averages the gradients of the ``healthy`` partitions each step."""
    theta, losses = problem.initial.copy(), [problem.loss(problem.initial)]
    for _ in range(steps):
        theta = theta - lr * np.mean([problem.gradient(theta, i) for i in healthy], axis=0)
        losses.append(problem.loss(theta))
    return losses


@pytest.mark.parametrize("how", ["gradient", "injected"])
def test_hung_workers_cost_a_step_the_healthy_workers_pace_not_a_minute(how, monkeypatch):
    """IS-SGD with 2 of 6 workers hung (s = 1) and the automatic deadline: their gradient blocks
    on an event (released at teardown), or an injected hang every step. No step finished to set
    the deadline's median, so every such step waited FIRST_STEP_TIMEOUT_S (60 s); now a step
    ends once the healthy workers' pace says so (half of them in: STEP_TIMEOUT_FACTOR times
    that, at least MIN_DEGRADED_WAIT_S for an approximate scheme), and each step averages
    exactly the healthy workers' gradients. (A blocking gradient costs the first step only: the
    busy workers fail at once later; injected hangs cost every step, here with the floor
    lowered from 1 s to 0.2 s to keep the test short.)"""
    floor = MIN_DEGRADED_WAIT_S
    if how == "injected":
        floor = 0.2
        monkeypatch.setattr(cc.gradient_coding.cluster, "MIN_DEGRADED_WAIT_S", floor)
    base = least_squares(6)
    hung = PartitionFaults(base, {1: "hang", 4: "hang"} if how == "gradient" else {})
    faults = {1: "hang", 4: "hang"} if how == "injected" else None
    try:
        with cc.ThreadCluster(num_threads=8, seed=0) as threads:
            start = time.perf_counter()
            with pytest.warns(RuntimeWarning, match="3 of 3 steps combined fewer than n - s"):
                history = train_on_cluster("is-sgd", hung.as_problem(), 1, 3, threads, lr=0.05, faults=faults)
            elapsed = time.perf_counter() - start
    finally:
        hung.release()
    assert elapsed < 20.0  # 3 steps: was at least 60 s (gradient) or 180 s (injected)
    waited = history[1:] if how == "injected" else history[1:2]
    assert all(step.timed_out and floor - 1e-6 <= step.step_time_s < floor + 5.0 for step in waited)
    assert all(step.degraded and sorted(step.used) == [0, 2, 3, 5] for step in history[1:])
    expected = healthy_replay(base, [0, 2, 3, 5], 3, 0.05)
    np.testing.assert_allclose([step.loss for step in history], expected, rtol=1e-12)


def test_the_pace_rule_of_a_step():
    """A step's clock: its deadline, until half the workers answered; then STEP_TIMEOUT_FACTOR
    times the time that took, at least the scheme's floor, never past the deadline; a fixed
    step_timeout_s has no pace rule."""
    start = time.perf_counter()
    exact, approximate = StepDeadline(None, exact=True), StepDeadline(None, exact=False)
    clock = approximate.clock(start, 6)
    assert clock.quorum == 3 and clock.seconds == FIRST_STEP_TIMEOUT_S and not clock.paced
    clock.answered(0.01)
    clock.answered(0.02)
    assert clock.seconds == FIRST_STEP_TIMEOUT_S
    clock.answered(0.5)  # the third of six
    assert clock.paced and clock.seconds == pytest.approx(STEP_TIMEOUT_FACTOR * 0.5)
    clock = approximate.clock(start, 6)
    for latency in (0.001, 0.002, 0.003):
        clock.answered(latency)
    assert clock.seconds == pytest.approx(MIN_DEGRADED_WAIT_S)
    clock = exact.clock(start, 5)
    for latency in (0.001, 0.002, 0.003):
        clock.answered(latency)
    assert clock.seconds == pytest.approx(MIN_STEP_TIMEOUT_S)
    clock = exact.clock(start, 2)
    clock.answered(100.0)  # never past the deadline
    assert clock.seconds == pytest.approx(FIRST_STEP_TIMEOUT_S) and not clock.paced
    fixed = StepDeadline(0.25).clock(start, 6)
    for latency in (0.001, 0.002, 0.003, 0.004):
        fixed.answered(latency)
    assert fixed.quorum is None and fixed.seconds == pytest.approx(0.25)
    waiting = StepClock(time.perf_counter(), 30.0, quorum=1, floor=0.05)
    waiting.answered(0.001)
    before = time.perf_counter()
    assert waiting.wait() is False and time.perf_counter() - before < 1.0  # ended at the pace


@pytest.mark.parametrize("kind", ["nan", "raise", "shape"])
def test_a_bad_partition_ends_the_same_way_on_both_trainers(cluster, kind):
    """simulate turned a NaN gradient into NaN losses where the cluster trainer raised: both
    now make every worker computing it a straggler, with the same outcome per scheme."""
    problem = PartitionFaults(least_squares(6), {5: kind}).as_problem()
    for scheme in SCHEMES:
        outcomes = []
        for trainer in ("simulate", "threads"):
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", RuntimeWarning)
                try:
                    if trainer == "simulate":
                        history = simulate(scheme, problem, 1, 4, lr=0.05)
                    else:
                        history = train_on_cluster(scheme, problem, 1, 4, cluster, lr=0.05)
                except TooManyStragglersError as err:
                    assert "partition 5" in str(err)
                    outcomes.append(("error", err.missing))
                    continue
            assert all(np.isfinite(step.loss) for step in history)
            outcomes.append(("trained", [step.degraded for step in history]))
            if scheme == "is-sgd":  # worker 5 fails, the other five are n - s: a fixed set
                outcomes[-1] += (np.round([step.loss for step in history], 12).tolist(),)
        assert outcomes[0] == outcomes[1], (scheme, outcomes)
        exact = scheme in EXACT_SCHEMES  # partition 5 spoils 2 workers
        assert (outcomes[0][0] == "error") == exact, (scheme, outcomes)


def test_fault_and_deadline_arguments_name_the_parameter(cluster):
    problem = least_squares(6)
    for faults, match in [
        ({0: "explode"}, "faults"),
        ({6: "raise"}, "faults"),
        ({True: "raise"}, "faults"),
        ([0], "faults"),
    ]:
        with pytest.raises(ValueError, match=match):
            train_on_cluster("gc-cr", problem, 1, 2, cluster, faults=faults)
    for timeout in (0, -1.0, "1", float("nan")):
        with pytest.raises(ValueError, match="step_timeout_s"):
            train_on_cluster("gc-cr", problem, 1, 2, cluster, step_timeout_s=timeout)
    with pytest.raises(ValueError, match="code_seed"):
        train_on_cluster("gc-cr", problem, 1, 2, cluster, code_seed=-1)


def test_the_cluster_s_own_faults_apply_shape_included(cluster):
    """A cluster's own fault model applies around each worker's task; its "shape" kind (a
    message one entry short) makes a straggler as the trainers' own does."""
    problem = least_squares(6)
    with cc.ThreadCluster(8, faults=cc.faults.Fixed({2: "shape"}), seed=0) as threads:
        with pytest.raises(TooManyStragglersError, match=r"step 1: dgd.*worker 2: returned shape \(1, 4\)"):
            train_on_cluster("dgd", problem, 1, 2, threads, lr=0.05)
        history = train_on_cluster("is-sgd", problem, 1, 3, threads, lr=0.05)
    assert all(sorted(step.used) == [0, 1, 3, 4, 5] for step in history[1:])
