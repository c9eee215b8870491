"""Corners of the codes: near-coincident and extremely scaled points, huge lambdas, LCC from
many results, determinism, pickling, caches that callers cannot corrupt, half precision, ragged
and unusual inputs, gradients, views and empty outputs; each docstring states the behaviour its
test asserts."""

from __future__ import annotations

import copy
import pickle

import numpy as np
import pytest
import scipy.sparse
import torch

import codedcomputing as cc
from codedcomputing.spline import fit
from layouts import paired_knots, relative_error


def test_gcc_with_paired_points_and_smoothing_keeps_its_affine_promise():
    """GCC's promise (affine inputs through affine f come back exactly, at any lambda) holds
    with explicit worker (or data) points in near-coincident pairs, 1e-9 apart, and lambda = 1:
    encode and decode return the affine values within 1e-6, raising nothing."""
    points = paired_knots(12, 1e-9)
    code = cc.GCC(3, 12, lambda_dec=1.0, beta=points)
    X = 0.5 + 2.0 * code.alpha[:, None] * np.array([1.0, -1.0])
    est = code.decode(code.encode(X), np.arange(12))
    # The augmented solve with refinement reaches ~1e-7 here (pairs 1e-9 apart, lambda = 1:
    # entries span 1e-9 to 1e10); well-spread points are exact to rounding (test_codes.py).
    np.testing.assert_allclose(est, X, rtol=0, atol=1e-6)
    code = cc.GCC(12, 20, lambda_enc=1.0, alpha=points)
    X = 0.5 + 2.0 * code.alpha[:, None]
    np.testing.assert_allclose(code.encode(X), 0.5 + 2.0 * code.beta[:, None], rtol=0, atol=1e-6)


def test_huge_finite_lambda_is_rejected_or_gives_the_least_squares_line():
    """lambda_enc = 1e307 (whose products with the point count overflow to inf) is either
    refused with a ValueError naming lambda_enc (what GCC does: it takes lambdas up to 1e100)
    or encodes as the limit, the least-squares line; never NaN."""
    X = np.random.default_rng(0).normal(size=(10, 2))
    try:
        code = cc.GCC(10, 50, lambda_enc=1e307)
    except ValueError as err:
        assert "lambda_enc" in str(err)
        return
    coded = code.encode(X)
    A = np.stack([np.ones(10), code.alpha], axis=1)
    line = np.stack([np.ones(50), code.beta], axis=1) @ np.linalg.lstsq(A, X, rcond=None)[0]
    np.testing.assert_allclose(coded, line, rtol=0, atol=1e-8)


def test_gcc_interpolation_does_not_depend_on_the_scale_of_the_points():
    """With lambda = 0 the natural spline is invariant under scaling the coordinates, as BACC
    and LCC are: GCC with alpha and beta scaled by 1e-200 or 1e200 (where the spline's
    h^2-weights would underflow or overflow unnormalised) encodes as the unscaled code does,
    within 1e-12."""
    ref = cc.GCC(6, 20)
    X = np.random.default_rng(0).normal(size=(6, 2))
    for scale in (1e-200, 1e200):
        code = cc.GCC(6, 20, alpha=scale * ref.alpha, beta=scale * ref.beta)
        np.testing.assert_allclose(code.encode(X), ref.encode(X), rtol=0, atol=1e-12)


def test_lcc_is_exact_from_many_results():
    """LCC is exact (to rounding) from recovery_threshold *or more* results: LCC(5, 400,
    degree=2) with 40 random stragglers decodes f(x) = x^2 within 1e-8 (relative), where a
    polynomial of degree len(alive) - 1 through every result, ill-conditioned on a random
    subset of Chebyshev points, would be off by about 2%."""
    code = cc.LCC(5, 400, degree=2)
    X = np.random.default_rng(0).normal(size=(5, 3))
    Y = code.encode(X) ** 2
    worst = 0.0
    for seed in range(5):
        alive = cc.stragglers.random(400, 40, seed)
        worst = max(worst, relative_error(code.decode(Y[alive], alive), X**2))
    assert worst < 1e-8


