"""The server on Ray actor replicas, and a node lost mid-stream.

One ``ray.cluster_utils.Cluster`` for the module (127.0.0.1, a head and a worker node of 1 CPU
each, fast health checks, custom resources ``node0``/``node1`` to place replicas; actors take no
CPU); every scheme serves a short stream on replicas spread over both nodes; then, per loss
test, a third node holding two of four replicas is removed (its processes killed, as in a
crash) while queries stream: no query is lost, the ones it held are decoded or re-dispatched.
Everything started here is stopped at the end, also on failure.
"""

from __future__ import annotations

import os
import sys
import threading
import time

import numpy as np
import pytest

import codedcomputing as cc
from codedcomputing import serving
from codedcomputing.serving.server import _RUNNING as RUNNING

pytestmark = pytest.mark.slow

UNIT = 0.02  # seconds per clock unit: a task sleeps 20 ms, then runs f
W = np.random.default_rng(0).normal(size=(4, 3))
FAST_HEALTH_CHECKS = {  # a lost node is noticed within ~2 s, not ~30 s
    "health_check_initial_delay_ms": 0,
    "health_check_period_ms": 500,
    "health_check_timeout_ms": 500,
    "health_check_failure_threshold": 3,
}
SERVICE = cc.runtime.delays.Bimodal(base=1.0, p=0.0, slowdown=1.0)
RARE_HEAVY = cc.runtime.delays.Bimodal(base=1.0, p=0.05, slowdown=10.0)


def linear(x):
    return np.asarray(x) @ W


def parity_f(groups):
    return linear(groups.sum(axis=1))


@pytest.fixture(scope="module")
def cluster():
    """``(cluster, {resource: node id})``: a head and one worker node, this driver joined."""
    ray = pytest.importorskip("ray")
    from ray._private import ray_constants
    from ray.cluster_utils import Cluster

    module = sys.modules[__name__]
    with pytest.MonkeyPatch.context() as patch:
        # ray.init turns a loopback address into this machine's outward IP, where nothing
        # listens (every node binds 127.0.0.1), unless it takes the machine for a single node
        patch.setattr(ray_constants, "ENABLE_RAY_CLUSTER", False)
        if ray.is_initialized():
            ray.shutdown()
        cluster = Cluster(
            initialize_head=True,
            head_node_args={
                "num_cpus": 1,
                "resources": {"node0": 100},
                "node_ip_address": "127.0.0.1",
                "include_dashboard": False,
                "_system_config": FAST_HEALTH_CHECKS,
            },
        )
        registered = False
        try:
            cluster.add_node(num_cpus=1, resources={"node1": 100}, node_ip_address="127.0.0.1")
            cluster.wait_for_nodes(timeout=120)
            ray.init(address=cluster.address, log_to_driver=False, configure_logging=False)
            ray.cloudpickle.register_pickle_by_value(module)  # tests/ is not importable there
            registered = True
            yield cluster
        finally:
            if registered:
                ray.cloudpickle.unregister_pickle_by_value(module)
            if ray.is_initialized():
                ray.shutdown()
            cluster.shutdown()


def on(resource: str) -> dict:
    return {"num_cpus": 0, "resources": {resource: 1}}


def schemes():
    return [
        serving.NoRedundancy(),
        serving.Replication(2),
        serving.Hedge(2.0),
        serving.Coded(cc.BACC(2, 3, systematic=True), tau=2.0, max_group_wait=3.0),
        serving.ParM(2, max_group_wait=3.0, parity_f=parity_f),
    ]


