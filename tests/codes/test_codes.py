"""Conformance suite for every code (``encode``/``decode`` contract), plus each code's promise.

The conformance part runs every entry of ``SPECS``; the code-specific part checks what each
docstring promises (LCC exactness, GCC affine reproduction, BACC constants, uncoded and
replication copying), agreement with independent references (scipy splines, Berrut's
formula) and that GCC's two paths for its linear maps (a dense matrix for small maps, a
large-map path for big ones) agree.
"""

from __future__ import annotations

import itertools
import time
import warnings
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

import codedcomputing as cc
from codedcomputing.testing import CHECKS, check_code

K, N = 6, 20


@dataclass(frozen=True)
class Spec:
    id: str
    name: str  # the expected lower-case scheme name
    make: Callable[[int, int], cc.Code]  # (num_inputs, num_workers) -> code
    workers: Callable[[int, int], int]  # (num_inputs, num_workers) -> expected num_workers


def _given_n(k: int, n: int) -> int:
    return n


SPECS = [
    Spec("gcc", "gcc", lambda k, n: cc.GCC(num_inputs=k, num_workers=n), _given_n),
    Spec(
        "gcc-smoothing",
        "gcc",
        lambda k, n: cc.GCC(num_inputs=k, num_workers=n, lambda_enc=1e-4, lambda_dec=1e-5),
        _given_n,
    ),
    Spec("gcc-equispaced", "gcc", lambda k, n: cc.GCC(k, n, points="equispaced"), _given_n),
    Spec("bacc", "bacc", lambda k, n: cc.BACC(k, n), _given_n),
    Spec("lcc-deg1", "lcc", lambda k, n: cc.LCC(k, n, degree=1), _given_n),
    Spec("lcc-deg2", "lcc", lambda k, n: cc.LCC(k, n, degree=2), _given_n),
    Spec("uncoded", "uncoded", lambda k, n: cc.Uncoded(k), lambda k, n: k),
    Spec("replication", "replication", lambda k, n: cc.Replication(k, replicas=3), lambda k, n: 3 * k),
    Spec("robust-gcc", "robust-gcc", lambda k, n: cc.RobustGCC(k, n, num_adversaries=1, bound=1e3), _given_n),
    Spec("approxifer", "approxifer", lambda k, n: cc.ApproxIFER(k, n, num_adversaries=1), _given_n),
]

ARRAYS = [
    pytest.param("numpy", np.float32, id="np-f32"),
    pytest.param("numpy", np.float64, id="np-f64"),
    pytest.param("torch", torch.float32, id="torch-f32"),
    pytest.param("torch", torch.float64, id="torch-f64"),
]


@pytest.fixture(params=SPECS, ids=[s.id for s in SPECS])
def spec(request) -> Spec:
    return request.param


@pytest.fixture
def code(spec) -> cc.Code:
    return spec.make(K, N)


# -- helpers ---------------------------------------------------------------------------


def as_kind(x: np.ndarray, kind: str, dtype=None):
    if kind == "torch":
        return torch.tensor(x, dtype=dtype or torch.float64)
    return np.asarray(x, dtype=dtype or np.float64)


def to_numpy(x) -> np.ndarray:
    return x.detach().cpu().numpy() if isinstance(x, torch.Tensor) else np.asarray(x)


def sin(x):
    return torch.sin(x) if isinstance(x, torch.Tensor) else np.sin(x)


def default_alive(code: cc.Code) -> np.ndarray:
    """Every worker for uncoded; else all but workers 1, 2, 3 (distinct replication inputs)."""
    if isinstance(code, cc.Uncoded):
        return np.arange(code.num_workers)
    return np.setdiff1d(np.arange(code.num_workers), [1, 2, 3])


def rel_err(est, truth) -> float:
    est, truth = to_numpy(est), to_numpy(truth)
    return float(np.max(np.abs(est - truth)) / np.max(np.abs(truth)))


def assert_same_kind(out, like) -> None:
    if isinstance(like, torch.Tensor):
        assert isinstance(out, torch.Tensor)
        assert out.dtype == like.dtype
        assert out.device == like.device
    else:
        assert type(out) is np.ndarray
        assert out.dtype == like.dtype


