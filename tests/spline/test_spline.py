"""Tests for the natural cubic smoothing spline engine (codedcomputing.spline).

Conventions (see the module docstring): mean-convention ``lam``, so scipy's
``make_smoothing_spline`` is called with ``lam = n * lam``; natural boundary, linear
extrapolation; ``lam = 0`` interpolates; knots may be unsorted but must be distinct.
"""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy.interpolate import make_smoothing_spline

from codedcomputing.spline import NaturalSpline, fit, smoothing_matrix
from references import mp_reinsch_values

# ---------------------------------------------------------------------------------------------
# helpers
# ---------------------------------------------------------------------------------------------

SEEDS = st.integers(min_value=0, max_value=2**32 - 1)


def rel_err(actual, expected) -> float:
    """max |actual - expected| / max |expected| (absolute error if expected is all zero)."""
    actual, expected = np.asarray(actual, dtype=np.float64), np.asarray(expected, dtype=np.float64)
    assert actual.shape == expected.shape, (actual.shape, expected.shape)
    scale = np.max(np.abs(expected)) if expected.size else 0.0
    diff = np.max(np.abs(actual - expected)) if expected.size else 0.0
    return float(diff / scale) if scale > 0 else float(diff)


def jittered_grid(rng: np.random.Generator, n: int) -> np.ndarray:
    """n sorted knots on a random interval: a uniform grid, each point moved by <= 0.4 spacing."""
    a, width = rng.uniform(-5, 5), rng.uniform(0.5, 10)
    spacing = width / (n - 1)
    return a + spacing * (np.arange(n) + rng.uniform(-0.4, 0.4, n))


def jittered_chebyshev(rng: np.random.Generator, n: int) -> np.ndarray:
    """n sorted Chebyshev-Lobatto points on a random interval, each jittered by <= 0.4 of the local gap."""
    a, width = rng.uniform(-5, 5), rng.uniform(0.5, 10)
    x = 0.5 * (1 - np.cos(np.pi * np.arange(n) / (n - 1)))
    gaps = np.diff(x)
    room = np.minimum(np.r_[gaps[0], gaps], np.r_[gaps, gaps[-1]])
    return a + width * (x + rng.uniform(-0.4, 0.4, n) * room)


def clustered_knots(rng: np.random.Generator, n: int, min_gap: float = 1e-4) -> np.ndarray:
    """n sorted knots in [0, ~10], in a few tight clusters with wide gaps between, spaced >= min_gap."""
    centers = rng.uniform(0, 10, rng.integers(1, 4))
    t = np.sort(centers[rng.integers(0, centers.size, n)] + rng.exponential(0.05, n))
    gaps = np.diff(t)
    t[1:] = t[0] + np.cumsum(np.maximum(gaps, min_gap))
    return t


def random_values(rng: np.random.Generator, t: np.ndarray, d: int) -> np.ndarray:
    """(n, d) values: a smooth random curve per column plus noise."""
    freq = rng.uniform(0.2, 2.0, d)
    phase = rng.uniform(0, 2 * np.pi, d)
    return np.sin(np.outer(t, freq) + phase) + 0.3 * rng.standard_normal((t.size, d))


def penalty(knots: np.ndarray, gamma: np.ndarray) -> float:
    """Exact int ||u''||^2 of the natural spline with knot second derivatives gamma (u'' piecewise linear)."""
    h = np.diff(knots)
    g0, g1 = gamma[:-1].reshape(h.size, -1), gamma[1:].reshape(h.size, -1)
    return float(np.sum(h[:, None] / 3.0 * (g0 * g0 + g0 * g1 + g1 * g1)))


def objective(spl: NaturalSpline, y: np.ndarray, lam: float) -> float:
    """Mean-convention objective (1/n) sum ||u(t_i) - y_i||^2 + lam * int ||u''||^2 (sorted knots)."""
    n = spl.knots.size
    return float(np.sum((spl.values - y) ** 2) / n + lam * penalty(spl.knots, spl.second_derivatives))


def fine_grid(t: np.ndarray, m: int = 997) -> np.ndarray:
    """m points covering [t.min(), t.max()], including both ends."""
    return np.linspace(t.min(), t.max(), m)


# ---------------------------------------------------------------------------------------------
# 1. agreement with scipy
# ---------------------------------------------------------------------------------------------


