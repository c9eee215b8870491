"""Contiguous blocks of stragglers: GCC against BACC when neighbouring workers fail together.

A block of S neighbouring *workers* (a rack, a switch, one slow host) is
``cc.stragglers.contiguous(N, S, rng)``. With the natural assignment (worker n at the n-th
sorted point beta_n) it removes S neighbouring points and leaves a gap in the design, where
every spline decoder used to lose to BACC from a block of ~10 of 50 on. Three parts:

``A`` (assignments). Workers are assigned to points through a permutation, so that a block of
worker indices lands on spread-out points: natural (sorted, what users have today), a seeded
random permutation, the golden stride (worker n at sorted point ``n p mod N``, ``p`` the integer
nearest ``N / phi`` coprime with N), the van der Corput order (worker n at the rank of the
base-2 radical inverse of n) and an even/odd interleave. Codes are built with explicit points
(``cc.GCC(K, N, decoding="adaptive", beta=beta[perm])``, ``cc.BACC(K, N, beta=beta[perm])``).
Every ratio is against BACC with the natural assignment (the baseline users have today); BACC
with the same permutation is a column of its own. A random-straggler pattern is exchangeable,
so no permutation changes its MSE distribution (not re-measured here).

``B`` (gaps). A block of S neighbouring *points* (the natural assignment): the true worst case.
Decoders prototyped here, all on GCC's encoder unless named. A *gap* is a bracket of
neighbouring returned points with ``m >= max(m0, floor(relative * median bracket span))``
design points missing between them (``m0 = 2``, ``relative = 2``: in a random pattern only the
brackets well above the typical one count; for a block, the block):
  - ``adaptive``: the library's ``decoding="adaptive"`` (one leave-one-out theta per call);
  - ``berrut@gap``: adaptive, but inputs in a gap, or beyond an end with points missing there,
    take Berrut's interpolant through all returned results;
  - ``half@gap``: adaptive, but inputs in a gap take the fixed blend (L + C) / 2 (L: the
    piecewise-linear, C: the natural cubic interpolant through all returned results);
  - ``gap-LBO``: adaptive, but inputs in a gap take ``L + w (C - L)`` with ``w`` fitted by
    leave-*block*-out: up to ``positions`` blocks of returned results that span as many design
    steps as the gap and overlap no gap are dropped one block at a time and predicted from
    their neighbours by L (the chord) and C (a natural cubic through ``window`` knots each
    side), and ``w`` in [0, 1] minimises the summed squared residual of the blend (one ``w``
    per gap size per call). Beyond an end with points missing, the estimate is the simplex
    blend of four extrapolants (hold the end value, the end chord's line, the natural cubic's
    end line, Berrut) fitted the same way on the ``miss`` outermost knots of each end;
  - ``gap-LBO+B``: the same with Berrut's interpolant as a third candidate inside gaps;
  - ``gap-LBO+M``: the same with the mean of the returned results as a third candidate
    inside gaps (shrinkage towards the average output where the gap leaves little
    information; weights on the simplex);
  - ``gcc-enc+berrut``: GCC's encoder with BACC's decoder; ``bacc-enc+adaptive``: BACC's
    encoder with the adaptive decoder (does the encoder or the decoder make the difference?).
``edge`` repeats part B with the block forced to one end (2 of the N - S + 1 positions a
uniform block takes), where the decoders must extrapolate.

``R`` (random). The same decoders under S random stragglers, S = 0, 20, 40, 60, 70% of N:
a gap fix that loses the random-straggler figure is no fix.

``sweep``: the recommended decoder's parameters (m0, positions, window, relative, the
exclusion of gaps from validation blocks, the fallback when no block fits) one at a time, on
the random MLPs only (not the networks the other parts report), contiguous and random.
``cost``: milliseconds per decode of BACC, the adaptive decoder and the recommended one.

The recommended decoder, gap-LBO+M, is the library's default at lambda_dec = 0
(``cc.GCC(K, N)``, ``decoding="gap-aware"``, :mod:`codedcomputing.spline.gaps`): every trial
that reports it also decodes with the library and asserts the two agree (to 1e-9 relative),
and part A's and the cost part's column is the library itself. The other decoders here are
the prototypes that lost to it.

Functions: LeNet-5 and the ViT on K MNIST test images (cached models), and a fresh random
two-layer tanh MLP on Gaussian inputs per trial (``mlp``). K = 10 at N = 50, K = 20 at N = 100.
Every scheme of a row sees the same images, function and straggler set per trial. Prints
ratio = mean MSE of BACC / mean MSE of the scheme (> 1: the scheme beats BACC) with a 95%
paired bootstrap interval over trials, and the share of trials it beats BACC.

Run: ``python benchmarks/studies/bench_contiguous.py [--trials 200] [--parts A B edge R cost sweep]
[--models lenet5 vit mlp] [--workers 50 100] [--seed 0]``.
"""

