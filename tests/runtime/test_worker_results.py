"""Worker results the master survives: no one worker sets the answer's shape, numpy and
torch results mix without crashing the master, a worker importing torch does not race it,
``SystemExit`` in f is a failure on every backend, and a stream decodes every batch it had."""

from __future__ import annotations

import subprocess
import sys
import textwrap

import numpy as np
import pytest
import torch

import codedcomputing as cc

D = cc.delays


K, N, DIM = 4, 12, 3


W = np.random.default_rng(0).normal(size=(DIM, 2))


def layer(x):
    return np.tanh(np.asarray(x, dtype=np.float64).reshape(len(x), -1) @ W)


def inputs(seed: int = 0) -> np.ndarray:
    return np.random.default_rng(seed).normal(size=(K, DIM))


def first_arrive(bad: list[int], num_workers: int = N) -> D.Trace:
    """The workers in ``bad`` arrive at once; the others 10 ms apart after them."""
    delays = np.full(num_workers, 0.0)
    others = [n for n in range(num_workers) if n not in bad]
    delays[others] = 0.01 * (1 + np.arange(len(others)))
    return D.Trace([delays.tolist()])


class ByWorker:
    """``f`` that finds each row's worker by the nearest coded row and lets ``odd[worker]``
    answer for it. A batch with an odd worker in it raises, so that the simulated cluster,
    which batches, runs its rows one by one, as workers would."""

    def __init__(self, coded: np.ndarray, odd: dict):
        self.coded, self.odd = np.asarray(coded), odd

    def __call__(self, x):
        rows = np.asarray(x.cpu() if torch.is_tensor(x) else x, dtype=np.float64)
        workers = [int(np.argmin(np.abs(self.coded - row).sum(axis=1))) for row in rows]
        odd = [n for n in workers if n in self.odd]
        if len(workers) > 1 and odd:
            raise RuntimeError("a batch with odd workers: run them one by one")
        out = layer(rows)
        return self.odd[odd[0]](out) if odd else out


def clusters(bad, **kwargs):
    return [
        cc.ThreadCluster(num_threads=4, delays=first_arrive(bad), **kwargs),
        cc.SimulatedCluster(delays=first_arrive(bad), **kwargs),
    ]


@pytest.mark.parametrize("make", [cc.GCC, cc.BACC], ids=["gcc", "bacc"])
@pytest.mark.parametrize("bad", [[0], [0, 5], [0, 3, 7, 9]], ids=["1", "2", "4"])
def test_misshaped_workers_arriving_first_are_failures(make, bad):
    code = make(K, N)
    X = inputs()
    coded = code.encode(X)
    f = ByWorker(coded, dict.fromkeys(bad, lambda out: out[:, :1]))
    for cluster in clusters(bad):
        with cluster:
            result = cc.CodedExecutor(code, f, cluster).run(X, wait_for=N - len(bad))
        assert result.estimates.shape == (K, 2)
        assert set(bad) <= set(result.report.failed) and not set(bad) & set(result.alive.tolist())
        assert all("shape" in result.report.failed[n] for n in bad)
        reference = code.decode(layer(coded)[result.alive], result.alive)
        np.testing.assert_allclose(result.estimates, reference, rtol=1e-12)


def test_declared_output_shape_guards_a_call_that_waits_for_one_result():
    code = cc.BACC(K, N)
    X = inputs()
    coded = code.encode(X)
    f = ByWorker(coded, {0: lambda out: out[:, :1]})  # arrives first, mis-shaped
    with cc.SimulatedCluster(delays=first_arrive([0])) as cluster:
        # waiting for one result, the first decides: only a declared shape can refuse it
        assert cc.CodedExecutor(code, f, cluster).run(X, wait_for=1).estimates.shape == (K, 1)
        result = cc.CodedExecutor(code, f, cluster, output_shape=(2,)).run(X, wait_for=1)
    assert result.estimates.shape == (K, 2) and result.alive.tolist() == [1]
    assert "declared" in result.report.failed[0]
    np.testing.assert_allclose(result.estimates, code.decode(layer(coded)[[1]], [1]), rtol=1e-12)
    with pytest.raises(ValueError, match="output_shape"):
        cc.CodedExecutor(code, f, cc.SimulatedCluster(), output_shape=(2.0,))


def test_a_tie_between_shapes_keeps_the_one_that_got_there_first():
    collector = cc.runtime.collect.Collector(4, lambda alive: False)
    for worker, width in enumerate([2, 3, 3, 2]):
        collector.arrive(worker, 0.0, np.zeros((1, width)))
    gathered = collector.gathered(np.zeros(4), {}, 0.0, False, like=np.zeros((4, 1)))
    assert gathered.alive.tolist() == [1, 2] and set(gathered.failed) == {0, 3}


