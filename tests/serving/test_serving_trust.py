"""What a served answer can be trusted for: validated results, a probed output spec, ParM's
``f(0)`` off the frontend, per-query deadlines, a bounded close, a pure record, and
constructors that name the parameter they reject.

Each case here was a measured failure of the serving engine (a wrong-shaped answer marked
exact, a NaN decode, a query that never ended, a close that waited for a hung replica).
No test here depends on how fast the machine is: delays only order events, and every wait
has a generous bound.
"""

from __future__ import annotations

import concurrent.futures
import math
import threading
import time

import numpy as np
import pytest

import codedcomputing as cc
from codedcomputing import serving

W = np.random.default_rng(0).normal(size=(4, 10))
WAIT_S = 60.0  # a bound on waits that a busy machine never reaches


def f(x):
    return np.tanh(np.asarray(x, dtype=np.float64) @ W)


def queries(n: int) -> np.ndarray:
    return np.random.default_rng(1).normal(size=(n, 4))


def answers_of(futures):
    return [future.result(timeout=WAIT_S) for future in futures]


def misshaped(x):
    return f(x)[:, :5]  # (1, 5) where the model gives (1, 10)


def strings(x):
    return np.array([[f"v{j}" for j in range(10)]] * len(x))


def booleans(x):
    return f(x) > 0  # numeric-looking, but not a number


@pytest.mark.parametrize("faulty", [misshaped, strings, booleans], ids=lambda g: g.__name__)
def test_a_faulty_replica_never_answers_and_never_sets_the_shape(faulty):
    # Replica 0 answers at once, wrongly; replicas 1 and 2 answer correctly. Every query goes to
    # all three (replication), so replica 0's result is usually the first in. Once it set the
    # expected shape, and correct results then failed; a string or boolean row of the right
    # shape was an exact answer.
    def later(x):  # correct, after replica 0's result is in (an ordering, not a timing)
        time.sleep(0.01)
        return f(x)

    server = serving.ThreadServer(
        [faulty, later, later], 3, serving.Replication(copies=3), seed=0, keep_record=True
    )
    X = queries(30)
    with server:
        got = answers_of([server.submit(x) for x in X])
    for x, answer in zip(X, got, strict=True):
        assert answer.exact and answer.outcome in ("own", "replica") and answer.replica != 0
        assert answer.estimate.shape == (10,) and answer.estimate.dtype.kind == "f"
        np.testing.assert_array_equal(answer.estimate, f(x[None])[0])
    record = server.record()
    assert not record.failed.any()


def test_the_probe_outvotes_a_replica_that_is_wrong_from_its_first_call():
    calls = []

    def wrong_first(x):  # replica 0's first call (the probe) is mis-shaped, later ones right
        calls.append(len(calls))
        return misshaped(x) if len(calls) == 1 else f(x)

    server = serving.ThreadServer([wrong_first, f, f], 3, serving.NoRedundancy(), seed=0)
    X = queries(12)
    with server:
        got = answers_of([server.submit(x) for x in X])
    assert calls[0] == 0  # replica 0 was probed
    assert all(a.estimate.shape == (10,) for a in got)
    np.testing.assert_allclose([a.estimate for a in got], f(X))


def test_a_declared_output_shape_rejects_other_results():
    server = serving.ThreadServer(f, 1, serving.NoRedundancy(), output_shape=(10,))
    with server:
        assert server.submit(queries(1)[0]).result(timeout=WAIT_S).estimate.shape == (10,)
    declared_wrong = serving.ThreadServer(f, 1, serving.NoRedundancy(), output_shape=(9,))
    with declared_wrong:
        future = declared_wrong.submit(queries(1)[0])
        with pytest.raises(serving.QueryFailed, match=r"shape \(10,\), expected \(9,\)"):
            future.result(timeout=WAIT_S)


def test_a_model_whose_probe_is_unusable_is_refused_at_the_first_submit():
    def nan_model(x):
        return np.full((len(x), 3), np.nan)

    with serving.ThreadServer(nan_model, 2, serving.NoRedundancy()) as server:
        with pytest.raises(ValueError, match=r"probe input .*NaN or inf"):
            server.submit(np.ones(4))
    with pytest.raises(ValueError, match="output_shape"):
        serving.ThreadServer(f, 1, serving.NoRedundancy(), output_shape=(-1,))


def _parity_sum(groups):
    """An exact 'parity model' for a sum parity: f_P(P) = sum_i f(x_i) over the group."""
    groups = np.asarray(groups, dtype=np.float64)
    return np.stack([f(group).sum(axis=0) for group in groups])


