"""The adaptive interpolant (codedcomputing.spline.adaptive) against independent references:
brute-force leave-one-out with scipy's natural cubic spline and numpy's linear interpolation,
a dense inverse, and a grid search for the blend weight."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from scipy.interpolate import CubicSpline

from codedcomputing import _arraylib
from codedcomputing.spline.adaptive import (
    AdaptiveInterpolant,
    _inverse_diagonal,
    blend_weight,
    cubic_loo_residuals,
    linear_loo_residuals,
    linear_matrix,
)


def _blend(decoder, y):
    """``(estimates, theta)`` of one call of the decoder interface."""
    estimates, info = decoder.decode(y)
    assert set(info) == {"lambda_dec", "theta"} and info["lambda_dec"] == 0.0
    return estimates, info["theta"]


def layouts(n: int, rng) -> dict[str, np.ndarray]:
    return {
        "chebyshev": np.sort(np.cos(np.arange(n) * np.pi / (n - 1))),
        "random": np.sort(rng.uniform(-1, 1, n)),
        "gappy": np.sort(np.concatenate([np.linspace(-1, -0.6, n // 2), np.linspace(0.5, 1, n - n // 2)])),
    }


def natural(t, y):
    return CubicSpline(t, y, bc_type="natural", axis=0)


@pytest.mark.parametrize("n", [4, 5, 9, 30])
def test_leave_one_out_residuals_match_refitting(n):
    rng = np.random.default_rng(n)
    for name, t in layouts(n, rng).items():
        y = np.stack([np.sin(3 * t), np.abs(t) + 0.1 * rng.normal(size=n)], axis=1)
        brute_linear, brute_cubic = [], []
        for j in range(1, n - 1):
            keep = np.delete(np.arange(n), j)
            brute_linear.append([y[j, c] - np.interp(t[j], t[keep], y[keep, c]) for c in range(2)])
            brute_cubic.append(y[j] - natural(t[keep], y[keep])(t[j]))
        np.testing.assert_allclose(
            linear_loo_residuals(t, y), brute_linear, rtol=1e-10, atol=1e-12, err_msg=name
        )
        np.testing.assert_allclose(
            cubic_loo_residuals(t, y), brute_cubic, rtol=1e-8, atol=1e-10, err_msg=name
        )


@pytest.mark.parametrize("m", [1, 2, 3, 10, 200])
def test_the_tridiagonal_inverse_diagonal_matches_a_dense_inverse(m):
    rng = np.random.default_rng(m)
    h = rng.uniform(0.01, 1.0, m + 1)
    diagonal, offdiagonal = (h[:-1] + h[1:]) / 3.0, h[1:-1] / 6.0
    dense = np.diag(diagonal) + np.diag(offdiagonal, 1) + np.diag(offdiagonal, -1)
    np.testing.assert_allclose(
        _inverse_diagonal(diagonal, offdiagonal), np.diag(np.linalg.inv(dense)), rtol=1e-12
    )


def test_the_blend_weight_minimises_the_leave_one_out_error():
    rng = np.random.default_rng(0)
    grid = np.linspace(0, 1, 100001)
    for _ in range(20):
        r_linear, r_cubic = rng.normal(size=(2, 12, 3)) * rng.uniform(0.1, 3, size=(2, 1, 1))
        theta = blend_weight(r_linear, r_cubic)
        errors = [np.sum(((1 - g) * r_linear + g * r_cubic) ** 2) for g in grid[::1000]]
        best = grid[::1000][int(np.argmin(errors))]
        assert 0.0 <= theta <= 1.0 and abs(theta - best) <= 0.01 + 1e-12
    assert blend_weight(np.ones((3, 2)), np.ones((3, 2))) == 1.0  # the two agree
    assert blend_weight(np.zeros((3, 2)), np.ones((3, 2))) == 0.0  # the linear one is exact


def test_the_interpolant_blends_and_holds_its_end_values():
    rng = np.random.default_rng(3)
    t = np.sort(rng.uniform(-0.8, 0.9, 15))
    z = np.linspace(-1, 1, 41)
    y = np.stack([np.tanh(4 * t), t**2], axis=1)
    est, theta = _blend(AdaptiveInterpolant(t, z), y)
    zc = np.clip(z, t[0], t[-1])
    linear = np.stack([np.interp(zc, t, y[:, c]) for c in range(2)], axis=1)
    cubic = natural(t, y)(zc)
    expected_theta = blend_weight(linear_loo_residuals(t, y), cubic_loo_residuals(t, y))
    assert theta == pytest.approx(expected_theta) and 0.0 < theta <= 1.0
    np.testing.assert_allclose(est, linear + theta * (cubic - linear), rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(est[z < t[0]], np.repeat(y[:1], np.sum(z < t[0]), axis=0))  # held constant
    np.testing.assert_allclose(est[z > t[-1]], np.repeat(y[-1:], np.sum(z > t[-1]), axis=0))


def test_smooth_data_get_the_cubic_and_kinks_the_line():
    t = np.linspace(-1, 1, 25)
    smooth = np.sin(2 * t)[:, None]
    kinked = np.abs(t - 0.013)[:, None]  # a kink between knots: the cubic rings around it
    _, theta_smooth = _blend(AdaptiveInterpolant(t, np.zeros(1)), smooth)
    _, theta_kink = _blend(AdaptiveInterpolant(t, np.zeros(1)), kinked)
    assert theta_smooth > 0.99 and theta_kink < theta_smooth


def test_two_and_three_knots_give_the_line():
    for n in (2, 3):
        t = np.linspace(-1, 1, n)
        y = np.arange(n, dtype=float)[:, None] ** 2
        est, theta = _blend(AdaptiveInterpolant(t, np.array([-1.5, 0.25, 2.0])), y)
        assert theta == 1.0
        linear = np.interp(np.clip([-1.5, 0.25, 2.0], -1, 1), t, y[:, 0])
        expected = natural(t, y)(np.clip([-1.5, 0.25, 2.0], -1, 1))[:, 0] if n == 3 else linear
        np.testing.assert_allclose(est[:, 0], expected, rtol=1e-12)


def test_torch_and_numpy_agree_and_keep_their_kind():
    rng = np.random.default_rng(5)
    t = np.sort(rng.uniform(-1, 1, 20))
    z = np.linspace(-1, 1, 7)
    y = rng.normal(size=(20, 3))
    decoder = AdaptiveInterpolant(t, z)
    expected, theta = _blend(decoder, y)
    got, theta_t = _blend(decoder, torch.tensor(y, dtype=torch.float32))
    assert isinstance(got, torch.Tensor) and got.dtype == torch.float32
    assert theta_t == pytest.approx(theta, rel=1e-5)
    np.testing.assert_allclose(got.numpy(), expected, rtol=1e-5, atol=1e-5)


def test_the_linear_matrix_is_numpys_interp_with_held_ends():
    t = np.array([-0.7, -0.1, 0.4, 0.9])
    z = np.array([-1.0, -0.7, 0.0, 0.4, 0.95])
    expected = np.stack([np.interp(z, t, unit) for unit in np.eye(4)], axis=1)  # numpy holds the ends
    np.testing.assert_allclose(linear_matrix(t, z).toarray(), expected, rtol=1e-14)


def test_knots_in_any_order_decode_as_sorted_ones():
    rng = np.random.default_rng(8)
    t = np.sort(rng.uniform(-1, 1, 12))
    z = np.linspace(-1, 1, 9)
    y = rng.normal(size=(12, 2))
    expected, theta = _blend(AdaptiveInterpolant(t, z), y)
    perm = rng.permutation(12)
    got, theta_perm = _blend(AdaptiveInterpolant(t[perm], z), y[perm])
    assert theta_perm == pytest.approx(theta, rel=1e-12)
    np.testing.assert_allclose(got, expected, rtol=1e-12, atol=1e-14)


def test_huge_values_give_the_same_weight_as_small_ones():
    t = np.linspace(-1, 1, 15)
    y = np.stack([np.sin(3 * t), np.abs(t)], axis=1)
    _, theta = _blend(AdaptiveInterpolant(t, np.zeros(3)), y)
    est, theta_big = _blend(AdaptiveInterpolant(t, np.zeros(3)), 1e300 * y)  # squares would overflow
    assert theta_big == pytest.approx(theta, rel=1e-12) and np.all(np.isfinite(est))


def test_results_up_to_the_sketch_width_get_the_exact_weight():
    from codedcomputing.spline.adaptive import SKETCH_COLUMNS

    rng = np.random.default_rng(11)
    t = np.sort(rng.uniform(-1, 1, 30))
    y = np.sin(rng.uniform(1, 5, SKETCH_COLUMNS) * t[:, None]) + np.abs(t[:, None] - 0.1)
    _, theta = _blend(AdaptiveInterpolant(t, np.zeros(2)), y)
    expected = blend_weight(linear_loo_residuals(t, y), cubic_loo_residuals(t, y))
    assert theta == pytest.approx(expected, rel=1e-12)


def test_wide_results_get_a_weight_near_the_exact_one():
    """Wider results are summarised by a CountSketch before the leave-one-out solve: theta is
    then an estimate, deterministic for a width, whose leave-one-out error stays near the
    optimum's."""
    rng = np.random.default_rng(12)
    increases = []
    for _ in range(40):
        t = np.sort(rng.uniform(-1, 1, 40))
        d = int(rng.choice([33, 200, 1000]))
        y = rng.lognormal(0, 1, d) * (
            np.sin(rng.uniform(0.5, 6, d) * t[:, None] + rng.uniform(0, 6, d))
            + rng.uniform(0, 1) * np.abs(t[:, None] - rng.uniform(-1, 1, d))
        )
        decoder = AdaptiveInterpolant(t, np.zeros(2))
        theta = decoder.weight(y)
        assert theta == decoder.weight(y.copy())  # the same sketch every call
        r_linear, r_cubic = linear_loo_residuals(t, y), cubic_loo_residuals(t, y)
        exact = blend_weight(r_linear, r_cubic)

        def loo(g, r_linear=r_linear, r_cubic=r_cubic):
            return np.sum(((1 - g) * r_linear + g * r_cubic) ** 2)

        increases.append(loo(theta) / loo(exact) - 1)
    assert np.median(increases) < 0.02 and max(increases) < 0.25


