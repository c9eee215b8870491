"""What ManifoldGCC's input-space decode (``degraded="input-space"``, the default) adds to a
decode call, against ``degraded="spline"``, paired: the same batch, the same alive set and
the same results for both, on a freshly bound code each call (as a runtime decodes each
batch once: the coded batch the kernel needs is computed within the first decode and is
counted), the two options timed in alternating order.

Setting: K MNIST test images (784 values), N workers, LeNet-5's outputs (10 values) as the
results, m = max(1, round(0.05 K)) systematic workers missing and every parity worker
returned. Figures: the median decode time of each option and the median of the paired
differences, with 95% bootstrap intervals over calls.

    python benchmarks/perf/bench_degraded_cost.py                 # K = 20 / N = 30 and 50 / 75
    python benchmarks/perf/bench_degraded_cost.py --calls 100
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np

import codedcomputing as cc

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # benchmarks/: common.py
from common import bootstrap


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[20, 30, 50, 75], help="K N pairs")
    parser.add_argument("--calls", type=int, default=60)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    if len(args.sizes) % 2:
        parser.error("--sizes takes K N pairs")
    f = cc.models.numpy_function("lenet5", progress=False)
    pool = cc.datasets.mnist().test_x
    header = f"{'K':>4} {'N':>4} {'spline ms':>10} {'input-space ms':>15} {'added ms':>9}"
    print(f"{header} {'95% CI (paired)':>17}")
    for K, N in zip(args.sizes[0::2], args.sizes[1::2], strict=True):
        rng = np.random.default_rng([args.seed, K, N])
        times = {"spline": [], "input-space": []}
        for call in range(args.calls):
            X = pool[rng.choice(len(pool), K, replace=False)]
            bound = {option: cc.ManifoldGCC(K, N, degraded=option).bind(X) for option in times}
            Y = f(np.asarray(bound["spline"].encode(X)))
            lost = rng.choice(K, max(1, round(0.05 * K)), replace=False)
            alive = np.setdiff1d(np.arange(N), bound["spline"].systematic_workers[lost])
            for option in times if call % 2 else reversed(list(times)):
                start = time.perf_counter()
                bound[option].decode(Y[alive], alive)
                times[option].append(1e3 * (time.perf_counter() - start))
        spline, kernel = np.asarray(times["spline"]), np.asarray(times["input-space"])
        added = kernel - spline
        _, lo, hi = bootstrap(added, np.median, np.random.default_rng([args.seed, K, N, 1]))
        print(
            f"{K:>4} {N:>4} {np.median(spline):>10.2f} {np.median(kernel):>15.2f} "
            f"{np.median(added):>+9.2f} [{lo:+.2f}, {hi:+.2f}]   ({args.calls} calls)"
        )


if __name__ == "__main__":
    main()
