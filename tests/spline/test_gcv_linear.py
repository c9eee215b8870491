"""GCV's influence-matrix diagonal in O(n) (``spline.gcv.influence_complement``): against the
dense map's diagonal, against brute-force leave-one-out fits, against a dense float64 solve
that shares no code with the package, and against the diagonal read row by row from the
truncated map (``gcv._influence_diagonal_by_rows``)."""

from __future__ import annotations

import warnings

import numpy as np
import pytest

import codedcomputing as cc
from codedcomputing.spline import fit, gcv, smoothing_matrix
from codedcomputing.spline.gcv import DIAGONAL_TOL, influence_complement
from layouts import paired_knots

GRID_AND_BEYOND = np.geomspace(1e-8, 1e8, 9)  # c = lam / h^4; the default grid is 1e-6 .. 1e4


def chebyshev(n: int) -> np.ndarray:
    """Second-kind Chebyshev points: clustered at both ends (spacing ~ 1/n^2 there)."""
    return np.sort(np.cos(np.pi * np.arange(n) / (n - 1)))


def chebyshev_alive(n: int, seed: int) -> np.ndarray:
    """n of the n / 0.9 second-kind Chebyshev points: GCC's decoder knots, 10% stragglers."""
    total = int(n / 0.9)
    keep = np.sort(np.random.default_rng(seed).choice(total, size=n, replace=False))
    return chebyshev(total)[keep]


def lam_of(c: float, t: np.ndarray) -> float:
    """lam = c h^4 with h the mean spacing on [-1, 1], scaled to the knots' span (lambda_grid)."""
    return c * (2.0 / (t.size - 1)) ** 4 * ((t[-1] - t[0]) / 2.0) ** 3


def dense_complement(t: np.ndarray, lam: float) -> np.ndarray:
    return 1.0 - np.diag(smoothing_matrix(t, lam, t))


LAYOUTS = {
    "chebyshev-400": lambda: chebyshev(400),
    "chebyshev-alive-300": lambda: chebyshev_alive(300, 0),
    "uniform-250": lambda: np.linspace(-1.0, 1.0, 250),
    "jittered-200": lambda: np.linspace(0, 5, 200) + np.random.default_rng(1).uniform(-0.01, 0.01, 200),
    "few-5": lambda: np.array([-1.0, -0.2, 0.1, 0.7, 1.0]),
    "three": lambda: np.array([0.0, 0.3, 1.0]),
}


@pytest.mark.parametrize("c", GRID_AND_BEYOND)
@pytest.mark.parametrize("layout", list(LAYOUTS))
def test_recurrence_matches_the_dense_diagonal(layout, c):
    """On Chebyshev (clustered ends), alive subsets, uniform and jittered knots, over the default
    grid and beyond, the O(n) diagonal is accepted and agrees with the dense map's to 1e-9
    (entries lie in [0, 1])."""
    t = LAYOUTS[layout]()
    lam = lam_of(c, t)
    new = influence_complement(t, lam)
    assert new is not None, "the recurrence should be accurate enough here"
    assert np.abs(new - dense_complement(t, lam)).max() < 1e-9


