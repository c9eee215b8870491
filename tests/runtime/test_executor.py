"""The executor (:class:`cc.CodedExecutor`): ``run`` and ``map`` decode what the cluster
gathered, checked against an independent decode of the same alive set; default waits via
``Code.complete``; insufficient and missing results; argument checks.

Thread-cluster checks use :class:`cc.delays.Trace` with known latencies 10-60 ms apart, so the
arrival order is fixed. Ray is tested in ``test_ray.py``.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch
from runtime_helpers import CLUSTER_KINDS, make_cluster, trace

import codedcomputing as cc

D = cc.delays
F = cc.faults


def _reference(code, f, X, alive):
    """Independent recomputation: every worker's f, decoded from the given alive set."""
    return code.decode(f(code.encode(X))[alive], alive)


def assert_report(result_or_report, num_workers):
    report = getattr(result_or_report, "report", result_or_report)
    alive = report.alive.tolist()
    assert len(alive) == len(set(alive)) and set(alive) <= set(range(num_workers))
    assert set(alive).isdisjoint(report.failed) and set(alive).isdisjoint(report.dropped.tolist())
    assert set(report.failed).isdisjoint(report.dropped.tolist())
    assert set(alive) | set(report.failed) | set(report.dropped.tolist()) == set(range(num_workers))
    assert report.latency.shape == report.delays.shape == report.compute_s.shape == (num_workers,)
    assert all(report.faults.get(n) not in ("raise", "nan", "hang") for n in alive)
    assert min(report.encode_s, report.wait_s, report.decode_s) >= 0
    assert report.total_s == pytest.approx(report.encode_s + report.wait_s + report.decode_s)
    assert report.master_s == pytest.approx(report.encode_s + report.decode_s)
    if hasattr(result_or_report, "alive"):
        assert result_or_report.alive.tolist() == sorted(alive)


def _make_X(lib, K=4, d=3, seed=0):
    X = np.random.default_rng(seed).uniform(-1, 1, size=(K, d))
    return torch.from_numpy(X) if lib == "torch" else X


@pytest.mark.parametrize("kind", CLUSTER_KINDS)
@pytest.mark.parametrize("lib", ["numpy", "torch"])
def test_executor_gcc_matches_decode_of_the_alive_set(kind, lib):
    code = cc.GCC(num_inputs=4, num_workers=12)
    f = torch.sin if lib == "torch" else np.sin
    X = _make_X(lib)
    faults = F.Fixed({2: "nan", 5: "raise", 7: "hang"})
    with make_cluster(kind, delays=D.ShiftedExponential(scale=0.002, rate=1.0), faults=faults, seed=1) as cl:
        result = cc.CodedExecutor(code, f, cl).run(X, wait_for=8)
    report = result.report
    assert len(report.alive) == 8
    assert not {2, 5, 7} & set(report.alive.tolist())
    assert 7 in report.dropped.tolist()
    assert_report(result, 12)
    expected = _reference(code, f, X, report.alive)
    if lib == "torch":
        assert isinstance(result.estimates, torch.Tensor) and result.estimates.dtype == torch.float64
        torch.testing.assert_close(result.estimates, expected, rtol=1e-12, atol=1e-14)
    else:
        assert isinstance(result.estimates, np.ndarray) and result.estimates.shape == (4, 3)
        np.testing.assert_allclose(result.estimates, expected, rtol=1e-12, atol=1e-14)
    # and the estimates are approximations of f(X)
    np.testing.assert_allclose(np.asarray(result.estimates), np.sin(np.asarray(X)), atol=0.2)


def _polynomial(x):
    return x**2 - 0.5 * x + 1.0


