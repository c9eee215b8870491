"""What GCC's default (gap-aware) decoder costs the master against the natural spline and BACC,
with a new alive set at every decode (the serving case), and what a systematic decode of a few
missing inputs costs against decoding them all.

Sections:

1. decode: K = N/5 for N <= 500 and N/10 above (the issue's table: 10/50, 20/100, 100/500,
   200/2000, then 800/8000, 1600/16000), float64 results of widths 1, 10 and 1000 (1000 only
   up to N = 2000 in ``--quick``), two straggler patterns: 20% random, and one contiguous
   block of 20%. Every repeat draws one alive set and one ``Y`` and decodes it with each code
   in turn (the order rotated), the caches cleared first, through ``GCC.decode`` /
   ``BACC.decode`` (build + apply). Per row: median ms of GCC spline (``decoding="spline"``,
   lambda 0), adaptive, default (gap-aware), and BACC; the paired ratio default / spline
   (median of the per-repeat ratios with a 95% bootstrap interval; goal <= 3), and at
   N = 50, 100 default / BACC (goal <= 5).
2. systematic: ``GCC(50, 75, systematic=True)`` with 2 of its K systematic workers missing
   (and 5 random parity workers), against ``GCC(50, 75)`` decoding all 50 from the same
   number of results; widths 10 and 1000.

One BLAS thread (threadpoolctl). Run:
``python benchmarks/bench_master_gcc.py [--quick] [--only decode systematic] [--sizes 50 100]``.
"""

from __future__ import annotations

import argparse
import time

import numpy as np
from threadpoolctl import threadpool_limits

import codedcomputing as cc


def interleaved(fns: dict, repeats: int, setup) -> dict[str, np.ndarray]:
    """Seconds of each callable at every repeat, timed in turn (the order rotated from one
    repeat to the next); ``setup(r)`` (untimed) runs first and its result goes to every one."""
    times = {name: [] for name in fns}
    names = list(fns)
    for r in range(repeats):
        arg = setup(r)
        for name in names[r % len(names) :] + names[: r % len(names)]:
            start = time.perf_counter()
            fns[name](arg)
            times[name].append(time.perf_counter() - start)
    return {name: np.array(t) for name, t in times.items()}


def bootstrap_median(values: np.ndarray, rng, draws: int = 2000) -> tuple[float, float, float]:
    """The median of ``values`` and a 95% percentile-bootstrap interval for it."""
    samples = rng.choice(values, size=(draws, values.size), replace=True)
    low, high = np.percentile(np.median(samples, axis=1), [2.5, 97.5])
    return float(np.median(values)), float(low), float(high)


def fresh(code):
    """A decode on a new alive set: the cache cleared (a serving master rarely sees one twice)."""

    def call(arg):
        code.clear_cache()
        code.decode(arg[1], arg[0])

    return call


def sizes_for(n: int) -> int:
    return n // 5 if n <= 500 else n // 10


def decode_row(n: int, width: int, pattern: str, repeats: int, rng) -> dict:
    k = sizes_for(n)
    codes = {
        "spline": cc.GCC(k, n, decoding="spline"),
        "adaptive": cc.GCC(k, n, decoding="adaptive"),
        "default": cc.GCC(k, n),
    }
    if n <= 2000:
        codes["bacc"] = cc.BACC(k, n)
    draw = cc.stragglers.random if pattern == "random" else cc.stragglers.contiguous

    def setup(_):
        alive = draw(n, n // 5, rng)
        return alive, rng.normal(size=(alive.size, width))

    return interleaved({name: fresh(code) for name, code in codes.items()}, repeats, setup)


def decode_cost(sizes, widths, repeats, quick, rng):
    print("\n1. decode on a new alive set a call (build + apply), float64, one BLAS thread (median ms)")
    print(
        f"{'N':>6} {'K':>5} {'width':>5} {'pattern':>10} | {'spline':>8} {'adaptive':>8} {'default':>8} "
        f"{'BACC':>8} | {'default/spline [95% CI]':>24} | {'default/BACC':>12}"
    )
    worst = {}
    for n in sizes:
        for width in widths:
            if quick and width >= 1000 and n > 2000:
                continue
            for pattern in ("random", "contiguous"):
                reps = repeats if n <= 2000 else max(5, repeats // 3)
                t = decode_row(n, width, pattern, reps, rng)
                ratio, low, high = bootstrap_median(t["default"] / t["spline"], rng)
                worst[(n, width, pattern)] = ratio
                bacc = np.median(t["bacc"]) if "bacc" in t else float("nan")
                vs_bacc = (
                    f"{bootstrap_median(t['default'] / t['bacc'], rng)[0]:12.2f}" if n <= 100 else " " * 12
                )
                print(
                    f"{n:>6} {sizes_for(n):>5} {width:>5} {pattern:>10} | "
                    + " ".join(f"{np.median(t[c]) * 1e3:8.3f}" for c in ("spline", "adaptive", "default"))
                    + f" {bacc * 1e3:8.3f} | {ratio:6.2f} [{low:5.2f}, {high:5.2f}]{'':>8} | {vs_bacc}",
                    flush=True,
                )
    key = max(worst, key=worst.get)
    print(f"worst default/spline: {worst[key]:.2f} at N = {key[0]}, width {key[1]}, {key[2]} (goal <= 3)")


def systematic_cost(widths, repeats, rng):
    k, n, missing = 50, 75, 2
    print(f"\n2. systematic: K = {k}, N = {n}, {missing} systematic workers missing (median ms, paired)")
    systematic, plain = cc.GCC(k, n, systematic=True), cc.GCC(k, n)
    print(f"{'width':>5} | {'systematic, 2 missing':>21} {'all 50 (non-systematic)':>24} | ratio [95% CI]")
    for width in widths:

        def setup(_, width=width):
            gone = np.concatenate(
                [rng.choice(k, missing, replace=False), k + rng.choice(n - k, 5, replace=False)]
            )
            alive = np.setdiff1d(np.arange(n), gone)
            return alive, rng.normal(size=(alive.size, width))

        t = interleaved({"systematic": fresh(systematic), "plain": fresh(plain)}, repeats, setup)
        ratio, low, high = bootstrap_median(t["systematic"] / t["plain"], rng)
        print(
            f"{width:>5} | {np.median(t['systematic']) * 1e3:21.3f} {np.median(t['plain']) * 1e3:24.3f} | "
            f"{ratio:.2f} [{low:.2f}, {high:.2f}]",
            flush=True,
        )


SECTIONS = ("decode", "systematic")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="fewer repeats; width 1000 only up to N = 2000")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--sizes", type=int, nargs="+", default=[50, 100, 500, 2000, 8000, 16000], help="N")
    parser.add_argument("--only", nargs="+", choices=SECTIONS, default=SECTIONS, help="sections to run")
    args = parser.parse_args()
    rng = np.random.default_rng(args.seed)
    repeats = 15 if args.quick else 45
    with threadpool_limits(1, user_api="blas"):
        if "decode" in args.only:
            decode_cost(args.sizes, [1, 10, 1000], repeats, args.quick, rng)
        if "systematic" in args.only:
            systematic_cost([10, 1000], 3 * repeats, rng)


if __name__ == "__main__":
    main()