def test_parm_fills_a_short_group_with_a_validated_f0_computed_off_the_frontend():
    # Replica 0 gives NaN; the others answer a non-zero input only after a release, so the
    # single query of a short group (k = 2, the wait closes it) is answered by its decode:
    # F(x) = F_P([x, 0]) - f(0). Once f(0) came from replica 0 on the frontend thread: NaN.
    release = threading.Event()
    zero_threads = []

    def nan_replica(x):
        return np.full((len(x), 10), np.nan)

    def held(x):
        if not np.any(x):
            zero_threads.append(threading.current_thread().name)
        else:
            release.wait(WAIT_S)
        return f(x)

    scheme = serving.ParM(2, max_group_wait=1.0, parity_f=_parity_sum)
    server = serving.ThreadServer([nan_replica, held, held], 3, scheme, time_unit=0.01, seed=0)
    x = queries(1)[0]
    try:
        with server:
            answer = server.submit(x).result(timeout=WAIT_S)
            release.set()
    finally:
        release.set()
    assert answer.outcome == "decoded" and not answer.exact
    np.testing.assert_allclose(answer.estimate, f(x[None])[0], rtol=1e-6, atol=1e-6)
    assert zero_threads and "serving-frontend" not in zero_threads


def test_a_query_past_its_deadline_fails_with_query_timeout_naming_its_tasks():
    release = threading.Event()

    def hung(x):
        release.wait(WAIT_S)
        return f(x)

    # No redundancy, one hung replica: the query once got neither an answer nor an error.
    server = serving.ThreadServer(
        hung,
        1,
        serving.NoRedundancy(),
        time_unit=0.01,
        query_timeout=5.0,
        output_shape=(10,),
        keep_record=True,
    )
    server.start()
    try:
        future = server.submit(queries(1)[0])
        error = future.exception(timeout=WAIT_S)
        assert isinstance(error, serving.QueryTimeout) and isinstance(error, serving.QueryFailed)
        message = str(error)
        assert message.startswith("query 0: not answered within query_timeout=5 units")
        assert "task 0 (primary) on replica 0: running" in message
        with pytest.warns(RuntimeWarning, match="replica-0"):
            server.close(timeout=0.05)  # returns though the replica is still inside f
    finally:
        release.set()
    record = server.record()
    assert record.failed.tolist() == [True] and record.counts()["failed"] == 1


def test_a_query_answered_in_time_is_not_failed_by_its_deadline():
    server = serving.ThreadServer(f, 2, serving.NoRedundancy(), time_unit=0.01, query_timeout=math.inf)
    with server:
        got = answers_of([server.submit(x) for x in queries(5)])
    assert all(a.exact for a in got)
    for bad in (0, -1.0, math.nan, "1"):
        with pytest.raises(ValueError, match="query_timeout"):
            serving.ThreadServer(f, 1, serving.NoRedundancy(), query_timeout=bad)


def test_record_is_pure():
    def fails_odd(x):
        if np.asarray(x)[0, 0] > 0:
            raise ValueError("no")
        return f(x)

    server = serving.ThreadServer(fails_odd, 2, serving.NoRedundancy(), output_shape=(10,), keep_record=True)
    X = queries(10)
    with server:
        futures = [server.submit(x) for x in X]
        concurrent.futures.wait(futures, timeout=WAIT_S)
    first, second = server.record(), server.record()
    assert first.failed.any() and not first.failed.all()
    np.testing.assert_array_equal(first.failed, second.failed)
    np.testing.assert_array_equal(first.outcome, second.outcome)
    np.testing.assert_array_equal(first.arrival, second.arrival)
    np.testing.assert_array_equal(first.mean_load, second.mean_load)
    assert first.counts() == second.counts()


@pytest.mark.parametrize(
    ("build", "match"),
    [
        (
            lambda: serving.make_scheme("none", copies=2),
            r"'none' has no option 'copies' \(it takes no options\)",
        ),
        (lambda: serving.make_scheme("hedge", dely=1.0), r"no option 'dely' \(it takes delay\)"),
        (lambda: serving.Coded(cc.GCC(4, 4, systematic=True), tau=1.0), "at least one parity"),
        (
            lambda: serving.ThreadServer(f, 2, serving.Coded(cc.GCC(4, 6, systematic=True), tau=1.0)),
            r"num_replicas >= 3.*got 2",
        ),
        (
            lambda: serving.SimulatedServer(2, cc.runtime.delays.Bimodal()).run(
                serving.Coded(cc.BACC(4, 6, systematic=True), tau=1.0), np.arange(4.0)
            ),
            "num_replicas >= 3",
        ),
        (lambda: serving.ThreadServer(f, 1, serving.ParM(2, parity_f=_parity_sum)), "num_replicas >= 2"),
    ],
)
def test_constructors_name_what_they_reject(build, match):
    with pytest.raises(ValueError, match=match):
        build()


# --- queue-aware decoding -------------------------------------------------------------------

