"""Training on a thread cluster with stateful workers: exact schemes follow DGD's iterates,
PGC at s = 0 is DGD, a slow worker's lost work ages its stored gradients, and stragglers do
not hold up the next step."""

from __future__ import annotations

import time

import numpy as np
import pytest

import codedcomputing as cc
from codedcomputing.gradient_coding import SCHEMES, simulate, train_on_cluster
from training_problems import SlowWorker, least_squares

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