def test_lcc_decode_is_deterministic_and_leaves_the_global_rng_alone():
    """LCC.decode neither reads nor advances numpy's global RandomState (scipy's
    BarycentricInterpolator draws a node permutation from it when given no rng): two decodes of
    the same data agree bit for bit whatever the global state, and the state is unchanged, so
    user code seeded with np.random.seed stays reproducible."""
    code = cc.LCC(6, 20)
    alive = np.arange(3, 20)
    Y = np.random.default_rng(0).normal(size=(17, 3))
    saved = np.random.get_state()  # noqa: NPY002
    try:
        np.random.seed(1)  # noqa: NPY002
        first = code.decode(Y, alive)
        after = np.random.get_state()[1].copy()  # noqa: NPY002
        np.random.seed(1)  # noqa: NPY002
        np.random.random()  # the global state moved on: must not matter  # noqa: NPY002
        assert np.array_equal(code.decode(Y, alive), first)
        np.random.seed(1)  # noqa: NPY002
        assert np.array_equal(after, np.random.get_state()[1]), "decode consumed the global RNG"  # noqa: NPY002
    finally:
        np.random.set_state(saved)  # noqa: NPY002


@pytest.mark.parametrize(
    "make", [lambda: cc.GCC(6, 20, 1e-3, 1e-4), lambda: cc.BACC(6, 20)], ids=["gcc", "bacc"]
)
def test_codes_with_decoder_caches_pickle(make):
    """GCC and BACC with cached decoders pickle, and the clone decodes bit for bit as the
    original: a coded-computing master ships its code to processes (multiprocessing, Ray)."""
    code = make()
    clone = pickle.loads(pickle.dumps(code))
    alive = np.arange(2, 18)
    Y = np.random.default_rng(1).normal(size=(16, 2))
    np.testing.assert_array_equal(clone.decode(Y, alive), code.decode(Y, alive))


def test_changing_lambda_dec_never_mixes_stale_and_fresh_decoders():
    """Assigning GCC.lambda_dec after a decode either raises AttributeError (GCC's: a
    read-only property) or is honoured everywhere: an alive set decoded before then decodes as
    a fresh code with the new lambda, never from a decoder cached with the old one."""
    code = cc.GCC(4, 10)
    alive = np.arange(8)
    Y = np.sin(np.arange(16.0).reshape(8, 2))
    code.decode(Y, alive)  # cached with lambda_dec = 0
    try:
        code.lambda_dec = 1.0
    except AttributeError:
        return
    np.testing.assert_allclose(code.decode(Y, alive), cc.GCC(4, 10, 0.0, 1.0).decode(Y, alive), atol=1e-12)


def test_bacc_decoder_matrix_cannot_corrupt_the_cache():
    """An in-place edit of BACC.decoder_matrix(alive) by the caller (D *= weights, say) either
    raises ValueError (the array is read-only, as BACC's is) or leaves later decodes of that
    alive set unchanged."""
    code = cc.BACC(4, 10)
    alive = np.arange(8)
    Y = np.random.default_rng(2).normal(size=(8, 2))
    before = code.decode(Y, alive).copy()
    D = code.decoder_matrix(alive)
    try:
        D *= 0.0
    except ValueError:  # read-only: fine
        pass
    np.testing.assert_array_equal(code.decode(Y, alive), before)


def test_gcc_decoder_map_cannot_corrupt_the_cache():
    """An in-place edit of GCC.decoder(alive).matrix either raises ValueError (read-only) or
    leaves later decodes of that alive set unchanged (to rounding)."""
    code = cc.GCC(4, 10, decoding="spline")
    alive = np.arange(8)
    Y = np.random.default_rng(3).normal(size=(8, 2))
    before = code.decode(Y, alive).copy()
    try:
        code.decoder(alive).matrix[:] = 0.0
    except ValueError:
        pass
    # the decoder may take its banded route on one call and its map on the next: rounding apart
    np.testing.assert_allclose(code.decode(Y, alive), before, rtol=1e-12, atol=1e-14)


