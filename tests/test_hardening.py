"""What a fault matrix, a fuzzer and damaged files found, kept fixed: odd workers never set the
answer's shape or crash the master, every batch of a stream is decoded, bad arguments are
named, damaged cache files are rebuilt, and a bad ``--out`` fails before any work."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap

import numpy as np
import pytest
import torch
from typer.testing import CliRunner

import codedcomputing as cc
from codedcomputing import datasets, models
from codedcomputing.cli import app

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


# -- the answer's shape is not hostage to one worker --------------------------------------


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


# -- numpy and torch results mix without crashing the master -------------------------------


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


def test_a_worker_importing_torch_does_not_race_the_master():
    """Before the fix, reading ``sys.modules['torch']`` while a worker thread was importing torch
    raised ``AttributeError: partially initialized module 'torch'`` inside ``gather``."""
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
    for _ in range(3):
        done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120)
        assert done.returncode == 0 and "ok" in done.stdout, done.stderr[-2000:]


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


# -- GCV at the edge, streams that fail ----------------------------------------------------


def test_gcv_decodes_from_two_results_and_has_no_fixed_decoder_map():
    code = cc.GCC(K, N, lambda_dec="gcv")
    y = np.array([[1.0, 2.0], [3.0, -2.0]])
    est = code.decode(y, [0, N - 1])  # the line through the two results
    slope = (y[1] - y[0]) / (code.beta[-1] - code.beta[0])
    np.testing.assert_allclose(est, y[0] + (code.alpha - code.beta[0])[:, None] * slope, rtol=1e-12)
    with pytest.raises(ValueError, match="lambda_dec"):
        code.decoder([0, 1, 2])


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


# -- arguments the fuzzer found ------------------------------------------------------------


BAD_ARGUMENTS = [
    (lambda: cc.BACC(17, 2**63), "num_workers"),
    (lambda: cc.GCC(2**63, 4), "num_inputs"),
    (lambda: cc.Uncoded(2**63), "num_inputs"),
    (lambda: cc.Replication(3, 2**40), "replicas"),
    (lambda: cc.GCC(4, 8, lambda_enc=10**400), "lambda_enc"),
    (lambda: cc.GCC(4, 8, lambda_dec=-(10**400)), "lambda_dec"),
    (lambda: cc.GCC(3, 5, alpha=[0.1j, 0.2, 0.3]), "alpha"),
    (lambda: cc.BACC(3, 4, beta=["a", "b", "c", "d"]), "beta"),
    (lambda: cc.GCC(3, 5).decode(np.ones((2, 1)), [[0, 1], [2]]), "alive"),
    (lambda: cc.stragglers.random(5, 1, "abc"), "rng"),
    (lambda: cc.stragglers.random(5, 1, -1), "rng"),
    (lambda: cc.stragglers.contiguous(5, 1, None), "rng"),
    (lambda: cc.stragglers.random(5, None, 0), "num_stragglers"),
    (lambda: cc.stragglers.bernoulli(5, False, 0), "p"),
    (lambda: cc.stragglers.bernoulli(5, "0.5", 0), "p"),
    (lambda: cc.metrics.mse(np.zeros((0, 3)), np.zeros((0, 3))), "est"),
    (lambda: cc.metrics.relative_accuracy(np.zeros((2, 0)), np.zeros((2, 0))), "est"),
    (lambda: cc.metrics.accuracy(np.eye(2), ["a", "b"]), "labels"),
    (lambda: cc.Uncoded(3, fill="x"), "fill"),
    (lambda: cc.ThreadCluster(num_threads=10**9), "num_threads"),
    (lambda: cc.SimulatedCluster(seed="abc"), "seed"),
    (lambda: cc.SimulatedCluster(compute_s=True), "compute_s"),
    (lambda: cc.SimulatedCluster().gather(np.sin, np.ones((3, 1)), 2, deadline="1"), "deadline"),
    (lambda: cc.delays.ShiftedExponential(scale="0.1"), "scale"),
    (lambda: cc.spline.fit([0.0, 1.0, 2.0], [[1], [2], ["x"]]), "values"),
    (lambda: cc.spline.smoothing_matrix([0.0, 1.0, 2.0], 0.0, [0.5j]), "points"),
    (lambda: cc.tuning.tune(np.sin, np.ones((3, 2)), 6, lambda n, r: np.arange(n), seed=-1), "seed"),
]


@pytest.mark.parametrize(("call", "name"), BAD_ARGUMENTS, ids=[name for _, name in BAD_ARGUMENTS])
def test_bad_arguments_raise_value_error_naming_them(call, name):
    with pytest.raises(ValueError, match=name):
        call()


def test_bfloat16_results_decode_with_gcv():
    code = cc.GCC(K, N, lambda_dec="gcv")
    y = torch.as_tensor(layer(code.encode(inputs())), dtype=torch.bfloat16)
    est = code.decode(y, torch.arange(N))
    assert est.dtype == torch.bfloat16 and est.shape == (K, 2) and bool(est.isfinite().all())


def test_bacc_builds_wide_maps_without_a_k_by_k_identity():
    """Building the encoder of ``BACC(100_000, 50)`` once asked for a 74.5 GiB identity."""
    with pytest.warns(cc.errors.MoreInputsThanWorkersWarning, match="num_inputs = 100000"):
        code = cc.BACC(100_000, 50)
    assert code.encoder_matrix.shape == (50, 100_000)
    np.testing.assert_allclose(code.encode(np.ones((100_000, 2))), 1.0, rtol=1e-12)  # constants


# -- damaged cache files are rebuilt, with a warning naming the file -----------------------

TINY = models.TrainingRecipe("digits", epochs=1, lr=2e-3, weight_decay=1e-4)


def _damage_weights(kind: str):
    def damage(weights, meta):
        if kind == "truncated":
            weights.write_bytes(weights.read_bytes()[: weights.stat().st_size // 2])
        elif kind == "empty":
            weights.write_bytes(b"")
        elif kind == "random":
            weights.write_bytes(np.random.default_rng(0).bytes(4096))
        elif kind == "nan":
            state = torch.load(weights, weights_only=True)
            next(iter(state.values())).fill_(float("nan"))
            torch.save(state, weights)

    return damage


def _damage_sidecar(change):
    def damage(weights, meta):
        info = json.loads(meta.read_text())
        meta.write_text(json.dumps(change(info)))

    return damage


DAMAGE = {
    "weights-truncated": (_damage_weights("truncated"), ".pt"),
    "weights-empty": (_damage_weights("empty"), ".pt"),
    "weights-random-bytes": (_damage_weights("random"), ".pt"),
    "weights-nan": (_damage_weights("nan"), "NaN"),
    "sidecar-a-list": (_damage_sidecar(lambda info: [info]), "keys"),
    "sidecar-missing-key": (_damage_sidecar(lambda info: {k: info[k] for k in ("model", "recipe")}), "keys"),
    "sidecar-huge-image": (_damage_sidecar(lambda info: {**info, "image_size": 10**6}), "image_size"),
    "sidecar-accuracy-text": (_damage_sidecar(lambda info: {**info, "test_accuracy": "high"}), "accuracy"),
    "sidecar-not-json": (lambda weights, meta: meta.write_text("{"), "sidecar"),
}


@pytest.mark.parametrize("damage", sorted(DAMAGE))
def test_a_damaged_model_cache_entry_is_retrained_with_a_warning(tmp_path, monkeypatch, damage):
    monkeypatch.setenv("CODEDCOMPUTING_CACHE", str(tmp_path))
    first = models.load("lenet5", TINY, progress=False)
    weights = models.weights_path("lenet5", TINY)
    meta = weights.with_suffix(".json")
    spoil, needle = DAMAGE[damage]
    spoil(weights, meta)
    with pytest.warns(cc.errors.DamagedCacheWarning, match=needle) as caught:
        again = models.load("lenet5", TINY, progress=False)
    assert str(tmp_path) in str(caught[0].message) and "retrain" in str(caught[0].message)
    x = torch.as_tensor(datasets.digits().test_x[:8])
    assert torch.equal(first(x), again(x)) and again.test_accuracy == first.test_accuracy
    assert models.load("lenet5", TINY) is not None  # the entry is whole again: no warning
    assert not list(tmp_path.glob(".*partial*"))


def test_a_damaged_data_cache_is_parsed_again(tmp_path, monkeypatch):
    monkeypatch.setenv("CODEDCOMPUTING_CACHE", str(tmp_path))
    calls = []

    def loader():
        calls.append(1)
        return np.arange(12).reshape(3, 4), np.array([0, 1, 2])

    images, _ = datasets._parsed("toy", loader)
    (tmp_path / "toy-data.npz").write_bytes(b"not a zip file")
    with pytest.warns(cc.errors.DamagedCacheWarning, match="toy-data.npz"):
        again, _ = datasets._parsed("toy", loader)
    np.testing.assert_array_equal(again, images)
    assert len(calls) == 2
    datasets._parsed("toy", loader)
    assert len(calls) == 2  # read from the rebuilt file


# -- --out is checked before the experiment runs -------------------------------------------


@pytest.mark.parametrize("where", ["a-file", "under-a-file"])
def test_an_unwritable_out_fails_at_once_naming_the_path(tmp_path, monkeypatch, where):
    blocker = tmp_path / "blocker"
    blocker.write_text("")
    out = blocker if where == "a-file" else blocker / "results"
    ran = []
    from codedcomputing.experiments import EXPERIMENTS

    monkeypatch.setattr(EXPERIMENTS["polynomial"], "run", lambda *a, **k: ran.append(1))
    result = CliRunner().invoke(app, ["experiment", "polynomial", "--out", str(out)], env={"COLUMNS": "300"})
    assert result.exit_code == 2 and not ran
    assert str(out) in result.output and "Traceback" not in result.output
    with pytest.raises(ValueError, match="out_dir"):
        from codedcomputing.experiments.records import output_dir

        output_dir(out)
