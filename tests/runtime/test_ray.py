"""RayCluster on a local Ray (the session's, ``conftest.local_ray``: num_cpus=2, no dashboard)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

import numpy as np
import pytest

import codedcomputing as cc

K, N = 6, 12
W = np.random.default_rng(0).normal(size=(4, 3))


def f(x):
    return np.tanh(x @ W)


class KillsOnce:
    """``f``, except that the first task to run it kills its own worker process (SIGKILL)."""

    def __init__(self, flag):
        self.flag = str(flag)

    def __call__(self, x):
        try:
            with open(self.flag, "x"):  # exactly one task creates the flag
                pass
        except FileExistsError:
            return f(x)
        os.kill(os.getpid(), signal.SIGKILL)


class CountsRuns:
    """``f`` after ``seconds`` of sleep; every run appends a byte to a file, across processes."""

    def __init__(self, path, seconds):
        self.path, self.seconds = str(path), seconds

    def __call__(self, x):
        with open(self.path, "ab") as runs:
            runs.write(b".")
        time.sleep(self.seconds)
        return f(x)

    def runs(self):
        return os.path.getsize(self.path) if os.path.exists(self.path) else 0


def batch(seed=1):
    return np.random.default_rng(seed).normal(size=(K, 4))


class CountsPickling:
    """A callable that counts how often the driver serialises it."""

    pickled = 0

    def __call__(self, x):
        return np.tanh(x @ W)

    def __reduce__(self):
        type(self).pickled += 1
        return (CountsPickling, ())


@pytest.fixture(scope="module")
def ray_session(local_ray):
    """The session's local Ray (``conftest.local_ray``), shipping this module's functions by
    value: Ray's workers cannot import this test module."""
    local_ray.cloudpickle.register_pickle_by_value(sys.modules[__name__])
    yield local_ray
    local_ray.cloudpickle.unregister_pickle_by_value(sys.modules[__name__])


@pytest.mark.slow
def test_ray_run_decodes_what_arrived(ray_session):
    cluster = cc.RayCluster(delays=cc.delays.ShiftedExponential(0.002), seed=3)
    code = cc.GCC(K, N)
    X = batch()
    result = cc.CodedExecutor(code, f, cluster).run(X, wait_for=N - 3)
    assert result.alive.size == N - 3 and result.report.dropped.size + result.alive.size == N
    # An independent recomputation from the workers the report says were used.
    alive = result.alive
    expected = code.decode(f(code.encode(X))[alive], alive)
    np.testing.assert_allclose(result.estimates, expected, rtol=1e-10, atol=1e-12)
    arrived = np.isfinite(result.report.latency)
    assert set(alive) <= set(np.flatnonzero(arrived))
    assert np.all(result.report.latency[alive] >= result.report.delays[alive])  # delays are held back


@pytest.mark.slow
def test_ray_ships_f_once(ray_session):
    CountsPickling.pickled = 0
    g = CountsPickling()
    cluster = cc.RayCluster(seed=0)
    executor = cc.CodedExecutor(cc.BACC(K, N), g, cluster)
    for seed in range(3):
        executor.run(batch(seed), wait_for=N)
    assert CountsPickling.pickled == 1
    assert cluster.share(g) is cluster.share(g)


@pytest.mark.slow
def test_ray_faults_are_stragglers_and_hangs_are_cancelled(ray_session):
    faults = cc.faults.Fixed({0: "raise", 1: "nan", 2: "hang", 3: "garbage"})
    cluster = cc.RayCluster(faults=faults, seed=1)
    executor = cc.CodedExecutor(cc.GCC(K, N), f, cluster)
    for trial in range(3):  # a hang not cancelled would hold one of the 2 CPUs for good
        result = executor.run(batch(trial), deadline=60)
        report = result.report
        assert set(report.failed) == {0, 1}
        assert "InjectedFault" in report.failed[0] and "NaN" in report.failed[1]
        assert report.dropped.tolist() == [2]
        assert 3 in result.alive  # garbage cannot be told from a true result
        assert not report.timed_out and report.wait_s < 30


@pytest.mark.slow
def test_ray_killed_worker_process_is_a_straggler(ray_session, tmp_path):
    cluster = cc.RayCluster(seed=2)
    code = cc.GCC(K, N)
    X = batch()
    result = cc.CodedExecutor(code, KillsOnce(tmp_path / "killed"), cluster).run(X, deadline=60)
    report = result.report
    assert len(report.failed) == 1 and result.alive.size == N - 1
    (killed,) = report.failed
    assert "Worker" in report.failed[killed] or "died" in report.failed[killed]
    expected = code.decode(f(code.encode(X))[result.alive], result.alive)
    np.testing.assert_allclose(result.estimates, expected, rtol=1e-10, atol=1e-12)
    with pytest.raises(cc.MissingResultsError) as err:  # uncoded has no second copy
        cc.CodedExecutor(cc.Uncoded(K), KillsOnce(tmp_path / "again"), cluster).run(X, deadline=60)
    assert len(err.value.missing) == 1 and len(err.value.report.failed) == 1


