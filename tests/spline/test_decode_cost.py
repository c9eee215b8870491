"""The decoder that picks the explicit map or a banded solve (``spline.SplineDecoder``): both
routes agree with ``spline.fit``, keep the caller's array kind, and the cost model picks the
route expected in each regime (predicted costs only: no timing is asserted)."""

from __future__ import annotations

import pickle
import threading

import numpy as np
import pytest
import scipy.sparse
import torch
from scipy.interpolate import make_smoothing_spline

import codedcomputing as cc
from codedcomputing.spline import fit, smoothing_matrix
from codedcomputing.spline.maps import (
    MAX_MAP_ENTRIES,
    TRUNCATION,
    BandedFit,
    SplineDecoder,
    predict_decode_costs,
    weight_reach,
)
from layouts import paired_knots, relative_error

LAMBDAS = [0.0, 1e-9, 1e-6, 1e-3]


def chebyshev_alive(rng, num_workers: int, returned: float = 0.9) -> np.ndarray:
    """The second-kind Chebyshev points of the workers that returned (GCC's decoder knots)."""
    beta = np.sort(np.cos(np.pi * np.arange(num_workers) / (num_workers - 1)))
    keep = np.sort(rng.choice(num_workers, size=int(returned * num_workers), replace=False))
    return beta[keep]


def clustered(rng, n: int) -> np.ndarray:
    """n knots on [-1, 1] in a few tight clusters (gaps >= 1e-5) with wide gaps between."""
    centers = rng.uniform(-1, 1, 3)
    t = np.sort(centers[rng.integers(0, 3, n)] + rng.exponential(0.02, n))
    t[1:] = t[0] + np.cumsum(np.maximum(np.diff(t), 1e-5))
    return 2 * (t - t[0]) / (t[-1] - t[0]) - 1


def layouts(rng, n: int) -> dict:
    return {
        "random": np.sort(rng.uniform(-1, 1, n)),
        "chebyshev-alive": chebyshev_alive(rng, int(n / 0.9)),
        "clustered": clustered(rng, n),
    }


def points_with_outside(num: int) -> np.ndarray:
    """First-kind Chebyshev points (GCC's inputs) plus points beyond the knots on both sides."""
    alpha = np.sort(np.cos((2 * np.arange(1, num + 1) - 1) * np.pi / (2 * num)))
    return np.concatenate([[-1.7, -1.0001], alpha, [1.0001, 2.5]])


