"""What a RobustGCC decode costs the master as N grows: t(8N) / t(N) for every loss.

Setting: K = N / 10 inputs (uniform on [-3, 3], sorted), f = sin, N in {1000, 2000, 4000, 8000},
output widths 1 and 50, float64, q = floor(sqrt(N)) adversaries (the concentrated attack,
bound 100, seeded), 10% random stragglers and a new alive set at every repeat (the serving
case: a decoder never sees the same alive set twice), ``bound=None`` (the default: the
decoder clips to the ranges the honest majority sets), one BLAS thread (threadpoolctl).

Every repeat draws one alive set and one attack per (N, width) and decodes it with every
loss (paired: the same results for all), the sizes and losses timed in turn in a new random
order at every repeat, so that the machine's noise (and the cold caches after a large decode)
falls on all alike. Prints
median ms per (loss, width, N) and t(8000) / t(1000), each with a 95% bootstrap interval over
the repeats (the goal of issue 22: at most 10), twice: wall-clock, and this thread's CPU time
(``time.thread_time``), which leaves out the waits for a core on a machine shared with other
work (the decode runs on one thread).

``--baseline REV`` also times ``codes/robust.py`` as it was at git revision ``REV`` (loaded
beside the current one, same draws, interleaved): a paired before/after in one run; it
checks that both give the same estimates (largest relative difference printed). ``--bound M``
gives the decoder a bound (the clip is then a plain one).

    python benchmarks/perf/bench_master_robust.py
    python benchmarks/perf/bench_master_robust.py --repeats 15 --baseline bc05f76
    python benchmarks/perf/bench_master_robust.py --sizes 1000 8000 --widths 50 --losses tukey
"""

from __future__ import annotations

import argparse
import math
import sys
from pathlib import Path

import numpy as np
from threadpoolctl import threadpool_limits

import codedcomputing as cc

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # benchmarks/: common.py
from common import CLOCKS, bootstrap, load_module_at, ratio_interval

LOSSES = ("tukey", "huber", "squared")
BOUND = 100.0


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", nargs="+", type=int, default=[1000, 2000, 4000, 8000])
    parser.add_argument("--widths", nargs="+", type=int, default=[1, 50])
    parser.add_argument("--losses", nargs="+", default=list(LOSSES), choices=LOSSES)
    parser.add_argument("--repeats", type=int, default=15)
    parser.add_argument("--baseline", metavar="REV", help="also time codes/robust.py at git revision REV")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--bound", type=float, help="RobustGCC's bound (default None: the majority's ranges)")
    args = parser.parse_args()
    rng = np.random.default_rng(args.seed)
    versions = {"now": cc.RobustGCC}
    if args.baseline:
        versions[f"at {args.baseline}"] = load_module_at(
            args.baseline, "codes/robust", "_robust_baseline"
        ).RobustGCC

    cases = []  # (N, width) with its codes and clean results
    for n in args.sizes:
        for width in args.widths:
            K, q = n // 10, math.isqrt(n)
            codes = {
                (version, loss): cls(K, n, q, args.bound, loss=loss)
                for version, cls in versions.items()
                for loss in args.losses
            }
            X = np.sort(rng.uniform(-3, 3, (K, width)), axis=0)
            Y = np.sin(next(iter(codes.values())).encode(X))
            cases.append({"n": n, "width": width, "q": q, "codes": codes, "Y": Y})
    clocks = CLOCKS
    times = {
        (clock, case["n"], case["width"], key): []
        for clock in clocks
        for case in cases
        for key in case["codes"]
    }
    worst = 0.0  # largest relative difference between the versions' estimates

    print(
        f"RobustGCC decode, K = N/10, q = floor(sqrt(N)) concentrated liars (bound {BOUND:g}), 10% random "
        f"stragglers, a new alive set a repeat, bound={args.bound}, one BLAS thread; {args.repeats} "
        "interleaved repeats, median ms [95% bootstrap], wall-clock and CPU time",
        flush=True,
    )
    with threadpool_limits(1):
        for repeat in range(args.repeats):
            draws = []
            for case in cases:
                n = case["n"]
                alive = cc.stragglers.random(n, n // 10, rng)
                attack = cc.adversaries.Concentrated(case["q"], BOUND)
                corrupted = attack.corrupt(
                    next(iter(case["codes"].values())), case["Y"][alive], alive, rng=repeat
                )
                for key, code in case["codes"].items():
                    draws.append((case, key, code, corrupted.results, alive))
            estimates = {}
            # A new order at every repeat: a decode after a large one finds the caches cold, so a
            # fixed (or rotated) order would charge that to the same decodes every time
            for index in rng.permutation(len(draws)):
                case, key, code, results, alive = draws[index]
                start = {clock: now() for clock, now in clocks.items()}
                estimate = code.decode(results, alive)
                for clock, now in clocks.items():
                    times[(clock, case["n"], case["width"], key)].append(now() - start[clock])
                estimates[(case["n"], case["width"], key)] = estimate
            for (n, width, (version, loss)), estimate in estimates.items():
                if version != "now":
                    now = estimates[(n, width, ("now", loss))]
                    scale = max(float(np.abs(estimate).max()), 1e-300)
                    worst = max(worst, float(np.abs(now - estimate).max()) / scale)
            print(f"  repeat {repeat + 1}/{args.repeats} done", file=sys.stderr, flush=True)

    for clock in clocks:
        report(
            {key[1:]: np.array(t) for key, t in times.items() if key[0] == clock}, clock, versions, args, rng
        )
    if len(versions) > 1:
        print(
            f"\nlargest relative difference of the estimates (now against {list(versions)[1]}): {worst:.1e}"
        )


def report(times: dict, clock: str, versions: dict, args, rng) -> None:
    """The tables of one clock: per version, median ms by loss, width and N with t(big) / t(small);
    then now against the baseline, paired."""
    small, big = min(args.sizes), max(args.sizes)
    what = (
        "wall-clock"
        if clock == "wall"
        else "CPU (this thread's, time.thread_time: waits for a core left out)"
    )
    for version in versions:
        print(f"\n{version}, {what} ms:")
        print(
            f"{'loss':>8} {'width':>5} | " + " | ".join(f"{'N = ' + str(n):>22}" for n in args.sizes) + " | "
            f"t({big}) / t({small})"
        )
        for loss in args.losses:
            for width in args.widths:
                cells = []
                for n in args.sizes:
                    samples = times[(n, width, (version, loss))] * 1e3
                    _, low, high = bootstrap(samples, np.median, rng)
                    cells.append(f"{np.median(samples):7.2f} [{low:6.2f}, {high:6.2f}]")
                a, b = times[(big, width, (version, loss))], times[(small, width, (version, loss))]
                ratio, low, high = ratio_interval(a, b, rng, statistic=np.median)
                print(
                    f"{loss:>8} {width:>5} | "
                    + " | ".join(cells)
                    + f" | {ratio:5.1f} [{low:.1f}, {high:.1f}]"
                )
    if len(versions) > 1:
        base = list(versions)[1]
        print(f"\nnow / {base}, {clock} (median time ratio, paired [95% bootstrap]):")
        for loss in args.losses:
            for width in args.widths:
                cells = []
                for n in args.sizes:
                    a, b = times[(n, width, ("now", loss))], times[(n, width, (base, loss))]
                    ratio, low, high = ratio_interval(a, b, rng, statistic=np.median)
                    cells.append(f"N = {n}: {ratio:.2f} [{low:.2f}, {high:.2f}]")
                print(f"{loss:>8} {width:>5} | " + "; ".join(cells))


if __name__ == "__main__":
    main()