def roundoff(code, alive, Y, factor: float = 1e-12) -> float:
    """An absolute tolerance for comparing two decodings of ``Y`` that differ only by
    rounding: ``factor * ||D||_inf * max|Y|`` with ``D`` the (linear) decoding matrix.

    LCC's matrix is badly conditioned over the reals (``||D||_inf`` ~ 1e4 for K = 6 with
    17 of 20 workers), so summation order alone moves its output by ~1e-12 relative.
    """
    D = to_numpy(decode_quietly(code, np.eye(len(alive)), alive))
    return factor * float(np.abs(D).sum(axis=1).max()) * float(np.max(np.abs(to_numpy(Y))))


def encode_roundoff(code, X, factor: float = 1e-12) -> float:
    """Like :func:`roundoff`, for two encodings of ``X``."""
    E = to_numpy(code.encode(np.eye(code.num_inputs)))  # the (linear) encoding matrix
    return factor * float(np.abs(E).sum(axis=1).max()) * float(np.max(np.abs(to_numpy(X))))


def decode_quietly(code, Y, alive, **kwargs):
    """Decode, failing on any warning."""
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        return code.decode(Y, alive, **kwargs)


# == conformance: every code, through the shipped suite =====================================


@pytest.mark.parametrize("spec_", SPECS, ids=[s.id for s in SPECS])
def test_every_code_passes_the_conformance_suite(spec_):
    """codedcomputing.testing.check_code: shapes, kinds, bad input, erasures, pickling, threads
    and the code's promise, at three sizes."""
    assert check_code(spec_.make) == [check.__name__ for check in CHECKS]


@pytest.mark.parametrize("lambda_dec", ["gcv", 1e-3])
def test_gcc_variants_pass_the_conformance_suite(lambda_dec):
    check_code(lambda k, n: cc.GCC(k, n, lambda_enc=1e-4, lambda_dec=lambda_dec))
    check_code(lambda k, n: cc.GCC(k, n, points="equispaced"), sizes=((6, 20), (4, 5)))


def test_codes_with_options_pass_the_conformance_suite():
    check_code(lambda k, n: cc.LCC(k, n, degree=2, best_effort=True))
    for decoding in ("adaptive", "spline"):
        check_code(lambda k, n, decoding=decoding: cc.GCC(k, n, decoding=decoding))
    check_code(lambda k, n: cc.GCC(k, n, assignment="golden"))
    check_code(lambda k, n: cc.BACC(k, n, assignment="golden"))
    for loss in cc.codes.robust.LOSSES:  # with and without a bound, golden too
        for bound in (None, 1e3):
            for assignment in ("natural", "golden"):
                check_code(
                    lambda k, n, loss=loss, bound=bound, a=assignment: cc.RobustGCC(
                        k, n, 1, bound, loss=loss, assignment=a
                    )
                )
    check_code(lambda k, n: cc.Uncoded(k, fill=np.nan))
    check_code(lambda k, n: cc.Replication(k, 2, fill=0.0))


def test_the_golden_assignment_spreads_neighbouring_workers_over_the_design():
    """Worker i sits at sorted point i p mod N: the same points, permuted; for N = 50 no block
    of up to 10 neighbouring workers holds two neighbouring points; the codes decode the
    same results into the same estimates as the natural assignment (their points permuted)."""
    for n in (2, 3, 50, 100, 101):
        perm = cc.points.assignment(n, "golden")
        assert sorted(perm) == list(range(n)) and np.gcd(cc.points.golden_stride(n), n) == 1
    perm = cc.points.assignment(50, "golden")
    for start in range(41):
        block = np.sort(perm[start : start + 10])
        assert np.all(np.diff(block) >= 2)
    natural, golden = cc.GCC(10, 50), cc.GCC(10, 50, assignment="golden")
    np.testing.assert_array_equal(golden.beta, natural.beta[perm])
    rng = np.random.default_rng(0)
    X = rng.normal(size=(10, 3))
    np.testing.assert_allclose(golden.encode(X), natural.encode(X)[perm], atol=1e-12)
    alive = cc.stragglers.random(50, 15, rng)
    Y = np.tanh(golden.encode(X))[alive]
    np.testing.assert_allclose(golden.decode(Y, alive), natural.decode(Y, perm[alive]), atol=1e-12)
    bacc = cc.BACC(10, 50, assignment="golden")
    np.testing.assert_allclose(bacc.decode(Y, alive), cc.BACC(10, 50).decode(Y, perm[alive]), atol=1e-12)
    with pytest.raises(ValueError, match="assignment"):
        cc.GCC(10, 50, assignment="random")
    assert type(golden)(**golden.get_params()).beta.tolist() == golden.beta.tolist()


def test_attributes_and_registry(spec):
    code = spec.make(K, N)
    assert code.name == spec.name
    assert cc.CODES[code.name] is type(code)
    assert code.num_inputs == K
    assert code.num_workers == spec.workers(K, N)