BURST_SERVICE = cc.runtime.delays.Bimodal(base=1.0, p=0.0, slowdown=10.0)  # no straggler at all


@pytest.mark.parametrize(("rule", "decoded_at_least"), [("straggling", 0), ("group", 40)])
def test_a_burst_without_stragglers_is_answered_by_its_own_tasks(rule, decoded_at_least):
    # 64 queries at once on 4 replicas with a 4 + 2 code (``coded serve``'s defaults): they
    # queue 16 deep. The group rule (decode tau after the group's close) decoded 47 of them;
    # the straggling rule decodes a query only when its own task runs late, or waits behind
    # one that does, so a queue alone decodes nothing.
    server = serving.SimulatedServer(4, BURST_SERVICE, seed=0)
    scheme = serving.Coded(cc.BACC(4, 6, systematic=True), tau=1.5, rule=rule)
    counts = server.run(scheme, np.zeros(64)).counts()
    if rule == "straggling":
        assert counts["own"] == 64 and counts["decoded"] == 0
    else:
        assert counts["decoded"] >= decoded_at_least


def test_a_straggling_task_is_decoded_once_it_is_late_and_the_parities_had_their_time():
    # Four queries at 0 on six replicas (jsq: one task each, the two parities on the others),
    # every task 1 unit but query 0's, 10: query 0 is decoded at max(start + tau, close + tau)
    # = 1.5, the others answer themselves at 1.
    def run(latencies):
        server = serving.SimulatedServer(6, cc.runtime.delays.Trace(latencies), balancer="jsq", seed=0)
        return server.run(serving.Coded(cc.BACC(4, 6, systematic=True), tau=1.5), np.zeros(4))

    latencies = np.ones((2, 6))
    placed = run(latencies).tasks
    latencies[0, placed["replica"][placed["query"] == 0][0]] = 10.0  # the same placement again
    record = run(latencies)
    decoded = record.outcome == serving.OUTCOMES.index("decoded")
    assert decoded.tolist() == [True, False, False, False]
    assert record.answered_at.tolist() == pytest.approx([1.5, 1.0, 1.0, 1.0])


def test_the_rule_is_named_and_checked():
    code = cc.BACC(4, 6, systematic=True)
    assert serving.Coded(code, tau=1.0).rule == "straggling"
    with pytest.raises(ValueError, match="rule must be one of"):
        serving.Coded(code, tau=1.0, rule="sometimes")


# --- bounded state --------------------------------------------------------------------------


def _settled(server, timeout_s: float = WAIT_S) -> dict:
    """The server's stats once it holds no task (the last parities may still run)."""
    deadline = time.monotonic() + timeout_s
    while server.stats()["in_flight"]["tasks"] and time.monotonic() < deadline:
        time.sleep(0.01)
    return server.stats()


def test_a_running_server_holds_only_the_queries_in_flight():
    scheme = serving.Coded(cc.BACC(4, 6, systematic=True), tau=1.5, max_group_wait=2.0)
    server = serving.ThreadServer(f, 6, scheme, time_unit=0.01, seed=0)
    X = queries(40)
    with server:
        got = answers_of([server.submit(x) for x in X])
        stats = _settled(server)
        assert stats["in_flight"] == {"queries": 0, "tasks": 0}
        assert not scheme.members and not scheme.group_of  # the groups are dropped too
    assert sum(stats["queries"].values()) == 40 and stats["queries"]["failed"] == 0
    assert stats["tasks"] >= 40
    latency_counts = sum(sum(counts) for counts in stats["latency_counts"].values())
    assert latency_counts == 40 and len(stats["latency_buckets_s"]) == 25
    exact = [(a, x) for a, x in zip(got, X, strict=True) if a.exact]
    assert exact and all(np.array_equal(a.estimate, f(x[None])[0]) for a, x in exact)
    with pytest.raises(RuntimeError, match="keep_record=True"):
        server.record()


def test_keep_record_keeps_the_latest_queries_only():
    server = serving.ThreadServer(f, 2, serving.NoRedundancy(), keep_record=10)
    with server:
        for x in queries(30):
            server.submit(x).result(timeout=WAIT_S)  # one at a time: retired in submit order
    record = server.record()
    assert record.num_queries == 10 and np.all(np.diff(record.arrival) > 0)
    assert record.counts()["own"] == 10
    everything = serving.ThreadServer(f, 2, serving.NoRedundancy(), keep_record=True)
    with everything:
        answers_of([everything.submit(x) for x in queries(30)])
    assert everything.record().num_queries == 30
    for bad in (0, -1, 2.5, "all"):
        with pytest.raises(ValueError, match="keep_record"):
            serving.ThreadServer(f, 1, serving.NoRedundancy(), keep_record=bad)