def test_every_scheme_answers_every_query_once_on_ray_actors(cluster):
    arrivals = serving.poisson_arrivals(30, 0.5, 3, RARE_HEAVY, rng=1)
    inputs = np.random.default_rng(2).normal(size=(30, 4))
    for scheme in schemes():
        r = 3 if scheme.name in ("coded", "parm") else 2  # fewer actors to start: a faster test
        placement = [on("node0"), on("node1"), on("node0")][:r]
        server = serving.RayServer(
            linear, r, scheme, actor_options=placement, service=RARE_HEAVY, time_unit=UNIT, seed=0
        )
        record = server.run(arrivals, inputs, timeout=60)
        assert record.errors == [], scheme
        counts = record.counts()
        assert counts["failed"] == 0 and sum(counts.values()) == 30, (scheme, counts)
        assert len(set(server.nodes)) == 2 and server.nodes[0] != server.nodes[1]
        assert r == 2 or server.nodes[2] == server.nodes[0]
        exact = record.exact
        np.testing.assert_allclose(record.estimates[exact], linear(inputs)[exact], atol=1e-12)
        if scheme.name == "coded":  # decodes: the code's decode of the same results, recomputed
            np.testing.assert_allclose(record.estimates, scheme.outputs(record, inputs, linear)[0], atol=1e-9)
        else:  # ParM's parity model is exact for a linear f
            np.testing.assert_allclose(record.estimates, linear(inputs), atol=1e-9)
        assert record.lost_tasks == 0 and record.redispatched.sum() == 0


class Counted:
    """``linear`` that counts how many times the driver pickled it."""

    pickled = 0

    def __call__(self, x):
        return linear(x)

    def __getstate__(self):
        Counted.pickled += 1
        return {}


def test_a_server_joins_a_running_cluster_by_address_and_ships_the_model_once(cluster):
    import ray

    ray.shutdown()  # this driver leaves; the server joins by address and leaves at close
    try:
        model = Counted()
        server = serving.RayServer(model, 3, serving.NoRedundancy(), address=cluster.address, time_unit=UNIT)
        inputs = np.random.default_rng(5).normal(size=(8, 4))
        with server:
            assert ray.is_initialized() and Counted.pickled == 1  # one copy for three replicas
            futures = [server.submit(x) for x in inputs]
        assert not ray.is_initialized()
        np.testing.assert_allclose(
            np.stack([f.result().estimate for f in futures]), linear(inputs), atol=1e-12
        )
        assert Counted.pickled == 1
    finally:
        if not ray.is_initialized():
            ray.init(address=cluster.address, log_to_driver=False, configure_logging=False)


def _unpickle_parity(marker: str):
    try:  # the first unpickle, on whichever actor (atomic: two actors may unpickle at once): it fails
        os.close(os.open(marker, os.O_CREAT | os.O_EXCL | os.O_WRONLY))
    except FileExistsError:
        return ParityOnce(marker)
    raise RuntimeError("the parity function failed to unpickle")


class ParityOnce:
    """``parity_f`` whose first unpickle anywhere fails (``marker``: a file, made then)."""

    def __init__(self, marker: str):
        self.marker = marker

    def __call__(self, groups):
        return parity_f(groups)

    def __reduce__(self):
        return _unpickle_parity, (self.marker,)


def test_parm_ships_its_parity_function_once_per_actor(cluster, tmp_path):
    import ray

    scheme = serving.ParM(2, max_group_wait=3.0, parity_f=ParityOnce(str(tmp_path / "unpickled")))
    server = serving.RayServer(
        linear, 3, scheme, actor_options=on("node0"), time_unit=UNIT, cancel=False, seed=0, keep_record=True
    )  # no cancel: every parity task runs
    inputs = np.random.default_rng(6).normal(size=(30, 4))
    with server:
        futures = [server.submit(x) for x in inputs]
        for future in futures:
            future.result(60)
        shipped = ray.get([actor.shipped.remote() for actor in server._run.backend.actors], timeout=60)
    record = server.record()
    parity = record.tasks["role"] == 3
    ran = parity & ~np.isnan(record.tasks["service"])
    per_actor = np.bincount(record.tasks["replica"][ran], minlength=3)
    assert per_actor.sum() >= 10 and per_actor.max() >= 2  # 15 groups; actors ran several parities
    # one parity task failed (its function did not unpickle): the next one on that actor brought
    # it again; otherwise the function crossed once to each actor that ran a parity task
    assert record.failed_tasks == 1
    assert all(s == int(n > 0) or (s == 0 and n == 1) for s, n in zip(shipped, per_actor, strict=True))
    assert sum(shipped) >= np.count_nonzero(per_actor) - 1, (shipped, per_actor)
    np.testing.assert_allclose(np.stack([f.result().estimate for f in futures]), linear(inputs), atol=1e-9)