def test_constructor_rejects_bad_num_inputs(spec):
    for bad in (0, -1, 2.5, True):
        with pytest.raises(ValueError, match="num_inputs"):
            spec.make(bad, N)


# -- the suite itself fails on codes that break the contract --------------------------------


class _Broken(cc.BACC):
    """BACC with one fault switched on, to show that check_code catches it."""

    name = "bacc"
    fault = ""

    def decode_details(self, Y, alive):
        if self.fault == "ignores-order":  # sorts alive without its rows: pairs results with the
            alive = np.sort(np.asarray(alive))  # wrong workers when unsorted
        return super().decode_details(Y, alive)

    def _decode(self, Y, alive):
        if self.fault == "assumes-sorted-points":  # right under the natural assignment only
            by_point = alive[np.argsort(self.beta[alive], kind="stable")]
            # the k-th result by worker index paired with the k-th worker by point
            return super()._decode(Y, by_point)
        if self.fault == "shared-state":  # one scratch attribute for every call: a race
            self.scratch = (Y, alive)
            time.sleep(0.002)
            Y, alive = self.scratch
        estimates, info = super()._decode(Y, alive)
        if self.fault == "float64":
            is_tensor = isinstance(estimates, torch.Tensor)
            estimates = estimates.double() if is_tensor else estimates.astype(np.float64)
        return estimates, info

    def _encode(self, X):
        if self.fault == "no-name" and X.shape[0] == 1:
            raise ValueError("bad input")
        return super()._encode(X)

    def promised_case(self, rng):
        X, f, alive = super().promised_case(rng)
        return (X + rng.normal(size=X.shape), f, alive) if self.fault == "false-promise" else (X, f, alive)


class _BrokenPoints(_Broken):
    """The sorted-points fault as a class: the relabelled copies check_code builds keep it."""

    fault = "assumes-sorted-points"


@pytest.mark.parametrize(
    ("fault", "check"),
    [
        ("ignores-order", "check_alive_in_any_order_and_form"),
        ("shared-state", "check_thread_safety"),
        ("float64", "check_array_kinds"),
        ("false-promise", "check_promise"),
        ("assumes-sorted-points", "check_relabelled_workers"),
    ],
)
def test_check_code_catches_a_broken_code(fault, check):
    def make(k, n):
        code = _BrokenPoints(k, n) if fault == _BrokenPoints.fault else _Broken(k, n)
        code.fault = fault
        return code

    with pytest.raises(AssertionError, match=check):
        check_code(make)


def test_check_code_needs_a_code_it_can_build():
    with pytest.raises(AssertionError, match="built no code"):
        check_code(lambda k, n: cc.LCC(k, n, degree=5), sizes=((6, 20),))
    with pytest.raises(AssertionError, match="not a codedcomputing Code"):
        check_code(lambda k, n: object())


# == constructor errors for the codes with num_workers / lambdas ==========================

WORKER_CODES = [s for s in SPECS if s.name in ("gcc", "bacc", "lcc")]


@pytest.mark.parametrize("spec_", WORKER_CODES, ids=[s.id for s in WORKER_CODES])
@pytest.mark.parametrize("bad", [1, 0, -3, 4.0])
def test_constructor_rejects_bad_num_workers(spec_, bad):
    with pytest.raises(ValueError, match="num_workers"):
        spec_.make(1, bad)


@pytest.mark.parametrize("param", ["lambda_enc", "lambda_dec"])
@pytest.mark.parametrize(
    "bad",
    ["abc", None, [1.0, 2.0], object(), -1e-3, -1, np.nan, np.inf],
    ids=["str", "None", "list", "object", "-1e-3", "-1", "nan", "inf"],
)
def test_gcc_rejects_bad_lambda(param, bad):
    with pytest.raises(ValueError, match=param):
        cc.GCC(K, N, **{param: bad})


@pytest.mark.parametrize("param", ["lambda_enc", "lambda_dec"])
def test_gcc_rejects_numeric_string_lambda(param):
    with pytest.raises(ValueError, match=param):
        cc.GCC(K, N, **{param: "0.1"})


def test_gcc_rejects_unknown_points():
    with pytest.raises(ValueError, match="points"):
        cc.GCC(K, N, points="random")


def test_replication_rejects_bad_replicas():
    for bad in (0, -2, 1.5):
        with pytest.raises(ValueError, match="replicas"):
            cc.Replication(K, replicas=bad)


