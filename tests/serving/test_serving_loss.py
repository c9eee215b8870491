"""Losing a replica mid-stream on the thread server's frontend, without Ray: a backend whose
replica 0 dies (its task in flight and those queued behind it are lost, as when a Ray node
goes) checks the re-dispatch rule and the record's counts for every scheme in about a second.
The same frontend drives the Ray actors (tests/serving/test_serving_ray.py loses a real node).
"""

import threading

import numpy as np
import pytest

import codedcomputing as cc
from codedcomputing import serving
from codedcomputing.serving.threads import _ThreadReplicas

UNIT = 0.01
W = np.random.default_rng(0).normal(size=(4, 3))


def linear(x):
    return np.asarray(x) @ W


class _Dying(_ThreadReplicas):
    """Replica 0 serves ``survive`` tasks, then its next task hangs a while and is lost (as a
    task in flight on a lost node), and so is every later call on it."""

    def __init__(self, functions, survive, replace=False):
        super().__init__(functions)
        self.survive = survive
        self.calls = 0
        self.lock = threading.Lock()
        self.replaceable = replace
        self.replaced = False

    def call(self, replica, fn, x, delay):
        if replica == 0 and not self.replaced:
            with self.lock:
                self.calls += 1
                calls = self.calls
            if calls > self.survive:
                self.halt.wait(3 * UNIT)
                raise serving.ReplicaLost("ActorDiedError")
        return super().call(replica, fn, x, delay)

    def replace(self, replica):
        if self.replaceable:
            self.halt.wait(5 * UNIT)  # a new actor starting
            self.replaced = True
        return self.replaceable


class LosingServer(serving.ThreadServer):
    def __init__(self, *args, survive=5, replace=False, **kwargs):
        super().__init__(*args, **kwargs)
        self.survive = survive
        self.replace = replace

    def _replicas(self):
        return _Dying(self.functions, self.survive, self.replace)


SERVICE = cc.runtime.delays.Bimodal(base=1.0, p=0.0, slowdown=1.0)  # 10 ms a task


def schemes():
    return [
        serving.NoRedundancy(),
        serving.Replication(2),
        serving.Hedge(2.0),
        serving.Coded(cc.BACC(3, 4, systematic=True), tau=1.0, max_group_wait=3.0),
        serving.ParM(2, max_group_wait=3.0, parity_f=lambda groups: linear(groups.sum(axis=1))),
    ]


@pytest.mark.parametrize("scheme", schemes(), ids=lambda s: s.name)
def test_a_lost_replica_loses_no_query(scheme):
    arrivals = serving.poisson_arrivals(60, 0.5, 4, SERVICE, rng=3)
    inputs = np.random.default_rng(4).normal(size=(60, 4))
    record = LosingServer(linear, 4, scheme, service=SERVICE, time_unit=UNIT, seed=0).run(arrivals, inputs)
    assert record.errors == []
    counts = record.counts()
    assert counts["failed"] == 0 and sum(counts.values()) == 60  # each query answered once
    assert record.lost_replicas == [0] and record.lost_tasks >= 1
    lost = record.tasks["lost"]
    assert lost.sum() == record.lost_tasks and np.all(record.tasks["replica"][lost] == 0)
    in_flight = lost & ~np.isnan(record.tasks["started"])
    assert in_flight.sum() == 1  # the task running at the loss; those behind it never started
    exact = record.exact
    np.testing.assert_allclose(record.estimates[exact], linear(inputs)[exact], atol=1e-12)
    # decodes: ParM's (exact parity model of a linear f) are f(x); the code's, its own decode of
    # the same result sets, encoded and computed afresh
    reference = linear(inputs) if scheme.name != "coded" else scheme.outputs(record, inputs, linear)[0]
    np.testing.assert_allclose(record.estimates, reference, rtol=1e-10, atol=1e-9)
    seen = record.tasks["started"][in_flight][0] + 3  # the loss is seen then: none picks it again
    after = record.tasks["dispatched"] > seen + 1
    assert not np.any(record.tasks["replica"][after & (record.tasks["role"] == 0)] == 0)
    hit = np.unique(record.tasks["query"][lost & (record.tasks["query"] >= 0)])
    ran = ~lost & ~np.isnan(record.tasks["service"])
    for query in hit:  # answered by its group's decode or by a task of its own that ran
        mine = ran & (record.tasks["query"] == query)
        assert record.outcome[query] == serving.OUTCOMES.index("decoded") or mine.any()
    if scheme.name == "none":  # no other path: every lost query was re-dispatched, once
        assert np.array_equal(np.flatnonzero(record.redispatched), hit)
        assert np.all(record.redispatched[hit] == 1) and np.all(record.outcome[hit] == 0)
    if scheme.name in ("replication", "hedge"):
        assert record.redispatched.sum() == 0  # the copy or the hedge answered
    check_redispatches_are_redundant(record)


