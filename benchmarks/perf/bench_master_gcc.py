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

``--baseline REV`` also decodes with the default decoder of the package as it was at git
revision ``REV`` (extracted to a temporary folder and imported beside the current one under
another name; same draws, interleaved), and prints the paired ratio now / then per row and
the largest relative difference of the two estimates; section 3 (``agreement``, with
``--baseline`` only) compares the two decoders' estimates over some 200 alive sets (random,
contiguous and end blocks, N = 20 to 2,000) at widths 1 to 1,000: a before/after in one run,
whatever the machine's load.

One BLAS thread (threadpoolctl). Run:
``python benchmarks/perf/bench_master_gcc.py [--quick] [--only decode systematic agreement] [--sizes 50 100]
[--widths 1 10 1000] [--baseline REV] [--clock cpu]``; ``--clock cpu`` times each call in
the calling thread's CPU time, which a machine busy with other work inflates less than the wall clock.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

import numpy as np
from threadpoolctl import threadpool_limits

import codedcomputing as cc

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # benchmarks/: common.py
from common import CLOCKS, add_clock_option, bootstrap, interleaved, load_package_at


def fresh(code):
    """A decode on a new alive set: the cache cleared (a serving master rarely sees one twice)."""

    def call(arg):
        code.clear_cache()
        code.decode(arg[1], arg[0])

    return call


def sizes_for(n: int) -> int:
    return n // 5 if n <= 500 else n // 10


