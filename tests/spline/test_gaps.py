"""The gap-aware interpolant (codedcomputing.spline.gaps) against independent references:
scipy's natural cubic spline and Floater-Hormann (Berrut) interpolant, numpy's linear
interpolation, brute-force leave-block-out, and a grid search over the simplex."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from scipy.interpolate import CubicSpline, FloaterHormannInterpolator

import codedcomputing as cc
from codedcomputing.spline import gaps
from codedcomputing.spline.adaptive import AdaptiveInterpolant
from codedcomputing.spline.gaps import GapAwareInterpolant, simplex_weights


def design(num_workers=50, num_inputs=10):
    code = cc.GCC(num_inputs, num_workers)
    return code.alpha, code.beta  # beta sorted: ranks are positions


def smooth(t, rng, d=3):
    return np.sin(rng.uniform(1, 4, d) * t[:, None] + rng.uniform(0, 3, d)) + 0.3 * np.abs(t[:, None] - 0.2)


def test_simplex_weights_match_a_grid_search():
    rng = np.random.default_rng(0)
    grid = [
        (a, b, 1 - a - b)
        for a in np.linspace(0, 1, 201)
        for b in np.linspace(0, 1, 201)
        if a + b <= 1 + 1e-12
    ]
    grid = np.clip(np.array(grid), 0, 1)
    for _ in range(20):
        residuals = list(rng.normal(size=(3, 15, 2)) + rng.normal(size=(3, 1, 1)))
        w = simplex_weights(residuals)
        assert np.all(w >= 0) and w.sum() == pytest.approx(1.0)
        value = np.sum(np.tensordot(w, np.stack(residuals), axes=1) ** 2)
        # every grid point's objective at once: (points, 15, 2) blends, summed over the last two axes
        best = np.min(np.sum(np.tensordot(grid, np.stack(residuals), axes=1) ** 2, axis=(1, 2)))
        assert value <= best + 1e-9


def test_simplex_weights_prefer_an_exact_candidate_and_survive_huge_values():
    exact, other = np.zeros((4, 2)), np.ones((4, 2))
    np.testing.assert_array_equal(simplex_weights([other, exact, -other]), [0.0, 1.0, 0.0])
    r = [np.array([[1.0], [2.0]]), np.array([[-1.0], [0.5]])]
    np.testing.assert_allclose(simplex_weights([1e300 * x for x in r]), simplex_weights(r), rtol=1e-12)
    np.testing.assert_array_equal(simplex_weights([np.zeros(3), np.zeros(3)]), [1.0, 0.0])


def test_no_gap_leaves_the_adaptive_blend():
    alpha, beta = design()
    rng = np.random.default_rng(1)
    alive = np.delete(np.arange(50), [3, 10, 11, 30])  # runs of at most 2: below the threshold
    y = smooth(beta[alive], rng)
    decoder = GapAwareInterpolant(beta[alive], alive, alpha, 50)
    assert decoder.groups == []
    est, info = decoder.decode(y)
    expected, adaptive_info = AdaptiveInterpolant(beta[alive], alpha).decode(y)
    assert info == {**adaptive_info, "gaps": []} and set(adaptive_info) == {"lambda_dec", "theta"}
    np.testing.assert_array_equal(est, expected)


def brute_force_gap_weights(t, rank, y, span):
    """Leave-block-out weights for gaps of ``span`` design steps, written out directly
    (every block chosen as the decoder does: the even spread of valid starts)."""
    n = t.size
    spans = np.diff(rank)
    threshold = max(gaps.MIN_MISSING, int(np.floor(gaps.RELATIVE * np.median(spans))))
    is_gap = spans - 1 >= threshold
    starts = []
    for s in range(n - 2):
        e = int(np.searchsorted(rank, rank[s] + span))
        if e <= n - 1 and e - s >= 2 and not is_gap[s:e].any():
            starts.append((s, e))
    pick = np.unique(np.linspace(0, len(starts) - 1, gaps.POSITIONS).round().astype(int))
    res = [[], [], []]
    for s, e in (starts[i] for i in pick):
        removed = np.arange(s + 1, e)
        kept = np.r_[max(0, s - gaps.WINDOW) : s + 1, e : min(n, e + 1 + gaps.WINDOW)]
        rest = np.setdiff1d(np.arange(n), removed)
        chord = np.stack([np.interp(t[removed], t[[s, e]], y[[s, e], c]) for c in range(y.shape[1])], axis=1)
        cubic = CubicSpline(t[kept], y[kept], bc_type="natural")(t[removed])
        res[0].append(chord - y[removed])
        res[1].append(cubic - y[removed])
        res[2].append(y[rest].mean(axis=0) - y[removed])
    return simplex_weights([np.concatenate(r) for r in res])


@pytest.mark.parametrize("block", [(20, 30), (5, 14), (22, 37)])
def test_points_in_a_gap_blend_the_line_the_cubic_and_the_mean(block):
    alpha, beta = design()
    rng = np.random.default_rng(2)
    alive = np.r_[0 : block[0], block[1] : 50]
    t, y = beta[alive], smooth(beta[alive], rng)
    est, info = GapAwareInterpolant(t, alive, alpha, 50)(y)
    ((label, weights),) = info["gaps"]
    missing = block[1] - block[0]
    assert label == ("gap", missing)
    np.testing.assert_allclose(weights, brute_force_gap_weights(t, alive, y, missing + 1), atol=1e-10)
    inside = (alpha > beta[block[0] - 1]) & (alpha < beta[block[1]])
    assert inside.any()
    linear = np.stack([np.interp(alpha, t, y[:, c]) for c in range(3)], axis=1)
    cubic = CubicSpline(t, y, bc_type="natural")(alpha)
    expected = weights[0] * linear + weights[1] * cubic + weights[2] * y.mean(axis=0)
    np.testing.assert_allclose(est[inside], expected[inside], rtol=1e-10, atol=1e-12)
    adaptive, _ = AdaptiveInterpolant(t, alpha)(y)
    np.testing.assert_allclose(est[~inside], adaptive[~inside], rtol=1e-12)


def test_points_beyond_a_missing_end_blend_four_extrapolants():
    alpha, beta = design()
    rng = np.random.default_rng(3)
    alive = np.arange(8, 50)  # the 8 lowest points missing
    t, y = beta[alive], smooth(beta[alive], rng)
    est, info = GapAwareInterpolant(t, alive, alpha, 50)(y)
    ((label, weights),) = info["gaps"]
    assert label == ("edge", "low") and len(weights) == 4
    beyond = alpha < t[0]
    z = alpha[beyond]
    hold = np.repeat(y[:1], z.size, axis=0)
    line = y[0] + (z - t[0])[:, None] * (y[1] - y[0]) / (t[1] - t[0])
    w = slice(0, gaps.WINDOW)
    cubic = CubicSpline(t[w], y[w], bc_type="natural", extrapolate=True)
    # scipy's natural spline extrapolates its end cubic; the natural spline is linear beyond
    end_line = cubic(t[0]) + (z - t[0])[:, None] * cubic(t[0], 1)
    berrut = FloaterHormannInterpolator(t, y, d=0)(z)
    expected = sum(c * e for c, e in zip(weights, [hold, line, end_line, berrut], strict=True))
    np.testing.assert_allclose(est[beyond], expected, rtol=1e-9, atol=1e-12)


def test_knot_order_does_not_matter_and_torch_agrees():
    alpha, beta = design()
    rng = np.random.default_rng(4)
    alive = np.r_[0:15, 26:47]
    y = smooth(beta[alive], rng)
    expected, info = GapAwareInterpolant(beta[alive], alive, alpha, 50)(y)
    assert info["gaps"]
    perm = rng.permutation(alive.size)
    got, info_perm = GapAwareInterpolant(beta[alive][perm], alive[perm], alpha, 50)(y[perm])
    np.testing.assert_allclose(got, expected, rtol=1e-11, atol=1e-13)
    assert [label for label, _ in info_perm["gaps"]] == [label for label, _ in info["gaps"]]
    decoder = GapAwareInterpolant(beta[alive], alive, alpha, 50)
    tensor, _ = decoder(torch.tensor(y, dtype=torch.float32))
    assert isinstance(tensor, torch.Tensor) and tensor.dtype == torch.float32
    np.testing.assert_allclose(tensor.numpy(), expected, rtol=1e-4, atol=1e-5)
    single, _ = decoder(y.astype(np.float32))
    assert single.dtype == np.float32


def test_large_blocks_validate_on_a_sample_and_cost_stays_linear():
    """A block of 3,200 of 16,000: each validation block predicts at most MAX_BLOCK_TARGETS
    knots, so the maps stay small."""
    code = cc.GCC(1600, 16000)
    alive = np.r_[0:6000, 9200:16000]
    decoder = code.decoder(alive)
    assert [g.label[0] for g in decoder.groups].count("gap") == 1
    assert decoder._plan["target"].size <= gaps.POSITIONS * gaps.MAX_BLOCK_TARGETS
    assert decoder._rows.size <= gaps.POSITIONS * (gaps.MAX_BLOCK_TARGETS + 2 * gaps.WINDOW + 2)
    y = np.sin(3 * code.beta[alive])[:, None]
    est = code.decode(y, alive)
    inside = (code.alpha > code.beta[5999]) & (code.alpha < code.beta[9200])
    assert (
        np.all(np.isfinite(est)) and np.max(np.abs(est[inside] - np.sin(3 * code.alpha[inside, None]))) < 0.5
    )


# ---------------------------------------------------------------------------------------------
# tensors on a device: the weights fitted there (CPU tensors follow the device route)
# ---------------------------------------------------------------------------------------------


@pytest.fixture
def pretend_device(monkeypatch):
    """CPU tensors follow the device route (numpy does not read them in place)."""
    from codedcomputing import _arraylib

    monkeypatch.setattr(_arraylib, "_HOST_DEVICES", frozenset())
    _arraylib.device_copies.clear()
    yield lambda host: monkeypatch.setattr(_arraylib, "_HOST_DEVICES", frozenset({"cpu"} if host else ()))
    _arraylib.device_copies.clear()


def _assert_same_weights(got, expected, tol):
    assert got[0] == pytest.approx(expected[0], abs=tol)
    assert len(got[1]) == len(expected[1])
    for w, reference in zip(got[1], expected[1], strict=True):
        np.testing.assert_allclose(w, reference, rtol=0, atol=tol)


@pytest.mark.parametrize(
    "num_workers, num_inputs, width, dropped",
    [
        (50, 10, 3, np.r_[20:30]),  # one gap
        (50, 10, 100, np.r_[0:4, 20:30, 45:50]),  # a gap and both ends, sketched
        (500, 100, 5, np.r_[0:10, 100:160, 300:330, 180:290:3]),  # five gap sizes and an end
        (2000, 200, 64, np.r_[0:30, 1000:1300, 1500:1520]),  # blocks predicted on a sample
    ],
)
def test_the_device_route_gives_the_hosts_weights_and_estimates(
    pretend_device, num_workers, num_inputs, width, dropped
):
    alpha, beta = design(num_workers, num_inputs)
    rng = np.random.default_rng(num_workers + width)
    alive = rng.permutation(np.setdiff1d(np.arange(num_workers), dropped))  # knots in any order
    y = smooth(beta[alive], rng, width) + 1e-3 * rng.normal(size=(alive.size, width))
    decoder = GapAwareInterpolant(beta[alive], alive, alpha, num_workers)
    assert {g.label[0] for g in decoder.groups} >= {"gap"}
    tensor = torch.as_tensor(y)
    out, info = decoder(tensor)
    weights = decoder.weights(tensor)
    pretend_device(host=True)
    reference, reference_info = decoder(y)
    _assert_same_weights(weights, decoder.weights(y), 1e-9)
    _assert_same_weights((info["theta"], [w for _, w in info["gaps"]]), weights, 1e-12)
    assert [label for label, _ in info["gaps"]] == [label for label, _ in reference_info["gaps"]]
    assert isinstance(out, torch.Tensor) and out.dtype == torch.float64
    np.testing.assert_allclose(out.numpy(), reference, rtol=0, atol=1e-10 * np.abs(reference).max())


def test_the_device_weights_are_scale_free_and_take_zeros(pretend_device):
    alpha, beta = design()
    alive = np.r_[3:20, 30:48]
    y = smooth(beta[alive], np.random.default_rng(40)) + 1e-3 * np.random.default_rng(41).normal(size=(35, 3))
    decoder = GapAwareInterpolant(beta[alive], alive, alpha, 50)
    weights = decoder.weights(torch.as_tensor(y))
    assert {g.label[0] for g in decoder.groups} == {"gap", "edge"}
    for factor in (1e300, 1e-300):
        _assert_same_weights(decoder.weights(torch.as_tensor(y * factor)), weights, 1e-12)
    theta, fitted = decoder.weights(torch.zeros(35, 3, dtype=torch.float64))
    assert theta == 1.0
    assert all(w[0] == 1.0 and w.sum() == 1.0 for w in fitted)  # the first candidate


def test_the_device_weights_are_constants_to_autograd(pretend_device):
    """The gradient of ``sum(w * u)`` is ``M^T w``, ``M`` the decoder's linear map at the
    fitted weights (:meth:`apply` of the identity, on the host)."""
    alpha, beta = design()
    alive = np.r_[2:18, 29:50]
    rng = np.random.default_rng(42)
    tensor = torch.as_tensor(smooth(beta[alive], rng) + 1e-3 * rng.normal(size=(alive.size, 3)))
    tensor.requires_grad_(True)
    decoder = GapAwareInterpolant(beta[alive], alive, alpha, 50)
    out, _ = decoder(tensor)
    weights = decoder.weights(tensor.detach())
    w = rng.normal(size=out.shape)
    (out * torch.as_tensor(w)).sum().backward()
    pretend_device(host=True)
    linear_map = decoder.apply(np.eye(alive.size), weights)
    np.testing.assert_allclose(tensor.grad.numpy(), linear_map.T @ w, rtol=1e-9, atol=1e-11)
