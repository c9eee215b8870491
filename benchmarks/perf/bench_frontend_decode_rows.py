"""A serving decode's cost: BACC's whole decode against only the rows the frontend needs.

The coded scheme's live decode (``Coded._decode_live``) asks BACC to decode all K inputs of a
group from the results arrived so far, then keeps the few rows (the queries still waiting,
at most ``--missing``). Below ``FAST_DECODE_SIZE`` BACC builds a dense ``(K, alive)`` Berrut
matrix for each new alive set (cached, but serving rarely repeats a set). Built for the
needed rows only, ``berrut_matrix(beta[alive], alpha[rows])`` is ``(rows, alive)``. Per K
(N = 1.5 K, systematic, LeNet-5's 10 outputs): ``--calls`` random alive sets (K - 2 to N
results) and missing rows, each decoded both ways back to back (the order alternating);
the median us of each, the median paired ratio rows / whole with a 95% bootstrap interval,
and the largest difference between the two answers (the same interpolant, rounding only).

Usage: OMP_NUM_THREADS=1 python benchmarks/perf/bench_frontend_decode_rows.py [--calls 500]
"""

from __future__ import annotations

import argparse
import time

import numpy as np

import codedcomputing as cc
from codedcomputing.spline.berrut import berrut_matrix


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=500)
    parser.add_argument("--missing", type=int, default=3)
    args = parser.parse_args()
    rng = np.random.default_rng(0)
    print(
        f"{'K':>4s} {'N':>4s} {'whole us':>9s} {'rows us':>8s} {'rows / whole (median, 95% CI)':>32s} "
        f"{'max |diff|':>11s}"
    )
    for k in (10, 20, 50):
        n = k + k // 2
        code = cc.BACC(k, n, systematic=True)
        outputs = rng.normal(size=(n, 10))
        whole, rows, diff = [], [], 0.0
        for call in range(args.calls):
            alive = np.sort(rng.permutation(n)[: int(rng.integers(k - 2, n))])
            returned = set(alive.tolist())
            missing = np.array([i for i in range(k) if int(code.systematic_workers[i]) not in returned])
            missing = missing[: args.missing] if missing.size else np.array([0])
            times = {}
            for way in ("whole", "rows") if call % 2 == 0 else ("rows", "whole"):
                start = time.perf_counter()
                if way == "whole":
                    estimates, _ = code._decode(outputs[alive], alive)
                    a = np.asarray(estimates)[missing]
                else:
                    b = berrut_matrix(code.beta[alive], code.alpha[missing]) @ outputs[alive]
                times[way] = time.perf_counter() - start
            whole.append(times["whole"])
            rows.append(times["rows"])
            diff = max(diff, float(np.max(np.abs(a - b))))
        ratio = np.array(rows) / np.array(whole)
        boots = np.median(ratio[rng.integers(ratio.size, size=(2000, ratio.size))], axis=1)
        low, high = np.quantile(boots, [0.025, 0.975])
        print(
            f"{k:4d} {n:4d} {np.median(whole) * 1e6:9.1f} {np.median(rows) * 1e6:8.1f} "
            f"{f'{np.median(ratio):.2f} [{low:.2f}, {high:.2f}]':>32s} {diff:11.1e}"
        )


if __name__ == "__main__":
    main()