@pytest.mark.parametrize("lam", LAMBDAS)
@pytest.mark.parametrize("n", [60, 700])
@pytest.mark.parametrize("kind", ["random", "chebyshev-alive", "clustered"])
def test_both_routes_agree_with_fit(kind, n, lam):
    """Map and banded solve give fit(knots, Y, lam)(points) to 1e-10 in float64, extrapolation
    (linear beyond the knots) included."""
    rng = np.random.default_rng(n + int(1e9 * lam) % 97)
    knots = layouts(rng, n)[kind]
    points = points_with_outside(max(4, knots.size // 9))
    y = rng.normal(size=(knots.size, 3))
    expected = fit(knots, y, lam)(points)
    for route in ("map", "banded"):
        got = SplineDecoder(knots, lam, points, route=route)(y)
        assert relative_error(got, expected) < 1e-10, route


@pytest.mark.parametrize("lam", [1e-9, 1e-6, 1e-3])
def test_banded_route_matches_scipy(lam):
    """An independent reference: scipy's make_smoothing_spline takes lam_scipy = n * lam (on
    jittered equispaced knots: where knots cluster scipy loses digits, see test_spline)."""
    rng = np.random.default_rng(3)
    knots = np.linspace(-1, 1, 300) + rng.uniform(-0.3, 0.3, 300) * 2 / 299
    y = rng.normal(size=(knots.size, 2))
    points = np.linspace(-0.99, 0.99, 41)
    ref = make_smoothing_spline(knots, y, lam=knots.size * lam)(points)
    assert relative_error(BandedFit(knots, lam, points)(y), ref) < 1e-8


def test_unsorted_knots_follow_the_rows_of_y():
    """Row i of Y belongs to knots[i], whatever their order, on both routes."""
    rng = np.random.default_rng(4)
    knots = rng.permutation(chebyshev_alive(rng, 200))
    points = points_with_outside(20)
    y = rng.normal(size=(knots.size, 2))
    expected = fit(knots, y, 1e-7)(points)
    for route in ("map", "banded"):
        assert relative_error(SplineDecoder(knots, 1e-7, points, route=route)(y), expected) < 1e-10


@pytest.mark.parametrize(
    "make",
    [
        lambda a: a.astype(np.float32),
        lambda a: a.astype(np.float64),
        lambda a: a.astype(np.float16),
        lambda a: torch.tensor(a, dtype=torch.float32),
        lambda a: torch.tensor(a, dtype=torch.float64),
        lambda a: torch.tensor(a, dtype=torch.bfloat16),
        lambda a: a + 0.5j * a[::-1],
        lambda a: torch.tensor(a + 0.5j * a[::-1], dtype=torch.complex128),
    ],
    ids=["np32", "np64", "np16", "t32", "t64", "tbf16", "np-complex", "t-complex"],
)
def test_banded_route_keeps_type_dtype_and_shape(make):
    """The banded route computes in float64 on the host and returns Y's type, dtype and shape;
    its numbers match the map's to the dtype's resolution."""
    rng = np.random.default_rng(5)
    knots = chebyshev_alive(rng, 120)
    points = points_with_outside(12)
    y = make(rng.normal(size=(knots.size, 2, 3)))
    banded = SplineDecoder(knots, 1e-6, points, route="banded")(y)
    mapped = SplineDecoder(knots, 1e-6, points, route="map")(y)
    assert type(banded) is type(y) and banded.dtype == y.dtype
    assert tuple(banded.shape) == (points.size, 2, 3)
    name = str(y.dtype).removeprefix("torch.")
    resolution = {"float16": 1e-3, "bfloat16": 1e-2, "float32": 1e-6}.get(name, 1e-12)
    if isinstance(y, torch.Tensor):
        wide = torch.complex128 if y.is_complex() else torch.float64
        banded, mapped = banded.to(wide).numpy(), mapped.to(wide).numpy()
    banded, mapped = np.asarray(banded, dtype=complex), np.asarray(mapped, dtype=complex)
    assert np.max(np.abs(banded - mapped)) <= 4 * resolution * np.max(np.abs(mapped))


def test_zero_width_and_two_knots():
    knots = np.array([-1.0, 1.0])
    decoder = SplineDecoder(knots, 1e-3, np.array([-2.0, 0.0, 3.0]), route="banded")
    assert decoder(np.zeros((2, 0))).shape == (3, 0)
    line = decoder(np.array([[1.0], [3.0]]))  # through two knots: the line, extrapolated
    np.testing.assert_allclose(line[:, 0], [0.0, 2.0, 5.0], rtol=1e-12)


def test_tensors_that_require_grad_take_the_map_and_get_its_transpose():
    rng = np.random.default_rng(6)
    knots = chebyshev_alive(rng, 150)
    points = points_with_outside(15)
    decoder = SplineDecoder(knots, 1e-6, points, route="banded")
    y = torch.tensor(rng.normal(size=(knots.size, 2)), requires_grad=True)
    out = decoder(y)
    assert out.requires_grad
    w = torch.randn_like(out)
    (out * w).sum().backward()
    matrix = smoothing_matrix(knots, 1e-6, points)
    np.testing.assert_allclose(y.grad.numpy(), matrix.T @ w.numpy(), atol=1e-10)


# --- the cost model and the choice ------------------------------------------------------------


@pytest.mark.parametrize("lam", [0.0, 1e-12, 1e-9, 1e-7])
@pytest.mark.parametrize("kind", ["uniform", "chebyshev-alive", "random"])
def test_predicted_row_widths_match_the_truncated_map(kind, lam):
    """weight_reach predicts the stored entries of smoothing_matrix(..., tol=TRUNCATION) to
    within -20% / +80% (over-predicting where the band is a few knots wide)."""
    rng = np.random.default_rng(7)
    n = 1500
    knots = {"uniform": np.linspace(-1, 1, n), "random": np.sort(rng.uniform(-1, 1, n))}.get(
        kind, chebyshev_alive(rng, int(n / 0.9))
    )
    points = points_with_outside(150)[2:-2]
    first, last = weight_reach(knots, knots.size * lam, points)
    predicted = int(np.sum(last - first + 1))
    actual = smoothing_matrix(knots, lam, points, tol=TRUNCATION).nnz
    assert 0.8 * actual <= predicted <= 1.8 * actual, (predicted, actual)


def test_interpolating_decoder_takes_the_narrow_map():
    """lam = 0: the map keeps ~50 entries a row whatever N, cheaper than a solve, fresh or not."""
    rng = np.random.default_rng(8)
    for num_workers in (2000, 16000):
        knots = chebyshev_alive(rng, num_workers)
        points = points_with_outside(num_workers // 10)
        costs = predict_decode_costs(knots, 0.0, points)
        assert costs.map_entries < 60 * points.size
        assert costs.map_seconds(200) < costs.banded_seconds(200)
        assert SplineDecoder(knots, 0.0, points).plan(200) == "map"


@pytest.mark.parametrize("lam", [1e-9, 1e-6])
def test_smoothing_decoder_for_many_workers_takes_the_banded_solve(lam):
    """lam > 0, N = 16000: the map's band spans thousands of knots; it would be too big to keep
    and far dearer to build than solving, so the decoder solves (nothing is built here)."""
    rng = np.random.default_rng(9)
    knots = chebyshev_alive(rng, 16000)
    points = points_with_outside(1600)
    decoder = SplineDecoder(knots, lam, points)
    costs = decoder.costs
    assert costs.map_entries > MAX_MAP_ENTRIES
    assert costs.map_build > 5 * costs.banded_seconds(200)
    assert decoder.plan(200) == decoder.plan(1) == "banded"
    assert not decoder.map_allowed
    # the banded route is linear in n: 8x the knots, 8x the predicted cost per column (+-25%)
    small = predict_decode_costs(chebyshev_alive(rng, 2000), lam, points_with_outside(200))
    assert 6 <= costs.banded_column / small.banded_column <= 10


def test_a_reused_decoder_builds_its_map_once_the_savings_pay_for_it():
    """Ski rental: where the first call solves but the map would be cheaper per call, each
    solve's would-be saving counts towards the map's build; the first call whose own saving
    covers what is left of the build builds and uses the map. The switch comes at the call
    the predicted costs say."""
    rng = np.random.default_rng(10)
    knots = chebyshev_alive(rng, 1000)
    points = points_with_outside(100)
    width = 40
    decoder = SplineDecoder(knots, 1e-6, points)
    costs = decoder.costs
    first_map = costs.map_seconds(width)
    assert first_map > costs.banded_seconds(width), "this case must start on the banded route"
    saving = costs.banded_seconds(width, factored=True) - costs.map_seconds(width, built=True)
    assert saving > 0
    expected_calls = int(np.ceil(costs.map_build / saving - 1))  # solves before the map is built
    y = rng.normal(size=(knots.size, width))
    reference = fit(knots, y, 1e-6)(points)
    routes = []
    for _ in range(expected_calls + 2):
        routes.append(decoder.plan(width))
        assert relative_error(decoder(y), reference) < 1e-10
    assert routes[:expected_calls] == ["banded"] * expected_calls
    assert routes[expected_calls:] == ["map", "map"]
    assert decoder._map is not None


def test_forced_routes_and_bad_route():
    rng = np.random.default_rng(11)
    knots = chebyshev_alive(rng, 100)
    points = points_with_outside(10)
    assert SplineDecoder(knots, 0.0, points, route="banded").plan(5) == "banded"
    assert SplineDecoder(knots, 1e-3, points, route="map").plan(5) == "map"
    with pytest.raises(ValueError, match="route"):
        SplineDecoder(knots, 0.0, points, route="fast")
    with pytest.raises(ValueError, match="lambda"):
        SplineDecoder(knots, 1e308, points)


def test_decoder_is_thread_safe_and_pickles():
    """Eight threads share one decoder (GCC's cache does); each gets the exact fit. A pickled
    decoder decodes the same."""
    rng = np.random.default_rng(12)
    knots = chebyshev_alive(rng, 800)
    points = points_with_outside(80)
    decoder = SplineDecoder(knots, 1e-6, points)
    inputs = [rng.normal(size=(knots.size, 16)) for _ in range(8)]
    expected = [fit(knots, y, 1e-6)(points) for y in inputs]
    results = [None] * 8

    def work(i):
        for _ in range(4):
            results[i] = decoder(inputs[i])

    threads = [threading.Thread(target=work, args=(i,)) for i in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    for got, want in zip(results, expected, strict=True):
        assert relative_error(got, want) < 1e-10
    twin = pickle.loads(pickle.dumps(decoder))
    assert relative_error(twin(inputs[0]), expected[0]) < 1e-10


def test_linear_map_is_the_smoothing_map():
    rng = np.random.default_rng(13)
    knots = chebyshev_alive(rng, 300)
    points = points_with_outside(30)
    matrix = SplineDecoder(knots, 1e-7, points).linear_map
    dense = matrix.toarray() if scipy.sparse.issparse(matrix) else matrix
    assert np.abs(dense - smoothing_matrix(knots, 1e-7, points)).max() < 1e-12


def test_a_gcc_decoder_wired_to_the_chooser_decodes_as_before():
    """The wiring GCC needs: SplineDecoder(beta[alive], lambda_dec, alpha) in place of
    SmoothingMap(...) gives the same estimates (on paired workers too)."""
    rng = np.random.default_rng(14)
    for beta in (None, paired_knots(60, 1e-4)):
        kwargs = {} if beta is None else {"beta": beta}
        code = cc.GCC(6, 60, 0.0, 1e-5, **kwargs)
        alive = cc.stragglers.random(60, 6, rng)
        y = rng.normal(size=(alive.size, 4))
        ours = SplineDecoder(code.beta[alive], 1e-5, code.alpha)(y)
        assert relative_error(ours, fit(code.beta[alive], y, 1e-5)(code.alpha)) < 1e-10
