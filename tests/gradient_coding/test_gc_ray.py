"""Training with gradient codes on Ray: one actor per worker keeps its state; exact codes
follow DGD's iterates and pipelined ones train (a short run: Ray and 12 actors take seconds)."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

import codedcomputing as cc
import training_problems
from codedcomputing.gradient_coding import simulate, train_on_cluster
from training_problems import least_squares

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def ray_cluster():
    ray = pytest.importorskip("ray")  # the README's install has the ray extra: this runs in CI
    cluster = cc.RayCluster(num_cpus=2)
    ray.cloudpickle.register_pickle_by_value(training_problems)  # the test problem ships by value
    yield cluster
    ray.cloudpickle.unregister_pickle_by_value(training_problems)
    cluster.close()


def test_exact_and_pipelined_codes_train_on_ray_actors(ray_cluster):
    problem = least_squares(12)
    delays = cc.delays.AdditiveExponential(mean=0.002)
    reference = simulate("dgd", problem, 2, 5, lr=0.05)
    gc = train_on_cluster("gc-cr", problem, 2, 5, ray_cluster, lr=0.05, delays=delays, seed=0)
    np.testing.assert_allclose([s.loss for s in gc], [s.loss for s in reference], rtol=1e-9)
    assert all(len(step.used) == 10 for step in gc[1:])
    pgc = train_on_cluster("pgc-cr", problem, 2, 5, ray_cluster, lr=0.05, delays=delays, seed=0)
    assert pgc[-1].loss < pgc[0].loss
    assert pgc[-1].ages.shape == (12, 3) and pgc[-1].ages.min() == 0
    assert all(later.wall_time_s > earlier.wall_time_s for earlier, later in itertools.pairwise(pgc))