from __future__ import annotations

import argparse
import itertools
import time

import numpy as np

import codedcomputing as cc
from codedcomputing.codes.bacc import berrut_matrix
from codedcomputing.spline.adaptive import AdaptiveInterpolant, linear_matrix

PHI = (1 + 5**0.5) / 2
RECOMMENDED, RECOMMENDED_NAME = "lbo+m", "gap-LBO+M"  # the decoder this study recommends
FRACTIONS_BLOCK = (0.05, 0.10, 0.15, 0.20)
FRACTIONS_BEYOND = (0.30, 0.40)  # part B also shows where the goal's range ends
FRACTIONS_RANDOM = (0.0, 0.20, 0.40, 0.60, 0.70)


# ----------------------------------------------------------------------------- statistics


def ratio_interval(bacc: np.ndarray, other: np.ndarray, rng: np.random.Generator, draws: int = 4000):
    """mean(bacc) / mean(other) and its 95% paired bootstrap interval over trials."""
    index = rng.integers(0, bacc.size, size=(draws, bacc.size))
    with np.errstate(divide="ignore", invalid="ignore"):
        ratios = bacc[index].mean(axis=1) / other[index].mean(axis=1)
        return bacc.mean() / other.mean(), *np.quantile(ratios, [0.025, 0.975])


def cell(bacc: np.ndarray, other: np.ndarray, seed: int) -> str:
    ratio, low, high = ratio_interval(bacc, other, np.random.default_rng(seed))
    win = np.mean(other < bacc) * 100
    if not np.isfinite(ratio) or ratio > 1e6:
        return f"{'exact':>17} {win:3.0f}%"
    return f"{ratio:5.2f} [{low:4.2f},{high:4.2f}] {win:3.0f}%"


# ----------------------------------------------------------------------------- functions


def random_mlp(rng: np.random.Generator, d_in=64, hidden=128, d_out=10):
    w1 = rng.normal(size=(d_in, hidden)) / np.sqrt(d_in)
    w2 = rng.normal(size=(hidden, d_out)) / np.sqrt(hidden)
    b1 = rng.normal(size=hidden) * 0.1
    return lambda x: np.tanh(x @ w1 + b1) @ w2


class Draws:
    """Per trial: (inputs, f) for a model; the same sequence for every scheme."""

    def __init__(self, model: str):
        self.model = model
        if model != "mlp":
            self.data = cc.datasets.mnist().test_x
            self.f = cc.models.numpy_function(model)

    def __call__(self, K: int, rng: np.random.Generator):
        if self.model == "mlp":
            return rng.normal(size=(K, 64)), random_mlp(rng)
        return self.data[rng.choice(len(self.data), size=K, replace=False)], self.f


# ----------------------------------------------------------------------------- assignments


def golden_stride(N: int) -> int:
    """The integer nearest N / phi that is coprime with N."""
    for p in sorted(range(1, N), key=lambda p: (abs(p - N / PHI), p)):
        if np.gcd(p, N) == 1:
            return p
    return 1


