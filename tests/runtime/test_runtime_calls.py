"""The runtime's primitive split in two (submit, then collect), one per-worker record held by a
gather's result and a run's report, errors that say why every worker failed, and workers that
run torch models without autograd."""

from __future__ import annotations

import threading
import time

import numpy as np
import pytest
import torch

import codedcomputing as cc

D = cc.delays


def rows_of(n: int, d: int = 3) -> np.ndarray:
    return np.arange(n, dtype=np.float64)[:, None] + 0.1 * np.arange(d)[None, :]


def clusters(**kwargs):
    return [cc.ThreadCluster(num_threads=4, **kwargs), cc.SimulatedCluster(**kwargs)]


@pytest.mark.parametrize("kind", ["thread", "simulated"])
def test_submit_then_collect_is_gather(kind):
    delays = D.Trace([[0.03, 0.0, 0.02, 0.01, 0.04]])
    make = (
        (lambda: cc.ThreadCluster(num_threads=4, delays=delays, seed=3))
        if kind == "thread"
        else (lambda: cc.SimulatedCluster(delays=delays, seed=3))
    )
    with make() as a, make() as b:
        gathered = a.gather(np.sin, rows_of(5), 3)
        call = b.submit(np.sin, rows_of(5))
        assert isinstance(call, cc.runtime.Call) and call.num_workers == 5
        collected = b.collect(call, 3)
    assert collected.alive.tolist() == gathered.alive.tolist() == [1, 3, 2]
    np.testing.assert_array_equal(collected.results, gathered.results)
    np.testing.assert_array_equal(collected.delays, gathered.delays)


def test_the_next_call_is_dispatched_while_this_ones_stragglers_still_run():
    """What pipelined training needs: submit step t + 1 before step t's slow workers finish."""
    release = threading.Event()
    started: list[float] = []

    def f(x):
        started.append(float(x[0, 0]))
        if x[0, 0] >= 100:  # step 1's straggler: blocks until the test lets it go
            release.wait(5)
        return x

    with cc.ThreadCluster(num_threads=4) as cluster:
        first = cluster.submit(f, np.array([[1.0], [2.0], [100.0]]))
        step1 = cluster.collect(first, 2)
        second = cluster.submit(f, np.array([[3.0], [4.0]]))  # the straggler is still running
        step2 = cluster.collect(second, 2, deadline=2.0)
        release.set()
    assert sorted(step1.alive.tolist()) == [0, 1] and 2 in step1.dropped.tolist()
    assert sorted(step2.alive.tolist()) == [0, 1] and not step2.timed_out
    assert 100.0 in started


def test_a_call_is_collected_once_and_can_be_cancelled():
    with cc.ThreadCluster(num_threads=1) as cluster:
        call = cluster.submit(np.sin, rows_of(3))
        cluster.collect(call, 3)
        with pytest.raises(ValueError, match="already collected"):
            cluster.collect(call, 1)
        ran = []
        slow = cluster.submit(lambda x: (time.sleep(0.2), ran.append(1), x)[-1], rows_of(6))
        cluster.cancel(slow)  # the queued tasks never start
        time.sleep(0.5)
        assert len(ran) <= 1  # at most the one that had started before the cancel
        with pytest.raises(ValueError, match="already collected"):
            cluster.collect(slow, 1)
        with pytest.raises(ValueError, match="call"):
            cluster.collect("not a call", 1)


def test_the_deadline_counts_from_dispatch():
    with cc.ThreadCluster(num_threads=2, delays=D.Trace([[0.0, 0.3]])) as cluster:
        call = cluster.submit(np.sin, rows_of(2))
        time.sleep(0.2)
        gathered = cluster.collect(call, 2, deadline=0.25)
    assert gathered.alive.tolist() == [0] and gathered.timed_out
    assert 0.25 <= gathered.wall_s < 0.4


def test_gather_and_report_hold_one_worker_record():
    code = cc.GCC(4, 12)
    with cc.SimulatedCluster(faults=cc.faults.Fixed({2: "raise", 5: "hang"})) as cluster:
        result = cc.CodedExecutor(code, np.tanh, cluster).run(np.ones((4, 3)), wait_for=10)
    report = result.report
    assert isinstance(report.workers, cc.runtime.WorkerRecord)
    assert report.alive is report.workers.alive and report.failed is report.workers.failed
    assert set(report.failed) == {2} and report.dropped.tolist() == [5]
    assert report.decoded is not None and report.decoded.info["lambda_dec"] == 0.0
    assert 0.0 <= report.decoded.info["theta"] <= 1.0  # the default decoder's blend weight
    assert report.trace_rows(7)[5] == {"call": 7, "worker": 5, "latency_s": ""}


def test_the_decode_info_reaches_the_report():
    code = cc.GCC(5, 40, lambda_dec="gcv")
    rng = np.random.default_rng(0)

    def noisy(x):
        return np.sin(x) + 0.05 * rng.normal(size=x.shape)

    with cc.SimulatedCluster(seed=1) as cluster:
        result = cc.CodedExecutor(code, noisy, cluster).run(rng.normal(size=(5, 2)), wait_for=30)
    assert result.report.decoded.info["lambda_dec"] > 0
    assert result.report.decoded.alive.tolist() == result.alive.tolist()


@pytest.mark.parametrize("cluster", clusters(), ids=["thread", "simulated"])
def test_when_every_worker_fails_the_error_says_why(cluster):
    def f(x):
        return x * (1 // int(x[0, 0] * 0))  # ZeroDivisionError in f

    with cluster, pytest.raises(cc.InsufficientResultsError) as err:
        cc.CodedExecutor(cc.GCC(4, 12), f, cluster).run(np.ones((4, 3)), wait_for=10)
    message = str(err.value)
    assert "12 failed" in message and "12 of 12 failed with ZeroDivisionError" in message
    assert "test_runtime_calls.py" in message and "in f" in message  # where it was raised
    assert err.value.report.workers.failure_summary() in message


def test_a_torch_module_as_f_gives_estimates_without_autograd_history():
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(3, 4), torch.nn.Tanh())
    X = torch.randn(4, 3)
    for cluster in clusters():
        with cluster:
            result = cc.CodedExecutor(cc.GCC(4, 12), model, cluster).run(X, wait_for=12)
        assert isinstance(result.estimates, torch.Tensor) and not result.estimates.requires_grad
        expected = cc.GCC(4, 12).decode(model(cc.GCC(4, 12).encode(X)).detach(), np.arange(12))
        torch.testing.assert_close(result.estimates, expected)
    # the code itself keeps autograd: differentiate through encode and decode directly
    code = cc.GCC(4, 12)
    est = code.decode(model(code.encode(X)), np.arange(12))
    assert est.requires_grad