# scipy solves a banded B-spline system whose conditioning grows like lam_scipy / h_min^3; measured
# against a 40-digit mpmath solve, its error is up to ~1e-17 * n * lam / h_min^3 (e.g. 4e-5 for jittered
# Chebyshev knots with n = 300, lam = 0.1, where ours is 2e-10). Beyond this bound scipy is not a
# 1e-8 reference, so lam is capped there; the mpmath tests below cover the rest.
SCIPY_TRUSTED_CONDITION = 1e8


@settings(max_examples=60, deadline=None)
@given(
    seed=SEEDS,
    n=st.integers(5, 300),
    log_lam=st.floats(-12, -1),
    d=st.integers(1, 4),
    chebyshev=st.booleans(),
)
def test_matches_scipy_make_smoothing_spline(seed, n, log_lam, d, chebyshev):
    """fit(t, y, lam) agrees with scipy's make_smoothing_spline(lam=n*lam) on a fine grid and at the knots."""
    rng = np.random.default_rng(seed)
    t = jittered_chebyshev(rng, n) if chebyshev else jittered_grid(rng, n)
    lam = min(10.0**log_lam, SCIPY_TRUSTED_CONDITION * np.min(np.diff(t)) ** 3 / n)
    y = random_values(rng, t, d)
    ref = make_smoothing_spline(t, y, lam=n * lam)
    spl = fit(t, y, lam)
    z = fine_grid(t)
    assert rel_err(spl(z), ref(z)) < 1e-8
    assert rel_err(spl.values, ref(t)) < 1e-8


# ---------------------------------------------------------------------------------------------
# 2. high-precision reference for extreme lambda and clustered knots
# ---------------------------------------------------------------------------------------------


@settings(max_examples=25, deadline=None)
@given(seed=SEEDS, n=st.integers(3, 25), log_lam=st.floats(-1, 3), d=st.integers(1, 2))
def test_matches_mpmath_reinsch_solve_for_extreme_lambda(seed, n, log_lam, d):
    """Knot values agree with a 50-digit mpmath solve of the Reinsch system for lam in [0.1, 1000]."""
    rng = np.random.default_rng(seed)
    lam = 10.0**log_lam
    # knot spacings from 0.02 to ~10 (ratio up to ~500); tighter clusters: see the next test
    t = clustered_knots(rng, n, min_gap=0.02)
    y = random_values(rng, t, d)
    spl = fit(t, y, lam)
    assert rel_err(spl.values, mp_reinsch_values(t, y, lam)) < 1e-9


def test_matches_mpmath_for_tightly_clustered_knots_and_large_lambda():
    """Two clusters of knots 1e-3 apart, lam = 100 (needs the iterative refinement step):
    knot values agree with mpmath to 1e-9."""
    t = np.concatenate([np.arange(6) * 1e-3, 5 + np.arange(6) * 1e-3, [10.0]])
    y = np.cos(1.3 * np.arange(t.size))
    lam = 100.0
    assert rel_err(fit(t, y, lam).values, mp_reinsch_values(t, y, lam)) < 1e-9


# ---------------------------------------------------------------------------------------------
# 3. large-lambda limit
# ---------------------------------------------------------------------------------------------


@settings(max_examples=30, deadline=None)
@given(seed=SEEDS, n=st.integers(3, 60), clustered=st.booleans())
def test_huge_lambda_tends_to_least_squares_line(seed, n, clustered):
    """For lam = 1e8 the fit is the least-squares line through the data (numpy.polyfit degree 1)."""
    rng = np.random.default_rng(seed)
    t = clustered_knots(rng, n) if clustered else jittered_grid(rng, n)
    y = random_values(rng, t, 2)
    spl = fit(t, y, 1e8)
    coef = np.polyfit(t, y, 1)  # (2, d): slope, intercept
    line = lambda z: np.outer(z, coef[0]) + coef[1]  # noqa: E731
    assert rel_err(spl.values, line(t)) < 1e-5
    z = np.linspace(t.min() - 1, t.max() + 1, 101)
    assert rel_err(spl(z), line(z)) < 1e-5


# ---------------------------------------------------------------------------------------------
# 4. exactness: interpolation at lam = 0, affine data reproduced for every lam
# ---------------------------------------------------------------------------------------------