def _rss_mb() -> float:
    with open("/proc/self/statm") as handle:
        return int(handle.read().split()[1]) * 4096 / 2**20


@pytest.mark.slow
@pytest.mark.parametrize("name", ["none", "coded"])
def test_a_long_stream_is_served_in_bounded_memory(name):
    # 60,000 queries after a 10,000-query warm-up (benchmarks/perf/soak_serving.py runs 1M):
    # the server once kept every query's input, future and answer (+61 MB per 25,000 queries).
    scheme = (
        serving.NoRedundancy()
        if name == "none"
        else serving.Coded(cc.BACC(4, 6, systematic=True), tau=50.0, max_group_wait=5.0)
    )
    X = np.random.default_rng(2).normal(size=(256, 4))
    with serving.ThreadServer(f, 4, scheme, time_unit=0.001) as server:
        window = []
        for q in range(70_000):
            window.append(server.submit(X[q % 256]))
            if len(window) == 256:
                answers_of(window)
                window.clear()
            if q + 1 == 10_000:
                before = _rss_mb()
        answers_of(window)
        stats = _settled(server)
        growth = _rss_mb() - before
    assert stats["in_flight"] == {"queries": 0, "tasks": 0}
    assert sum(stats["queries"].values()) == 70_000 and stats["queries"]["failed"] == 0
    assert growth < 30.0, f"RSS grew {growth:.1f} MB over 60,000 queries"


# --- scheme options in one place ------------------------------------------------------------


def test_parse_scheme_reads_a_name_and_its_options():
    coded = serving.parse_scheme("coded:code=gcc,k=3,parities=1,tau=inf,rule=group,max_group_wait=2.5")
    assert isinstance(coded.code, cc.GCC) and (coded.code.num_inputs, coded.code.num_workers) == (3, 4)
    assert coded.tau == math.inf and coded.rule == "group" and coded.max_group_wait == 2.5
    assert coded.code.get_params()["systematic"] is True
    assert serving.parse_scheme("hedge:delay=12").delay == 12
    assert serving.parse_scheme("replication").copies == 2
    defaults = {"coded": {"tau": 10.0, "k": 2}}
    under = serving.parse_scheme("coded:tau=7", defaults)
    assert under.tau == 7 and under.code.num_inputs == 2  # the text's options over the defaults
    parity = serving.parse_scheme("parm:k=2", {"parm": {"parity_f": _parity_sum}})
    assert parity.group_size == 2 and parity.parity_f is _parity_sum


@pytest.mark.parametrize(
    ("spec", "match"),
    [
        ("bogus", "scheme must be one of"),
        ("", "scheme must be a name"),
        ("hedge:delay", "key=value pairs"),
        ("hedge:dely=3", r"no option 'dely' \(it takes delay\)"),
        ("coded:k=4,foo=1", r"no option 'foo' \(it takes k, parities, code, tau"),
        ("coded:code=lcc", "code must be one of bacc, gcc, manifold-gcc"),
        ("coded:k=0", "k must be"),
        ("replication:copies=1", "copies"),
    ],
)
def test_parse_scheme_names_what_it_refuses(spec, match):
    with pytest.raises(ValueError, match=match):
        serving.parse_scheme(spec)


def test_the_simulated_server_fails_a_query_past_its_deadline_as_a_live_one_does():
    # Replica 0's first task takes 10 units, every other 1: with query_timeout 3, the query
    # on it fails at its arrival + 3 (a query queued behind it too), the others answer.
    latencies = np.ones((8, 2))
    latencies[0, 0] = 10.0
    service = cc.runtime.delays.Trace(latencies)
    X = queries(6)
    arrivals = np.array([0.0, 0.0, 0.5, 4.0, 4.0, 4.5])
    server = serving.SimulatedServer(2, service, balancer="jsq", seed=0, query_timeout=3.0)
    record = server.run(serving.NoRedundancy(), arrivals, inputs=X, f=f)
    failed = record.failed
    assert 1 <= failed.sum() <= 2 and failed[record.tasks["query"][record.tasks["replica"] == 0][0]]
    np.testing.assert_allclose(record.answered_at[failed], arrivals[failed] + 3.0)
    assert np.all(np.isnan(record.estimates[failed])) and not record.exact[failed].any()
    np.testing.assert_array_equal(record.estimates[~failed], f(X)[~failed])
    assert record.counts()["failed"] == failed.sum() and record.counts()["own"] == 6 - failed.sum()
    untimed = serving.SimulatedServer(2, service, balancer="jsq", seed=0).run(
        serving.NoRedundancy(), arrivals
    )
    assert not untimed.failed.any() and untimed.counts()["own"] == 6
    with pytest.raises(ValueError, match="query_timeout"):
        serving.SimulatedServer(2, service, query_timeout=0)
