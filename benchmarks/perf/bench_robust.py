"""The master's decode time with adversaries: RobustGCC (squared and Tukey losses, the
schedule's lambda) against plain GCC and the error-locating ApproxIFER, N = 200 to 8000,
q = ceil(sqrt(N)) concentrated liars, d = 10 outputs (LeNet-5's logits' width). Prints the
median of 5 decodes per scheme, interleaved, and the ratios to ApproxIFER's.

    python benchmarks/perf/bench_robust.py
    python benchmarks/perf/bench_robust.py --sizes 1000 8000 --no-approxifer
"""

from __future__ import annotations

import argparse
import math
import time

import numpy as np
from threadpoolctl import threadpool_limits

import codedcomputing as cc


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", nargs="+", type=int, default=[200, 1000, 8000])
    parser.add_argument("--no-approxifer", action="store_true")
    parser.add_argument("--repeats", type=int, default=30)
    args = parser.parse_args()
    K, d, M = 9, 10, 100.0
    rng = np.random.default_rng(0)
    print(f"K = {K}, d = {d}, q = ceil(sqrt(N)) concentrated liars; median decode ms of {args.repeats} "
          "after a first call [its ms]")
    for n in args.sizes:
        q = math.ceil(math.sqrt(n))
        gcc = cc.GCC(K, n)
        X = np.sort(rng.uniform(-3, 3, (K, d)), axis=0)
        Y = np.sin(gcc.encode(X))
        alive = np.arange(n)
        Y = cc.adversaries.Concentrated(q, M).corrupt(gcc, Y, alive, rng=0).results
        codes = {
            "gcc": gcc,
            "robust-gcc": cc.RobustGCC(K, n, q, M, loss="squared"),
            "robust-gcc-tukey": cc.RobustGCC(K, n, q, M, loss="tukey"),
        }
        if not args.no_approxifer and n <= 2000:
            codes["approxifer"] = cc.ApproxIFER(K, n, q)
        times = {name: [] for name in codes}
        first = {}
        with threadpool_limits(1):
            for name, code in codes.items():  # the first call builds what the code caches
                start = time.perf_counter()
                code.decode(Y, alive)
                first[name] = (time.perf_counter() - start) * 1e3
            for _ in range(args.repeats):
                for name, code in codes.items():
                    start = time.perf_counter()
                    code.decode(Y, alive)
                    times[name].append(time.perf_counter() - start)
        medians = {name: float(np.median(t)) * 1e3 for name, t in times.items()}
        base = medians.get("approxifer")
        cells = []
        for name, ms in medians.items():
            ratio = f" ({ms / base:.2f}x approxifer)" if base and name != "approxifer" else ""
            cells.append(f"{name} {ms:.2f} ms{ratio} [first {first[name]:.1f}]")
        print(f"N = {n:5d}, q = {q:3d}: " + "; ".join(cells), flush=True)


if __name__ == "__main__":
    main()