def test_lcc_rejects_bad_degree_and_too_few_workers():
    for bad in (0, -1, 1.5):
        with pytest.raises(ValueError, match="degree"):
            cc.LCC(K, N, degree=bad)
    with pytest.raises(ValueError, match="num_workers"):
        cc.LCC(6, 10, degree=2)  # threshold 11 > 10
    assert cc.LCC(6, 11, degree=2).recovery_threshold == 11


# == GCC ==================================================================================


def test_gcc_rejects_a_single_result():
    code = cc.GCC(K, N)
    with pytest.raises(cc.InsufficientResultsError) as err:
        code.decode(np.ones((1, 3)), [7])
    assert err.value.needed == 2
    assert err.value.alive == [7]
    # two results, one of them an erasure: one usable result is still too few
    Y = np.ones((2, 3))
    Y[0, 0] = np.nan
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        with pytest.raises(cc.InsufficientResultsError) as err:
            code.decode(Y, [4, 9])
    assert err.value.needed == 2
    assert err.value.alive == [9]
    assert any(issubclass(w.category, cc.NonFiniteResultWarning) for w in caught)


def _check_gcc_affine(code: cc.GCC, alive_sets, seed: int) -> float:
    """Worst relative error of decoding an affine f of affine-in-alpha inputs."""
    rng = np.random.default_rng(seed)
    d_in, d_out = 3, 2
    a, b = rng.standard_normal(d_in), rng.standard_normal(d_in)
    W, c = rng.standard_normal((d_in, d_out)), rng.standard_normal(d_out)
    X = a + b * code.alpha[:, None]
    truth = X @ W + c
    Y = code.encode(X) @ W + c
    return max(rel_err(decode_quietly(code, Y[list(s)], list(s)), truth) for s in alive_sets)


@pytest.mark.parametrize("points", ["chebyshev", "equispaced"])
@pytest.mark.parametrize("k", [1, 2, 4, 9])
@pytest.mark.parametrize("lambdas", [(0, 0), (1e-6, 1e-6), (1e-2, 1e-2), (10, 10), (0, 10), (10, 0)], ids=str)
def test_gcc_reproduces_affine_exhaustively(points, k, lambdas):
    n = 6
    with warnings.catch_warnings():  # k = 9 > n on purpose: the promise holds there too
        warnings.simplefilter("ignore", cc.errors.MoreInputsThanWorkersWarning)
        code = cc.GCC(k, n, *lambdas, decoding="spline", points=points)
    subsets = [s for size in range(2, n + 1) for s in itertools.combinations(range(n), size)]
    assert len(subsets) == 57
    assert (2, 3) in subsets  # both edge workers missing: extrapolation on both sides
    assert _check_gcc_affine(code, subsets, seed=k) < 1e-9


@settings(max_examples=25, deadline=None, derandomize=True)
@given(
    lam_enc=st.floats(0, 1e3, allow_subnormal=False),
    lam_dec=st.floats(0, 1e3, allow_subnormal=False),
    seed=st.integers(0, 2**32 - 1),
)
def test_gcc_reproduces_affine_any_lambdas(lam_enc, lam_dec, seed):
    code = cc.GCC(K, N, lam_enc, lam_dec, decoding="spline")
    rng = np.random.default_rng(seed)
    subsets = [np.sort(rng.choice(N, size, replace=False)) for size in (2, 3, 7, N)]
    assert _check_gcc_affine(code, subsets, seed) < 1e-9


@pytest.mark.parametrize("points", ["chebyshev", "equispaced"])
def test_gcc_single_input_is_copied_to_every_worker(points):
    code = cc.GCC(1, 7, lambda_enc=0.5, lambda_dec=1e-3, points=points)
    x = np.array([[1.5, -2.0, 3.25]])
    coded = code.encode(x)
    assert coded.shape == (7, 3)
    np.testing.assert_array_equal(coded, np.repeat(x, 7, axis=0))
    coded_t = code.encode(torch.tensor(x, dtype=torch.float32))
    assert coded_t.dtype == torch.float32
    assert torch.equal(coded_t, torch.tensor(np.repeat(x, 7, axis=0), dtype=torch.float32))
    est = code.decode(np.tanh(coded[[1, 5]]), [5, 1])
    assert est.shape == (1, 3)
    np.testing.assert_allclose(est, np.tanh(x), rtol=1e-12)


