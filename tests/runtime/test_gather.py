"""The clusters' ``gather`` primitive (thread and simulated): the first k in arrival order,
latency, deadlines, faults as stragglers, misshaped outputs, predicates, seeds, argument
checks.

Thread-cluster checks use :class:`cc.delays.Trace` with known latencies 10-60 ms apart, so the
arrival order is fixed. Ray is tested in ``test_ray.py``.
"""

from __future__ import annotations

import math
import threading

import numpy as np
import pytest
import torch
from runtime_helpers import CLUSTER_KINDS, assert_partition, identity, make_cluster, rms, rows_of, trace

import codedcomputing as cc

D = cc.delays
F = cc.faults


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
    assert 0.7 < rms(garbage) / rms(2 * X[4]) < 1.3


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
