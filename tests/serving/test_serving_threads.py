"""The thread server (real-time replicas) and the open-loop load generator.

Service times here are 10 ms per clock unit, tiny models, a few hundred queries at most: each
test runs in about a second or two and stops every thread it starts (``close`` joins them).
"""

import concurrent.futures
import math
import threading
import time

import numpy as np
import pytest

import codedcomputing as cc
from codedcomputing import serving

UNIT = 0.01  # seconds per clock unit: a task takes about 10 ms
W = np.random.default_rng(0).normal(size=(4, 3))


def f(x):
    return np.tanh(np.asarray(x) @ W)


def linear(x):
    return np.asarray(x) @ W


@pytest.fixture(autouse=True)
def no_thread_left_behind():
    before = set(threading.enumerate())
    yield
    deadline = time.monotonic() + 30.0  # threads end promptly once closed; generous for a busy machine
    while time.monotonic() < deadline:
        left = [t for t in set(threading.enumerate()) - before if t.is_alive()]
        if not left:
            return
        time.sleep(0.01)
    pytest.fail(f"threads left running: {left}")


def stream(num_queries, utilisation, replicas, service, seed=1):
    arrivals = serving.poisson_arrivals(num_queries, utilisation, replicas, service, rng=seed)
    inputs = np.random.default_rng(seed + 100).normal(size=(num_queries, 4))
    return arrivals, inputs


RARE_HEAVY = cc.runtime.delays.Bimodal(base=1.0, p=0.05, slowdown=10.0)


def test_every_query_is_answered_once_exact_answers_are_f_and_decodes_are_the_codes_decode():
    arrivals, inputs = stream(150, 0.5, 5, RARE_HEAVY)
    scheme = serving.Coded(cc.BACC(4, 5, systematic=True), tau=1.5, max_group_wait=3.0)
    server = serving.ThreadServer(f, 5, scheme, service=RARE_HEAVY, time_unit=UNIT, seed=0)
    record = server.run(arrivals, inputs)
    assert record.errors == []
    assert sum(record.counts().values()) == 150 and record.counts()["failed"] == 0
    assert np.all(np.isfinite(record.answered_at)) and np.all(record.latency >= 0)
    assert record.counts()["decoded"] > 0  # 5% of tasks straggle x10: some queries are decoded
    exact = record.exact
    np.testing.assert_allclose(record.estimates[exact], f(inputs)[exact], rtol=0, atol=1e-12)
    # the independent path: encode afresh, run f, decode each group from the same result sets
    reference, reference_exact = scheme.outputs(record, inputs, f)
    np.testing.assert_allclose(record.estimates, reference, rtol=1e-10, atol=1e-12)
    np.testing.assert_array_equal(exact, reference_exact)
    assert record.master_s["encode"] > 0 and record.master_s["decode"] > 0
    assert record.master_s["frontend"] >= record.master_s["decode"]


def test_submit_resolves_futures_and_close_drains_queries_in_flight():
    service = cc.runtime.delays.Bimodal(base=2.0, p=0.0, slowdown=1.0)  # 20 ms a task
    inputs = np.random.default_rng(3).normal(size=(12, 4))
    with serving.ThreadServer(
        f, 3, serving.NoRedundancy(), service=service, time_unit=UNIT, keep_record=True
    ) as server:
        futures = [server.submit(x) for x in inputs]
        assert not all(future.done() for future in futures)  # 12 tasks of 20 ms on 3 replicas
    # __exit__ closed it: every query in flight was answered first
    answers = [future.result(timeout=0) for future in futures]
    np.testing.assert_allclose(np.stack([a.estimate for a in answers]), f(inputs), atol=1e-12)
    assert all(a.exact and a.outcome == "own" and 0 <= a.replica < 3 for a in answers)
    assert max(a.latency for a in answers) >= 0.06  # the last ones queued behind three tasks
    record = server.record()
    assert record.num_queries == 12 and record.served.sum() == 12
    with pytest.raises(RuntimeError, match="running"):
        server.submit(inputs[0])


