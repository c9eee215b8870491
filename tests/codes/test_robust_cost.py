"""RobustGCC's decoder against a straightforward reference of its math (loops, np.median,
np.sort and the public spline fit): the fast decode computes the same estimates and weights,
for every loss, with and without a bound, for clean and attacked results."""

from __future__ import annotations

import math

import numpy as np
import pytest

import codedcomputing as cc
from codedcomputing.codes.robust import (
    HUBER_C,
    LOCAL_WIDTH,
    REJECT_FACTOR,
    SPARED_WEIGHT,
    SPREAD_FLOOR,
    TUKEY_C,
    repeated_median_line,
    robust_lambda,
)

# -- the reference: the decoder's docstring, step by step ---------------------------------------


def reference_block_medians(knots, values, size, points):
    """Medians of blocks of ``size`` consecutive rows (the last takes the rest) at their
    median knots, joined linearly and extended linearly beyond the outer blocks."""
    n = knots.size
    blocks = max(n // size, 1)
    bounds = [(b * size, (b + 1) * size if b < blocks - 1 else n) for b in range(blocks)]
    medians = np.array([np.median(values[lo:hi], axis=0) for lo, hi in bounds])
    centres = np.array([np.median(knots[lo:hi]) for lo, hi in bounds])
    if blocks == 1:
        return np.repeat(medians, points.size, axis=0)
    out = np.empty((points.size, values.shape[1]))
    for p, z in enumerate(points):
        b = min(max(int(np.searchsorted(centres, z)) - 1, 0), blocks - 2)
        share = (z - centres[b]) / (centres[b + 1] - centres[b])
        out[p] = (1 - share) * medians[b] + share * medians[b + 1]
    return out


def reference_repeated_median_line(knots, values, points):
    """Siegel's line: slope the median over i of the median over j != i of the slopes from i,
    intercept the median of ``values - slope knots``; read at ``points``."""
    slopes = [
        np.median(np.delete(values - values[i], i, 0) / np.delete(knots - knots[i], i)[:, None], axis=0)
        for i in range(knots.size)
    ]
    slope = np.median(slopes, axis=0)
    return np.median(values - knots[:, None] * slope, axis=0) + points[:, None] * slope


def reference_majority_range(values, q):
    ordered = np.sort(values, axis=0)
    low, high = ordered[q], ordered[values.shape[0] - 1 - q]
    return low - (high - low), high + (high - low)


def reference_clip(code, knots, flat):
    if code.bound is not None:
        return np.clip(flat, -code.bound, code.bound)
    n, q = flat.shape[0], code.num_adversaries
    if q == 0 or n < 2 * q + 2 or flat.shape[1] == 0:
        return flat
    if n >= 2 * (2 * q + 1):
        trend = reference_block_medians(knots, flat, 2 * q + 1, knots)
    else:
        trend = repeated_median_line(knots, flat)
    low, high = reference_majority_range(flat, q)
    residual_low, residual_high = reference_majority_range(flat - trend, q)
    return np.clip(flat, np.minimum(low, trend + residual_low), np.maximum(high, trend + residual_high))


def reference_fit(knots, values, lam, weights, points):
    """The weighted smoothing spline through the public ``cc.spline.fit`` (a zero weight leaves
    its knot out; two knots left: the line through them)."""
    keep = weights > 0
    if np.count_nonzero(keep) == 2:
        return cc.spline.fit(knots[keep], values[keep])(points)
    return cc.spline.fit(knots, values, lam, weights)(points)


def reference_reweighted(code, knots, flat):
    lam, q, n = code.lambda_dec, code.num_adversaries, knots.size
    if flat.shape[1] == 0:
        return np.zeros((code.num_inputs, 0)), np.ones(n)
    unit = float(np.abs(flat).max())
    if unit > 0 and unit != 1.0:
        estimates, weights = reference_reweighted(code, knots, flat / unit)
        return estimates * unit, weights
    if code.start == "median" and q > 0 and n >= 2 * (2 * q + 1):
        start = reference_block_medians(knots, flat, 2 * q + 1, knots)
    else:
        start_lambda = max(lam, robust_lambda(q, code.num_workers, code.schedule))
        start = reference_fit(knots, flat, start_lambda, np.ones(n), knots)
    residual = np.sqrt(np.mean((flat - start) ** 2, axis=1))
    extent = np.sqrt(np.mean((start.max(axis=0) - start.min(axis=0)) ** 2))
    spread = start_spread = max(1.4826 * np.median(residual), SPREAD_FLOOR * extent, 1e-12)
    weights, estimates = None, None
    for _ in range(code.iterations):
        ratio = residual / spread
        if code.loss == "huber":
            new = np.minimum(1.0, HUBER_C / np.maximum(ratio, 1e-300))
        else:
            new = np.maximum(1.0 - (ratio / TUKEY_C) ** 2, 0.0) ** 2
            floor = max(SPREAD_FLOOR * extent, 1e-12)
            if weights is None and 0 < q < n:  # the q results farthest from the start are left out
                farthest = np.argsort(-residual, kind="stable")[:q]
                new[farthest[residual[farthest] > floor]] = 0.0
                if n > LOCAL_WIDTH:  # and the q farthest from the median of their 5 neighbours (interior)
                    half = LOCAL_WIDTH // 2
                    local = np.zeros(n)
                    for i in range(half, n - half):
                        local[i] = np.sqrt(
                            np.mean((flat[i] - np.median(flat[i - half : i + half + 1], axis=0)) ** 2)
                        )
                    farthest = np.argsort(-local, kind="stable")[:q]
                    new[farthest[local[farthest] > floor]] = 0.0
            rejected = np.flatnonzero(new == 0.0)
            if rejected.size > REJECT_FACTOR * q:
                order = np.argsort(-residual[rejected], kind="stable")
                new[rejected[order[REJECT_FACTOR * q :]]] = SPARED_WEIGHT
        if np.count_nonzero(new) < 2:
            break
        if weights is not None:
            same = np.array_equal(new > 0, weights > 0) if lam == 0 else np.allclose(new, weights, 0, 1e-6)
            if same:
                break
        weights = new
        fitted = reference_fit(knots, flat, lam, weights, np.concatenate([knots, code.alpha]))
        estimates = fitted[n:]
        residual = np.sqrt(np.mean((flat - fitted[:n]) ** 2, axis=1))
        if code.loss == "tukey":  # then the scale of the fit's residuals
            spread = max(1.4826 * np.median(residual), SPREAD_FLOOR * extent, 1e-12, start_spread / TUKEY_C)
    if weights is None:
        weights = np.ones(n)
        estimates = reference_fit(knots, flat, lam, weights, code.alpha)
    return estimates, weights


def reference_decode(code, Y, alive):
    """``(estimates (K, d), weights by sorted worker or None)`` for finite results."""
    order = np.argsort(code.beta[alive], kind="stable")
    by_point = alive[order]
    knots = code.beta[by_point]
    flat = reference_clip(code, knots, np.asarray(Y, dtype=np.float64)[order].reshape(alive.size, -1))
    if code.loss == "squared":
        return cc.spline.fit(knots, flat, code.lambda_dec)(code.alpha), None
    if code.loss == "median":
        size = 2 * code.num_adversaries + 1
        if alive.size < 2 * size:  # one block: the repeated-median line instead
            return reference_repeated_median_line(knots, flat, code.alpha), None
        return reference_block_medians(knots, flat, size, code.alpha), None
    estimates, weights = reference_reweighted(code, knots, flat)
    if code.loss == "tukey" and code.lambda_dec == 0:  # the final fit: GCC's default decoder
        kept = weights > 0
        gcc = cc.GCC(code.num_inputs, code.num_workers, alpha=code.alpha, beta=code.beta)
        line = estimates  # the interpolating spline's line beyond every returned result, where
        estimates = gcc.decode(flat[kept], by_point[kept])  # GCC's decoder holds the end value
        fitted_ends = [g.points for g in gcc.decoder(by_point[kept]).groups if g.label[0] == "edge"]
        held = (code.alpha < knots.min()) | (code.alpha > knots.max())
        held[np.concatenate([[], *fitted_ends]).astype(int)] = False
        estimates[held] = line[held]
    return estimates, weights[np.argsort(by_point, kind="stable")]


# -- the cases ----------------------------------------------------------------------------------


def attacked_case(N, K, q, width, attack, seed, assignment="natural", stragglers=0.1):
    """A code's honest results of f = sin on sorted inputs, attacked: ``(code kwargs, Y, alive)``."""
    rng = np.random.default_rng(seed)
    layout = cc.GCC(K, N, assignment=assignment)
    X = np.sort(rng.uniform(-3, 3, (K, width)), axis=0)
    alive = cc.stragglers.random(N, int(stragglers * N), rng)
    Y = np.sin(layout.encode(X))[alive]
    if attack is not None:
        Y = cc.adversaries.make_attack(attack, q, 100.0).corrupt(layout, Y, alive, rng=seed).results
    return Y, alive


def assert_matches_reference(code, Y, alive, rtol=1e-9):
    details = code.decode_details(Y, alive)
    expected, weights = reference_decode(code, Y, alive)
    got = np.asarray(details.estimates).reshape(expected.shape)
    scale = max(float(np.abs(expected).max()), 1e-300)
    assert np.abs(got - expected).max() <= rtol * scale
    if weights is not None:
        np.testing.assert_allclose(details.info["weights"], weights, rtol=0, atol=1e-9)


CASES = [  # (N, K, q, width, attack, bound, extra kwargs)
    (200, 20, 14, 3, "concentrated", None, {}),
    (200, 20, 14, 3, "random", 100.0, {}),
    (300, 30, 17, 50, "greedy", None, {}),
    (300, 30, 17, 1, "concentrated", None, {}),
    (120, 12, 10, 4, "sign-flip", None, {"start": "spline"}),
    (150, 15, 12, 2, "concentrated", None, {"lambda_dec": 1e-5}),
    (150, 15, 12, 2, "random", 100.0, {"assignment": "golden"}),
    (60, 6, 5, 3, "concentrated", None, {"iterations": 1}),
    (40, 4, 9, 2, "random", None, {}),  # fewer than 4q + 2 results: the repeated-median line
    (80, 8, 0, 2, None, None, {}),  # no adversary
    (200, 20, 14, 3, None, None, {}),  # clean results, q > 0
]


@pytest.mark.parametrize("loss", ["tukey", "huber", "squared", "median"])
@pytest.mark.parametrize("case", CASES, ids=[f"case{i}" for i in range(len(CASES))])
def test_decode_matches_the_reference(loss, case):
    N, K, q, width, attack, bound, extra = case
    assignment = extra.get("assignment", "natural")
    code = cc.RobustGCC(K, N, q, bound, loss=loss, **extra)
    Y, alive = attacked_case(N, K, q, width, attack, seed=N + width, assignment=assignment)
    assert_matches_reference(code, Y, alive)


@pytest.mark.parametrize("loss", ["tukey", "huber"])
def test_decode_matches_the_reference_at_a_benchmark_size(loss):
    # N = 2000, q = sqrt(N), width 20: where the reweighting iterates more than once
    N, q = 2000, math.isqrt(2000)
    code = cc.RobustGCC(N // 10, N, q, loss=loss)
    Y, alive = attacked_case(N, N // 10, q, 20, "concentrated", seed=7)
    assert_matches_reference(code, Y, alive)


def test_decode_keeps_the_shape_and_type_of_the_results():
    code = cc.RobustGCC(10, 100, 5, loss="tukey")
    Y, alive = attacked_case(100, 10, 5, 6, "concentrated", seed=3)
    Y = np.asarray(Y).reshape(alive.size, 2, 3).astype(np.float32)
    est = code.decode(Y, alive)
    assert est.shape == (10, 2, 3) and est.dtype == np.float32
    expected, _ = reference_decode(code, Y, alive)
    np.testing.assert_allclose(est.reshape(10, 6), expected, rtol=0, atol=1e-5 * np.abs(expected).max())


# -- the refit of an interpolating fit on windows around changed knots ---------------------------


@pytest.mark.parametrize("spacing", ["chebyshev", "uniform-random", "clustered"])
def test_a_refit_on_windows_is_the_full_interpolating_fit(spacing):
    from codedcomputing.codes.robust import _WeightedSpline

    rng = np.random.default_rng(5)
    n = 3000
    knots = {
        "chebyshev": np.cos(np.linspace(np.pi, 0, n)),
        "uniform-random": np.sort(rng.uniform(-1, 1, n)),
        "clustered": np.sort(np.concatenate([rng.uniform(-1, 1, n - 500), rng.normal(0.3, 1e-4, 500)])),
    }[spacing]
    flat = np.asfortranarray(np.sin(3 * knots)[:, None] + rng.normal(0, 1e-3, (n, 4)))
    flat[1500:1540] += 5.0  # liars: a step the fits cut out
    first = np.ones(n)
    first[rng.choice(n, 30, replace=False)] = 0.0
    first[[0, 1, 1510, 1511]] = 0.0  # an end knot left out, and liars
    second = first.copy()
    second[[0, 1, 7, 1520, 2999]] = [1.0, 1.0, 0.0, 0.0, 0.0]  # changes at both ends and inside
    previous = _WeightedSpline(knots, 0.0, first, flat)
    refit = _WeightedSpline(knots, 0.0, second, flat, previous=previous)
    full = _WeightedSpline(knots, 0.0, second, flat)
    assert refit._refit_windows(previous) is not None  # the windows were used
    points = np.linspace(-1.1, 1.1, 401)
    expected = full.at(points)
    np.testing.assert_allclose(refit.at(points), expected, rtol=0, atol=1e-12 * np.abs(expected).max())
    np.testing.assert_allclose(refit.squares, full.squares, rtol=1e-9, atol=1e-20)


def test_the_benchmark_size_decode_refits(monkeypatch):
    from codedcomputing.codes import robust

    calls = []
    refit = robust._WeightedSpline._refit
    monkeypatch.setattr(robust._WeightedSpline, "_refit", lambda *a: calls.append(1) or refit(*a))
    N, q = 4000, math.isqrt(4000)
    code = cc.RobustGCC(N // 10, N, q, loss="tukey")
    for seed in range(3):
        Y, alive = attacked_case(N, N // 10, q, 5, "concentrated", seed=seed)
        assert_matches_reference(code, Y, alive)
    assert calls  # the reweighting refitted on windows at least once