def test_torch_results_for_numpy_inputs_are_converted():
    code = cc.GCC(K, N)
    X = inputs()
    coded = code.encode(X)
    f = ByWorker(coded, {0: torch.as_tensor, 4: lambda out: torch.as_tensor(out, dtype=torch.bfloat16)})
    for cluster in clusters([0, 4]):
        with cluster:
            result = cc.CodedExecutor(code, f, cluster).run(X, wait_for=N)
        assert isinstance(result.estimates, np.ndarray) and {0, 4} <= set(result.alive.tolist())
        expected = layer(coded)
        expected[4] = torch.as_tensor(expected[4], dtype=torch.bfloat16).float().numpy()
        np.testing.assert_allclose(result.estimates, code.decode(expected, np.arange(N)), rtol=1e-12)


def test_numpy_results_for_torch_inputs_become_tensors():
    code = cc.BACC(K, N)
    X = torch.as_tensor(inputs())
    coded = code.encode(X)
    f = ByWorker(coded.numpy(), {n: lambda out: out for n in range(N)})

    def mixed(x):
        out = f(x)
        return out if x[0, 0] > 0 else torch.as_tensor(out)

    with cc.ThreadCluster(num_threads=4) as cluster:
        result = cc.CodedExecutor(code, mixed, cluster).run(X, wait_for=N)
    assert isinstance(result.estimates, torch.Tensor)
    expected = code.decode(torch.as_tensor(layer(coded.numpy())), torch.arange(N))
    torch.testing.assert_close(result.estimates, expected)


def test_a_list_result_is_used_and_none_or_strings_are_failures():
    code = cc.GCC(K, N)
    X = inputs()
    odd = {0: lambda out: out.tolist(), 1: lambda out: None, 2: lambda out: np.array([["a", "b"]])}
    for cluster in clusters([0, 1, 2]):
        with cluster:
            result = cc.CodedExecutor(code, ByWorker(code.encode(X), odd), cluster).run(X, wait_for=N - 2)
        assert 0 in result.alive and set(result.report.failed) == {1, 2}
        assert "None" in result.report.failed[1] and "dtype" in result.report.failed[2]


@pytest.mark.slow  # two processes importing torch: 5 s
def test_a_worker_importing_torch_does_not_race_the_master():
    """Worker threads importing torch for the first time while the master gathers their
    results (and looks torch up in ``sys.modules``, where it is partially initialised) make no
    failure: every worker's result is decoded, in three fresh processes."""
    script = textwrap.dedent(
        """
        import sys
        import numpy as np
        import codedcomputing as cc
        assert "torch" not in sys.modules

        def f(x):
            import torch
            return torch.as_tensor(x).numpy()

        with cc.ThreadCluster(num_threads=8) as cluster:
            result = cc.CodedExecutor(cc.GCC(4, 16), f, cluster).run(np.ones((4, 3)), wait_for=16)
        assert result.estimates.shape == (4, 3) and not result.report.failed, result.report.failed
        print("ok")
        """
    )
    # the three run side by side: each is mostly its own torch import (seconds), and they share nothing
    runs = [
        subprocess.Popen(
            [sys.executable, "-c", script], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
        )
        for _ in range(3)
    ]
    try:
        outputs = [run.communicate(timeout=180) for run in runs]
    finally:
        for run in runs:
            if run.poll() is None:
                run.kill()
                run.wait()
    for run, (stdout, stderr) in zip(runs, outputs, strict=True):
        assert run.returncode == 0 and "ok" in stdout, stderr[-2000:]


def test_system_exit_in_f_is_a_failure_on_the_simulated_cluster():
    code = cc.GCC(K, N)
    X = inputs()

    def leave(out):
        raise SystemExit(3)

    f = ByWorker(code.encode(X), {1: leave, 6: leave})
    with cc.SimulatedCluster() as cluster:
        result = cc.CodedExecutor(code, f, cluster).run(X, wait_for=N - 2)
    assert set(result.report.failed) == {1, 6} and "SystemExit" in result.report.failed[1]
    assert result.estimates.shape == (K, 2)


def test_map_yields_every_batch_before_the_iterator_fails():
    def batches():
        for i in range(20):
            if i == 15:
                raise KeyError("the data source broke")
            yield inputs(i)

    executor = cc.CodedExecutor(cc.GCC(K, N), layer, cc.SimulatedCluster())
    results = []
    with pytest.raises(KeyError, match="data source"):
        for result in executor.map(batches(), wait_for=N - 2):
            results.append(result)
    assert len(results) == 15
    code = executor.code
    np.testing.assert_allclose(
        results[14].estimates,
        code.decode(layer(code.encode(inputs(14)))[results[14].alive], results[14].alive),
        rtol=1e-12,
    )