def radical_inverse(n: np.ndarray) -> np.ndarray:
    out, scale, n = np.zeros(n.shape), 0.5, n.copy()
    while np.any(n):
        out += (n & 1) * scale
        n, scale = n >> 1, scale / 2
    return out


def assignments(N: int, seed: int) -> dict[str, np.ndarray]:
    """name -> perm: worker n sits at the perm[n]-th sorted point."""
    n = np.arange(N)
    half = (N + 1) // 2
    return {
        "natural": n,
        "random": np.random.default_rng([seed, 7919, N]).permutation(N),
        f"golden p={golden_stride(N)}": n * golden_stride(N) % N,
        "van der Corput": np.argsort(np.argsort(radical_inverse(n), kind="stable"), kind="stable"),
        "even/odd": np.where(n < half, 2 * n, 2 * (n - half) + 1),
    }


def longest_run(perm: np.ndarray, S: int) -> int:
    """The longest run of neighbouring points a block of S neighbouring workers removes,
    over all block positions."""
    N = perm.size
    worst = 0
    for start in range(N - S + 1):
        missing = np.zeros(N, bool)
        missing[perm[start : start + S]] = True
        runs = np.diff(np.flatnonzero(np.diff(np.r_[0, missing.astype(int), 0])))[::2]
        worst = max(worst, int(runs.max()) if runs.size else 0)
    return worst


# ----------------------------------------------------------------------------- decoders


def simplex_lsq(residuals: list[np.ndarray]) -> np.ndarray:
    """Weights w >= 0, sum w = 1 minimising ||sum_c w_c r_c||^2 (exact: every face of the
    simplex is tried; at most four candidates)."""
    M = np.stack([r.ravel() for r in residuals], axis=1)
    c = M.shape[1]
    G = M.T @ M
    best, best_w = np.inf, np.eye(c)[0]
    for size in range(1, c + 1):
        for face in itertools.combinations(range(c), size):
            f = list(face)
            # minimise w^T G_ff w subject to 1^T w = 1: w ~ G_ff^-1 1
            try:
                v = np.linalg.lstsq(G[np.ix_(f, f)], np.ones(size), rcond=None)[0]
            except np.linalg.LinAlgError:
                continue
            if not abs(v.sum()) > 1e-300:
                continue
            w_f = v / v.sum()
            if np.any(w_f < -1e-12):
                continue
            w = np.zeros(c)
            w[f] = np.clip(w_f, 0, None)
            w /= w.sum()
            value = w @ G @ w
            if value < best:
                best, best_w = value, w
    return best_w


def chord_and_cubic(t: np.ndarray, Y: np.ndarray, z: np.ndarray):
    """The piecewise-linear and the natural cubic interpolant through (t, Y) at z (inside)."""
    L = linear_matrix(t, z) @ Y
    C = cc.spline.fit(t, Y)(z) if t.size >= 3 else L
    return L, C


def extrapolants(t: np.ndarray, Y: np.ndarray, z: np.ndarray, low: bool, window: int):
    """Candidates beyond one end: hold, the end chord's line, the natural cubic's end line
    (through ``window`` end knots), Berrut through all knots."""
    e0, e1 = (0, 1) if low else (-1, -2)
    hold = np.broadcast_to(Y[e0], (z.size, Y.shape[1]))
    line = Y[e0] + (z - t[e0])[:, None] * ((Y[e1] - Y[e0]) / (t[e1] - t[e0]))
    w = slice(0, window) if low else slice(-window, None)
    cubic = cc.spline.fit(t[w], Y[w])(z) if t.size >= 3 else line
    return [hold, line, cubic, berrut_matrix(t, z) @ Y]