def test_a_group_left_open_at_close_is_flushed_and_decoded_or_answered():
    scheme = serving.Coded(cc.BACC(4, 6, systematic=True), tau=0.0)  # infinite group wait
    inputs = np.random.default_rng(4).normal(size=(3, 4))
    with serving.ThreadServer(f, 6, scheme, time_unit=UNIT, keep_record=True) as server:
        futures = [server.submit(x) for x in inputs]
    assert all(future.done() for future in futures)
    assert server.record().counts()["failed"] == 0


def broken(kind):
    def g(x):
        if kind == "raise":
            raise RuntimeError("replica 0 is broken")
        if kind == "nan":
            return np.full((x.shape[0], 3), np.nan)
        return np.zeros((x.shape[0] + 1, 3))  # one row too many

    return g


@pytest.mark.parametrize("kind", ["raise", "nan", "shape"])
def test_a_failing_replica_is_a_straggler_other_paths_answer_and_none_fails_cleanly(kind):
    arrivals, inputs = stream(40, 0.4, 4, RARE_HEAVY, seed=5)
    functions = [broken(kind), f, f, f]
    for scheme in (
        serving.Replication(2),
        serving.Hedge(2.0),
        serving.Coded(cc.BACC(3, 5, systematic=True), tau=2.0, max_group_wait=3.0),
    ):
        record = serving.ThreadServer(functions, 4, scheme, time_unit=UNIT, seed=2).run(arrivals, inputs)
        assert record.counts()["failed"] == 0, scheme
        assert record.failed_tasks > 0 and record.errors == []
        exact = record.exact
        np.testing.assert_allclose(record.estimates[exact], f(inputs)[exact], atol=1e-12)
    server = serving.ThreadServer(functions, 4, serving.NoRedundancy(), time_unit=UNIT, seed=2)
    with server:
        futures = [server.submit(x) for x in inputs[:20]]
    failed = [future for future in futures if future.exception() is not None]
    assert failed and len(failed) < 20  # replica 0's queries fail, the others are answered
    assert all(isinstance(future.exception(), serving.QueryFailed) for future in failed)
    assert "replica 0" in str(failed[0].exception()) or kind != "raise"
    for future, x in zip(futures, inputs[:20], strict=True):
        if future.exception() is None:
            np.testing.assert_allclose(future.result().estimate, f(x[None])[0], atol=1e-12)


def test_parm_answers_a_missing_query_from_its_parity_model_live():
    # a linear f with the exact parity model F_P(x_1 + ... + x_k) = f(sum): decodes are exact
    service = cc.runtime.delays.Bimodal(base=1.0, p=0.15, slowdown=12.0)
    arrivals, inputs = stream(80, 0.4, 5, service, seed=6)
    scheme = serving.ParM(3, max_group_wait=4.0, parity_f=lambda groups: linear(groups.sum(axis=1)))
    record = serving.ThreadServer(linear, 5, scheme, service=service, time_unit=UNIT, seed=1).run(
        arrivals, inputs
    )
    assert record.counts()["decoded"] > 0 and record.counts()["failed"] == 0
    np.testing.assert_allclose(record.estimates, linear(inputs), atol=1e-9)
    assert not np.any(record.exact[record.outcome == serving.OUTCOMES.index("decoded")])


