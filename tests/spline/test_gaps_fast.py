"""The gap-aware decoder as rebuilt for serving rates against a frozen copy of the one it
replaced (tests/spline/gaps_reference.py): the same estimates and weights, to rounding, on
random and contiguous stragglers, knots in any order, edges missing, wide and huge results."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import numpy as np
import pytest

import codedcomputing as cc
from codedcomputing.spline import gaps
from codedcomputing.spline.gaps import GapAwareInterpolant, _simplex_minimiser, simplex_weights

_spec = importlib.util.spec_from_file_location(
    "gaps_reference", Path(__file__).with_name("gaps_reference.py")
)
gaps_reference = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(gaps_reference)


def cases(rng, count):
    """(knots, ranks, points, num_design, y) over designs of 20 to 600 points, random and
    contiguous stragglers (and both at once), some knots shuffled."""
    for i in range(count):
        n = int(rng.choice([20, 50, 100, 237, 600]))
        code = cc.GCC(max(2, n // int(rng.choice([3, 5, 10]))), n)
        pattern = i % 4
        if pattern == 0:
            alive = cc.stragglers.random(n, int(rng.integers(0, n // 2)), rng)
        elif pattern == 1:
            alive = cc.stragglers.contiguous(n, int(rng.integers(1, n // 2)), rng)
        elif pattern == 2:  # a block at an end
            cut = int(rng.integers(2, n // 3))
            alive = np.arange(cut, n) if rng.integers(2) else np.arange(n - cut)
        else:  # a block and random stragglers
            alive = cc.stragglers.contiguous(n, n // 5, rng)
            alive = np.sort(rng.choice(alive, size=int(0.8 * alive.size), replace=False))
        if alive.size < 4:
            continue
        if rng.integers(2):
            alive = rng.permutation(alive)
        ranks = np.argsort(np.argsort(code.beta))[alive]
        t = code.beta[alive]
        d = int(rng.choice([1, 3, 32]))  # up to the sketch's width: exact
        y = np.sin(rng.uniform(1, 6, d) * t[:, None] + rng.uniform(0, 3, d)) + 0.1 * rng.normal(
            size=(t.size, d)
        )
        yield t, ranks, code.alpha, n, y


def test_matches_the_frozen_reference_on_random_cases():
    rng = np.random.default_rng(20)
    compared = with_gaps = 0
    for t, ranks, alpha, n, y in cases(rng, 48):
        new = GapAwareInterpolant(t, ranks, alpha, n)
        old = gaps_reference.GapAwareInterpolant(t, ranks, alpha, n)
        got, info = new(y)
        expected, info_old = old(y)
        assert [g.label for g in new.groups] == [g.label for g in old.groups]
        assert info["theta"] == pytest.approx(info_old["theta"], rel=1e-10, abs=1e-12)
        for (label, w), (label_old, w_old) in zip(info["gaps"], info_old["gaps"], strict=True):
            assert label == label_old
            np.testing.assert_allclose(w, w_old, atol=1e-9)
        np.testing.assert_allclose(got, expected, rtol=1e-10, atol=1e-10 * np.abs(expected).max())
        compared += 1
        with_gaps += bool(info["gaps"])
    assert compared >= 40 and with_gaps >= 25


def test_wide_results_get_weights_near_the_exact_ones():
    """Results wider than SKETCH_COLUMNS are sketched before the leave-block-out fit: the
    weights are then an estimate, the same at every call, whose leave-block-out error stays
    near the exact weights' (the reference's, fitted on the whole results)."""
    rng = np.random.default_rng(24)
    code = cc.GCC(20, 100)
    ranks_all = np.argsort(np.argsort(code.beta))
    increases = []
    for _ in range(12):
        alive = cc.stragglers.contiguous(100, int(rng.integers(8, 30)), rng)
        t, ranks = code.beta[alive], ranks_all[alive]
        d = int(rng.choice([100, 500]))
        y = rng.lognormal(0, 1, d) * np.sin(rng.uniform(1, 8, d) * t[:, None] + rng.uniform(0, 6, d))
        decoder = GapAwareInterpolant(t, ranks, code.alpha, 100)
        ((_, w),) = decoder(y)[1]["gaps"]
        assert decoder(y.copy())[1]["gaps"][0][1] == w
        old = gaps_reference.GapAwareInterpolant(t, ranks, code.alpha, 100)
        (group,) = old.groups
        host = y[old._rows]
        total = y.sum(0)
        residuals = []
        for v, mean in zip(group.validation, group.means, strict=True):
            r = np.asarray(v @ host)
            if mean is not None:
                indicator, block, coefficient = mean
                r += coefficient[:, None] * (total - np.asarray(indicator @ host)[block])
            residuals.append(r)
        exact = gaps_reference.simplex_weights(residuals)

        def error(weights, residuals=residuals):
            return np.sum(sum(c * r for c, r in zip(weights, residuals, strict=True)) ** 2)

        increases.append(error(w) / error(exact) - 1)
    assert np.median(increases) < 0.05 and max(increases) < 0.5


def test_matches_the_reference_through_gcc_for_huge_and_float32_results():
    code = cc.GCC(20, 100)
    rng = np.random.default_rng(21)
    alive = np.r_[0:30, 45:100]
    t, ranks = code.beta[alive], np.argsort(np.argsort(code.beta))[alive]
    y = np.cos(4 * t)[:, None] * np.array([1.0, -2.0])
    for scale in (1e-200, 1.0, 1e200):
        got, info = GapAwareInterpolant(t, ranks, code.alpha, 100)(scale * y)
        expected, info_old = gaps_reference.GapAwareInterpolant(t, ranks, code.alpha, 100)(scale * y)
        np.testing.assert_allclose(info["gaps"][0][1], info_old["gaps"][0][1], atol=1e-9)
        np.testing.assert_allclose(got, expected, rtol=1e-10)
    single = y.astype(np.float32) + rng.normal(size=y.shape).astype(np.float32) * 1e-3
    got, _ = GapAwareInterpolant(t, ranks, code.alpha, 100)(single)
    expected, _ = gaps_reference.GapAwareInterpolant(t, ranks, code.alpha, 100)(single)
    assert got.dtype == np.float32
    np.testing.assert_allclose(got, expected, rtol=1e-5, atol=1e-6)


def test_simplex_minimiser_matches_the_least_squares_faces():
    """Closed-form vertices and edges against the reference's least-squares solve of every face."""
    rng = np.random.default_rng(22)
    for count in (2, 3, 4):
        for _ in range(60):
            residuals = list(rng.normal(size=(count, 7, 2)) * rng.uniform(0.1, 3, size=(count, 1, 1)))
            if rng.integers(4) == 0:  # two candidates alike: singular Gram matrices
                residuals[1] = residuals[0] * (1 + 1e-15 * rng.integers(2))
            np.testing.assert_allclose(
                simplex_weights(residuals), gaps_reference.simplex_weights(residuals), atol=1e-9
            )
    np.testing.assert_array_equal(_simplex_minimiser(np.zeros((3, 3))), [1.0, 0.0, 0.0])