@settings(max_examples=40, deadline=None)
@given(seed=SEEDS, n=st.integers(2, 200), clustered=st.booleans())
def test_lam_zero_interpolates(seed, n, clustered):
    """With lam = 0 the spline passes through every data point."""
    rng = np.random.default_rng(seed)
    t = clustered_knots(rng, n) if clustered else jittered_grid(rng, n)
    y = random_values(rng, t, 3)
    spl = fit(t, y, 0.0)
    assert np.max(np.abs(spl.values - y)) < 1e-10
    assert np.max(np.abs(spl(t) - y)) < 1e-10


@settings(max_examples=40, deadline=None)
@given(
    seed=SEEDS,
    n=st.integers(2, 100),
    log_lam=st.one_of(st.just(None), st.floats(-12, 8)),
    trailing=st.sampled_from([(), (3,), (2, 2)]),
)
def test_affine_data_is_reproduced_exactly_for_any_lam(seed, n, log_lam, trailing):
    """a + b t has zero penalty, so it is reproduced at knots, between knots and outside, for every lam."""
    rng = np.random.default_rng(seed)
    lam = 0.0 if log_lam is None else 10.0**log_lam
    t = clustered_knots(rng, n) if seed % 2 else jittered_grid(rng, n)
    a, b = rng.standard_normal(trailing), rng.standard_normal(trailing)
    line = lambda z: a + np.multiply.outer(z, b)  # noqa: E731
    spl = fit(t, line(t), lam)
    z = np.concatenate([t, np.linspace(t.min() - 5, t.max() + 5, 203)])
    assert spl(z).shape == (z.size, *trailing)
    assert rel_err(spl.values, line(t)) < 1e-9
    assert rel_err(spl(z), line(z)) < 1e-9
    assert np.max(np.abs(spl.second_derivatives)) < 1e-6 * (1 + np.max(np.abs(b))) / np.min(np.diff(t))


# ---------------------------------------------------------------------------------------------
# 5. linear, C1 extrapolation
# ---------------------------------------------------------------------------------------------


@settings(max_examples=40, deadline=None)
@given(seed=SEEDS, n=st.integers(2, 80), log_lam=st.floats(-8, 1))
def test_extrapolation_is_affine_and_c1_at_end_knots(seed, n, log_lam):
    """Beyond the end knots the spline is affine, continuous and has the same slope as inside."""
    rng = np.random.default_rng(seed)
    t = jittered_grid(rng, n)
    y = random_values(rng, t, 2)
    spl = fit(t, y, 10.0**log_lam)
    lo, hi, h_lo, h_hi = t[0], t[-1], t[1] - t[0], t[-1] - t[-2]
    scale = 1 + np.max(np.abs(spl.values))
    # values at the end knots are the end knot values, and the outside is continuous with them
    assert np.max(np.abs(spl([lo, hi]) - spl.values[[0, -1]])) < 1e-12 * scale
    assert np.max(np.abs(spl([lo - 1e-9 * h_lo, hi + 1e-9 * h_hi]) - spl.values[[0, -1]])) < 1e-7 * scale
    for end, sign, hk in ((lo, -1.0, h_lo), (hi, 1.0, h_hi)):
        # three outside points are collinear
        z = end + sign * np.array([0.3, 1.7, 4.0]) * hk
        u = spl(z)
        slope01, slope12 = (u[1] - u[0]) / (z[1] - z[0]), (u[2] - u[1]) / (z[2] - z[1])
        assert np.max(np.abs(slope01 - slope12)) < 1e-8 * scale / hk
        # outside slope (exact, affine) equals the inside one-sided derivative (2nd-order difference)
        e = 1e-4 * hk
        outside = (spl(end + sign * e) - spl(end))[0] / (sign * e)
        u0, u1, u2 = spl(end - sign * np.array([0.0, e, 2 * e]))
        inside = (3 * u0 - 4 * u1 + u2) / (2 * sign * e)
        assert np.max(np.abs(outside - inside)) < 1e-5 * scale / hk


# ---------------------------------------------------------------------------------------------
# 6. two knots and one knot
# ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize("lam", [0.0, 1e-6, 1.0, 1e6])
def test_two_knots_give_the_straight_line(lam):
    """n = 2: the fit is the line through the two points, everywhere, for any lam."""
    t, y = np.array([1.5, -0.5]), np.array([[2.0, -1.0], [0.0, 3.0]])
    slope = (y[0] - y[1]) / (t[0] - t[1])
    z = np.array([-3.0, -0.5, 0.0, 0.7, 1.5, 4.0])
    expected = y[1] + np.outer(z - t[1], slope)
    spl = fit(t, y, lam)
    np.testing.assert_allclose(spl(z), expected, rtol=1e-13, atol=1e-13)
    np.testing.assert_allclose(spl.second_derivatives, 0.0)