def test_the_thread_server_ranks_schemes_as_the_simulated_server_does():
    """Rare heavy stragglers at 40% load on 5 replicas: the coded scheme's and the hedge's p99
    beat no redundancy's by far on both servers (p99: none ~10, coded ~3 units). Tolerance:
    the thread p50 within 30% of the simulated p50 plus 0.2 units (f, threads and a noisy
    shared machine add real time)."""
    arrivals, inputs = stream(200, 0.4, 5, RARE_HEAVY, seed=7)
    schemes = {
        "none": serving.NoRedundancy(),
        "coded": serving.Coded(cc.BACC(4, 5, systematic=True), tau=1.5, max_group_wait=3.0),
    }
    simulated = serving.SimulatedServer(5, RARE_HEAVY, seed=3)
    p50, p99 = {}, {}
    for name, scheme in schemes.items():
        sim = simulated.run(scheme, arrivals)
        live = serving.ThreadServer(f, 5, scheme, service=RARE_HEAVY, time_unit=UNIT, seed=3).run(
            arrivals, inputs
        )
        p50[name] = (sim.percentile(50), live.percentile(50))
        p99[name] = (sim.percentile(99), live.percentile(99))
        assert abs(live.percentile(50) - sim.percentile(50)) <= 0.3 * sim.percentile(50) + 0.2, (name, p50)
    for backend in (0, 1):
        assert p99["coded"][backend] < 0.6 * p99["none"][backend], p99


def test_bad_arguments_raise_value_errors_naming_them():
    scheme = serving.NoRedundancy()
    with pytest.raises(ValueError, match="f must"):
        serving.ThreadServer("model", 2, scheme)
    with pytest.raises(ValueError, match="f must"):
        serving.ThreadServer([f], 2, scheme)
    with pytest.raises(ValueError, match="num_replicas"):
        serving.ThreadServer(f, 0, scheme)
    with pytest.raises(ValueError, match="scheme"):
        serving.ThreadServer(f, 2, "none")
    with pytest.raises(ValueError, match="time_unit"):
        serving.ThreadServer(f, 2, scheme, time_unit=0.0)
    with pytest.raises(ValueError, match="service"):
        serving.ThreadServer(f, 2, scheme, service=0.01)
    with pytest.raises(ValueError, match="parity_f"):
        serving.ThreadServer(f, 2, serving.ParM(2))
    with pytest.raises(ValueError, match="hedge needs num_replicas"):
        serving.ThreadServer(f, 1, serving.Hedge(1.0))
    server = serving.ThreadServer(f, 2, scheme)
    with pytest.raises(RuntimeError, match="start it"):
        server.submit(np.zeros(4))
    with pytest.raises(ValueError, match="inputs must have one row per arrival"):
        server.run([0.0, 1.0], np.zeros((3, 4)))
    with server:
        with pytest.raises(ValueError, match="x contains NaN"):
            server.submit(np.array([0.0, np.nan, 0.0, 0.0]))
        with pytest.raises(ValueError, match="x must be a numeric"):
            server.submit(["a", "b"])
        assert server.submit(np.zeros(4)).result(timeout=5).exact
        with pytest.raises(ValueError, match="x must have shape"):
            server.submit(np.zeros(5))
    with pytest.raises(RuntimeError, match="starts once"):
        server.start()