def test_the_adaptive_decoders_maps_cannot_corrupt_the_cache():
    code = cc.GCC(4, 10, decoding="adaptive")
    alive = np.arange(8)
    Y = np.random.default_rng(3).normal(size=(8, 2))
    before = code.decode(Y, alive).copy()
    decoder = code.decoder(alive)
    linear = decoder.linear.data if hasattr(decoder.linear, "nnz") else decoder.linear
    for array in (linear, decoder.cubic.matrix):
        try:
            array[...] = 0.0
        except (ValueError, TypeError):  # read-only: fine
            pass
    # as above: the cubic part may take its banded route on one call and its map on the next
    np.testing.assert_allclose(code.decode(Y, alive), before, rtol=1e-12, atol=1e-14)


@pytest.mark.parametrize(
    "dtype", [torch.float16, torch.bfloat16, np.float16], ids=["torch-f16", "torch-bf16", "np-f16"]
)
def test_large_gcc_maps_accept_half_precision(dtype):
    """Large GCC codes, whose decoder maps are sparse (K = 200, N = 2000; the spline and the
    adaptive decoders), encode and decode torch float16 and bfloat16 and numpy float16 and keep
    the dtype, within 5% of the float64 result, though neither torch nor scipy has
    half-precision sparse products (the map is applied in float32 and cast back)."""
    code = cc.GCC(200, 2000, decoding="spline")
    alive = cc.stragglers.random(2000, 200, 0)
    assert scipy.sparse.issparse(code.decoder(alive).matrix)
    rng = np.random.default_rng(4)
    X, Y = rng.normal(size=(200, 3)), rng.normal(size=(1800, 3))
    for data, expected in ((X, code.encode(X)), (Y, code.decode(Y, alive))):
        half = torch.tensor(data, dtype=dtype) if isinstance(dtype, torch.dtype) else data.astype(dtype)
        out = code.encode(half) if data is X else code.decode(half, alive)
        assert out.dtype == half.dtype
        assert relative_error(out, expected) < 5e-2
    adaptive = cc.GCC(200, 2000, decoding="adaptive")  # its linear map is sparse too
    expected = adaptive.decode(Y, alive)
    half = torch.tensor(Y, dtype=dtype) if isinstance(dtype, torch.dtype) else Y.astype(dtype)
    out = adaptive.decode(half, alive)
    assert out.dtype == half.dtype and relative_error(out, expected) < 5e-2


def test_ragged_list_of_tensors_raises_value_error_naming_the_parameter():
    """A list of tensors of different shapes as Y or X raises a ValueError naming Y or X, as a
    ragged list of numpy arrays does (not torch's RuntimeError from stacking)."""
    code = cc.GCC(3, 6)
    with pytest.raises(ValueError, match=r"\bY\b"):
        code.decode([torch.ones(2), torch.ones(3)], [0, 1])
    with pytest.raises(ValueError, match=r"\bX\b"):
        code.encode([torch.ones(2), torch.ones(3), torch.ones(2)])


def test_alive_out_of_range_float_is_reported_as_given():
    """alive=[1e30] raises a ValueError naming alive that shows the index as given, not as a
    cast to int64 would make it (-9223372036854775808)."""
    code = cc.GCC(3, 10)
    with pytest.raises(ValueError, match="alive") as err:
        code.decode(np.ones((1, 2)), [1e30])
    assert "-9223372036854775808" not in str(err.value)


ALL_CODES = [
    pytest.param(lambda: cc.GCC(4, 10), id="gcc"),
    pytest.param(lambda: cc.GCC(4, 10, 1e-3, 1e-2, points="equispaced"), id="gcc-smooth-eq"),
    pytest.param(lambda: cc.GCC(200, 2000), id="gcc-sparse"),
    pytest.param(lambda: cc.GCC(200, 2000, 1e-6, 1e-6), id="gcc-sparse-smooth"),
    pytest.param(lambda: cc.BACC(4, 10), id="bacc"),
    pytest.param(lambda: cc.LCC(4, 10), id="lcc"),
    pytest.param(lambda: cc.Uncoded(4), id="uncoded"),
    pytest.param(lambda: cc.Replication(4, 2), id="replication"),
]


