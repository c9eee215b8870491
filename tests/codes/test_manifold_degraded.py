"""ManifoldGCC's degraded option: inputs whose systematic worker is missing decoded in input
space (codes.input_space) instead of by GCC's spline."""

import pickle

import numpy as np
import pytest

import codedcomputing as cc
from codedcomputing.codes.input_space import kernel_estimates, kernel_map
from codedcomputing.codes.manifold import InputSpaceGCC
from codedcomputing.testing import check_code

torch = pytest.importorskip("torch")


def _batch(k=12, d=6, seed=0):
    return np.random.default_rng(seed).normal(size=(k, d))


def _decode_both(X, f, lost, n=18, **options):
    """Details of both options' decodes with the systematic workers of ``lost`` missing and
    every parity returned."""
    kernel = cc.ManifoldGCC(len(X), n, **options).bind(X)
    spline = cc.ManifoldGCC(len(X), n, degraded="spline", **options).bind(X)
    assert np.array_equal(kernel.alpha, spline.alpha) and np.array_equal(kernel.beta, spline.beta)
    coded = np.asarray(kernel.encode(X))
    alive = np.setdiff1d(np.arange(n), kernel.systematic_workers[lost])
    Y = f(coded)[alive]
    return kernel.decode_details(Y, alive), spline.decode_details(Y, alive), coded, alive, Y


def test_the_default_is_input_space_and_only_missing_rows_change():
    X, lost = _batch(), np.array([3, 7])
    kernel, spline, coded, alive, Y = _decode_both(X, np.tanh, lost)
    assert isinstance(cc.ManifoldGCC(12, 18).bind(X), InputSpaceGCC)
    assert type(cc.ManifoldGCC(12, 18, degraded="spline").bind(X)) is cc.GCC
    exact = kernel.info["exact"]
    assert np.array_equal(exact, spline.info["exact"]) and np.array_equal(np.flatnonzero(~exact), lost)
    assert kernel.info["input_space"].tolist() == lost.tolist()
    # exact rows: the systematic results, bit for bit, in both
    assert np.array_equal(kernel.estimates[exact], np.tanh(X)[exact])
    assert np.array_equal(kernel.estimates[exact], spline.estimates[exact])
    # missing rows: kernel_estimates on the batch's coded inputs (an independent call)
    reference = kernel_estimates(coded, Y, alive, X[lost], amplitude=1.0, length=0.5, ridge=1e-6)
    np.testing.assert_allclose(kernel.estimates[lost], reference, rtol=1e-10, atol=1e-12)
    assert not np.allclose(kernel.estimates[lost], spline.estimates[lost])


def test_every_systematic_worker_back_decodes_as_the_spline_option():
    X = _batch(seed=1)
    kernel, spline, *_ = _decode_both(X, np.sin, np.array([], dtype=int))
    assert np.array_equal(kernel.estimates, spline.estimates) and kernel.info["exact"].all()
    assert "input_space" not in kernel.info


def test_affine_f_is_exact_for_missing_inputs_in_the_affine_variant():
    # with the RBF term off (amplitude 0, ridge 0) the map is the affine inversion: a missing
    # input covered by returned parities (an affine combination of returned coded inputs)
    # gets f exactly for affine f; with the default RBF term it is not promised
    X = _batch(k=10, d=3, seed=2)
    weights, shift = np.random.default_rng(3).normal(size=(3, 2)), np.array([0.5, -1.0])
    f = lambda z: z @ weights + shift  # noqa: E731
    bound = cc.ManifoldGCC(10, 16).bind(X)
    twin = InputSpaceGCC(**{**bound.get_params(), "amplitude": 0.0})
    coded = np.asarray(twin.encode(X))
    lost = np.array([2, 5])
    alive = np.setdiff1d(np.arange(16), twin.systematic_workers[lost])
    estimates = twin.decode(f(coded)[alive], alive)
    np.testing.assert_allclose(estimates, f(X), rtol=0, atol=1e-4)  # to the ridge's bias (1e-6)
    assert np.array_equal(
        estimates[np.setdiff1d(np.arange(10), lost)], f(X)[np.setdiff1d(np.arange(10), lost)]
    )
    exact_map = kernel_map(coded, alive, X[lost], amplitude=0.0, ridge=0.0)
    np.testing.assert_allclose(exact_map @ f(coded)[alive], f(X)[lost], rtol=0, atol=1e-9)