def test_a_large_block_is_validated_on_a_sample_as_before():
    """A block of 320 of 1,600: each validation block predicts MAX_BLOCK_TARGETS knots spread
    as the reference spreads them, and the weights read only the blocks' windows and targets."""
    code = cc.GCC(160, 1600)
    alive = np.r_[0:600, 920:1600]
    t, ranks = code.beta[alive], np.argsort(np.argsort(code.beta))[alive]
    decoder = GapAwareInterpolant(t, ranks, code.alpha, 1600)
    assert decoder._plan["target"].size == gaps.POSITIONS * gaps.MAX_BLOCK_TARGETS
    assert decoder._rows.size <= gaps.POSITIONS * (gaps.MAX_BLOCK_TARGETS + 2 * gaps.WINDOW + 2)
    y = np.sin(3 * t)[:, None] + 0.01 * np.cos(40 * t)[:, None]
    got, info = decoder(y)
    expected, info_old = gaps_reference.GapAwareInterpolant(t, ranks, code.alpha, 1600)(y)
    np.testing.assert_allclose(info["gaps"][0][1], info_old["gaps"][0][1], atol=1e-9)
    np.testing.assert_allclose(got, expected, rtol=1e-10, atol=1e-12)


def test_a_first_call_shares_thetas_solve_and_matches_the_spline_decoder():
    """The adaptive interpolant's first call on numpy results evaluates the cubic from theta's
    own solve (or its own, for wide results); later calls go to the SplineDecoder: the same
    estimates to rounding, in the results' dtype; torch and zero-width results as before."""
    from codedcomputing.spline.adaptive import AdaptiveInterpolant
    from codedcomputing.spline.maps import SplineDecoder

    rng = np.random.default_rng(23)
    for n, d, dtype in [(5, 1, np.float64), (40, 3, np.float64), (300, 10, np.float32), (80, 50, np.float64)]:
        t = rng.permutation(np.sort(rng.uniform(-1, 1, n)))
        z = np.linspace(-1.2, 1.2, 9)
        y = (np.sin(3 * t)[:, None] + rng.normal(size=(n, d))).astype(dtype)
        decoder = AdaptiveInterpolant(t, z)
        first, info = decoder.decode(y)
        again, info_again = decoder.decode(y)
        theta, theta_again = info["theta"], info_again["theta"]
        assert first.dtype == dtype and theta == pytest.approx(theta_again, rel=1e-12)
        cubic = SplineDecoder(t, 0.0, np.clip(z, t.min(), t.max()))(y.astype(np.float64))
        tol = (1e-10 if dtype == np.float64 else 1e-5) * np.abs(cubic).max()  # random knots: ill-conditioned
        np.testing.assert_allclose(first, again, rtol=0, atol=tol)
        np.testing.assert_allclose(AdaptiveInterpolant(t, z).cubic_values(y), cubic, rtol=0, atol=tol)
    empty, _ = AdaptiveInterpolant(t, z)(np.zeros((t.size, 0)))
    assert empty.shape == (9, 0)


