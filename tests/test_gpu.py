"""Torch tensors on a device stay there through encode, decode and the executor.

Without CUDA the device paths are followed on CPU tensors by pretending the CPU is a device
(``_arraylib._HOST_DEVICES`` emptied: numpy does not read tensors in place), while a
:class:`torch.overrides.TorchFunctionMode` records every call that would bring a tensor's data
to the host: ``Tensor.cpu``, ``.numpy``, ``.tolist``, ``__array__``, ``.to`` the CPU, and the
scalar reads ``.item``, ``__bool__``, ``__float__``, ``__int__``, ``__index__``. A scalar read
of a one-element tensor is a sync, not a transfer of the data: the finiteness check at the
public API needs one per validated array (encode: ``X``; decode: ``Y``), and so does the
cluster's check of each worker's output (``runtime/collect.py``), and no more may happen,
except that GCC's gap-aware and adaptive blends read back, in one ``tolist`` per decode, the
few numbers their weight fits need (counted per decoder by ``_fit_numbers``), never the
results.

The tests marked ``cuda`` run the same on a real GPU and skip without one.
"""

from __future__ import annotations

import gc

import numpy as np
import pytest
import scipy.interpolate

torch = pytest.importorskip("torch")
from torch.overrides import TorchFunctionMode  # noqa: E402

import codedcomputing as cc  # noqa: E402
from codedcomputing import _arraylib  # noqa: E402
from codedcomputing.runtime import CodedExecutor, SimulatedCluster, ThreadCluster  # noqa: E402
from codedcomputing.spline import SplineDecoder  # noqa: E402

cuda = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")

DATA_READS = {"cpu", "numpy", "tolist", "__array__"}
SCALAR_READS = {"item", "__bool__", "__float__", "__int__", "__index__"}


def _is_cpu(value) -> bool:
    return (isinstance(value, str) and value.startswith("cpu")) or (
        isinstance(value, torch.device) and value.type == "cpu"
    )


class HostReads(TorchFunctionMode):
    """Records the calls that read a tensor's data on the host: ``data`` (name, shape of the
    tensor read), ``scalars`` (the same for one-element reads) and ``uploads`` (maps built
    as torch tensors: ``tensor`` and ``sparse_csr_tensor`` calls)."""

    def __init__(self):
        super().__init__()
        self.data, self.scalars, self.uploads = [], [], []

    def __torch_function__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        name = getattr(func, "__name__", "")
        target = args[0] if args and isinstance(args[0], torch.Tensor) else None
        shape = tuple(target.shape) if target is not None else None
        if name in DATA_READS or (name == "to" and any(map(_is_cpu, (*args[1:], *kwargs.values())))):
            self.data.append((name, shape))
        elif name in SCALAR_READS:
            (self.scalars if target is None or target.numel() <= 1 else self.data).append((name, shape))
        elif name in ("tensor", "sparse_csr_tensor"):
            self.uploads.append(name)
        return func(*args, **kwargs)


@pytest.fixture
def pretend_device(monkeypatch):
    """CPU tensors follow the device paths; the map copies start empty."""
    monkeypatch.setattr(_arraylib, "_HOST_DEVICES", frozenset())
    _arraylib.device_copies.clear()
    yield
    _arraylib.device_copies.clear()


def _alive(num_workers: int, stragglers: int, seed: int) -> np.ndarray:
    """Random stragglers, keeping both end workers (the estimates are then interpolation)."""
    rng = np.random.default_rng(seed)
    inner = rng.choice(np.arange(1, num_workers - 1), num_workers - 2 - stragglers, replace=False)
    return np.sort(np.concatenate([[0, num_workers - 1], inner]))


def _natural_spline(knots, values, points):
    """The natural cubic interpolant (scipy, independent of the package's Reinsch code),
    extended linearly beyond the knots, as the minimiser is."""
    order = np.argsort(knots)
    spline = scipy.interpolate.CubicSpline(knots[order], values[order], bc_type="natural")
    end = np.clip(points, knots.min(), knots.max())
    return spline(end) + spline(end, 1) * (points - end)[:, None]