def scipy_spline_reference(knots, values, lam: float, z) -> np.ndarray:
    """The GCC docstring's minimiser, from scipy: natural cubic (smoothing) spline through
    sorted ``knots`` with the mean-convention ``lam`` (scipy's ``lam = n * lam``), evaluated at
    ``z`` and extended linearly outside ``[knots[0], knots[-1]]``."""
    from scipy.interpolate import CubicSpline, make_smoothing_spline

    t = np.asarray(knots)
    if lam == 0:
        spline = CubicSpline(t, values, bc_type="natural")
    else:
        spline = make_smoothing_spline(t, values, lam=t.size * lam)
    slope = spline.derivative()
    out = np.asarray(spline(np.clip(z, t[0], t[-1])))
    for end, side in ((t[0], z < t[0]), (t[-1], z > t[-1])):
        out[side] = spline(end) + slope(end) * (z[side] - end)[:, None]
    return out


@pytest.mark.parametrize("lambdas", [(0.0, 0.0), (1e-3, 1e-4), (1e-2, 3e-2)], ids=str)
@pytest.mark.parametrize("points", ["chebyshev", "equispaced"])
def test_gcc_matches_scipy_smoothing_splines(lambdas, points):
    # an independent reference for both maps, including linear extrapolation: beta = +-1 lie
    # outside the data points, and decoding without the edge workers extrapolates to alpha
    code = cc.GCC(K, N, *lambdas, decoding="spline", points=points)
    rng = np.random.default_rng(17)
    X = rng.standard_normal((K, 3))
    coded = code.encode(X)
    ref = scipy_spline_reference(code.alpha, X, code.lambda_enc, code.beta)
    np.testing.assert_allclose(coded, ref, rtol=0, atol=1e-9 * np.max(np.abs(ref)))
    for alive in (
        np.arange(N),
        np.arange(2, N - 3),
        np.sort(rng.choice(np.arange(1, N - 1), 8, replace=False)),
    ):
        Y = np.sin(3 * coded[alive])
        est = code.decode(Y, alive)
        ref = scipy_spline_reference(code.beta[alive], Y, code.lambda_dec, code.alpha)
        np.testing.assert_allclose(est, ref, rtol=0, atol=1e-9 * np.max(np.abs(ref)))


def _gcc_vs_bacc(seed: int) -> tuple[float, float]:
    rng = np.random.default_rng(seed)
    k, d, n = 10, 20, 50
    X = rng.standard_normal((k, d))
    W = rng.standard_normal((d, d)) / np.sqrt(d)

    def f(x):
        return np.tanh(x @ W)

    alive = cc.stragglers.random(n, 5, rng)
    out = []
    for code in (cc.GCC(k, n), cc.BACC(k, n)):
        out.append(cc.metrics.mse(code.decode(f(code.encode(X)[alive]), alive), f(X)))
    return out[0], out[1]


def test_gcc_beats_bacc_on_smooth_f_in_the_median():
    results = np.array([_gcc_vs_bacc(seed) for seed in range(9)])
    gcc_mse, bacc_mse = results[:, 0], results[:, 1]
    assert np.all(np.isfinite(results))
    assert np.median(gcc_mse) < np.median(bacc_mse)


# -- GCC: the dense-matrix path and the large-map path (banded solve / truncated sparse
# matrix) give the same map as an explicit spline fit --------------------------------------


def uses_dense_path(decoder) -> bool:
    """Whether a GCC decoder's explicit map is one dense matrix (else its large-map path)."""
    return getattr(decoder, "smoothing_map", decoder).dense


def apply_map_matrix(smap, y: np.ndarray) -> np.ndarray:
    """``smap.linear_map @ y`` for 2-D ``y``, whatever the matrix's storage."""
    return np.asarray(smap.linear_map @ y)


@pytest.fixture(scope="module", params=[(0.0, 0.0), (1e-4, 1e-5)], ids=["interpolating", "smoothing"])
def big_gcc(request) -> cc.GCC:
    return cc.GCC(300, 2000, lambda_enc=request.param[0], lambda_dec=request.param[1], decoding="spline")


def large_path_expected(code: cc.GCC) -> bool:
    """Whether the large-map path must be taken for large maps. With lambda = 0 the spline
    weights decay fast (a factor ~0.27 per knot), so a truncated or banded map always pays;
    with smoothing the weights may span the whole domain and a dense matrix is legitimate."""
    return code.lambda_enc == 0 and code.lambda_dec == 0