def test_one_knot_raises():
    """n = 1 is rejected with a message about the knots."""
    with pytest.raises(ValueError, match="knots"):
        fit([0.0], [1.0], 0.1)
    with pytest.raises(ValueError, match="knots"):
        smoothing_matrix([0.0], 0.1, [0.0])


# ---------------------------------------------------------------------------------------------
# 7. unsorted knots and input validation
# ---------------------------------------------------------------------------------------------


@settings(max_examples=30, deadline=None)
@given(seed=SEEDS, n=st.integers(2, 60), log_lam=st.floats(-8, 2))
def test_permuted_knots_give_the_same_spline(seed, n, log_lam):
    """Fitting (t, y) in any row order gives the same spline as fitting it sorted."""
    rng = np.random.default_rng(seed)
    lam = 10.0**log_lam
    t = jittered_grid(rng, n)
    y = random_values(rng, t, 2)
    perm = rng.permutation(n)
    ref, spl = fit(t, y, lam), fit(t[perm], y[perm], lam)
    np.testing.assert_array_equal(spl.knots, t)
    np.testing.assert_allclose(spl.values, ref.values, rtol=0, atol=1e-12 * np.max(np.abs(y)))
    z = np.linspace(t.min() - 1, t.max() + 1, 51)
    np.testing.assert_allclose(spl(z), ref(z), rtol=0, atol=1e-11 * np.max(np.abs(y)))


def test_duplicate_knots_raise():
    """Repeated knots are rejected with a message mentioning 'duplicate'."""
    with pytest.raises(ValueError, match="duplicate"):
        fit([0.0, 1.0, 2.0, 1.0], np.zeros(4), 0.1)
    with pytest.raises(ValueError, match="duplicate"):
        smoothing_matrix([0.0, 0.0, 1.0], 0.1, [0.5])


@pytest.mark.parametrize("bad", [np.nan, np.inf])
def test_non_finite_knots_or_values_raise(bad):
    """NaN/inf in knots or values is rejected."""
    t, y = np.array([0.0, 1.0, 2.0, 3.0]), np.array([1.0, 2.0, 0.0, 1.0])
    t_bad, y_bad = t.copy(), y.copy()
    t_bad[2], y_bad[1] = bad, bad
    with pytest.raises(ValueError, match="knots"):
        fit(t_bad, y, 0.1)
    with pytest.raises(ValueError, match="values"):
        fit(t, y_bad, 0.1)


@pytest.mark.parametrize("lam", [-1e-3, -1.0, np.nan, np.inf])
def test_bad_lambda_raises(lam):
    """Negative, NaN or infinite lam is rejected with a message mentioning 'lam'."""
    t, y = np.arange(5.0), np.arange(5.0) ** 2
    with pytest.raises(ValueError, match="lam"):
        fit(t, y, lam)
    with pytest.raises(ValueError, match="lam"):
        smoothing_matrix(t, lam, [0.5])


@pytest.mark.parametrize("shape", [(4,), (6,), (4, 2), (6, 2), (1, 5), ()])
def test_wrong_leading_dimension_of_values_raises(shape):
    """values whose leading dimension is not n (or a scalar) is rejected with a message about 'values'."""
    with pytest.raises(ValueError, match="values"):
        fit(np.arange(5.0), np.ones(shape), 0.1)


# ---------------------------------------------------------------------------------------------
# 8. trailing shapes
# ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize("trailing", [(), (3,), (2, 3, 4), (1,)])
def test_output_shape_follows_trailing_shape(trailing):
    """spl(z) has shape (len(z),) + trailing, and matches the flattened (n, d) fit column by column."""
    rng = np.random.default_rng(7)
    t = jittered_grid(rng, 20)
    y = rng.standard_normal((20, *trailing))
    spl = fit(t, y, 1e-3)
    z = np.linspace(t.min() - 1, t.max() + 1, 17)
    out = spl(z)
    assert out.shape == (17, *trailing)
    assert spl.values.shape == spl.second_derivatives.shape == (20, *trailing)
    flat = fit(t, y.reshape(20, -1), 1e-3)(z)
    np.testing.assert_allclose(out.reshape(17, -1), flat, rtol=1e-14, atol=1e-14)
    assert spl(0.5).shape == (1, *trailing)


