"""The thread server's two frontends: results handled on the replica threads (``inline``) or
handed back to the frontend thread (``events``); the same answers, order and timers either way.

Each test runs in well under a second (10 ms clock units, tens of queries) and stops its threads.
"""

import threading

import numpy as np
import pytest

import codedcomputing as cc
from codedcomputing import serving

UNIT = 0.01
W = np.random.default_rng(5).normal(size=(4, 3))


def f(x):
    return np.tanh(np.asarray(x) @ W)


class Recorder(serving.NoRedundancy):
    """No redundancy, noting the thread that runs each result's hook."""

    def prepare(self, arrivals):
        self.threads = []

    def done(self, run, task):
        self.threads.append(threading.current_thread().name)
        super().done(run, task)


class LateAnswer(serving.NoRedundancy):
    """Answers a query ``delay`` clock units after its result is in: a timer set by the result's
    hook, the only timer of the run (nothing else would wake the frontend)."""

    def __init__(self, delay):
        self.delay = delay

    def done(self, run, task):
        run.schedule(run.now + self.delay, task)

    def timer(self, run, task):
        run.answer(run.t_query[task], 0, run.t_replica[task], task)


@pytest.mark.parametrize("frontend", ["inline", "direct", "events"])
def test_results_are_handled_on_the_replica_threads_inline_and_on_the_frontend_otherwise(frontend):
    scheme = Recorder()
    inputs = np.random.default_rng(0).normal(size=(20, 4))
    with serving.ThreadServer(f, 3, scheme, time_unit=UNIT, frontend=frontend) as server:
        answers = [future.result(timeout=10) for future in [server.submit(x) for x in inputs]]
    np.testing.assert_allclose(np.stack([a.estimate for a in answers]), f(inputs), rtol=0, atol=1e-12)
    assert len(scheme.threads) == 20
    expected = {"replica-0", "replica-1", "replica-2"} if frontend != "events" else {"serving-frontend"}
    assert set(scheme.threads) <= expected
    assert "frontend='" + frontend + "'" in repr(server)


@pytest.mark.parametrize("frontend", ["inline", "direct", "events"])
def test_a_timer_set_by_a_result_fires_on_time_without_another_event(frontend):
    # the frontend thread sleeps with no timer due; the result's hook puts one 50 ms ahead
    server = serving.ThreadServer(f, 2, LateAnswer(5.0), time_unit=UNIT, frontend=frontend)
    with server:
        answer = server.submit(np.ones(4)).result(timeout=5)
    assert 0.05 <= answer.latency < 0.5  # on time: not at close, not before the timer
    np.testing.assert_allclose(answer.estimate, f(np.ones((1, 4)))[0], rtol=0, atol=1e-12)


@pytest.mark.parametrize("frontend", ["inline", "direct", "events"])
def test_coded_answers_are_f_or_the_codes_decode_and_each_replica_serves_in_order(frontend):
    service = cc.runtime.delays.Bimodal(base=1.0, p=0.1, slowdown=6.0)
    arrivals = serving.poisson_arrivals(60, 0.5, 5, service, rng=2)
    inputs = np.random.default_rng(3).normal(size=(60, 4))
    scheme = serving.Coded(cc.BACC(4, 5, systematic=True), tau=1.5, max_group_wait=3.0)
    record = serving.ThreadServer(
        f, 5, scheme, service=service, time_unit=UNIT, seed=1, frontend=frontend
    ).run(arrivals, inputs)
    assert record.errors == [] and record.counts()["failed"] == 0
    assert sum(record.counts().values()) == 60 and np.all(np.isfinite(record.answered_at))
    reference, reference_exact = scheme.outputs(record, inputs, f)  # encode, f and decode afresh
    np.testing.assert_allclose(record.estimates, reference, rtol=1e-10, atol=1e-12)
    np.testing.assert_array_equal(record.exact, reference_exact)
    assert record.master_s["frontend"] >= record.master_s["encode"] + record.master_s["decode"] > 0


@pytest.mark.parametrize("frontend", ["inline", "direct", "events"])
def test_one_replica_serves_its_queue_first_in_first_out(frontend):
    service = cc.runtime.delays.Bimodal(base=0.5, p=0.0, slowdown=1.0)
    inputs = np.random.default_rng(4).normal(size=(15, 4))
    server = serving.ThreadServer(
        f, 1, serving.NoRedundancy(), service=service, time_unit=UNIT, frontend=frontend, keep_record=True
    )
    with server:
        futures = [server.submit(x) for x in inputs]
    record = server.record()
    assert np.all(np.diff(record.started) > 0)  # started in submit order
    assert np.all(np.diff(record.answered_at) >= 0)
    assert all(future.result(timeout=0).exact for future in futures)


def test_frontend_must_be_a_known_design():
    with pytest.raises(ValueError, match="frontend"):
        serving.ThreadServer(f, 2, serving.NoRedundancy(), frontend="batched")