def _berrut(nodes, values, points):
    """Berrut's rational interpolant, written out: w_j = (-1)^j / (z - t_j) over sorted nodes."""
    order = np.argsort(nodes)
    nodes, values = nodes[order], values[order]
    signs = (-1.0) ** np.arange(nodes.size)
    weights = signs / (points[:, None] - nodes[None, :])
    return (weights @ values) / weights.sum(axis=1, keepdims=True)


def _round_trip(code, X, alive, f=torch.tanh):
    """``(estimates, reads of the encode, reads of the warm decode)``: the decode runs once,
    with the decoder's map built as a reused decoder's ends up (see
    ``test_a_reused_decoder_ends_with_its_map_on_the_device``), then again under the recorder."""
    with HostReads() as encoding:
        coded = code.encode(X)
    Y = f(coded)[torch.as_tensor(alive)]
    decoder = getattr(code, "decoder", None)
    if decoder is not None and isinstance(decoder(alive), SplineDecoder):
        decoder(alive).smoothing_map  # noqa: B018 (built and cached)
    code.decode(Y, alive)
    with HostReads() as decoding:
        estimates = code.decode(Y, alive)
    return estimates, encoding, decoding


def _assert_stays(reads: HostReads, scalars: int = 1) -> None:
    assert reads.data == [], f"data read on the host: {reads.data}"
    assert len(reads.scalars) <= scalars, f"scalar reads: {reads.scalars}"


# ---------------------------------------------------------------------------------------------
# encode and decode
# ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "num_inputs, num_workers, stragglers",
    [(10, 50, 10), (40, 400, 80)],  # a dense map; a two-stage encoder and a sparse decoder
)
def test_gcc_spline_stays_on_the_device(pretend_device, num_inputs, num_workers, stragglers):
    code = cc.GCC(num_inputs, num_workers, decoding="spline")
    X = torch.as_tensor(np.random.default_rng(0).normal(size=(num_inputs, 3)))
    alive = _alive(num_workers, stragglers, 1)
    estimates, encoding, decoding = _round_trip(code, X, alive)
    _assert_stays(encoding)
    _assert_stays(decoding)
    assert decoding.uploads == []  # the map crossed once, at the first decode
    coded = _natural_spline(code.alpha, X.numpy(), code.beta)
    expected = _natural_spline(code.beta[alive], np.tanh(coded[alive]), code.alpha)
    np.testing.assert_allclose(estimates.numpy(), expected, rtol=1e-9, atol=1e-9)


def test_gcc_smoothing_spline_stays_on_the_device(pretend_device):
    code = cc.GCC(12, 60, lambda_enc=1e-4, lambda_dec=1e-3)
    X = torch.as_tensor(np.random.default_rng(2).normal(size=(12, 4)))
    alive = _alive(60, 15, 3)
    estimates, encoding, decoding = _round_trip(code, X, alive)
    _assert_stays(encoding)
    _assert_stays(decoding)
    Y = torch.tanh(code.encode(X))[alive].numpy()
    fit = scipy.interpolate.make_smoothing_spline(code.beta[alive], Y, lam=alive.size * 1e-3)
    np.testing.assert_allclose(estimates.numpy(), fit(code.alpha), rtol=1e-7, atol=1e-8)


def test_a_reused_decoder_ends_with_its_map_on_the_device(pretend_device):
    """Where building the map is dearer than a banded solve's round trip (lam > 0, a wide
    band), a decoder solves on the host at first; reused, it builds its map (the ski-rental
    rule, the round trips counted) and from then on stays on the device."""
    knots, points = np.sort(np.random.default_rng(4).uniform(-1, 1, 400)), np.linspace(-0.9, 0.9, 40)
    decoder = SplineDecoder(knots, 1e-2, points)
    assert decoder.plan(10, device=True) == "banded"
    y = torch.as_tensor(np.random.default_rng(5).normal(size=(400, 10)))
    with HostReads() as reads:
        decoder(y)
    assert reads.data  # the banded solve's round trip
    costs = decoder.costs
    saving = costs.banded_seconds(10, factored=True, device=True) - costs.map_seconds(10, built=True)
    calls = 1
    while decoder._map is None:
        decoder(y)
        calls += 1
        assert calls <= costs.map_build / saving + 2
    with HostReads() as reads:
        out = decoder(y)
    _assert_stays(reads, scalars=0)
    np.testing.assert_allclose(out.numpy(), decoder.banded(y.numpy()), rtol=1e-8, atol=1e-10)