def dense_loo_map(t: np.ndarray) -> np.ndarray:
    """``K = Q R^-1 Q^T`` (the cubic's energy) with rows divided by their diagonal entries, from
    a dense solve: row j applied to y is the cubic's leave-one-out residual at knot j."""
    h = np.diff(t)
    n, m = t.size, t.size - 2
    r = np.diag((h[:-1] + h[1:]) / 3) + np.diag(h[1:-1] / 6, 1) + np.diag(h[1:-1] / 6, -1)
    q = np.zeros((n, m))
    q[np.arange(m), np.arange(m)] = 1 / h[:-1]
    q[np.arange(m) + 1, np.arange(m)] = -1 / h[:-1] - 1 / h[1:]
    q[np.arange(m) + 2, np.arange(m)] = 1 / h[1:]
    k = q @ np.linalg.solve(r, q.T)
    return k / np.diag(k)[:, None]


@pytest.mark.parametrize("n", [5, 40, 200])
def test_truncated_rows_of_the_cubic_map_match_a_dense_solve(n):
    """Rows of K built from the products of the LDL^T factor, cut where their weights fall
    below 1e-14 of the row's largest: within 1e-12 of the dense rows, clustered and gappy
    knots too."""
    from codedcomputing.spline.adaptive import _CubicLeaveOneOut

    for name, t in layouts(n, np.random.default_rng(n)).items():
        expected = dense_loo_map(t)[1:-1]
        rows = _CubicLeaveOneOut(t).rows(np.arange(1, n - 1)).toarray()
        error = np.abs(rows - expected).max(axis=1) / np.abs(expected).max(axis=1)
        assert error.max() < 1e-12, name