def _linear_map(code, alive):
    """The decoder as an explicit matrix (decode of the identity)."""
    return np.asarray(code.decode(np.eye(alive.size), alive))


@pytest.mark.parametrize("make", ALL_CODES)
def test_gradients_flow_through_encode_and_decode(make):
    """Tensors that require grad: the outputs do too, and the gradient is the map's transpose
    (dense and sparse paths); for the adaptive decoder, the blend's map at the call's theta
    (which autograd treats as a constant)."""
    torch.manual_seed(0)
    code = make()
    K, N = code.num_inputs, code.num_workers
    X = torch.randn(K, 2, dtype=torch.float64, requires_grad=True)
    coded = code.encode(X)
    assert coded.requires_grad
    w = torch.randn_like(coded)
    (coded * w).sum().backward()
    E = np.asarray(code.encode(np.eye(K)))
    np.testing.assert_allclose(X.grad.numpy(), E.T @ w.numpy(), atol=1e-10)
    alive = np.arange(N)
    Y = torch.randn(N, 2, dtype=torch.float64, requires_grad=True)
    est = code.decode(Y, alive)
    assert est.requires_grad
    w = torch.randn_like(est)
    (est * w).sum().backward()
    if code.linear:
        D = _linear_map(code, alive)
    else:  # the blend's map at this call's weights
        D = _blend_map(code, Y.detach().numpy(), alive)
    np.testing.assert_allclose(Y.grad.numpy(), D.T @ w.numpy(), atol=1e-10)


def _blend_map(code, Y, alive):
    """The adaptive or gap-aware decoder's map at the weights it fits to ``Y``."""
    decoder = code.decoder(alive)
    if hasattr(decoder, "apply"):  # gap-aware
        return np.asarray(decoder.apply(np.eye(alive.size), decoder.weights(Y)))
    theta = code.decode_details(Y, alive).info["theta"]
    cubic = decoder.cubic.linear_map
    L, C = (m.toarray() if hasattr(m, "toarray") else np.asarray(m) for m in (decoder.linear, cubic))
    return (1 - theta) * L + theta * C


@pytest.mark.parametrize("decoding", ["adaptive", "gap-aware"])
def test_gradients_through_a_decode_with_a_gap(decoding):
    """With a block of neighbouring workers missing (gap-aware: re-estimated points inside
    the gap and beyond an end), the gradient is the decoder's map at the call's weights."""
    code = cc.GCC(10, 50, decoding=decoding)
    for alive in (np.r_[0:20, 30:50], np.arange(6, 50)):
        beta = code.beta[alive]
        Y = torch.tensor(np.stack([np.sin(3 * beta), np.abs(beta - 0.1)], axis=1), requires_grad=True)
        details = code.decode_details(Y, alive)
        if decoding == "gap-aware":
            assert details.info["gaps"]  # the gap was found
        w = torch.randn_like(details.estimates)
        (details.estimates * w).sum().backward()
        D = _blend_map(code, Y.detach().numpy(), alive)
        np.testing.assert_allclose(Y.grad.numpy(), D.T @ w.numpy(), atol=1e-10)
        np.testing.assert_allclose(details.estimates.detach().numpy(), D @ Y.detach().numpy(), atol=1e-12)


@pytest.mark.parametrize("make", ALL_CODES)
def test_non_contiguous_inputs_give_the_contiguous_result(make):
    """Transposed, permuted and strided views (numpy and torch) are read correctly."""
    code = make()
    K, N = code.num_inputs, code.num_workers
    rng = np.random.default_rng(5)
    base = rng.normal(size=(K, 3, 2))
    views = [
        np.ascontiguousarray(base.transpose(2, 1, 0)).transpose(2, 1, 0),
        np.repeat(base, 2, axis=1)[:, ::2],
        torch.tensor(base.transpose(0, 2, 1)).permute(0, 2, 1),
    ]
    expected = code.encode(base)
    for view in views:
        np.testing.assert_allclose(np.asarray(code.encode(view)), expected, rtol=0, atol=1e-13)
    alive = np.arange(N)[::-1].copy()
    Y = rng.normal(size=(N, 4))
    expected = code.decode(Y, alive)
    np.testing.assert_allclose(code.decode(Y.T.copy().T, alive), expected, rtol=0, atol=1e-13)
    np.testing.assert_allclose(
        code.decode(torch.tensor(Y.T).T, torch.tensor(alive)).numpy(), expected, rtol=0, atol=1e-13
    )


