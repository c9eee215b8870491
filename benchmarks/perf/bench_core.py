"""Master-side cost of GCC: scaling in N, against scipy, against the copy floor, against BACC.

Prints medians over repeats; alternatives are timed interleaved in the same run, so their
ratios are robust to a noisy machine. Sections:

1. scaling: N = 100 .. 20000, K = N / 10, 10% random stragglers, output width 1000, float32.
   Per N: building the encoder, encode, decode with a fresh alive set (decoder built and
   applied) and with a cached one; then t(8N) / t(N).
2. decode strategies at N = 2000: our cached sparse map (fresh and cached) against a banded
   Reinsch solve per call (``cc.spline.fit``) and one call of scipy's make_smoothing_spline.
3. copy floor at N = 2000, K = 200, width 1000: decode time / time to copy Y once.
4. MNIST-sized inference at N = 50, K = 10 (784 in, 10 out): GCC encode + decode against BACC.

Run: ``python benchmarks/perf/bench_core.py [--quick]``.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np
from scipy.interpolate import make_smoothing_spline

import codedcomputing as cc

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # benchmarks/: common.py
from common import median_seconds


def median_times(fns: dict, repeats: int) -> dict:
    """Median seconds of each callable (no arguments), called once to warm up, then timed in
    turn so they share the machine's noise (:func:`common.median_seconds`)."""
    return median_seconds({name: (lambda _, fn=fn: fn()) for name, fn in fns.items()}, repeats, warm_up=True)


def fresh_decode(code, y, alive):
    code.clear_cache()  # as for an alive set not seen before
    return code.decode(y, alive)


def scaling(sizes, width, repeats, rng):
    print(f"\n1. scaling: K = N/10, 10% random stragglers, width {width}, float32 (median ms)")
    print(f"{'N':>6} {'build enc':>10} {'encode':>9} {'decode':>9} {'decode(cached)':>15}")
    rows = {}
    for n in sizes:
        k = n // 10
        x = rng.normal(size=(k, width)).astype(np.float32)
        alive = cc.stragglers.random(n, n // 10, rng)
        code = cc.GCC(k, n, decoding="spline")
        y = code.encode(x)[alive]
        t = median_times(
            {
                "build": lambda k=k, n=n: cc.GCC(k, n, decoding="spline"),
                "encode": lambda c=code, x=x: c.encode(x),
                "decode": lambda c=code, y=y, a=alive: fresh_decode(c, y, a),
                "cached": lambda c=code, y=y, a=alive: c.decode(y, a),
            },
            repeats,
        )
        rows[n] = t
        print(
            f"{n:>6} {t['build'] * 1e3:>10.2f} {t['encode'] * 1e3:>9.2f} "
            f"{t['decode'] * 1e3:>9.2f} {t['cached'] * 1e3:>15.2f}"
        )
    print("t(8N) / t(N) (8 = linear, 64 = quadratic):")
    for n in sizes:
        if 8 * n in rows:
            ratios = ", ".join(f"{name} {rows[8 * n][name] / rows[n][name]:.1f}" for name in rows[n])
            print(f"  N = {n} -> {8 * n}: {ratios}")


def strategies(n, width, repeats, rng):
    k = n // 10
    print(f"\n2. decode strategies at N = {n}, K = {k}, width {width}, float64 (median ms)")
    x = rng.normal(size=(k, width))
    alive = cc.stragglers.random(n, n // 10, rng)
    code = cc.GCC(k, n, decoding="spline")
    y = code.encode(x)[alive]
    knots = code.beta[alive]
    t = median_times(
        {
            "ours: sparse map, fresh alive set": lambda: fresh_decode(code, y, alive),
            "ours: sparse map, cached": lambda: code.decode(y, alive),
            "banded Reinsch solve per call": lambda: cc.spline.fit(knots, y, 0.0)(code.alpha),
            "scipy make_smoothing_spline": lambda: make_smoothing_spline(knots, y, lam=0.0)(code.alpha),
        },
        repeats,
    )
    base = t["ours: sparse map, fresh alive set"]
    for name, seconds in t.items():
        print(f"  {name:<36} {seconds * 1e3:9.2f}   ({seconds / base:.1f}x ours fresh)")


def copy_floor(n, width, repeats, rng):
    k = n // 10
    print(f"\n3. copy floor at N = {n}, K = {k}, width {width}, float32 (median ms)")
    x = rng.normal(size=(k, width)).astype(np.float32)
    alive = cc.stragglers.random(n, n // 10, rng)
    code = cc.GCC(k, n, decoding="spline")
    y = code.encode(x)[alive]
    t = median_times(
        {
            "copy": lambda: y.copy(),
            "fresh": lambda: fresh_decode(code, y, alive),
            "cached": lambda: code.decode(y, alive),
        },
        repeats,
    )
    print(f"  copy Y once {t['copy'] * 1e3:.2f}")
    print(f"  decode, fresh alive set {t['fresh'] * 1e3:.2f}  -> {t['fresh'] / t['copy']:.1f}x the copy")
    print(f"  decode, cached alive set {t['cached'] * 1e3:.2f}  -> {t['cached'] / t['copy']:.1f}x the copy")


def versus_bacc(repeats, rng):
    n, k, s = 50, 10, 5
    print(f"\n4. MNIST-sized inference, N = {n}, K = {k}, S = {s}: 784 in, 10 out, float32 (median us)")
    x = rng.normal(size=(k, 784)).astype(np.float32)
    patterns = [cc.stragglers.random(n, s, rng) for _ in range(16)]  # repeats, as in production
    outputs = rng.normal(size=(n, 10)).astype(np.float32)
    codes = {
        f"{name} {kind}": cls(k, n)
        for name, cls in (("gcc", cc.GCC), ("bacc", cc.BACC))
        for kind in ("fresh", "cached")
    }  # separate objects: "fresh" clears its own cache
    state = {"i": 0}

    def round_trip(code, fresh):
        alive = patterns[state["i"] % len(patterns)]
        state["i"] += 1
        if fresh:
            code.clear_cache()
        code.encode(x)
        return code.decode(outputs[alive], alive)

    t = median_times(
        {name: lambda name=name: round_trip(codes[name], name.endswith("fresh")) for name in codes},
        repeats,
    )
    for kind in ("fresh", "cached"):
        g, b = t[f"gcc {kind}"], t[f"bacc {kind}"]
        print(
            f"  encode + decode, {kind} alive set: GCC {g * 1e6:.0f}, BACC {b * 1e6:.0f}"
            f"  -> GCC/BACC {g / b:.2f}"
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="fewer sizes and repeats")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    rng = np.random.default_rng(args.seed)
    if args.quick:
        scaling([100, 800, 2500], 1000, 3, rng)
    else:
        scaling([100, 250, 800, 2000, 2500, 6400, 16000, 20000], 1000, 7, rng)
    strategies(2000, 1000, 3 if args.quick else 9, rng)
    copy_floor(2000, 1000, 5 if args.quick else 21, rng)
    versus_bacc(200 if args.quick else 2000, rng)


if __name__ == "__main__":
    main()