@settings(max_examples=30, deadline=None)
@given(seed=SEEDS, n=st.integers(2, 100), log_lam=st.floats(-10, 2))
def test_columns_are_fitted_independently(seed, n, log_lam):
    """A (n, 3) fit equals three separate (n,) fits."""
    rng = np.random.default_rng(seed)
    lam = 10.0**log_lam
    t = jittered_grid(rng, n)
    y = random_values(rng, t, 3)
    z = np.linspace(t.min() - 1, t.max() + 1, 41)
    joint = fit(t, y, lam)
    for k in range(3):
        single = fit(t, y[:, k], lam)
        assert single(z).shape == (41,)
        np.testing.assert_allclose(joint(z)[:, k], single(z), rtol=1e-13, atol=1e-13)
        np.testing.assert_allclose(joint.values[:, k], single.values, rtol=1e-13, atol=1e-13)


# ---------------------------------------------------------------------------------------------
# 9. smoothing_matrix is the same linear map as fit
# ---------------------------------------------------------------------------------------------


@settings(max_examples=30, deadline=None)
@given(seed=SEEDS, n=st.integers(2, 60), log_lam=st.floats(-10, 2), shuffle=st.booleans())
def test_smoothing_matrix_is_the_fit_as_a_matrix(seed, n, log_lam, shuffle):
    """S @ y == fit(knots, y, lam)(points), columns in the given knot order, points inside and outside."""
    rng = np.random.default_rng(seed)
    lam = 10.0**log_lam
    t = jittered_grid(rng, n)
    if shuffle:
        t = rng.permutation(t)
    y = random_values(rng, t, 2)
    z = rng.uniform(t.min() - 2, t.max() + 2, 37)
    S = smoothing_matrix(t, lam, z)
    assert S.shape == (37, n)
    expected = fit(t, y, lam)(z)
    assert rel_err(S @ y, expected) < 1e-10
    # each column is the response to one unit vector, in the caller's knot order
    k = int(rng.integers(n))
    np.testing.assert_allclose(S[:, k], fit(t, np.eye(n)[k], lam)(z), rtol=0, atol=1e-12)


# ---------------------------------------------------------------------------------------------
# 11. the fit minimises the mean-convention objective
# ---------------------------------------------------------------------------------------------


@settings(max_examples=30, deadline=None)
@given(seed=SEEDS, n=st.integers(3, 80), log_lam=st.floats(-8, 1), clustered=st.booleans())
def test_fit_minimises_mean_objective(seed, n, log_lam, clustered):
    """J(u) = mean ||u(t_i) - y_i||^2 + lam int ||u''||^2 is lower at our fit than at rival splines."""
    rng = np.random.default_rng(seed)
    lam = 10.0**log_lam
    t = clustered_knots(rng, n) if clustered else jittered_grid(rng, n)
    y = random_values(rng, t, 2)
    best = fit(t, y, lam)
    j_best = objective(best, y, lam)
    # lam * n is the fit one would get by mistaking the mean convention for scipy's sum convention
    rivals = [fit(t, y, lam * 2), fit(t, y, lam / 2), fit(t, y, lam * n), fit(t, y, 0.0)]
    # the interpolants of slightly perturbed knot values are natural splines close to the optimum
    scale = np.std(y)
    rivals += [fit(t, best.values + eps * scale * rng.standard_normal(y.shape), 0.0) for eps in (1e-2, 1e-4)]
    for rival in rivals:
        assert objective(rival, y, lam) >= j_best * (1 - 1e-10)


@settings(max_examples=30, deadline=None)
@given(seed=SEEDS, n=st.integers(3, 80), log_lam=st.floats(-8, 3))
def test_second_derivatives_are_those_of_the_natural_spline_through_the_values(seed, n, log_lam):
    """Interpolating spl.values (lam = 0) gives back spl.second_derivatives: both describe one spline."""
    rng = np.random.default_rng(seed)
    t = clustered_knots(rng, n)
    y = random_values(rng, t, 2)
    spl = fit(t, y, 10.0**log_lam)
    again = fit(t, spl.values, 0.0)
    scale = np.max(np.abs(fit(t, y, 0.0).second_derivatives)) + 1.0
    assert np.max(np.abs(again.second_derivatives - spl.second_derivatives)) < 1e-8 * scale
    assert np.all(spl.second_derivatives[[0, -1]] == 0.0)