@pytest.mark.parametrize("make", ALL_CODES)
def test_empty_trailing_dimension(make):
    """Shape (K, 0) in, (N, 0) out and back, for numpy and torch."""
    code = make()
    K, N = code.num_inputs, code.num_workers
    for zeros in (np.zeros, torch.zeros):
        assert tuple(code.encode(zeros((K, 0))).shape) == (N, 0)
        assert tuple(code.decode(zeros((N, 0)), np.arange(N)).shape) == (K, 0)


@pytest.mark.parametrize("make", ALL_CODES)
def test_results_as_sequences_and_alive_in_any_integer_form(make):
    """Y as a list of arrays or of tensors; alive as a torch tensor, a list of numpy ints, a
    uint16 array, a range or integral floats: all decode alike."""
    code = make()
    N = code.num_workers
    Y = np.random.default_rng(6).normal(size=(N, 2))
    expected = code.decode(Y, np.arange(N))
    for Ys in (list(Y), [torch.tensor(row) for row in Y]):
        np.testing.assert_allclose(np.asarray(code.decode(Ys, np.arange(N))), expected, atol=1e-13)
    for alive in (
        torch.arange(N),
        [np.int32(i) for i in range(N)],
        np.arange(N, dtype=np.uint16),
        range(N),
        np.arange(N, dtype=float),
    ):
        np.testing.assert_allclose(code.decode(Y, alive), expected, atol=1e-13)
    for bad in (np.ones(N, dtype=bool), np.arange(N) + 0.5, np.arange(N)[:, None]):
        with pytest.raises(ValueError, match="alive"):
            code.decode(Y, bad)


@pytest.mark.parametrize("make", ALL_CODES)
def test_bool_inputs_become_floating_point(make):
    code = make()
    K = code.num_inputs
    mask = np.random.default_rng(7).random((K, 3)) > 0.5
    expected = code.encode(mask.astype(np.float64))
    np.testing.assert_array_equal(code.encode(mask), expected)
    out = code.encode(torch.tensor(mask))
    assert out.is_floating_point()
    np.testing.assert_allclose(out.double().numpy(), expected, rtol=1e-6, atol=1e-6)


