"""Losing a Ray node: a head and two worker nodes from ``ray.cluster_utils.Cluster`` (on
127.0.0.1, 1 CPU each, fast health checks), and one worker node removed (its processes
killed, as in a crash) in the middle of

(a) a coded call (``CodedExecutor`` on ``RayCluster(address=...)``): the tasks on the lost
    node are stragglers, and the estimates are the decode of the survivors' true outputs;
(b) a training run (``train_on_cluster``, GC-CR with s = 2 on 6 actors spread over the
    nodes, two on the lost node): the dead actors are stragglers, then replaced on the live
    nodes, and the run stays exact (DGD's losses).

Each test starts its own cluster (a Ray already running in this process is shut down
first: a driver joins one cluster) and stops everything it started, also on failure.
"""

from __future__ import annotations

import sys
import threading
import time
import warnings

import numpy as np
import pytest

import codedcomputing as cc
import training_problems
from codedcomputing.gradient_coding import Problem, simulate, train_on_cluster
from training_problems import least_squares

pytestmark = pytest.mark.slow

K, N = 4, 9
W = np.random.default_rng(0).normal(size=(5, 3))
FAST_HEALTH_CHECKS = {  # a lost node is noticed within ~2 s, not ~30 s
    "health_check_initial_delay_ms": 0,
    "health_check_period_ms": 500,
    "health_check_timeout_ms": 500,
    "health_check_failure_threshold": 3,
}


class SlowTanh:
    """``tanh(x W)`` after ``seconds`` of sleep: a call long enough to lose a node in."""

    def __init__(self, seconds: float):
        self.seconds = seconds

    def __call__(self, x):
        time.sleep(self.seconds)
        return np.tanh(np.asarray(x) @ W)


class SlowGradient:
    """A problem's gradient that takes ``seconds`` longer per partition."""

    def __init__(self, problem: Problem, seconds: float):
        self.problem, self.seconds = problem, seconds

    def __call__(self, theta, partition):
        time.sleep(self.seconds)
        return self.problem.gradient(theta, partition)


@pytest.fixture
def three_nodes(monkeypatch):
    """``(cluster, [worker nodes], cc.RayCluster joined to it)``, all stopped afterwards."""
    ray = pytest.importorskip("ray")
    from ray._private import ray_constants
    from ray.cluster_utils import Cluster

    # ray.init turns a loopback address into this machine's outward IP, where nothing listens
    # (every node binds 127.0.0.1), unless it takes the machine for a single-node one.
    monkeypatch.setattr(ray_constants, "ENABLE_RAY_CLUSTER", False)
    if ray.is_initialized():  # an earlier test's Ray: a driver joins one cluster at a time
        ray.shutdown()
    cluster = Cluster(
        initialize_head=True,
        head_node_args={
            "num_cpus": 1,
            "node_ip_address": "127.0.0.1",
            "include_dashboard": False,
            "_system_config": FAST_HEALTH_CHECKS,
        },
    )
    joined = None
    try:
        workers = [cluster.add_node(num_cpus=1, node_ip_address="127.0.0.1") for _ in range(2)]
        cluster.wait_for_nodes(timeout=120)
        joined = cc.RayCluster(address=cluster.address, seed=0)
        for module in (sys.modules[__name__], training_problems):  # tests/ is not importable there
            ray.cloudpickle.register_pickle_by_value(module)
        yield cluster, workers, joined
    finally:
        for module in (sys.modules[__name__], training_problems):
            try:
                ray.cloudpickle.unregister_pickle_by_value(module)
            except ValueError:  # never registered
                pass
        if joined is not None:
            joined.close()  # disconnects (this driver joined the cluster, it did not start it)
        if ray.is_initialized():
            ray.shutdown()
        cluster.shutdown()


def remove_later(cluster, node, after_s: float) -> threading.Thread:
    """Remove ``node`` (killing its processes, no graceful shutdown) ``after_s`` from now."""

    def remove():
        time.sleep(after_s)
        cluster.remove_node(node, allow_graceful=False)

    thread = threading.Thread(target=remove, daemon=True)
    thread.start()
    return thread


def test_a_coded_call_decodes_from_the_survivors_of_a_lost_node(three_nodes):
    cluster, workers, joined = three_nodes
    code = cc.GCC(K, N)
    X = np.random.default_rng(1).normal(size=(K, 5))
    f = SlowTanh(1.0)  # 9 tasks of 1 s on 3 CPUs: three waves, the node goes in the first
    executor = cc.CodedExecutor(code, f, joined)
    remover = remove_later(cluster, workers[0], 0.5)
    start = time.perf_counter()
    result = executor.run(X, wait_for=N - 3, deadline=60.0)
    elapsed = time.perf_counter() - start
    remover.join(60)
    assert not remover.is_alive()
    alive = np.asarray(result.alive)
    assert alive.size >= N - 3 and elapsed < 60.0
    expected = code.decode(np.tanh(code.encode(X) @ W)[alive], alive)  # the survivors' true outputs
    np.testing.assert_allclose(result.estimates, expected, rtol=1e-10, atol=1e-12)
    assert np.all(np.isfinite(result.estimates))


def node_of(actors) -> list[str]:
    import ray

    calls = [a.__ray_call__.remote(lambda self: ray.get_runtime_context().get_node_id()) for a in actors]
    return ray.get(calls, timeout=60)


def test_training_stays_exact_when_a_node_with_actors_is_lost(three_nodes):
    cluster, workers, joined = three_nodes
    base = least_squares(6)
    problem = Problem(SlowGradient(base, 0.1), base.loss, base.initial, 6)
    train_on_cluster("gc-cr", problem, 2, 1, joined, lr=0.05)  # start the actors, see where they are
    actors = joined._gradient_workers[id(problem)].actors  # the pool's list: replacements land in it
    where = node_of(actors)
    lost = max(workers, key=lambda node: where.count(node.node_id))
    assert 1 <= where.count(lost.node_id) <= 2, where  # spread: the run can do without them (s = 2)
    steps = 20  # ~0.3 s a step (3 partitions each): the node goes at ~1.5 s, noticed ~2 s later
    remover = remove_later(cluster, lost, 1.5)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        history = train_on_cluster("gc-cr", problem, 2, steps, joined, lr=0.05)
        again = train_on_cluster("gc-cr", problem, 2, 2, joined, lr=0.05)  # replaces any left dead
    remover.join(60)
    assert not remover.is_alive()
    reference = simulate("dgd", base, 2, steps, lr=0.05)
    np.testing.assert_allclose([s.loss for s in history], [s.loss for s in reference], rtol=1e-9)
    assert len(again) == 3 and all(np.isfinite(step.loss) for step in again)
    assert any("died and were replaced" in str(w.message) for w in caught), [str(w.message) for w in caught]
    assert lost.node_id not in node_of(actors)  # every actor now lives on a live node