def test_gcc_small_encoder_is_dense_and_matches_spline_fit():
    code = cc.GCC(K, N, lambda_enc=1e-3)
    assert uses_dense_path(code.encoder)
    X = np.random.default_rng(7).standard_normal((K, 2, 3))
    ref = cc.spline.fit(code.alpha, X, code.lambda_enc)(code.beta)
    np.testing.assert_allclose(code.encode(X), ref, rtol=1e-12, atol=1e-12)


def test_gcc_large_encoder_matches_spline_fit(big_gcc):
    code = big_gcc
    if large_path_expected(code):
        assert not uses_dense_path(code.encoder)
    X = np.random.default_rng(8).standard_normal((300, 3, 2))
    ref = cc.spline.fit(code.alpha, X, code.lambda_enc)(code.beta)
    coded = code.encode(X)
    np.testing.assert_allclose(coded, ref, rtol=1e-10, atol=1e-10)
    coded_t = code.encode(torch.tensor(X, dtype=torch.float32))
    assert coded_t.dtype == torch.float32
    np.testing.assert_allclose(coded_t.numpy(), ref, rtol=1e-4, atol=1e-5)
    coded_32 = code.encode(X.astype(np.float32))
    assert coded_32.dtype == np.float32
    np.testing.assert_allclose(coded_32, ref, rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(
        apply_map_matrix(code.encoder, X.reshape(300, -1)).reshape(coded.shape), coded, rtol=0, atol=1e-10
    )


def test_gcc_dense_and_large_decoders_match_spline_fit(big_gcc):
    code = big_gcc
    rng = np.random.default_rng(9)
    coded = code.encode(rng.standard_normal((300, 4)))
    paths = []
    interior = np.arange(1, 1999)
    for alive in (
        cc.stragglers.random(2000, 100, rng),
        cc.stragglers.contiguous(2000, 300, rng),
        np.sort(rng.choice(interior, 400, replace=False)),
        np.sort(rng.choice(interior, 200, replace=False)),
        np.sort(rng.choice(interior, 40, replace=False)),
        np.array([3, 500, 1997]),  # edges missing: extrapolation
        np.array([10, 11]),
    ):
        decoder = code.decoder(alive)
        paths.append(uses_dense_path(decoder))
        Y = np.sin(coded[alive])
        ref = cc.spline.fit(code.beta[alive], Y, code.lambda_dec)(code.alpha)
        est = code.decode(Y, alive)
        scale = np.max(np.abs(ref))
        np.testing.assert_allclose(est, ref, rtol=0, atol=1e-10 * scale)
        np.testing.assert_allclose(apply_map_matrix(decoder, Y), est, rtol=0, atol=1e-10 * scale)
        perm = rng.permutation(alive.size)
        np.testing.assert_allclose(code.decode(Y[perm], alive[perm]), est, rtol=0, atol=1e-12 * scale)
        est_t = code.decode(torch.tensor(Y[perm]), alive[perm])
        np.testing.assert_allclose(est_t.numpy(), est, rtol=0, atol=1e-12 * scale)
        # float32: rounding amplified by ||map||_inf (~1.5e5 extrapolating from workers 10, 11)
        norm = float(np.max(np.asarray(abs(decoder.matrix).sum(axis=1))))
        for Y32 in (Y.astype(np.float32), torch.tensor(Y, dtype=torch.float32)):
            est_32 = code.decode(Y32, alive)
            assert_same_kind(est_32, Y32)
            np.testing.assert_allclose(to_numpy(est_32), est, rtol=0, atol=1e-5 * norm * np.max(np.abs(Y)))
    assert paths[-1] is True, "two results must take the dense path"
    if large_path_expected(code):
        assert paths[0] is False, "a large alive set must take the large-map path"


# == LCC ==================================================================================


def lcc_poly(x):
    return x**2 + 3 * x


def test_lcc_exact_at_threshold_exhaustive():
    code = cc.LCC(3, 7, degree=2)
    assert code.recovery_threshold == 5
    assert code.min_results == 5
    rng = np.random.default_rng(10)
    X = rng.standard_normal((3, 4, 2))
    truth = lcc_poly(X)
    Y = lcc_poly(code.encode(X))
    subsets = list(itertools.combinations(range(7), 5))
    assert len(subsets) == 21
    for s in subsets:
        assert rel_err(decode_quietly(code, Y[list(s)], s), truth) < 1e-9, s
    for size in (6, 7):  # more results than the threshold
        for s in itertools.combinations(range(7), size):
            assert rel_err(decode_quietly(code, Y[list(s)], s), truth) < 1e-9, s


def test_lcc_below_threshold_raises_or_degrades():
    code = cc.LCC(3, 7, degree=2)
    best_effort = cc.LCC(3, 7, degree=2, best_effort=True)
    assert best_effort.min_results == 1
    assert best_effort.complete(range(5)) and not best_effort.complete(range(4))
    rng = np.random.default_rng(11)
    X = rng.standard_normal((3, 5))
    truth = lcc_poly(X)
    Y = lcc_poly(code.encode(X))
    at_threshold = max(
        rel_err(code.decode(Y[list(s)], s), truth) for s in itertools.combinations(range(7), 5)
    )
    # Workers whose beta equals some alpha compute f(x_k) itself (the code is partly systematic
    # for K = 3, N = 7); a below-threshold set holding all of them still decodes exactly.
    systematic = {j for j in range(7) if np.isclose(code.beta[j], code.alpha, atol=1e-12).any()}
    assert len(systematic) == 3
    checked = 0
    for s in itertools.combinations(range(7), 4):
        with pytest.raises(cc.InsufficientResultsError) as err:
            code.decode(Y[list(s)], s)
        assert err.value.needed == 5
        assert err.value.alive == list(s)
        with pytest.warns(RuntimeWarning, match="recovery_threshold"):
            details = best_effort.decode_details(Y[list(s)], s)
        est = details.estimates
        assert details.info["exact"].shape == (3,) and not details.info["exact"].any()
        assert est.shape == truth.shape
        assert np.all(np.isfinite(est))
        if not systematic <= set(s):
            checked += 1
            err_below = rel_err(est, truth)
            assert err_below > 1e-4
            assert err_below > 1e6 * max(at_threshold, 1e-16)
    assert checked == 35 - 4
    assert best_effort.decode_details(Y[:5], range(5)).info["exact"].tolist() == [True] * 3
    with pytest.raises(cc.InsufficientResultsError):
        best_effort.decode(np.zeros((0, 5)), [])


@pytest.mark.parametrize(("k", "n", "degree"), [(6, 20, 1), (4, 12, 2), (4, 12, 3), (6, 20, 2)])
def test_lcc_exact_for_polynomials_of_its_degree(k, n, degree):
    code = cc.LCC(k, n, degree=degree)
    threshold = (k - 1) * degree + 1
    assert code.recovery_threshold == threshold
    rng = np.random.default_rng(12 + degree)
    W = rng.standard_normal((3, 3))
    c = rng.standard_normal(3)

    def f(x):  # total degree `degree`, mixing coordinates
        z = x @ W
        return z**degree + 2.0 * z + c

    X = rng.standard_normal((k, 3))
    truth = f(X)
    Y = f(code.encode(X))
    for size in (threshold, threshold + 1, n):
        for _ in range(5):
            alive = rng.choice(n, size, replace=False)
            assert rel_err(decode_quietly(code, Y[alive], alive), truth) < 1e-9


# == BACC =================================================================================


@pytest.mark.parametrize(
    ("k", "n", "points"), [(6, 20, "chebyshev"), (3, 7, "chebyshev"), (5, 13, "equispaced")]
)
def test_bacc_reproduces_constants_through_any_f(k, n, points):
    code = cc.BACC(k, n, points=points)
    rng = np.random.default_rng(13)
    W = rng.standard_normal((4, 6))

    def f(x):
        return np.tanh(x @ W)

    x0 = rng.standard_normal(4)
    X = np.tile(x0, (k, 1))
    coded = code.encode(X)
    np.testing.assert_allclose(coded, np.tile(x0, (n, 1)), rtol=1e-12, atol=1e-12)
    truth = f(X)
    Y = f(coded)
    for size in range(1, n + 1):
        for _ in range(3):
            alive = rng.choice(n, size, replace=False)
            assert rel_err(decode_quietly(code, Y[alive], alive), truth) < 1e-9


def berrut_reference(nodes, values, z) -> np.ndarray:
    """BACC's docstring formula: ``sum_j w_j y_j / sum_j w_j`` with ``w_j = (-1)^rank(j) /
    (z - nodes_j)``, rank among ``nodes`` in sorted order; the node's value at a node."""
    nodes, values = np.asarray(nodes), np.asarray(values)
    signs = np.empty(nodes.size)
    signs[np.argsort(nodes)] = (-1.0) ** np.arange(nodes.size)
    out = np.empty((z.size, *values.shape[1:]))
    for i, zi in enumerate(z):
        hit = np.flatnonzero(zi == nodes)
        if hit.size:
            out[i] = values[hit[0]]
            continue
        w = signs / (zi - nodes)
        out[i] = np.tensordot(w, values, axes=1) / w.sum()
    return out


@pytest.mark.parametrize(("k", "n"), [(6, 20), (3, 7), (10, 50)])
def test_bacc_is_berrut_interpolation(k, n):
    code = cc.BACC(k, n)
    rng = np.random.default_rng(18)
    X = rng.standard_normal((k, 2))
    coded = code.encode(X)
    np.testing.assert_allclose(coded, berrut_reference(code.alpha, X, code.beta), rtol=0, atol=1e-12)
    for size in (1, 2, 3, n // 2, n - 1, n):
        alive = rng.choice(n, size, replace=False)  # unsorted: signs follow the rank, not alive order
        Y = rng.standard_normal((size, 2))
        ref = berrut_reference(code.beta[alive], Y, code.alpha)
        np.testing.assert_allclose(code.decode(Y, alive), ref, rtol=0, atol=1e-12 * np.max(np.abs(ref)))


# == uncoded and replication ==============================================================


def _check_copying_code(code, seed: int) -> None:
    """Every subset of workers: exact when all inputs are covered, else MissingResultsError
    (or, built with ``fill``, those inputs' rows filled and listed in ``info["missing"]``)."""
    k, n = code.num_inputs, code.num_workers
    filling = type(code)(**{**code.get_params(), "fill": np.nan})
    rng = np.random.default_rng(seed)
    X = rng.standard_normal((k, 2, 2))
    truth = np.cos(X)
    Y_all = np.cos(code.encode(X))
    for size in range(1, n + 1):
        for s in itertools.combinations(range(n), size):
            alive = np.array(s)
            missing = sorted(set(range(k)) - {j % k for j in s})
            assert code.missing_inputs(alive) == missing
            if not missing:
                np.testing.assert_array_equal(decode_quietly(code, Y_all[alive], alive), truth)
                continue
            with pytest.raises(cc.MissingResultsError) as err:
                code.decode(Y_all[alive], alive)
            assert isinstance(err.value, ValueError)
            assert err.value.missing == missing
            details = filling.decode_details(Y_all[alive], alive)
            est = details.estimates
            assert details.info["missing"] == missing
            assert np.all(np.isnan(est[missing]))
            present = np.setdiff1d(np.arange(k), missing)
            np.testing.assert_array_equal(est[present], truth[present])
            est_t = filling.decode(torch.tensor(Y_all[alive]), alive)
            assert torch.isnan(est_t[missing]).all()
            np.testing.assert_array_equal(est_t[present].numpy(), truth[present])


def test_uncoded_exhaustive():
    code = cc.Uncoded(4)
    assert code.num_workers == 4
    np.testing.assert_array_equal(code.encode(np.arange(8.0).reshape(4, 2)), np.arange(8.0).reshape(4, 2))
    _check_copying_code(code, seed=14)


@pytest.mark.parametrize(("k", "r"), [(3, 2), (2, 3)])
def test_replication_exhaustive(k, r):
    code = cc.Replication(k, replicas=r)
    assert code.num_workers == k * r
    X = np.arange(k * 3.0).reshape(k, 3)
    coded = code.encode(X)
    for n in range(k * r):  # round-robin assignment
        np.testing.assert_array_equal(coded[n], X[n % k])
    _check_copying_code(code, seed=15)


def test_copying_codes_with_no_results_raise_insufficient():
    for code in (cc.Uncoded(3), cc.Replication(3, 2)):
        with pytest.raises(cc.InsufficientResultsError) as err:
            code.decode(np.zeros((0, 2)), [])
        assert err.value.needed == 1
        assert err.value.alive == []


@pytest.mark.parametrize("kind", ["numpy", "torch"])
def test_replication_first_copy_in_alive_order_wins(kind):
    k, r = 4, 3
    code = cc.Replication(k, replicas=r)
    rng = np.random.default_rng(16)
    alive_sorted = np.setdiff1d(np.arange(k * r), [2, 5])
    fake = 1000.0 * np.arange(k * r)[:, None] + np.arange(3)  # distinct result per worker
    for _ in range(6):
        alive = rng.permutation(alive_sorted)
        Y = as_kind(fake[alive], kind)
        est = to_numpy(code.decode(Y, alive))
        for j in range(k):
            first = next(w for w in alive if w % k == j)
            np.testing.assert_array_equal(est[j], fake[first])
    # sorted order: the lowest-indexed copy wins
    est = code.decode(fake[alive_sorted], alive_sorted)
    np.testing.assert_array_equal(est, fake[[0, 1, 6, 3]])