@pytest.mark.slow
def test_ray_deadline_returns_what_arrived(ray_session):
    latencies = np.full((1, N), 0.01)
    latencies[0, -4:] = 30.0  # four workers would take 30 s
    cluster = cc.RayCluster(delays=cc.delays.Trace(latencies), seed=0)
    result = cc.CodedExecutor(cc.GCC(K, N), f, cluster).run(batch(), wait_for=N, deadline=6.0)
    report = result.report
    # The slow four never arrive; the fast ones do, unless Ray is still starting worker
    # processes on a busy machine, so only "some" of them is asserted.
    assert report.timed_out and set(result.alive) <= set(range(N - 4)) and result.alive.size >= 2
    assert set(range(N - 4, N)) <= set(report.dropped.tolist())
    assert 6.0 <= report.wait_s < 15


@pytest.mark.slow
def test_ray_tasks_of_an_answered_call_skip_f(ray_session, tmp_path):
    n = 16
    g = CountsRuns(tmp_path / "runs", 0.25)
    inputs = np.random.default_rng(0).normal(size=(n, 4))
    cluster = cc.RayCluster(seed=0)
    cluster.gather(g, inputs[:2], 2)  # times g (0.25 s: worth skipping)
    cluster.gather(g, inputs[:2], 2)  # starts the board (an actor: ~1 s on a small node)
    ray_session.get(cluster._board.__ray_ready__.remote(), timeout=60)
    first = g.runs()
    quick = cluster.gather(g, inputs, 2)  # 2 CPUs: ~2 more start before the gate opens
    full = cluster.gather(g, inputs, n)  # queued behind the first call's 14 unstarted tasks
    ran_quick = g.runs() - first - n
    # Without skipping all 16 would run; a lagging gate lets a few more than 4 start.
    assert ran_quick <= n // 2
    assert quick.alive.size == 2 and full.alive.size == n and not full.failed
    np.testing.assert_allclose(full.results, f(inputs)[full.alive], rtol=1e-12)
    never = cc.RayCluster(seed=0, skip_min_s=np.inf)
    never.gather(g, inputs[:2], 2)
    before = g.runs()
    never.gather(g, inputs[:4], 1)
    never.gather(g, inputs[:4], 4)
    waited = time.perf_counter()
    while g.runs() - before < 8 and time.perf_counter() - waited < 30:
        time.sleep(0.05)
    assert g.runs() - before == 8  # skipping off: every task runs f


@pytest.mark.slow
def test_ray_gate_opens_in_any_order_and_a_skip_is_never_a_result(ray_session):
    from codedcomputing.runtime import ray_cluster

    board = ray_cluster._board_actor().remote()
    ray_session.get(board.close.remote(1))  # a close that runs before its open
    assert ray_session.get(board.open.remote(1), timeout=30) is True
    gate = board.open.remote(0)
    f_ref = ray_session.put(f)
    x = batch()[:1]
    out, _ = ray_cluster._run_shared([f_ref, gate], x, None, 0)  # the call is open: f runs
    np.testing.assert_allclose(out, f(x))
    ray_session.get(board.close.remote(0))
    assert ray_session.get(gate, timeout=30) is True
    skipped = ray_cluster._run_shared([f_ref, gate], x, None, 0)
    assert isinstance(skipped, ray_cluster._Skipped)
    outcome, seconds = ray_cluster._resolve(ray_session.put(skipped))
    assert isinstance(outcome, ray_cluster.CallOver) and np.isnan(seconds)
    collector = cc.runtime.collect.Collector(1, lambda alive: len(alive) >= 1)
    collector.arrive(0, 0.1, outcome)
    assert collector.failed and not collector.alive  # a failure, never a result
    ray_session.kill(board)