def test_torch_and_numpy_agree_and_keep_dtype():
    X, lost = _batch(seed=4), np.array([0, 11])
    kernel, _, _, alive, Y = _decode_both(X, np.tanh, lost)
    bound = cc.ManifoldGCC(12, 18).bind(X)
    out = bound.decode(torch.tensor(Y, dtype=torch.float32), alive)
    assert isinstance(out, torch.Tensor) and out.dtype == torch.float32
    np.testing.assert_allclose(out.numpy(), kernel.estimates, rtol=1e-4, atol=1e-5)
    as_float32 = bound.decode(Y.astype(np.float32), alive)
    assert as_float32.dtype == np.float32
    # autograd follows the input-space rows (a linear map of Y)
    Yt = torch.tensor(Y, requires_grad=True)
    bound.decode(Yt, alive)[lost].sum().backward()
    assert Yt.grad is not None and torch.count_nonzero(Yt.grad) > 0


def test_results_in_any_order_and_other_trailing_shapes():
    X, lost = _batch(seed=5), np.array([4])
    kernel, _, _, alive, Y = _decode_both(X, np.tanh, lost)
    bound = cc.ManifoldGCC(12, 18).bind(X)
    perm = np.random.default_rng(6).permutation(alive.size)
    np.testing.assert_allclose(bound.decode(Y[perm], alive[perm]), kernel.estimates, rtol=1e-9, atol=1e-12)
    wide = bound.decode(np.stack([Y, 2 * Y], axis=1), alive)  # results (|F|, 2, 6)
    assert wide.shape == (12, 2, 6)
    np.testing.assert_allclose(wide[:, 1], 2 * kernel.estimates, rtol=1e-9, atol=1e-12)


def test_bad_option_names_the_parameter():
    with pytest.raises(ValueError, match="degraded"):
        cc.ManifoldGCC(5, 8, degraded="kernel")
    with pytest.raises(ValueError, match="amplitude"):
        InputSpaceGCC(3, 5, batch=np.ones((3, 2)), amplitude=-1.0)
    with pytest.raises(ValueError, match="length"):
        InputSpaceGCC(3, 5, batch=np.ones((3, 2)), length=0.0)
    with pytest.raises(ValueError, match="batch"):
        InputSpaceGCC(3, 5, batch=np.ones((4, 2)))


def test_params_and_pickling_keep_the_option():
    code = cc.ManifoldGCC(6, 9, degraded="spline")
    assert code.get_params()["degraded"] == "spline" and "degraded='spline'" in repr(code)
    assert type(code)(**code.get_params()).degraded == "spline"
    assert pickle.loads(pickle.dumps(code)).degraded == "spline"
    assert cc.ManifoldGCC(6, 9).degraded == "auto"
    X, lost = _batch(k=6, d=4, seed=7), np.array([1])
    bound = cc.ManifoldGCC(6, 9).bind(X)
    alive = np.setdiff1d(np.arange(9), bound.systematic_workers[lost])
    Y = np.tanh(np.asarray(bound.encode(X)))[alive]
    before = bound.decode(Y, alive)
    for twin in (pickle.loads(pickle.dumps(bound)), type(bound)(**bound.get_params())):
        assert isinstance(twin, InputSpaceGCC) and np.array_equal(twin.batch, bound.batch)
        np.testing.assert_allclose(twin.decode(Y, alive), before, rtol=1e-12, atol=1e-14)


def test_not_applied_to_thin_plate_or_non_systematic_layouts():
    X = _batch(k=6, d=3, seed=8)
    assert type(cc.ManifoldGCC(6, 9, systematic=False).bind(X)) is cc.GCC
    with pytest.warns(cc.errors.MoreInputsThanWorkersWarning):
        assert type(cc.ManifoldGCC(6, 4).bind(X)) is cc.GCC  # K > N: not snapped
    assert not isinstance(cc.ManifoldGCC(6, 9, layout="thin-plate").bind(X), InputSpaceGCC)


def test_both_options_pass_the_conformance_suite():
    sizes = ((1, 3), (4, 9), (7, 10))
    assert check_code(lambda k, n: cc.ManifoldGCC(k, n), sizes=sizes)[0] == "check_binding"
    assert check_code(lambda k, n: cc.ManifoldGCC(k, n, degraded="spline"), sizes=sizes)[0] == "check_binding"


def test_auto_decodes_in_input_space_up_to_three_workers_per_input_then_by_the_spline():
    """The default switches at N = 3 K: the input-space estimate's mean MSE was below the
    spline's up to 3 K workers and above it at 5 K (docs/degraded.rst)."""
    X = _batch(k=6, d=3, seed=9)
    assert cc.ManifoldGCC(6, 18).degraded == "auto"
    assert isinstance(cc.ManifoldGCC(6, 18).bind(X), InputSpaceGCC)  # N = 3 K
    assert type(cc.ManifoldGCC(6, 19).bind(X)) is cc.GCC  # N > 3 K: the spline
    assert isinstance(cc.ManifoldGCC(6, 19, degraded="input-space").bind(X), InputSpaceGCC)
    assert type(cc.ManifoldGCC(6, 9, degraded="spline").bind(X)) is cc.GCC
    with pytest.raises(ValueError, match="degraded"):
        cc.ManifoldGCC(6, 9, degraded="Auto")