def test_bursty_arrivals_keep_the_stated_rate_and_are_burstier_than_poisson():
    service = cc.runtime.delays.Bimodal(base=1.0, p=0.0, slowdown=1.0)  # mean service 1
    bursty = serving.bursty_arrivals(200_000, 0.5, 4, service, rng=0, burst_ratio=5.0, burst_fraction=0.2)
    poisson = serving.poisson_arrivals(200_000, 0.5, 4, service, rng=0)
    assert np.all(np.diff(bursty) >= 0)
    assert bursty.size / bursty[-1] == pytest.approx(2.0, rel=0.05)  # 0.5 x 4 replicas / 1

    # index of dispersion of counts in windows of 20 units: 1 for Poisson, far above for MMPP-2
    def dispersion(times):
        counts = np.bincount((times // 20.0).astype(np.int64))[:-1]
        return counts.var() / counts.mean()

    assert dispersion(poisson) == pytest.approx(1.0, abs=0.15)
    assert dispersion(bursty) > 5.0
    again = serving.bursty_arrivals(100, 0.5, 4, service, rng=0, burst_ratio=5.0, burst_fraction=0.2)
    np.testing.assert_array_equal(again, bursty[:100])  # seeded
    for bad, name in (
        ({"burst_ratio": 0.5}, "burst_ratio"),
        ({"burst_fraction": 1.0}, "burst_fraction"),
        ({"burst_fraction": 0.0}, "burst_fraction"),
        ({"mean_burst": -1.0}, "mean_burst"),
    ):
        with pytest.raises(ValueError, match=name):
            serving.bursty_arrivals(10, 0.5, 4, service, rng=0, **bad)


def test_the_driver_is_open_loop_submitting_on_time_behind_a_slow_server():
    def slow(x):
        time.sleep(0.03)
        return f(x)

    arrivals = np.arange(20) * 1.0  # one query every 10 ms, into a server that needs 30 ms each
    inputs = np.random.default_rng(8).normal(size=(20, 4))
    record = serving.ThreadServer(slow, 1, serving.NoRedundancy(), time_unit=UNIT).run(arrivals, inputs)
    assert np.all(record.arrival >= arrivals)
    assert np.median(record.arrival - arrivals) < 0.5  # on time (within 5 ms), not after answers
    assert record.latency[-1] > 20.0  # the queue grew: the driver did not wait for answers
    assert math.isclose(record.counts()["own"], 20)


def test_interference_starts_pinned_busy_processes_and_stops_them():
    if not serving.can_pin():
        with pytest.raises(ValueError, match="cores"):
            serving.Interference(cores={0})
        return
    import os

    core = min(os.sched_getaffinity(0))
    interference = serving.Interference(cores={core}, processes=2, load=0.5)
    with interference:
        assert interference.running
        pids = [child.pid for child in interference._children]
        assert all(os.sched_getaffinity(pid) == {core} for pid in pids)
        # a replica pinned to the same core serves as usual (slower, never wrong)
        server = serving.ThreadServer(f, 2, serving.NoRedundancy(), time_unit=UNIT, affinity=[{core}, None])
        with server:
            futures = [server.submit(x) for x in np.eye(4)]
        np.testing.assert_allclose(
            np.stack([fu.result().estimate for fu in futures]), f(np.eye(4)), atol=1e-12
        )
    assert not interference.running and interference._children == []
    for bad, name in (
        ({"cores": {10**6}}, "cores"),
        ({"processes": 0}, "processes"),
        ({"load": 0.0}, "load"),
    ):
        with pytest.raises(ValueError, match=name):
            serving.Interference(**bad)
    with pytest.raises(ValueError, match="affinity"):
        serving.ThreadServer(f, 2, serving.NoRedundancy(), affinity=[{core}])


def test_close_with_a_timeout_fails_the_queries_a_hung_replica_holds():
    release = threading.Event()

    def hangs(x):
        release.wait(60)
        return f(x)

    # output_shape declared: nothing is probed (a probe of ``hangs`` would hold the first submit)
    server = serving.ThreadServer(
        [hangs, f], 2, serving.NoRedundancy(), balancer="jsq", seed=0, output_shape=(3,), keep_record=True
    ).start()
    try:
        futures = [server.submit(x) for x in np.eye(4)[:2]]  # jsq: one query on each replica
        done, _ = concurrent.futures.wait(futures, timeout=60, return_when="FIRST_COMPLETED")
        assert len(done) == 1  # the healthy replica's
        with pytest.warns(RuntimeWarning, match="abandoned .*replica-0"):
            server.close(timeout=0.05)
    finally:
        release.set()
    outcomes = sorted(type(future.exception()).__name__ for future in futures)
    assert outcomes == ["NoneType", "QueryFailed"]
    assert "closed" in str(next(fu.exception() for fu in futures if fu.exception() is not None))
    assert server.record().counts()["failed"] == 1


def test_a_server_closed_without_queries_records_an_empty_run():
    server = serving.ThreadServer(
        f, 2, serving.Coded(cc.BACC(2, 3, systematic=True), tau=1.0), keep_record=True
    ).start()
    server.close()
    record = server.record()
    assert record.num_queries == 0 and record.counts()["own"] == 0 and record.failed_tasks == 0