def test_zero_width_results_take_the_first_candidate():
    code = cc.GCC(10, 50)
    alive = np.r_[0:20, 30:50]
    est = code.decode(np.zeros((alive.size, 0)), alive)
    assert est.shape == (10, 0)


@pytest.mark.parametrize("width", [1, 10, 40])
def test_a_cached_decoder_gives_the_same_estimates_at_every_call(width):
    """The routes a call takes depend on the decoder and the results' width only: a decoder
    reused on one alive set repeats its estimates bit for bit (numpy, float32 and float64).
    (Wide results on many knots take the SplineDecoder's cubic, which moves from its banded
    solve to its map once that pays, with rounding-level changes: not asserted there.)"""
    rng = np.random.default_rng(25)
    for n, k in [(50, 10), (100, 20), (3000, 100)]:  # few knots, a recurrence, a sample of many
        if width > 32 and n > 100:
            continue
        code = cc.GCC(k, n)
        alive = np.sort(cc.stragglers.random(n, n // 5, rng))
        y = np.sin(rng.uniform(1, 5, width) * code.beta[alive, None])
        for dtype in (np.float64, np.float32):
            first = code.decode(y.astype(dtype), alive)
            for _ in range(3):
                np.testing.assert_array_equal(code.decode(y.astype(dtype), alive), first)


def test_the_edge_cubics_closed_form_line_matches_the_smoothing_matrix():
    """Beyond an end the natural cubic is a line: its closed form (one small tridiagonal solve)
    against the Reinsch map at lambda 0, random knots of 3 to 12, both ends."""
    from codedcomputing.spline.reinsch import smoothing_matrix

    rng = np.random.default_rng(26)
    for m in (3, 4, 5, 12):
        for _ in range(20):
            t = np.sort(rng.uniform(-1, 1, m))
            t += np.arange(m) * 0.05  # no two knots too close
            for low in (True, False):
                z = t[0] - rng.uniform(0, 0.5, 4) if low else t[-1] + rng.uniform(0, 0.5, 4)
                expected = smoothing_matrix(t, 0.0, z)
                np.testing.assert_allclose(gaps._end_line(t, z, low), expected, rtol=0, atol=1e-13)
