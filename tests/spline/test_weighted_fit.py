"""Weighted smoothing splines (the robust decoders' reweighted fits) against scipy."""

from __future__ import annotations

import numpy as np
import pytest
from scipy.interpolate import make_smoothing_spline

from codedcomputing.spline import fit


@pytest.mark.parametrize("n", [5, 30, 400])
@pytest.mark.parametrize("lam", [1e-7, 1e-3, 1e-1])
def test_weighted_fit_matches_scipy(n, lam):
    rng = np.random.default_rng(n)
    t = np.sort(rng.uniform(-1, 1, n))
    y = np.sin(3 * t) + 0.1 * rng.normal(size=n)
    w = rng.uniform(0.1, 2.0, n)
    z = np.linspace(t[0], t[-1], 57)  # scipy extrapolates with the end cubics, we linearly
    reference = make_smoothing_spline(t, y, w, lam=n * lam)(z)  # scipy: the sum convention
    # scipy's own fit is off by ~1e-6 at n = 400 (unweighted too): the optimality check is tighter
    np.testing.assert_allclose(fit(t, y, lam, w)(z), reference, atol=1e-5 * (1 + np.abs(reference).max()))
    spline = fit(t, y, lam, w)
    g, gamma = spline.values, spline.second_derivatives
    Q, R = second_difference_matrices(t)
    # optimality of the weighted objective (Green and Silverman 1994, section 3.5):
    # Q^T g = R gamma (g is a natural cubic spline) and W (y - g) = n lam Q gamma
    np.testing.assert_allclose(Q.T @ g, R @ gamma[1:-1], atol=1e-9 * np.abs(Q.T @ g).max())
    np.testing.assert_allclose(w * (y - g), n * lam * Q @ gamma[1:-1], atol=1e-9 * (1 + np.abs(y).max()))


def second_difference_matrices(t):
    n, h = t.size, np.diff(t)
    Q, R = np.zeros((n, n - 2)), np.zeros((n - 2, n - 2))
    for j in range(1, n - 1):
        Q[j - 1, j - 1], Q[j, j - 1], Q[j + 1, j - 1] = 1 / h[j - 1], -1 / h[j - 1] - 1 / h[j], 1 / h[j]
        R[j - 1, j - 1] = (h[j - 1] + h[j]) / 3
        if j < n - 2:
            R[j - 1, j] = R[j, j - 1] = h[j] / 6
    return Q, R


def test_zero_weights_leave_points_out():
    # (1/n) sum_{w > 0} w_i (...)^2 + lam J  ==  (m/n) [(1/m) sum ...] + lam J: the fit on the m
    # weighted points alone with lam * n / m; scipy refuses zero weights, so this is the oracle.
    rng = np.random.default_rng(1)
    t = np.sort(rng.uniform(-1, 1, 60))
    y = np.c_[np.cos(2 * t), t**3] + 0.05 * rng.normal(size=(60, 2))
    w = rng.uniform(0.5, 1.5, 60)
    w[::4] = 0.0
    y[::4] = 1e6  # what a zero weight must ignore
    keep = w > 0
    for lam in (1e-5, 1e-2):
        ours = fit(t, y, lam, w)(t)
        alone = fit(t[keep], y[keep], lam * 60 / keep.sum(), w[keep])(t)
        np.testing.assert_allclose(ours, alone, atol=1e-9)
        # the limit of vanishing weights, through the banded solve with every knot in it
        tiny = np.where(keep, w, 1e-13)
        np.testing.assert_allclose(fit(t, y, lam, tiny)(t), ours, atol=1e-5)
    interpolating = fit(t, y, 0.0, w)
    np.testing.assert_allclose(interpolating(t[keep]), y[keep], atol=1e-9)


def test_unit_weights_are_the_unweighted_fit_in_any_knot_order():
    rng = np.random.default_rng(2)
    t = rng.uniform(-1, 1, 25)
    y = rng.normal(size=(25, 3))
    np.testing.assert_allclose(fit(t, y, 1e-3, np.ones(25))(t), fit(t, y, 1e-3)(t), atol=1e-12)
    w = rng.uniform(0.2, 1.0, 25)
    order = np.argsort(t)
    np.testing.assert_allclose(fit(t, y, 1e-3, w)(t), fit(t[order], y[order], 1e-3, w[order])(t), atol=1e-12)


@pytest.mark.parametrize(
    "weights, match",
    [(np.ones(5), "weights"), (-np.ones(6), "weights"), (np.r_[1.0, np.zeros(5)], "positive weight")],
)
def test_bad_weights_are_refused(weights, match):
    with pytest.raises(ValueError, match=match):
        fit(np.linspace(0, 1, 6), np.zeros(6), 1e-3, weights)