def check_redispatches_are_redundant(record):
    """The record's work split, recomputed task by task: a query's first task is its primary
    work (also when it was lost); its re-dispatches, copies, hedges and parities are redundant."""
    tasks = record.tasks
    ran = ~np.isnan(tasks["service"])
    primary = np.zeros(tasks["role"].size, dtype=bool)
    seen = set()
    for task, query in enumerate(tasks["query"]):
        if query >= 0 and query not in seen:
            seen.add(query)
            primary[task] = tasks["role"][task] == 0
    again = (tasks["role"] == 0) & ~primary  # re-dispatched primaries
    assert again.sum() <= record.redispatched.sum()  # a re-dispatch takes its lost task's role
    if record.scheme == "none":  # every task is a primary: the redundant ones are re-dispatches
        assert again.sum() == record.redispatched.sum() > 0
        # the redundant work is the re-dispatches that ran (one lost before it started ran none)
        assert record.redundant_tasks == (again & ran).sum() > 0 and record.extra_load > 0
    redundant = ran & ~primary
    assert record.redundant_tasks == redundant.sum()
    np.testing.assert_allclose(record.redundant_s, tasks["service"][redundant].sum(), rtol=1e-12)
    np.testing.assert_allclose(record.work_s - record.redundant_s, tasks["service"][ran & primary].sum())


def test_a_replaced_replica_serves_again_and_no_query_is_lost():
    arrivals = serving.poisson_arrivals(80, 0.5, 3, SERVICE, rng=6)
    inputs = np.random.default_rng(7).normal(size=(80, 4))
    server = LosingServer(linear, 3, serving.NoRedundancy(), service=SERVICE, time_unit=UNIT, replace=True)
    record = server.run(arrivals, inputs)
    assert record.counts()["failed"] == 0 and sum(record.counts().values()) == 80
    assert record.lost_replicas == [0] and record.replaced == [0]
    np.testing.assert_allclose(record.estimates, linear(inputs), atol=1e-12)
    tasks = record.tasks
    lost_at = np.nanmax(np.where(tasks["lost"], tasks["dispatched"], np.nan))
    served_after = (tasks["replica"] == 0) & ~tasks["lost"] & (tasks["dispatched"] > lost_at)
    assert served_after.any() and np.all(~np.isnan(tasks["service"][served_after]))
    assert np.all(record.outcome == 0)  # no redundancy: own results, the lost ones re-dispatched
    assert np.flatnonzero(record.redispatched).size == np.unique(tasks["query"][tasks["lost"]]).size


def test_a_failing_f_is_not_redispatched():
    def broken(x):
        raise RuntimeError("replica 0 is broken")

    inputs = np.random.default_rng(5).normal(size=(10, 4))
    server = serving.ThreadServer(
        [broken, linear], 2, serving.NoRedundancy(), time_unit=UNIT, seed=0, keep_record=True
    )
    with server:
        futures = [server.submit(x) for x in inputs]
    record = server.record()
    assert record.counts()["failed"] > 0 and record.redispatched.sum() == 0 and record.lost_tasks == 0
    assert sum(f.exception() is not None for f in futures) == record.counts()["failed"]


def test_ray_server_checks_its_arguments_before_starting_ray():
    good = dict(f=linear, num_replicas=2, scheme=serving.NoRedundancy())
    for bad, name in (
        ({"actor_options": [{}]}, "actor_options"),
        ({"actor_options": "node0"}, "actor_options"),
        ({"address": 6379}, "address"),
        ({"num_cpus": 0}, "num_cpus"),
        ({"replace_options": [{}]}, "replace_options"),
        ({"ready_timeout": 0}, "ready_timeout"),
        ({"poll_s": -1.0}, "poll_s"),
    ):
        with pytest.raises(ValueError, match=name):
            serving.RayServer(**good, **bad)
    server = serving.RayServer(**good, actor_options={"num_cpus": 0})
    assert server.actor_options == [{"num_cpus": 0}] * 2 and server.nodes is None
    assert "RayServer(2 replicas" in repr(server)


def test_ray_server_refuses_to_start_ray_outside_the_main_thread(monkeypatch):
    ray = pytest.importorskip("ray")

    def init(*args, **kwargs):
        raise AssertionError("ray.init must not be called outside the main thread")

    monkeypatch.setattr(ray, "is_initialized", lambda: False)
    monkeypatch.setattr(ray, "init", init)
    server = serving.RayServer(linear, 2, serving.NoRedundancy(), address="auto")
    raised = []

    def start():
        try:
            server.start()
        except Exception as err:  # the test reads it
            raised.append(err)

    thread = threading.Thread(target=start, name="lifespan")
    thread.start()
    thread.join(30)
    assert len(raised) == 1 and isinstance(raised[0], RuntimeError), raised
    message = str(raised[0])
    assert "'lifespan'" in message and "main thread" in message and "ray.init()" in message
    assert "address='auto'" in message
    with pytest.raises(RuntimeError, match="running server"):  # nothing was left running
        server.submit(np.zeros(4))