@pytest.mark.parametrize("make", ALL_CODES[:6])
@pytest.mark.parametrize("scale", [1e30, 1e-30, 1e300, 1e-300])
def test_maps_are_scale_equivariant_in_the_data(make, scale):
    """Encoding and decoding commute with scaling X and Y, for magnitudes near float64's range
    and (where representable) float32's."""
    code = make()
    K, N = code.num_inputs, code.num_workers
    rng = np.random.default_rng(8)
    X = rng.normal(size=(K, 3))
    alive = np.sort(rng.choice(N, N - N // 10, replace=False))
    Y = np.sin(code.encode(X)[alive])
    coded, est = code.encode(X), code.decode(Y, alive)
    dtypes = (np.float64, np.float32) if scale in (1e30, 1e-30) else (np.float64,)
    for dtype in dtypes:
        tol = 1e-12 if dtype == np.float64 else 1e-5
        assert relative_error(code.encode((scale * X).astype(dtype)) / scale, coded) < tol
        assert relative_error(code.decode((scale * Y).astype(dtype), alive) / scale, est) < tol * 100


@pytest.mark.parametrize("cls", [cc.GCC, cc.BACC, cc.LCC])
def test_explicit_unsorted_points_permute_consistently(cls):
    """alpha and beta given in any order: input k and worker n keep their own points."""
    rng = np.random.default_rng(9)
    ref = cls(6, 20)
    pa, pb = rng.permutation(6), rng.permutation(20)
    code = cls(6, 20, alpha=ref.alpha[pa], beta=ref.beta[pb])
    X = rng.normal(size=(6, 2))
    X_ref = np.empty_like(X)
    X_ref[pa] = X
    np.testing.assert_allclose(code.encode(X), ref.encode(X_ref)[pb], atol=1e-13)
    alive = np.sort(rng.choice(20, 17, replace=False))
    Y = rng.normal(size=(17, 2))
    np.testing.assert_allclose(code.decode(Y, alive), ref.decode(Y, pb[alive])[pa], atol=1e-12)


@pytest.mark.parametrize(("k", "n"), [(1, 2), (2, 2), (3, 2), (2, 3), (30, 5)])
@pytest.mark.parametrize("lam", [0.0, 1e-3, 10.0])
@pytest.mark.parametrize("points", ["chebyshev", "equispaced"])
def test_gcc_tiny_sizes_match_the_spline_fit(k, n, lam, points):
    """K = 1, 2 and N = 2, every pair of results (edges included): encode and decode are the
    spline fits (a constant for K = 1, a line through two points); K > N warns."""
    if k > n:
        with pytest.warns(cc.errors.MoreInputsThanWorkersWarning, match=f"num_inputs = {k} exceeds"):
            code = cc.GCC(k, n, lam, lam, decoding="spline", points=points)
    else:
        code = cc.GCC(k, n, lam, lam, decoding="spline", points=points)
    X = np.random.default_rng(10).normal(size=(k, 3))
    coded = code.encode(X)
    expected = np.repeat(X, n, axis=0) if k == 1 else fit(code.alpha, X, lam)(code.beta)
    np.testing.assert_allclose(coded, expected, rtol=0, atol=1e-13)
    for i in range(n):
        for j in range(i + 1, n):
            Y = np.sin(coded[[j, i]])
            expected = fit(code.beta[[j, i]], Y, lam)(code.alpha)
            np.testing.assert_allclose(code.decode(Y, [j, i]), expected, rtol=0, atol=1e-12)


def test_gcc_large_n_with_smoothing_matches_the_spline_fit():
    """N = 5000 workers, lambda > 0: sparse encoder and decoder agree with spline.fit."""
    code = cc.GCC(500, 5000, 1e-6, 1e-6)
    rng = np.random.default_rng(11)
    X = rng.normal(size=(500, 2))
    coded = code.encode(X)
    assert relative_error(coded, fit(code.alpha, X, 1e-6)(code.beta)) < 1e-11
    alive = cc.stragglers.random(5000, 500, rng)
    Y = np.sin(coded[alive])
    assert relative_error(code.decode(Y, alive), fit(code.beta[alive], Y, 1e-6)(code.alpha)) < 1e-10


@pytest.mark.parametrize(
    "make", [lambda: cc.GCC(6, 20, 1e-3, 1e-3), lambda: cc.BACC(6, 20)], ids=["gcc", "bacc"]
)
def test_gcc_and_bacc_leave_the_global_rng_alone(make):
    saved = np.random.get_state()  # noqa: NPY002
    try:
        np.random.seed(0)  # noqa: NPY002
        before = np.random.get_state()[1].copy()  # noqa: NPY002
        code = make()
        code.decode(np.ones((17, 2)), np.arange(3, 20))
        assert np.array_equal(before, np.random.get_state()[1])  # noqa: NPY002
    finally:
        np.random.set_state(saved)  # noqa: NPY002


def test_deepcopy_of_a_code_decodes_like_the_original():
    """copy.deepcopy works for every code (note: GCC/BACC copies share the original's decoder
    cache, harmless while codes are not mutated)."""
    alive = np.arange(2, 18)
    Y = np.random.default_rng(13).normal(size=(16, 2))
    for code in (cc.GCC(6, 20), cc.BACC(6, 20), cc.LCC(6, 20)):
        np.testing.assert_allclose(copy.deepcopy(code).decode(Y, alive), code.decode(Y, alive), atol=1e-12)