class GapDecoder:
    """GCC's adaptive decoder with the inputs that fall in gaps re-estimated (module docstring).

    ``mode``: "lbo" (blend of L and C fitted by leave-block-out), "lbo+b" (L, C and Berrut),
    "lbo+m" (L, C and the mean of the results), "half" ((L + C) / 2), "berrut" (Berrut through
    all returned results). Inputs beyond an end with design points missing there are
    extrapolated by the fitted blend of four extrapolants (LBO modes) or Berrut ("half",
    "berrut"). ``beta`` may be in any order (worker n at beta[n]); design steps are ranks
    among the sorted points.

    Cost per decode beyond the adaptive decoder, per distinct gap size: ``positions`` block
    predictions over ``m + 2 window`` knots each (a chord, one tridiagonal cubic solve, a mean)
    and a 3x3 simplex least squares on ``positions * m * d`` residuals; the edge rule the same
    on the ends. ``O((positions (m + window) + K) d)`` in all; the Berrut candidate adds
    ``O(n (m positions + K) d)``.
    """

    def __init__(
        self,
        alpha,
        beta,
        mode="lbo",
        *,
        m0=2,
        positions=8,
        window=12,
        edge=True,
        fallback="linear",
        exclude=True,
        relative=2.0,
    ):
        self.alpha, self.beta = np.asarray(alpha, float), np.asarray(beta, float)
        self.N = self.beta.size
        self.rank_of_worker = np.argsort(np.argsort(self.beta, kind="stable"), kind="stable")
        self.mode, self.m0, self.positions, self.window, self.edge = mode, m0, positions, window, edge
        self.relative = relative  # a gap also spans more than relative x the median bracket
        self.exclude = exclude  # validation blocks must overlap no gap
        self.fallback = fallback  # no block of the gap's span to validate on: "linear" or "adaptive"

    def __call__(self, Y: np.ndarray, alive: np.ndarray):
        """``(estimates, weights)``: per interior gap fitted, the weights of C (and of the third
        candidate) in the blend."""
        Y = np.asarray(Y, float).reshape(len(alive), -1)
        order = np.argsort(self.beta[alive], kind="stable")
        t, Y, rank = self.beta[alive][order], Y[order], self.rank_of_worker[alive][order]
        a, n = self.alpha, t.size
        out = AdaptiveInterpolant(t, a)(Y)[0]
        out = np.array(out, float)
        bracket = np.clip(np.searchsorted(t, a, side="right") - 1, 0, n - 2)
        missing = rank[bracket + 1] - rank[bracket] - 1
        inside = (a >= t[0]) & (a <= t[-1])
        spans = np.diff(rank)
        threshold = max(self.m0, int(np.floor(self.relative * np.median(spans))))  # missing points
        is_gap = spans - 1 >= threshold  # bracket i (between knots i, i+1) is a gap
        weights = []
        for m in np.unique(missing[inside & (missing >= threshold)]):
            pts = np.flatnonzero(inside & (missing == m))
            L, C = chord_and_cubic(t, Y, a[pts])
            if self.mode == "half":
                out[pts] = (L + C) / 2
                continue
            if self.mode == "berrut":
                out[pts] = berrut_matrix(t, a[pts]) @ Y
                continue
            residuals = self._validate(t, Y, rank, is_gap, int(m) + 1)
            if residuals is None:  # no block of this span overlaps no gap
                if self.fallback == "linear":
                    out[pts] = L
                continue
            w = simplex_lsq(residuals)
            candidates = [L, C]
            if self.mode == "lbo+b":
                candidates.append(berrut_matrix(t, a[pts]) @ Y)
            if self.mode == "lbo+m":
                candidates.append(np.broadcast_to(Y.mean(axis=0), L.shape))
            out[pts] = sum(wc * c for wc, c in zip(w, candidates, strict=True))
            weights.append(w[1:])
        if self.edge:
            for low in (True, False):
                pts = np.flatnonzero(a < t[0]) if low else np.flatnonzero(a > t[-1])
                miss = rank[0] if low else self.N - 1 - rank[-1]
                if pts.size == 0 or miss < 1:
                    continue
                if self.mode in ("half", "berrut"):
                    out[pts] = berrut_matrix(t, a[pts]) @ Y
                    continue
                residuals = self._validate_edges(t, Y, rank, int(miss))
                if residuals is None:
                    continue
                w = simplex_lsq(residuals)
                out[pts] = sum(
                    wc * c for wc, c in zip(w, extrapolants(t, Y, a[pts], low, self.window), strict=True)
                )
        return out, weights

    def _validate(self, t, Y, rank, is_gap, span):
        """Leave-block-out residuals of the interior candidates for gaps of ``span`` design
        steps, on up to ``positions`` blocks that overlap no gap."""
        n = t.size
        j0 = np.arange(n - 2)
        j1 = np.searchsorted(rank, rank[j0] + span, side="left")  # first knot >= span steps on
        gaps_before = np.r_[0, np.cumsum(is_gap)]  # gaps among brackets 0..i-1
        ok = (j1 <= n - 1) & (j1 - j0 >= 2)
        if self.exclude:
            ok &= gaps_before[np.minimum(j1, n - 1)] - gaps_before[j0] == 0
        starts = np.flatnonzero(ok)
        if starts.size == 0:
            return None
        pick = np.unique(np.linspace(0, starts.size - 1, self.positions).round().astype(int))
        res = [[], []] + ([[]] if self.mode in ("lbo+b", "lbo+m") else [])
        for s in starts[pick]:
            e = j1[s]
            removed = np.arange(s + 1, e)
            lo, hi = max(0, s - self.window), min(n, e + 1 + self.window)
            kept = np.r_[lo : s + 1, e:hi]
            L, C = chord_and_cubic(t[kept], Y[kept], t[removed])
            res[0].append(L - Y[removed])
            res[1].append(C - Y[removed])
            if self.mode == "lbo+b":
                rest = np.r_[0 : s + 1, e:n]
                res[2].append(berrut_matrix(t[rest], t[removed]) @ Y[rest] - Y[removed])
            if self.mode == "lbo+m":
                rest = np.r_[0 : s + 1, e:n]
                res[2].append(Y[rest].mean(axis=0) - Y[removed])
        return [np.concatenate(r) for r in res]

    def _validate_edges(self, t, Y, rank, miss):
        """Residuals of the extrapolants on the knots within ``miss`` design steps of each end,
        predicted from the knots beyond them."""
        n = t.size
        res = [[], [], [], []]
        for low in (True, False):
            if low:
                q = int(np.searchsorted(rank - rank[0], miss))
                removed, rest = np.arange(q), np.arange(q, n)
            else:
                q = int(np.searchsorted(rank[-1] - rank[::-1], miss))
                removed, rest = np.arange(n - q, n), np.arange(n - q)
            if removed.size == 0 or rest.size < 3 or removed.size > n // 4:
                continue
            for r, c in zip(res, extrapolants(t[rest], Y[rest], t[removed], low, self.window), strict=True):
                r.append(c - Y[removed])
        if not res[0]:
            return None
        return [np.concatenate(r) for r in res]