def decode_row(
    n: int, width: int, pattern: str, repeats: int, rng, baseline=None, clock=CLOCKS["wall"]
) -> tuple[dict, float]:
    """Per-code seconds at every repeat, and the largest relative difference between the
    default decoder's estimates and the baseline's (nan without one)."""
    k = sizes_for(n)
    codes = {
        "spline": cc.GCC(k, n, decoding="spline"),
        "adaptive": cc.GCC(k, n, decoding="adaptive"),
        "default": cc.GCC(k, n),
    }
    if n <= 2000:
        codes["bacc"] = cc.BACC(k, n)
    if baseline is not None:
        codes["then"] = baseline.GCC(k, n)
    draw = cc.stragglers.random if pattern == "random" else cc.stragglers.contiguous
    cases = []

    def setup(_):
        alive = draw(n, n // 5, rng)
        cases.append((alive, rng.normal(size=(alive.size, width))))
        return cases[-1]

    times = interleaved({name: fresh(code) for name, code in codes.items()}, repeats, setup, clock)
    difference = float("nan")
    if baseline is not None:  # the same estimates? (after the timing: a decoder is cached here)
        difference = 0.0
        for alive, y in cases[:5]:
            now, then = codes["default"].decode(y, alive), codes["then"].decode(y, alive)
            difference = max(difference, float(np.max(np.abs(now - then)) / np.max(np.abs(then))))
    return times, difference


def decode_cost(sizes, widths, repeats, quick, rng, baseline=None, clock=CLOCKS["wall"]):
    print("\n1. decode on a new alive set a call (build + apply), float64, one BLAS thread (median ms)")
    then = f" | {'now/then [95% CI]':>20} {'rel. diff':>9}" if baseline is not None else ""
    print(
        f"{'N':>6} {'K':>5} {'width':>5} {'pattern':>10} | {'spline':>8} {'adaptive':>8} {'default':>8} "
        f"{'BACC':>8} | {'default/spline [95% CI]':>24} | {'default/BACC [95% CI]':>22}{then}"
    )
    worst = {}
    for n in sizes:
        for width in widths:
            if quick and width >= 1000 and n > 2000:
                continue
            for pattern in ("random", "contiguous"):
                reps = repeats if n <= 2000 else max(5, repeats // 3)
                t, difference = decode_row(n, width, pattern, reps, rng, baseline, clock)
                ratio, low, high = bootstrap(t["default"] / t["spline"], np.median, rng)
                worst[(n, width, pattern)] = ratio
                bacc = np.median(t["bacc"]) if "bacc" in t else float("nan")
                vs_bacc = " " * 22
                if n <= 100:
                    b_ratio, b_low, b_high = bootstrap(t["default"] / t["bacc"], np.median, rng)
                    vs_bacc = f"{b_ratio:6.2f} [{b_low:5.2f}, {b_high:5.2f}]{'':>6}"
                line = (
                    f"{n:>6} {sizes_for(n):>5} {width:>5} {pattern:>10} | "
                    + " ".join(f"{np.median(t[c]) * 1e3:8.3f}" for c in ("spline", "adaptive", "default"))
                    + f" {bacc * 1e3:8.3f} | {ratio:6.2f} [{low:5.2f}, {high:5.2f}]{'':>8} | {vs_bacc}"
                )
                if baseline is not None:
                    now, n_low, n_high = bootstrap(t["default"] / t["then"], np.median, rng)
                    line += f" | {now:5.2f} [{n_low:5.2f}, {n_high:5.2f}]{'':>2} {difference:9.1e}"
                print(line, flush=True)
    key = max(worst, key=worst.get)
    print(f"worst default/spline: {worst[key]:.2f} at N = {key[0]}, width {key[1]}, {key[2]} (goal <= 3)")


def systematic_cost(widths, repeats, rng, clock=CLOCKS["wall"]):
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

        t = interleaved({"systematic": fresh(systematic), "plain": fresh(plain)}, repeats, setup, clock)
        ratio, low, high = bootstrap(t["systematic"] / t["plain"], np.median, rng)
        print(
            f"{width:>5} | {np.median(t['systematic']) * 1e3:21.3f} {np.median(t['plain']) * 1e3:24.3f} | "
            f"{ratio:.2f} [{low:.2f}, {high:.2f}]",
            flush=True,
        )


def agreement(baseline, rng, cases_per_size: int = 40):
    """The default decoder's estimates against the baseline's: the largest relative difference
    per output width over random, contiguous, end-block and mixed stragglers (alive sets in
    worker order or shuffled), N = 20 to 2,000, K = N / 5 or N / 10."""
    print("\n3. agreement with the baseline's default decoder (largest relative difference)")
    widths, worst = (1, 3, 10, 32, 100, 1000), {}
    for n in (20, 50, 100, 237, 600, 2000):
        for case in range(cases_per_size if n <= 600 else cases_per_size // 5):
            k = max(2, n // int(rng.choice([5, 10])))
            now, then = cc.GCC(k, n), baseline.GCC(k, n)
            if case % 4 == 0:
                alive = cc.stragglers.random(n, int(rng.integers(0, n // 2)), rng)
            elif case % 4 == 1:
                alive = cc.stragglers.contiguous(n, int(rng.integers(1, n // 2)), rng)
            elif case % 4 == 2:  # a block at an end
                cut = int(rng.integers(2, n // 3))
                alive = np.arange(cut, n) if rng.integers(2) else np.arange(n - cut)
            else:  # a block and random stragglers
                alive = cc.stragglers.contiguous(n, n // 5, rng)
                alive = np.sort(rng.choice(alive, size=int(0.8 * alive.size), replace=False))
            if rng.integers(2):
                alive = rng.permutation(alive)
            t = now.beta[alive]
            for width in widths:
                if width == 1000 and n > 600:
                    continue
                y = np.sin(rng.uniform(1, 6, width) * t[:, None] + rng.uniform(0, 3, width))
                y += 0.1 * rng.normal(size=y.shape)
                a, b = now.decode(y, alive), then.decode(y, alive)
                worst[width] = max(worst.get(width, 0.0), float(np.max(np.abs(a - b)) / np.max(np.abs(b))))
    print("  " + "  ".join(f"width {w}: {worst[w]:.1e}" for w in widths))


SECTIONS = ("decode", "systematic", "agreement")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="fewer repeats; width 1000 only up to N = 2000")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--sizes", type=int, nargs="+", default=[50, 100, 500, 2000, 8000, 16000], help="N")
    parser.add_argument("--only", nargs="+", choices=SECTIONS, default=SECTIONS, help="sections to run")
    parser.add_argument("--widths", type=int, nargs="+", default=[1, 10, 1000], help="decode widths")
    parser.add_argument("--repeats", type=int, help="decode repeats (default 45, 15 with --quick)")
    parser.add_argument("--baseline", metavar="REV", help="also time the default decoder at git revision REV")
    add_clock_option(parser)
    args = parser.parse_args()
    clock = CLOCKS[args.clock]
    rng = np.random.default_rng(args.seed)
    repeats = args.repeats or (15 if args.quick else 45)
    with tempfile.TemporaryDirectory() as folder, threadpool_limits(1, user_api="blas"):
        baseline = load_package_at(args.baseline, folder) if args.baseline else None
        if "decode" in args.only:
            decode_cost(args.sizes, args.widths, repeats, args.quick, rng, baseline, clock)
        if "systematic" in args.only:
            systematic_cost([10, 1000], 3 * repeats, rng, clock)
        if "agreement" in args.only and baseline is not None:
            agreement(baseline, rng)


if __name__ == "__main__":
    main()