def test_the_round_trip_counts_against_the_banded_route():
    """On the host a banded solve is predicted cheaper for this decoder; on a device, with
    the copies to the host and back, the map."""
    knots, points = np.sort(np.random.default_rng(24).uniform(-1, 1, 100)), np.linspace(-0.9, 0.9, 10)
    decoder = SplineDecoder(knots, 0.0, points)
    assert (decoder.plan(10), decoder.plan(10, device=True)) == ("banded", "map")
    costs = decoder.costs
    assert costs.banded_seconds(10, device=True) > costs.banded_seconds(10)


@pytest.mark.parametrize("num_inputs, num_workers", [(10, 40), (250, 2500)])  # dense maps; fast sums
def test_bacc_stays_on_the_device(pretend_device, num_inputs, num_workers):
    code = cc.BACC(num_inputs, num_workers)
    X = torch.as_tensor(np.random.default_rng(6).normal(size=(num_inputs, 3)))
    alive = np.sort(np.random.default_rng(7).choice(num_workers, num_workers * 3 // 4, replace=False))
    code.encode(X)  # the first encode copies the map, or builds the fast sums
    estimates, encoding, decoding = _round_trip(code, X, alive)
    _assert_stays(encoding)
    _assert_stays(decoding)
    assert encoding.uploads == decoding.uploads == []
    coded = _berrut(code.alpha, X.numpy(), code.beta)
    expected = _berrut(code.beta[alive], np.tanh(coded[alive]), code.alpha)
    np.testing.assert_allclose(estimates.numpy(), expected, rtol=1e-9, atol=1e-9)


@pytest.mark.parametrize(
    "options",
    [
        {"decoding": "spline", "degraded": "spline"},
        {"decoding": "spline", "degraded": "input-space"},  # its kernel map crosses at each decode
        {"layout": "thin-plate"},
    ],
)
def test_bound_manifold_code_stays_on_the_device(pretend_device, options):
    """ManifoldGCC's layout is computed on the host from the batch (``bind``: distances, a
    graph, an ordering: the math needs the data there); the bound code's encode and decode
    then stay on the device."""
    t = np.random.default_rng(8).permutation(12) / 11.0
    points = np.stack([np.cos(3 * t), np.sin(3 * t)], axis=1)
    num_workers = 30 if options.get("degraded") == "input-space" else 60  # input space: N <= 3K
    code = cc.ManifoldGCC(12, num_workers, **options)
    bound = code.bind(points)
    X = torch.as_tensor(points)
    alive = _alive(code.num_workers, code.num_workers // 5, 9)
    estimates, encoding, decoding = _round_trip(bound, X, alive, f=lambda x: x)
    _assert_stays(encoding)
    _assert_stays(decoding)
    reference = bound.decode_details(bound.encode(points)[alive], alive)
    if "degraded" in options:
        assert ("input_space" in reference.info) == (options["degraded"] == "input-space")
    reference = reference.estimates
    np.testing.assert_allclose(estimates.numpy(), reference, rtol=1e-10, atol=1e-12)


def _fit_numbers(decoder) -> int:
    """How many numbers a blend's weight fit reads back from the device, in one ``tolist``:
    theta's 3 (a scale and two inner products), and for the gap-aware decoder 10 a fitted
    group inside gaps (a scale and a 3 x 3 Gram matrix) and ``1 + c^2`` an end (``c``
    candidates)."""
    count = 3
    for group in getattr(decoder, "groups", []):
        if group.block is not None:
            count += 10
        elif group.fixed is None:
            count += 1 + len(group.validation) ** 2
    return count


@pytest.mark.parametrize(
    "decoding, dropped",
    [
        ("auto", None),  # random stragglers
        ("adaptive", None),
        ("auto", np.r_[0:3, 20:30, 33:36, 47:50]),  # gaps of two sizes and both ends missing
    ],
)
def test_gcc_blends_stay_on_the_device(pretend_device, monkeypatch, decoding, dropped):
    """The blends' weights are fitted on the device: the results never cross, only the few
    numbers the theta and simplex fits need (:func:`_fit_numbers`, one read), and the
    estimates are the numpy decode's."""
    code = cc.GCC(10, 50, decoding=decoding)
    X = torch.as_tensor(np.random.default_rng(10).normal(size=(10, 3)))
    alive = _alive(50, 10, 11) if dropped is None else np.setdiff1d(np.arange(50), dropped)
    estimates, _, reads = _round_trip(code, X, alive)
    numbers = _fit_numbers(code.decoder(alive))
    assert reads.data == [("tolist", (numbers,))]
    assert len(reads.scalars) <= 1  # the finiteness check of Y
    if dropped is not None:
        assert {g.label[0] for g in code.decoder(alive).groups} == {"gap", "edge"}
        assert numbers > 3 + 2 * 10
    Y = torch.tanh(code.encode(X))[torch.as_tensor(alive)].numpy()
    monkeypatch.setattr(_arraylib, "_HOST_DEVICES", frozenset({"cpu"}))  # the numpy decode, as reference
    np.testing.assert_allclose(estimates.numpy(), code.decode(Y, alive), rtol=1e-10, atol=1e-12)


def test_validation_reads_rows_only_when_some_are_not_finite(pretend_device):
    code = cc.GCC(4, 12, decoding="spline")
    X = torch.ones(4, 3, dtype=torch.float64)
    X[2, 1] = torch.nan
    with pytest.raises(ValueError, match=r"rows \[2\]"):
        code.encode(X)
    Y = torch.tanh(code.encode(torch.ones(4, 3, dtype=torch.float64)))
    Y[5] = torch.inf
    with pytest.warns(cc.NonFiniteResultWarning, match=r"workers \[5\]"):
        decoded = code.decode_details(Y, np.arange(12))
    assert 5 not in decoded.alive


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.complex64])
def test_device_outputs_keep_dtype_and_device(pretend_device, dtype):
    for code in (cc.GCC(8, 30, decoding="spline"), cc.BACC(8, 30), cc.GCC(8, 30, lambda_dec=1e-3)):
        X = torch.randn(8, 5, dtype=dtype, generator=torch.Generator().manual_seed(12))
        coded = code.encode(X)
        assert (coded.dtype, coded.device, tuple(coded.shape)) == (dtype, X.device, (30, 5))
        alive = _alive(30, 6, 13)
        estimates = code.decode(coded[torch.as_tensor(alive)], alive)
        assert (estimates.dtype, estimates.device, tuple(estimates.shape)) == (dtype, X.device, (8, 5))
        tol = 1e-4 if dtype != torch.float64 else 1e-12
        plain = code.decode(coded.numpy()[alive], alive)
        np.testing.assert_allclose(estimates.numpy(), plain, rtol=tol, atol=tol)


def _dense(matrix) -> np.ndarray:
    return matrix.toarray() if hasattr(matrix, "toarray") else np.asarray(matrix)


@pytest.mark.parametrize("num_inputs, num_workers", [(6, 24), (40, 400)])  # dense maps; sparse ones
def test_gradients_flow_through_the_device_path(pretend_device, num_inputs, num_workers):
    """d/dX sum(w * decode(encode(X))) is (D E)^T w for the linear maps E and D."""
    code = cc.GCC(num_inputs, num_workers, decoding="spline")
    alive = _alive(num_workers, num_workers // 5, 14)
    generator = torch.Generator().manual_seed(15)
    X = torch.randn(num_inputs, 3, dtype=torch.float64, generator=generator, requires_grad=True)
    w = torch.randn(num_inputs, 3, dtype=torch.float64, generator=generator)
    estimates = code.decode(code.encode(X)[torch.as_tensor(alive)], alive)
    (w * estimates).sum().backward()
    E, D = _dense(code.encoder.linear_map), _dense(code.decoder(alive).linear_map)
    np.testing.assert_allclose(X.grad.numpy(), (D @ E[alive]).T @ w.numpy(), rtol=1e-10, atol=1e-12)


# ---------------------------------------------------------------------------------------------
# the map copies
# ---------------------------------------------------------------------------------------------


def test_device_copies_live_as_long_as_their_map(pretend_device):
    matrix = np.random.default_rng(17).normal(size=(5, 7))
    matrix.flags.writeable = False
    x = torch.ones(7, 2, dtype=torch.float32)
    first = _arraylib.apply_matrix(matrix, x)
    assert len(_arraylib.device_copies) == 1
    with HostReads() as reads:
        again = _arraylib.apply_matrix(matrix, x)
    assert reads.uploads == [] and torch.equal(first, again)
    _arraylib.apply_matrix(matrix, x.double())  # one copy per dtype
    assert len(_arraylib.device_copies) == 2
    del matrix
    gc.collect()
    assert len(_arraylib.device_copies) == 0


def test_copies_made_in_inference_mode_serve_autograd_later(pretend_device):
    """A server decodes under ``torch.inference_mode``; a later training step through the same
    cached map must still get gradients."""
    code = cc.GCC(5, 20, decoding="spline")
    X = torch.randn(5, 2, dtype=torch.float64, generator=torch.Generator().manual_seed(22))
    with torch.inference_mode():
        code.encode(X)
    X.requires_grad_(True)
    code.encode(X).sum().backward()
    E = code.encoder.linear_map
    np.testing.assert_allclose(X.grad.numpy(), np.repeat(E.sum(axis=0)[:, None], 2, axis=1), rtol=1e-12)


def test_threads_share_one_copy(pretend_device):
    from concurrent.futures import ThreadPoolExecutor

    matrix = np.random.default_rng(23).normal(size=(40, 30))
    matrix.flags.writeable = False
    xs = [torch.full((30, 3), float(i), dtype=torch.float64) for i in range(16)]
    with ThreadPoolExecutor(4) as pool:
        outs = list(pool.map(lambda x: _arraylib.apply_matrix(matrix, x), xs))
    for x, out in zip(xs, outs, strict=True):
        np.testing.assert_allclose(out.numpy(), matrix @ x.numpy(), rtol=1e-12)
    assert len(_arraylib.device_copies) == 1


def test_writeable_maps_are_never_kept(pretend_device):
    matrix = np.eye(3)
    x = torch.ones(3, 2, dtype=torch.float64)
    assert torch.equal(_arraylib.apply_matrix(matrix, x), x)
    matrix[0, 0] = 2.0  # the caller may change it: the next call sees the change
    assert _arraylib.apply_matrix(matrix, x)[0, 0].item() == 2.0
    assert len(_arraylib.device_copies) == 0


def test_sparse_map_copies(pretend_device):
    import scipy.sparse

    matrix = scipy.sparse.random(30, 20, density=0.1, random_state=18, format="csr")
    matrix.data.flags.writeable = False
    x = torch.as_tensor(np.random.default_rng(19).normal(size=(20, 4)))
    out = _arraylib.apply_matrix(matrix, x)
    np.testing.assert_allclose(out.numpy(), matrix @ x.numpy(), rtol=1e-12)
    assert len(_arraylib.device_copies) == 1
    half = _arraylib.apply_matrix(matrix, x.half())  # float32 kernels, the result in half
    assert half.dtype == torch.float16


# ---------------------------------------------------------------------------------------------
# the executor
# ---------------------------------------------------------------------------------------------


def _torch_f(x):
    return torch.tanh(x @ torch.ones(x.shape[1], 2, dtype=x.dtype, device=x.device))


@pytest.mark.parametrize("cluster", ["simulated", "threads"])
def test_executor_stays_on_the_device(pretend_device, cluster):
    num_inputs, num_workers = 8, 32
    code = cc.GCC(num_inputs, num_workers, decoding="spline", systematic=True)
    backend = SimulatedCluster(seed=0) if cluster == "simulated" else ThreadCluster(num_threads=2, seed=0)
    try:
        executor = CodedExecutor(code, _torch_f, backend)
        X = torch.as_tensor(np.random.default_rng(20).normal(size=(num_inputs, 3)))
        code.decoder(np.arange(num_workers)).smoothing_map  # noqa: B018 (cached, as a reused one's ends up)
        first = executor.run(X, wait_for=num_workers)  # every alive set the same: the decoder is cached
        with HostReads() as reads:
            result = executor.run(X, wait_for=num_workers)
        # the finiteness checks: X, every worker's output, Y
        _assert_stays(reads, scalars=num_workers + 2)
        assert reads.uploads == []
        assert isinstance(result.estimates, torch.Tensor) and result.estimates.dtype == torch.float64
        np.testing.assert_allclose(result.estimates.numpy(), first.estimates.numpy(), rtol=1e-12)
        np.testing.assert_allclose(result.estimates.numpy(), _torch_f(X).numpy(), rtol=1e-12)  # systematic
        with HostReads() as reads:
            answers = executor.run_queries(X)
        _assert_stays(reads, scalars=num_workers + 2)
        assert answers.answered.all()
        np.testing.assert_allclose(answers.estimates.numpy(), _torch_f(X).numpy(), rtol=1e-12)
    finally:
        if hasattr(backend, "close"):
            backend.close()


# ---------------------------------------------------------------------------------------------
# on a real GPU
# ---------------------------------------------------------------------------------------------


@cuda
@pytest.mark.parametrize("code", [cc.GCC(10, 50, decoding="spline"), cc.BACC(10, 50), cc.GCC(10, 50)])
def test_cuda_round_trip(code):
    X = torch.randn(10, 64, dtype=torch.float32, device="cuda", generator=None)
    alive = _alive(50, 10, 21)
    estimates, encoding, decoding = _round_trip(code, X, alive)
    assert estimates.device == X.device and estimates.dtype == X.dtype
    reference = code.decode(torch.tanh(code.encode(X.cpu()))[torch.as_tensor(alive)], alive)
    np.testing.assert_allclose(estimates.cpu().numpy(), reference.numpy(), rtol=1e-4, atol=1e-5)
    if code.linear:
        _assert_stays(encoding)
        _assert_stays(decoding)


@cuda
def test_cuda_executor_and_gradients():
    code = cc.GCC(8, 32, decoding="spline")
    X = torch.randn(8, 3, dtype=torch.float64, device="cuda")
    result = CodedExecutor(code, _torch_f, SimulatedCluster(seed=0)).run(X, wait_for=24)
    assert result.estimates.device == X.device
    X.requires_grad_(True)
    code.decode(code.encode(X)[torch.as_tensor(result.alive, device="cuda")], result.alive).sum().backward()
    assert X.grad.device == X.device and torch.isfinite(X.grad).all()


# ---------------------------------------------------------------------------------------------
# the benchmark
# ---------------------------------------------------------------------------------------------


def _bench_gpu():
    import importlib.util
    from pathlib import Path

    path = Path(__file__).resolve().parents[1] / "benchmarks" / "perf" / "bench_gpu.py"
    spec = importlib.util.spec_from_file_location("bench_gpu", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.mark.skipif(torch.cuda.is_available(), reason="checks the message given without CUDA")
def test_bench_gpu_says_when_there_is_no_cuda(capsys):
    assert _bench_gpu().main([]) == 2
    assert "no CUDA device" in capsys.readouterr().out


def test_bench_gpu_smoke_run_on_the_cpu(capsys):
    bench = _bench_gpu()
    assert bench.main(["--device", "cpu", "--quick", "--sizes", "20", "200", "--repeats", "1"]) == 0
    lines = capsys.readouterr().out.splitlines()
    rows = [line.split() for line in lines if line.split()[:1] in (["gcc-spline"], ["gcc-default"], ["bacc"])]
    assert len(rows) == 6 and all(float(row[4]) > 0 and float(row[8]) > 0 for row in rows)
    assert any(line.startswith("lenet5") for line in lines)