# ----------------------------------------------------------------------------- parts


def inputs_for(N: int) -> int:
    return 10 if N == 50 else max(2, N // 5)


def sizes(N: int, fractions) -> list[int]:
    return sorted({int(np.floor(f * N + 0.5)) for f in fractions})


def part_a(models, workers, trials, seed):
    print("\n=== A: a block of S neighbouring WORKERS, workers assigned to points by a permutation ===")
    print(
        "ratio = mean MSE of BACC (natural assignment) / mean MSE of the scheme [95% paired bootstrap] win%"
    )
    for N in workers:
        K = inputs_for(N)
        perms = assignments(N, seed)
        assert np.array_equal(perms[f"golden p={golden_stride(N)}"], cc.points.assignment(N, "golden"))
        base = cc.GCC(K, N).beta  # sorted Chebyshev points of the second kind
        print(f"\nK={K}, N={N}: longest run of neighbouring points a block removes (worst position)")
        for name, perm in perms.items():
            runs = " ".join(f"S={S}:{longest_run(perm, S)}" for S in sizes(N, FRACTIONS_BLOCK))
            print(f"  {name:>16}  {runs}")
        codes = {}
        for name, perm in perms.items():
            beta = base[perm]
            codes[name] = (
                cc.BACC(K, N, beta=beta),
                cc.GCC(K, N, decoding="adaptive", beta=beta),
                cc.GCC(K, N, beta=beta),  # the library's default: gap-aware
                perm,
            )
        nat_g, nat_b = cc.GCC(K, N), cc.BACC(K, N)
        check = np.random.default_rng(0).normal(size=(K, 3))
        # a permuted code's coded inputs are the natural code's rows, permuted
        for bacc, gcc, _, perm in codes.values():
            assert np.allclose(gcc.encode(check), nat_g.encode(check)[perm])
            assert np.allclose(bacc.encode(check), nat_b.encode(check)[perm])
        for model in models:
            draws, start = Draws(model), time.perf_counter()
            print(f"\n{model} K={K} N={N}")
            print(
                f"{'assignment':>16} {'S':>3} {'bacc-nat MSE':>12} | {'bacc (same perm)':>22} | "
                f"{'gcc adaptive':>22} | {'gcc gap-aware':>22}"
            )
            for S in sizes(N, FRACTIONS_BLOCK):
                rng = np.random.default_rng([seed, 1, N, S])
                err = {name: np.empty((3, trials)) for name in codes}
                err_nat = np.empty(trials)
                for trial in range(trials):
                    x, f = draws(K, rng)
                    truth = f(x)
                    alive = cc.stragglers.contiguous(N, S, rng)  # worker indices
                    yg, yb = f(nat_g.encode(x)), f(nat_b.encode(x))
                    err_nat[trial] = cc.metrics.mse(nat_b.decode(yb[alive], alive), truth)
                    for name, (bacc, gcc, gap, perm) in codes.items():
                        Yg, Yb = yg[perm][alive], yb[perm][alive]
                        err[name][0, trial] = cc.metrics.mse(bacc.decode(Yb, alive), truth)
                        err[name][1, trial] = cc.metrics.mse(gcc.decode(Yg, alive), truth)
                        err[name][2, trial] = cc.metrics.mse(gap.decode(Yg, alive), truth)
                for name in codes:
                    cells = " | ".join(cell(err_nat, err[name][i], seed + 1) for i in range(3))
                    print(f"{name:>16} {S:>3} {err_nat.mean():12.4g} | {cells}", flush=True)
            print(f"({time.perf_counter() - start:.0f} s)", flush=True)


def b_schemes(K: int, N: int, **gap):
    g = cc.GCC(K, N)
    alpha, beta = g.alpha, g.beta
    return {
        "adaptive": ("g", cc.GCC(K, N, decoding="adaptive")),
        "berrut@gap": ("g", GapDecoder(alpha, beta, "berrut", **gap)),
        "half@gap": ("g", GapDecoder(alpha, beta, "half", **gap)),
        "gap-LBO": ("g", GapDecoder(alpha, beta, "lbo", **gap)),
        "gap-LBO+B": ("g", GapDecoder(alpha, beta, "lbo+b", **gap)),
        "gap-LBO+M": ("g", GapDecoder(alpha, beta, "lbo+m", **gap)),
        "gcc-enc+berrut": ("g", cc.BACC(K, N)),  # BACC's decoder applied to GCC-encoded results
        "bacc-enc+adaptive": ("b", cc.GCC(K, N, decoding="adaptive")),
    }


def decode_with(scheme, Y, alive, shape):
    est = scheme(Y, alive)[0] if isinstance(scheme, GapDecoder) else scheme.decode(Y, alive)
    return np.asarray(est).reshape(shape)


def edge_block(N: int, S: int, rng: np.random.Generator) -> np.ndarray:
    """A block of S neighbouring points at one end (either, equally likely)."""
    return np.arange(S, N) if rng.random() < 0.5 else np.arange(N - S)


def run_pattern(model, K, N, S, pattern, trials, seed, schemes, tag):
    """{scheme: (trials,) MSE}, BACC's MSE and the recommended decoder's weights, on paired draws."""
    g, b = cc.GCC(K, N), cc.BACC(K, N)
    draws = Draws(model)
    rng = np.random.default_rng([seed, tag, N, S])
    err = {name: np.empty(trials) for name in schemes}
    err_b = np.empty(trials)
    weights = []
    draw = edge_block if pattern == "edge" else getattr(cc.stragglers, pattern)
    for trial in range(trials):
        x, f = draws(K, rng)
        truth = f(x)
        alive = draw(N, S, rng)
        Y = {"g": f(g.encode(x))[alive], "b": f(b.encode(x))[alive]}
        err_b[trial] = cc.metrics.mse(b.decode(Y["b"], alive), truth)
        for name, (enc, scheme) in schemes.items():
            if isinstance(scheme, GapDecoder) and name == RECOMMENDED_NAME:
                est, w = scheme(Y[enc], alive)
                weights += w
                est = est.reshape(truth.shape)
                # the same decoder, shipped (in float64: the networks' float32 results round)
                library = g.decode(np.asarray(Y[enc], float), alive).reshape(truth.shape)
                assert np.allclose(library, est, rtol=1e-9, atol=1e-9 * np.max(np.abs(est))), name
            else:
                est = decode_with(scheme, Y[enc], alive, truth.shape)
            err[name][trial] = cc.metrics.mse(est, truth)
    return err, err_b, weights


def part_br(models, workers, trials, seed, pattern):
    title = {
        "contiguous": "B: a block of S neighbouring POINTS (natural assignment): the worst case",
        "edge": "B, edge blocks only: the S points at one end missing (2 of the N - S + 1 block positions)",
        "random": "R: S random stragglers (every decoder of part B)",
    }[pattern]
    print(f"\n=== {title} ===")
    print(
        "ratio = mean MSE of BACC / mean MSE of the scheme [95% paired bootstrap] win%; "
        f"w = {RECOMMENDED_NAME}'s mean weights of C and M in interior gaps (n: gaps fitted)"
    )
    fractions = {"contiguous": FRACTIONS_BLOCK + FRACTIONS_BEYOND, "edge": FRACTIONS_BLOCK}
    fractions = fractions.get(pattern, FRACTIONS_RANDOM)
    tag = {"contiguous": 2, "random": 3, "edge": 5}[pattern]
    for N in workers:
        K = inputs_for(N)
        schemes = b_schemes(K, N)
        for model in models:
            start = time.perf_counter()
            print(f"\n{model} K={K} N={N} {pattern}")
            print(f"{'S':>3} {'bacc MSE':>9} | " + " | ".join(f"{name:>22}" for name in schemes) + " | w")
            for S in sizes(N, fractions):
                err, err_b, w = run_pattern(model, K, N, S, pattern, trials, seed, schemes, tag)
                cells = " | ".join(cell(err_b, err[name], seed + 1) for name in schemes)
                wtxt = " ".join(f"{v:.2f}" for v in np.mean(w, axis=0)) + f" (n={len(w)})" if w else "-"
                print(f"{S:>3} {err_b.mean():9.4g} | {cells} | {wtxt}", flush=True)
            print(f"({time.perf_counter() - start:.0f} s)", flush=True)


def part_sweep(workers, trials, seed):
    print(f"\n=== sweep: {RECOMMENDED_NAME}'s parameters on random tanh MLPs (not the networks above) ===")
    print(
        f"ratio = mean MSE of BACC / mean MSE of {RECOMMENDED_NAME}; default m0=2, positions=8, window=12, "
        "relative=2, exclude=True, fallback=linear; one change per column; last column: the library's "
        "adaptive decoder"
    )
    default = dict(m0=2, positions=8, window=12, relative=2.0, exclude=True, fallback="linear")
    changes = [
        {},
        {"m0": 1},
        {"m0": 3},
        {"positions": 4},
        {"positions": 16},
        {"window": 6},
        {"window": 24},
        {"relative": 0.0},
        {"relative": 3.0},
        {"exclude": False},
        {"fallback": "adaptive"},
    ]
    grid = [{**default, **c} for c in changes]
    labels = ["default"] + [",".join(f"{k}={v}" for k, v in c.items()) for c in changes[1:]]
    for N in workers:
        K = inputs_for(N)
        g = cc.GCC(K, N)
        settings = [("contiguous", S) for S in sizes(N, FRACTIONS_BLOCK + FRACTIONS_BEYOND)]
        settings += [("random", S) for S in sizes(N, FRACTIONS_RANDOM[1:])]
        print(f"\nmlp K={K} N={N}")
        print(f"{'pattern':>10} {'S':>3} | " + " | ".join(f"{label:>22}" for label in [*labels, "adaptive"]))
        for pattern, S in settings:
            schemes = {
                label: ("g", GapDecoder(g.alpha, g.beta, RECOMMENDED, **p))
                for label, p in zip(labels, grid, strict=True)
            }
            schemes["adaptive"] = ("g", cc.GCC(K, N, decoding="adaptive"))
            err, err_b, _ = run_pattern("mlp", K, N, S, pattern, trials, seed + 100, schemes, 4)
            cells = " | ".join(cell(err_b, err[label], seed + 1) for label in [*labels, "adaptive"])
            print(f"{pattern:>10} {S:>3} | {cells}", flush=True)


def part_cost(workers, seed, repeats=200):
    print(
        "\n=== cost: seconds per decode (numpy, one thread of this machine; d = 10 outputs), "
        "the decoder built per call ==="
    )
    rng = np.random.default_rng([seed, 6])
    for N in workers:
        K = inputs_for(N)
        g = cc.GCC(K, N)
        line = f"K={K} N={N}:"
        for pattern, S in (("contiguous", N // 5), ("random", N // 5)):
            alive = getattr(cc.stragglers, pattern)(N, S, rng)
            Y = rng.normal(size=(alive.size, 10))
            for name, scheme in (
                ("bacc", cc.BACC(K, N)),
                ("adaptive", cc.GCC(K, N, decoding="adaptive")),
                (RECOMMENDED_NAME + " (prototype)", GapDecoder(g.alpha, g.beta, RECOMMENDED)),
                ("gap-aware (library)", cc.GCC(K, N)),
            ):
                begin = time.perf_counter()
                for _ in range(repeats):
                    if isinstance(scheme, GapDecoder):
                        scheme(Y, alive)
                    else:
                        scheme.clear_cache()
                        scheme.decode(Y, alive)
                line += f"  {pattern} S={S} {name} {(time.perf_counter() - begin) / repeats * 1e3:.2f} ms;"
        print(line, flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--trials", type=int, default=200)
    parts = ["A", "B", "edge", "R", "sweep", "cost"]
    parser.add_argument("--parts", nargs="+", default=["A", "B", "edge", "R", "cost"], choices=parts)
    parser.add_argument("--models", nargs="+", default=["lenet5", "vit", "mlp"])
    parser.add_argument("--workers", type=int, nargs="+", default=[50, 100])
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    start = time.perf_counter()
    print(f"{args.trials} paired trials per row; K = 10 at N = 50, K = N/5 otherwise; seed {args.seed}")
    if "A" in args.parts:
        part_a(args.models, args.workers, args.trials, args.seed)
    if "B" in args.parts:
        part_br(args.models, args.workers, args.trials, args.seed, "contiguous")
    if "edge" in args.parts:
        part_br(args.models, args.workers, args.trials, args.seed, "edge")
    if "R" in args.parts:
        part_br(args.models, args.workers, args.trials, args.seed, "random")
    if "cost" in args.parts:
        part_cost(args.workers, args.seed)
    if "sweep" in args.parts:
        part_sweep(args.workers, args.trials, args.seed)
    print(f"\ntotal {time.perf_counter() - start:.0f} s")


if __name__ == "__main__":
    main()