@pytest.mark.slow
def test_ray_many_calls_with_skipping_all_decode(ray_session, tmp_path):
    # Many calls whose stragglers are skipped, every one decoded, and the driver survives them
    # (Ray's own cancel crashed it within 30-40 such calls).
    g = CountsRuns(tmp_path / "runs", 0.004)
    faults = cc.faults.Independent({"raise": 0.03, "nan": 0.03})
    cluster = cc.RayCluster(faults=faults, seed=4, skip_min_s=0.0)
    code = cc.GCC(K, 30)
    executor = cc.CodedExecutor(code, g, cluster)
    rng = np.random.default_rng(4)
    for call in range(30):
        X = batch(call)
        result = executor.run(X, wait_for=int(rng.integers(K + 4, 26)), deadline=60)
        alive = result.alive
        expected = code.decode(f(code.encode(X))[alive], alive)
        np.testing.assert_allclose(result.estimates, expected, rtol=1e-10, atol=1e-12)
        assert not any("CallOver" in reason for reason in result.report.failed.values())
    assert cc.CodedExecutor(code, g, cc.RayCluster(seed=5)).run(batch(), wait_for=30).alive.size == 30


def test_ray_skip_min_s_is_checked():
    for bad in (-1.0, np.nan, "soon", True, None):
        with pytest.raises(ValueError, match="skip_min_s"):
            cc.RayCluster(skip_min_s=bad)


def test_a_local_ray_is_started_afresh_even_beside_a_ray_start_cluster(monkeypatch):
    """Without ``address``, ``ray.init`` would join a cluster that ``ray start`` left on this
    machine and then refuse ``num_cpus``; RayCluster asks for a new local instance."""
    ray = pytest.importorskip("ray")
    calls = []
    monkeypatch.setattr(ray, "is_initialized", lambda: False)
    monkeypatch.setattr(ray, "init", lambda **kwargs: calls.append(kwargs))
    cc.RayCluster(num_cpus=3)
    cc.RayCluster(address="auto", num_cpus=3)
    assert [(c["address"], c["num_cpus"]) for c in calls] == [("local", 3), ("auto", None)]


def test_ray_missing_says_which_extra(monkeypatch):
    monkeypatch.setitem(sys.modules, "ray", None)
    with pytest.raises(ImportError, match=r"codedcomputing\[ray\]"):
        cc.RayCluster()


DRIVER = """
import sys
import numpy as np
import ray
import codedcomputing as cc

cluster = cc.RayCluster(address=sys.argv[1], delays=cc.delays.ShiftedExponential(0.001), seed=0)
x = np.random.default_rng(0).normal(size=(4, 3))
result = cc.CodedExecutor(cc.GCC(4, 8), np.tanh, cluster).run(x, wait_for=7)
expected = cc.GCC(4, 8).decode(np.tanh(cc.GCC(4, 8).encode(x))[result.alive], result.alive)
print("address", ray.get_runtime_context().gcs_address)
print("alive", result.alive.size)
print("error", float(np.abs(result.estimates - expected).max()))
cluster.close()
print("initialised_after_close", ray.is_initialized())
"""


@pytest.mark.slow
def test_ray_cluster_joins_a_running_cluster_by_address(ray_session, tmp_path):
    """A second driver process joins this session's Ray by its address, runs a call there,
    and on close disconnects without stopping that Ray."""
    address = ray_session.get_runtime_context().gcs_address
    script = tmp_path / "driver.py"
    script.write_text(DRIVER)
    run = subprocess.run([sys.executable, str(script), address], capture_output=True, text=True, timeout=180)
    assert run.returncode == 0, run.stderr[-2000:]
    lines = dict(line.split(" ", 1) for line in run.stdout.splitlines() if " " in line)
    assert lines["address"] == address  # the running cluster, not a new local one
    assert lines["alive"] == "7"
    assert float(lines["error"]) < 1e-12
    assert lines["initialised_after_close"] == "False"  # close disconnects the driver it connected...
    assert ray_session.get(ray_session.put(1)) == 1  # ...and leaves the running cluster serving


def zero_division(x):
    return x * (1 // int(x.ravel()[0] * 0))


@pytest.mark.slow
def test_ray_submit_and_collect_and_the_error_that_says_why(ray_session):
    cluster = cc.RayCluster(faults=cc.faults.Fixed({1: "hang"}), seed=2, skip_min_s=0.0)
    call = cluster.submit(f, cc.GCC(K, N).encode(batch()))
    gathered = cluster.collect(call, N - 1)
    assert sorted(gathered.alive.tolist()) == [n for n in range(N) if n != 1]
    with pytest.raises(ValueError, match="already collected"):
        cluster.collect(call, 1)
    cluster.faults = None
    with pytest.raises(cc.InsufficientResultsError, match=f"{N} of {N} failed with ZeroDivisionError"):
        cc.CodedExecutor(cc.GCC(K, N), zero_division, cluster).run(batch(), wait_for=N - 2)