@pytest.mark.parametrize("kind", CLUSTER_KINDS)
def test_executor_default_wait_uses_code_complete(kind):
    X = _make_X("numpy", K=4, d=2, seed=3)
    model = D.ShiftedExponential(scale=0.002, rate=1.0)
    with make_cluster(kind, delays=model, seed=2) as cluster:
        uncoded = cc.CodedExecutor(cc.Uncoded(4), _polynomial, cluster).run(X)
        assert uncoded.alive.tolist() == [0, 1, 2, 3]
        np.testing.assert_array_equal(uncoded.estimates, _polynomial(X))

        replication = cc.Replication(4, replicas=3)
        result = cc.CodedExecutor(replication, _polynomial, cluster).run(X)
        arrived = result.report.alive
        assert replication.complete(arrived) and not replication.complete(arrived[:-1])
        np.testing.assert_array_equal(np.unique(replication.assignment[arrived]), [0, 1, 2, 3])
        np.testing.assert_array_equal(result.estimates, _polynomial(X))
        assert_report(result, 12)

        lcc = cc.LCC(4, 10, degree=2)  # threshold (4 - 1) * 2 + 1 = 7
        result = cc.CodedExecutor(lcc, _polynomial, cluster).run(X)
        assert len(result.alive) == 7
        np.testing.assert_allclose(result.estimates, _polynomial(X), rtol=1e-9, atol=1e-9)
        assert_report(result, 10)

        gcc = cc.GCC(4, 10)
        result = cc.CodedExecutor(gcc, _polynomial, cluster).run(X)
        assert result.alive.tolist() == list(range(10))


def test_executor_insufficient_results_gcc():
    code = cc.GCC(num_inputs=4, num_workers=10)
    X = _make_X("numpy")
    faults = F.Fixed({n: "hang" for n in range(1, 10)})
    with cc.ThreadCluster(num_threads=4, faults=faults) as cluster:
        with pytest.raises(cc.InsufficientResultsError) as info:
            cc.CodedExecutor(code, np.sin, cluster).run(X, wait_for=8, deadline=0.5)
    err = info.value
    assert err.report.alive.tolist() == [0]
    assert err.report.dropped.tolist() == list(range(1, 10))
    np.testing.assert_allclose(err.results, np.sin(code.encode(X)[[0]]))
    assert err.needed == 2
    assert_report(err.report, 10)


def test_executor_no_result_at_all():
    cluster = cc.SimulatedCluster(faults=F.Independent({"hang": 1.0}))
    with pytest.raises(cc.InsufficientResultsError) as info:
        cc.CodedExecutor(cc.BACC(4, 8), np.sin, cluster).run(_make_X("numpy"), deadline=1.0)
    assert info.value.results is None
    assert info.value.report.alive.tolist() == [] and info.value.report.dropped.tolist() == list(range(8))


def test_executor_lcc_below_threshold_by_deadline():
    lcc = cc.LCC(4, 10, degree=2)  # threshold 7
    delays = trace(*([0.01] * 5 + [3.0] * 5))
    with pytest.raises(cc.InsufficientResultsError) as info:
        cc.CodedExecutor(lcc, _polynomial, cc.SimulatedCluster(delays=delays)).run(
            _make_X("numpy"), deadline=1.0
        )
    err = info.value
    assert err.needed == 7 and err.report.timed_out
    # the message names the deadline, what arrived and what lets a decode through below it
    assert "deadline of 1 s expired with 5 usable results in, 7 needed" in str(err)
    assert "best_effort=True" in str(err)
    assert sorted(err.report.alive.tolist()) == [0, 1, 2, 3, 4]
    assert err.results.shape == (5, 3)
    assert_report(err.report, 10)


@pytest.mark.parametrize("kind", CLUSTER_KINDS)
def test_executor_uncoded_missing_input(kind):
    delays = trace(0.0, 0.01, 3.0, 0.02)
    X = _make_X("numpy")
    with make_cluster(kind, delays=delays) as cluster:
        with pytest.raises(cc.MissingResultsError) as info:
            cc.CodedExecutor(cc.Uncoded(4), np.sin, cluster).run(X, deadline=0.15)
    err = info.value
    assert err.missing == [2]
    assert err.report.timed_out and err.report.dropped.tolist() == [2]
    np.testing.assert_allclose(err.results, np.sin(X[err.report.alive]))
    assert_report(err.report, 4)