def test_the_sampled_path_uses_truncated_rows_of_the_dense_map(monkeypatch):
    """With the sample forced small (LOO_KNOTS = 8, blocks of 4), the decoder's residual rows are
    the dense map's rows at the sampled knots, each scaled by its weight's square root, over
    the knots they read; the knots next to the gap are always sampled."""
    from codedcomputing.spline import adaptive

    monkeypatch.setattr(adaptive, "LOO_KNOTS", 8)
    monkeypatch.setattr(adaptive, "LOO_BLOCK", 4)
    n = 200
    for name, t in layouts(n, np.random.default_rng(3)).items():
        decoder = AdaptiveInterpolant(t, np.linspace(-1, 1, 5))
        rows = decoder.residual_rows
        assert rows is not None and rows.targets.size < n - 2 and rows.knots.size < n, name
        sampled = rows.matrix.toarray()[rows.targets.size :] / rows.scale[:, None]
        expected = dense_loo_map(t)[rows.targets]
        error = np.abs(expected).max(axis=1, keepdims=True) * 1e-12
        assert np.all(np.abs(sampled - expected[:, rows.knots]) <= error), name
        dropped = np.delete(expected, rows.knots, axis=1)  # the knots no row reads
        assert np.all(np.abs(dropped) <= error), name
        if name == "gappy":
            assert {n // 2 - 1, n // 2} <= set(rows.targets.tolist())


def sampled_layouts(rng) -> dict[str, np.ndarray]:
    """Large sets of knots: GCC's Chebyshev design with random and with neighbouring workers
    missing, and two clusters with a gap between them."""
    design = np.sort(np.cos((2 * np.arange(3000) + 1) * np.pi / 6000))
    random = np.sort(rng.choice(3000, 2700, replace=False))
    start = rng.integers(0, 2700)
    block = np.r_[0:start, start + 300 : 3000]
    return {
        "chebyshev, random missing": design[random],
        "chebyshev, a block missing": design[block],
        "gappy": layouts(2500, rng)["gappy"],
    }


def test_the_sampled_weight_keeps_the_leave_one_out_error_near_its_optimum():
    """Many more knots than points: theta's sums run over a weighted sample of the knots (the
    widest brackets' knots and evenly spread blocks, ~10% of them here). Its leave-one-out
    error, on the full, unsketched residuals, stays near the exact optimum's; the same sample
    every call. A sample can miss the few knots next to a strong kink that dominate the sums
    (measured over 360 draws: 90% within 2% of the optimum, the worst 2.3x it), hence the
    bounds on the median and the 90th percentile, and only a loose one on the worst."""
    rng = np.random.default_rng(21)
    increases = []
    for _ in range(8):
        for name, t in sampled_layouts(rng).items():
            d = int(rng.choice([10, 200]))
            y = rng.lognormal(0, 1, d) * (
                np.sin(rng.uniform(0.5, 6, d) * t[:, None] + rng.uniform(0, 6, d))
                + rng.uniform(0, 1) * np.abs(t[:, None] - rng.uniform(-1, 1, d))
            )
            decoder = AdaptiveInterpolant(t, np.linspace(-0.9, 0.9, 100))
            assert decoder.loo_rows is not None and decoder.loo_rows.size < t.size / 2, name
            theta = decoder.weight(y)
            assert theta == decoder.weight(y.copy())
            r_linear, r_cubic = linear_loo_residuals(t, y), cubic_loo_residuals(t, y)
            exact = blend_weight(r_linear, r_cubic)

            def loo(g, r_linear=r_linear, r_cubic=r_cubic):
                return np.sum(((1 - g) * r_linear + g * r_cubic) ** 2)

            increases.append(loo(theta) / loo(exact) - 1)
    assert np.median(increases) < 0.02 and np.quantile(increases, 0.9) < 0.1 and max(increases) < 2


def test_a_sampled_weight_reads_only_its_rows_and_ignores_the_knots_order():
    rng = np.random.default_rng(22)
    t = sampled_layouts(rng)["chebyshev, a block missing"]
    y = np.sin(3 * t)[:, None] + np.abs(t[:, None] - rng.uniform(-1, 1, 40))  # wide: read by rows
    decoder = AdaptiveInterpolant(t, np.linspace(-0.9, 0.9, 100))
    theta = decoder.weight(y)
    unread = np.setdiff1d(np.arange(t.size), decoder.loo_rows)
    changed = y.copy()
    changed[unread] = rng.normal(size=(unread.size, 40))
    # narrow results solve at every knot instead: the same sample's residuals, to rounding
    narrow = y[:, :20]
    rows = decoder.residual_rows
    values = narrow[rows.knots]
    both = rows.matrix @ values
    expected = blend_weight(both[: rows.targets.size], both[rows.targets.size :])
    assert decoder.weight(narrow) == pytest.approx(expected, rel=1e-9)
    assert decoder.weight(changed) == theta
    perm = rng.permutation(t.size)
    assert AdaptiveInterpolant(t[perm], np.linspace(-0.9, 0.9, 100)).weight(y[perm]) == pytest.approx(
        theta, rel=1e-12
    )


@pytest.mark.parametrize("n", [30, 200])
def test_the_dense_and_recurrence_paths_give_the_exact_weight(n):
    """Results up to the sketch width: the tridiagonal recurrence, exact. Wider ones are
    sketched, and with few knots take the residuals as one dense product."""
    rng = np.random.default_rng(n)
    t = np.sort(rng.uniform(-1, 1, n))
    y = np.sin(rng.uniform(1, 5, 7) * t[:, None]) + np.abs(t[:, None] - 0.1)
    decoder = AdaptiveInterpolant(t, np.zeros(2))
    expected = blend_weight(linear_loo_residuals(t, y), cubic_loo_residuals(t, y))
    assert decoder.weight(y) == pytest.approx(expected, rel=1e-12)  # narrow: the recurrence
    assert decoder._residual_rows is None
    assert (decoder.residual_rows is not None) == (n <= 64)
    wide = np.repeat(y, 6, axis=1)  # sketched: the rows where there are any
    sketched = decoder.weight(wide)
    assert sketched == decoder.weight(wide.copy())


def test_wide_float32_results_are_sketched_in_float32_without_overflow():
    """Wide float32 results are summed in float32: theta near the float64 sum's; results whose
    float32 sums overflow are summed in float64 instead."""
    rng = np.random.default_rng(23)
    t = np.sort(rng.uniform(-1, 1, 40))
    y = (np.sin(rng.uniform(1, 5, 300) * t[:, None]) + np.abs(t[:, None] - 0.2)).astype(np.float32)
    decoder = AdaptiveInterpolant(t, np.zeros(2))
    theta = decoder.weight(y)
    assert theta == pytest.approx(decoder.weight(y.astype(np.float64)), abs=1e-4)
    huge = (y / np.abs(y).max() * 3e38).astype(np.float32)
    assert decoder.weight(huge) == pytest.approx(decoder.weight(huge.astype(np.float64)), rel=1e-12)


def test_the_gathered_linear_interpolant_is_the_sparse_product():
    rng = np.random.default_rng(24)
    t = rng.permutation(np.linspace(-1, 1, 30))
    decoder = AdaptiveInterpolant(t, np.linspace(-1.2, 1.2, 11))
    for dtype in (np.float32, np.float64):
        y = rng.normal(size=(30, 4, 3)).astype(dtype)
        got = decoder.linear_values(y)
        assert got.dtype == dtype and got.shape == (11, 4, 3)
        np.testing.assert_array_equal(got, _arraylib.apply_matrix(decoder.linear, y))


# ---------------------------------------------------------------------------------------------
# tensors on a device: theta's sums computed there (CPU tensors follow the device route)
# ---------------------------------------------------------------------------------------------


@pytest.fixture
def pretend_device(monkeypatch):
    """CPU tensors follow the device route (numpy does not read them in place)."""
    monkeypatch.setattr(_arraylib, "_HOST_DEVICES", frozenset())
    _arraylib.device_copies.clear()
    yield monkeypatch
    _arraylib.device_copies.clear()


def _device_call(interpolant, y, monkeypatch):
    """``(estimates, theta)`` of ``y`` as a tensor on the (pretended) device, then the host's
    on the numpy array."""
    out, theta = _blend(interpolant, torch.as_tensor(y))
    monkeypatch.setattr(_arraylib, "_HOST_DEVICES", frozenset({"cpu"}))
    reference, reference_theta = _blend(interpolant, y)
    monkeypatch.setattr(_arraylib, "_HOST_DEVICES", frozenset())
    return out, theta, reference, reference_theta


@pytest.mark.parametrize(
    "n, width, theta_tol",
    [
        (40, 3, 1e-10),  # few knots: the dense residual map
        (40, 100, 1e-10),  # ... sketched
        (300, 5, 1e-9),  # every interior knot's truncated rows (the host solves)
        (300, 50, 1e-10),
        (2000, 4, 1e-8),  # a sample of many knots: its truncated rows (the host solves)
        (2000, 60, 1e-9),  # ... the same rows as the host's
    ],
)  # r_L - r_C cancels (1e-7 noise on smooth data): theta's rounding is amplified
def test_the_device_route_gives_the_hosts_theta_and_estimates(pretend_device, n, width, theta_tol):
    rng = np.random.default_rng(n + width)
    knots = rng.permutation(np.sort(rng.uniform(-1, 1, n)))
    y = np.tanh(3 * knots[:, None] * rng.normal(size=(1, width))) + 1e-7 * rng.normal(size=(n, width))
    interpolant = AdaptiveInterpolant(knots, np.linspace(-0.95, 0.95, 20))
    out, theta, reference, reference_theta = _device_call(interpolant, y, pretend_device)
    assert isinstance(out, torch.Tensor) and out.dtype == torch.float64
    assert 0.0 < reference_theta < 1.0 or n < 2000  # a blend, not an end of [0, 1], where it matters
    assert theta == pytest.approx(reference_theta, abs=theta_tol)
    np.testing.assert_allclose(out.numpy(), reference, rtol=0, atol=1e-10 * np.abs(reference).max())


def test_the_device_route_is_scale_free_and_takes_zeros(pretend_device):
    rng = np.random.default_rng(30)
    knots = np.sort(rng.uniform(-1, 1, 30))
    y = np.sin(4 * knots)[:, None] + 1e-4 * rng.normal(size=(30, 2))  # theta 0.64
    interpolant = AdaptiveInterpolant(knots, np.linspace(-0.9, 0.9, 7))
    theta = interpolant.weight(torch.as_tensor(y))
    assert 0.0 < theta < 1.0
    assert interpolant.weight(torch.as_tensor(y * 1e300)) == pytest.approx(theta, abs=1e-12)
    assert interpolant.weight(torch.as_tensor(y * 1e-300)) == pytest.approx(theta, abs=1e-12)
    assert interpolant.weight(torch.zeros(30, 2, dtype=torch.float64)) == 1.0


def test_the_device_route_keeps_float32_and_treats_theta_as_a_constant(pretend_device):
    """float32 results keep their dtype; autograd differentiates the blend at the fitted theta:
    the gradient of ``sum(w * u)`` is ``((1 - theta) L + theta C)^T w``."""
    rng = np.random.default_rng(31)
    knots = np.sort(rng.uniform(-1, 1, 25))
    points = np.linspace(-0.9, 0.9, 6)
    y = np.cos(3 * knots)[:, None] + 3e-4 * rng.normal(size=(25, 3))  # theta 0.68
    interpolant = AdaptiveInterpolant(knots, points)
    single, _ = _blend(interpolant, torch.as_tensor(y, dtype=torch.float32))
    assert single.dtype == torch.float32
    tensor = torch.as_tensor(y).requires_grad_(True)
    out, theta = _blend(interpolant, tensor)
    assert 0.0 < theta < 1.0  # both interpolants' maps count
    w = rng.normal(size=out.shape)
    (out * torch.as_tensor(w)).sum().backward()
    np.testing.assert_allclose(single.numpy(), out.detach().numpy(), rtol=1e-5, atol=1e-5)
    linear = interpolant.linear.toarray()
    cubic = CubicSpline(knots, np.eye(25), bc_type="natural", axis=0)(points)  # C's map, independently
    blend = (1.0 - theta) * linear + theta * cubic
    np.testing.assert_allclose(tensor.grad.numpy(), blend.T @ w, rtol=1e-9, atol=1e-11)


def test_the_sparse_sketch_of_few_rows_is_the_dense_products():
    """Up to SPARSE_SKETCH_ROWS rows the CountSketch is a sparse product: the dense one's sums
    to rounding, in float64 and float32, and the same at every call."""
    from codedcomputing.spline import adaptive

    rng = np.random.default_rng(31)
    for rows, dtype in [(40, np.float64), (adaptive.SPARSE_SKETCH_ROWS, np.float32)]:
        values = rng.normal(size=(rows, 700)).astype(dtype)
        sketched = adaptive._sketch(values)
        dense = values.astype(np.float64) @ adaptive._sketches[(700, np.dtype(dtype))].astype(np.float64)
        assert sketched.dtype == np.float64 and sketched.flags.c_contiguous
        np.testing.assert_allclose(sketched, dense, rtol=0, atol=(1e-12 if dtype == np.float64 else 1e-4))
        np.testing.assert_array_equal(adaptive._sketch(values), sketched)