@pytest.mark.parametrize(
    "scheme",
    [serving.NoRedundancy(), serving.Coded(cc.BACC(3, 4, systematic=True), tau=3.0, max_group_wait=3.0)],
    ids=lambda s: s.name,
)
def test_a_node_lost_mid_stream_loses_no_query(cluster, scheme):
    doomed = cluster.add_node(num_cpus=1, resources={"doomed": 100}, node_ip_address="127.0.0.1")
    cluster.wait_for_nodes(timeout=120)
    placement = [on("doomed"), on("doomed"), on("node0"), on("node1")]
    arrivals = serving.poisson_arrivals(150, 0.3, 4, SERVICE, rng=3)  # about 2.5 s of queries
    inputs = np.random.default_rng(4).normal(size=(150, 4))
    replace = scheme.name == "none"  # with no redundancy, the lost replicas are also replaced
    server = serving.RayServer(
        linear,
        4,
        scheme,
        actor_options=placement,
        service=SERVICE,
        time_unit=UNIT,
        replace=replace,
        replace_options=on("node0"),
        keep_record=True,
    )
    server.start(last_query=149)

    def remove():
        # once a query's task runs on a doomed replica (so one is in flight when the node goes;
        # a fixed time could fall between tasks), at the latest after 20 s
        time.sleep(0.5)
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline:
            run = server._run  # the live run's task table (internal: the test needs its timing)
            with run.lock:
                states = [(run.t_state[t], run.t_replica[t], run.t_query[t]) for t in list(run.t_state)]
            if any(state == RUNNING and replica < 2 and query >= 0 for state, replica, query in states):
                break
            time.sleep(0.002)
        cluster.remove_node(doomed, allow_graceful=False)

    remover = threading.Thread(target=remove, daemon=True)
    remover.start()
    survivor = server.nodes[2]
    try:
        futures = serving.drive(server, arrivals, inputs)
        if replace:  # wait for the replacements (on node0), then send queries their way too
            deadline = time.monotonic() + 60
            while server.nodes[:2] != [survivor] * 2 and time.monotonic() < deadline:
                time.sleep(0.1)
            futures += [server.submit(x) for x in inputs[:20]]
    finally:
        server.close(timeout=60)
    remover.join(60)
    record = server.record()
    assert record.errors == []
    counts = record.counts()
    total = 170 if replace else 150
    assert counts["failed"] == 0 and sum(counts.values()) == total, counts
    assert all(future.exception() is None for future in futures)
    assert sorted(record.lost_replicas) == [0, 1]
    lost = record.tasks["lost"]
    in_flight = lost & ~np.isnan(record.tasks["started"]) & (record.tasks["query"] >= 0)
    assert in_flight.any()  # queries were running on the node when it went
    hit = np.unique(record.tasks["query"][lost & (record.tasks["query"] >= 0)])
    decoded = record.outcome[hit] == serving.OUTCOMES.index("decoded")
    redispatched = record.redispatched[hit] > 0
    assert np.all(decoded | redispatched)  # every query on the lost node: decoded or sent again
    if scheme.name == "none":
        assert np.all(redispatched)
        # with no redundancy the only redundant tasks are the re-dispatches that ran: at least
        # one per re-dispatched query, and none for a re-dispatch lost before it started
        redone = record.redispatched
        assert (redone > 0).sum() <= record.redundant_tasks <= redone.sum() and record.extra_load > 0
        assert sorted(record.replaced) == [0, 1] and server.nodes[:2] == [survivor] * 2
        late = record.tasks["query"] >= 150  # sent after the replacements were up
        assert np.isin(record.tasks["replica"][late], [0, 1]).any()  # the new actors serve
        assert not record.tasks["lost"][late].any()
    else:
        assert record.replaced == []
    exact = record.exact
    sent = np.concatenate([inputs, inputs[:20]]) if replace else inputs
    np.testing.assert_allclose(record.estimates[exact], linear(sent)[exact], atol=1e-12)
    if scheme.name == "coded":
        np.testing.assert_allclose(record.estimates, scheme.outputs(record, inputs, linear)[0], atol=1e-9)