@pytest.mark.parametrize("c", [1e-4, 1.0, 1e4])
def test_recurrence_matches_brute_force_leave_one_out(c):
    """For a linear smoother, y_i - (fit without knot i)(t_i) = (y_i - g_i) / (1 - S_ii), where
    the fit without knot i keeps the sum-convention weight l = n lam (mean lam' = l / (n - 1))."""
    rng = np.random.default_rng(2)
    t = chebyshev_alive(600, 3)
    n = t.size
    lam = lam_of(c, t)
    y = rng.normal(size=n)
    complement = influence_complement(t, lam)
    g = fit(t, y, lam).values
    for i in (0, 1, 7, n // 3, n // 2, n - 2, n - 1):
        keep = np.arange(n) != i
        left_out = fit(t[keep], y[keep], n * lam / (n - 1))(t[i])
        expected = (y[i] - g[i]) / (y[i] - left_out)  # 1 - S_ii
        assert abs(complement[i] - expected) < 1e-8 * max(1.0, abs(expected)), i


def test_recurrence_matches_an_independent_dense_solve():
    """S = (I + l Q R^-1 Q^T)^-1 built densely in float64 from the docstring's matrices alone."""
    rng = np.random.default_rng(4)
    n = 120
    t = np.sort(np.linspace(-1, 1, n) + rng.uniform(-0.3, 0.3, n) * 2 / (n - 1))
    h = np.diff(t)
    q = np.zeros((n, n - 2))
    r = np.zeros((n - 2, n - 2))
    for j in range(n - 2):
        q[j, j], q[j + 1, j], q[j + 2, j] = 1 / h[j], -1 / h[j] - 1 / h[j + 1], 1 / h[j + 1]
        r[j, j] = (h[j] + h[j + 1]) / 3
        if j + 1 < n - 2:
            r[j, j + 1] = r[j + 1, j] = h[j + 1] / 6
    for c in (1e-6, 1e-2, 1e2):
        lam = lam_of(c, t)
        s = np.linalg.inv(np.eye(n) + n * lam * q @ np.linalg.solve(r, q.T))
        assert np.abs(influence_complement(t, lam) - (1 - np.diag(s))).max() < 1e-9


@pytest.mark.parametrize("c", [1e-2, 1e4])
def test_recurrence_matches_the_previous_implementation_on_many_knots(c):
    """n = 1800 alive Chebyshev knots: the O(n) diagonal agrees within 1e-9 with the one read
    row by row from the sparse truncated map."""
    t = chebyshev_alive(1800, 5)
    lam = lam_of(c, t)
    old = 1.0 - gcv._influence_diagonal_by_rows(t, lam)
    assert np.abs(influence_complement(t, lam) - old).max() < 1e-9


def test_nearly_coincident_knots_fall_back_to_the_map_rows():
    """Paired knots (gaps 1e-6 of the others): the sum q^T Sigma q cancels, the error bound
    exceeds DIAGONAL_TOL, and GCV takes the diagonal from the map's rows instead, which agrees
    with the dense diagonal. Light smoothing still passes the bound, within it."""
    t = paired_knots(500, 1e-6)
    heavy = lam_of(1e2, t)
    assert influence_complement(t, heavy) is None
    exact = dense_complement(t, heavy)
    assert np.abs(gcv._influence_complement(t, heavy) - exact).max() < 1e-9
    light = lam_of(1e-8, t)
    new = influence_complement(t, light)
    assert new is not None
    assert np.abs(new - dense_complement(t, light)).max() < DIAGONAL_TOL


def test_gcv_on_many_knots_is_unchanged(monkeypatch):
    """gcv_score and gcv_lambda above DENSE_GCV_LIMIT: the O(n) diagonal gives the scores of the
    row-by-row diagonal to 1e-9 and the same lambda."""
    rng = np.random.default_rng(6)
    t = chebyshev_alive(900, 7)
    y = np.stack([np.sin(3 * t), np.cos(5 * t)], axis=1) + 0.1 * rng.normal(size=(t.size, 2))
    grid = cc.spline.lambda_grid(t.size, num=14, high=1e6)
    assert t.size > gcv.DENSE_GCV_LIMIT
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        new_scores = [cc.spline.gcv_score(t, y, lam) for lam in grid[1:]]
        new_choice = cc.spline.gcv_lambda(t, y, grid)
        monkeypatch.setattr(gcv, "influence_complement", lambda t, lam: None)
        old_scores = [cc.spline.gcv_score(t, y, lam) for lam in grid[1:]]
        old_choice = cc.spline.gcv_lambda(t, y, grid)
    np.testing.assert_allclose(new_scores, old_scores, rtol=1e-9)
    assert new_choice == old_choice


def test_knots_spanning_a_tiny_interval():
    """The recurrence works on knots rescaled to [-1, 1]: the span does not matter."""
    t = chebyshev(450) * 1e-6 + 3.0
    lam = lam_of(1.0, t)
    assert np.abs(influence_complement(t, lam) - dense_complement(t, lam)).max() < 1e-9