@pytest.mark.parametrize(
    ("code", "wait_for"),
    [
        (cc.GCC(4, 10), 1),  # GCC needs 2
        (cc.GCC(4, 10), 11),
        (cc.GCC(4, 10), 0),
        (cc.GCC(4, 10), 5.0),
        (cc.GCC(4, 10), True),
        (cc.GCC(4, 10), "5"),
        (cc.LCC(4, 10, degree=2), 6),  # below the recovery threshold
        (cc.Uncoded(4), 5),
    ],
)
def test_executor_wait_for_validation(code, wait_for):
    executor = cc.CodedExecutor(code, np.sin, cc.SimulatedCluster())
    X = _make_X("numpy")
    with pytest.raises(ValueError, match=r"^wait_for"):
        executor.run(X, wait_for=wait_for)
    with pytest.raises(ValueError, match=r"^wait_for"):
        list(executor.map([X], wait_for=wait_for))


def test_executor_accepts_boundary_wait_for():
    X = _make_X("numpy")
    lcc = cc.LCC(4, 10, degree=1)  # threshold 4
    executor = cc.CodedExecutor(lcc, _polynomial, cc.SimulatedCluster(delays=D.ShiftedExponential()))
    assert len(executor.run(X, wait_for=4).alive) == 4
    assert len(executor.run(X, wait_for=np.int64(10)).alive) == 10


@pytest.mark.parametrize(
    ("args", "match"),
    [
        (("gcc", np.sin, cc.SimulatedCluster()), "^code"),
        ((cc.GCC(4, 8), "sin", cc.SimulatedCluster()), "^f"),
        ((cc.GCC(4, 8), np.sin, "local"), "^cluster"),
    ],
)
def test_executor_constructor_validation(args, match):
    with pytest.raises(ValueError, match=match):
        cc.CodedExecutor(*args)


def test_executor_map_equals_run_with_the_same_seed():
    code = cc.GCC(num_inputs=4, num_workers=12)
    batches = [_make_X("numpy", seed=s) for s in range(4)]

    def cluster():
        return cc.SimulatedCluster(
            delays=D.ShiftedExponential(), faults=F.Independent({"nan": 0.1, "raise": 0.1}), seed=5
        )

    mapped = list(cc.CodedExecutor(code, np.tanh, cluster()).map(iter(batches), wait_for=8))
    runner = cc.CodedExecutor(code, np.tanh, cluster())
    ran = [runner.run(X, wait_for=8) for X in batches]
    assert len(mapped) == len(batches)
    for X, m, r in zip(batches, mapped, ran, strict=True):
        np.testing.assert_array_equal(m.estimates, r.estimates)
        assert m.report.alive.tolist() == r.report.alive.tolist()
        assert m.report.failed == r.report.failed and m.report.wait_s == r.report.wait_s
        np.testing.assert_allclose(m.estimates, _reference(code, np.tanh, X, m.report.alive), rtol=1e-12)
        assert_report(m, 12)
    # the draws differ from batch to batch (the cluster's generator advances)
    assert mapped[0].report.alive.tolist() != mapped[1].report.alive.tolist()


def test_executor_map_on_threads_yields_in_order():
    code = cc.BACC(4, 8)
    batches = [_make_X("torch", seed=s) for s in range(3)]
    with cc.ThreadCluster(num_threads=4, delays=D.ShiftedExponential(scale=0.002), seed=0) as cluster:
        results = list(cc.CodedExecutor(code, torch.tanh, cluster).map(batches, wait_for=6))
    assert len(results) == 3
    for X, r in zip(batches, results, strict=True):
        torch.testing.assert_close(r.estimates, _reference(code, torch.tanh, X, r.report.alive))
        assert r.report.encode_s > 0
        assert_report(r, 8)


def test_executor_map_empty_iterable():
    executor = cc.CodedExecutor(cc.GCC(4, 8), np.sin, cc.SimulatedCluster())
    assert list(executor.map([])) == []
    assert list(executor.map(iter(()), wait_for=5)) == []


def test_executor_map_checks_wait_for_when_called():
    executor = cc.CodedExecutor(cc.GCC(4, 8), lambda x: x, cc.SimulatedCluster(seed=0))
    with pytest.raises(ValueError, match="wait_for"):
        executor.map([np.zeros((4, 2))], wait_for=9)  # no next() needed
