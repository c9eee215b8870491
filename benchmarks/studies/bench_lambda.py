"""How GCC's MSE depends on (lambda_enc, lambda_dec), against BACC: the evidence behind GCC's
default lambdas.

Functions are random two-layer tanh MLPs (in 64 -> hidden 128 -> out 10) and inputs are
Gaussian; stragglers are random or a contiguous block. For each setting the script prints
the median MSE over trials of every lambda pair on the grid, relative to lambda = (0, 0),
and BACC's. Run: ``python benchmarks/studies/bench_lambda.py [--trials 40]``.
"""

from __future__ import annotations

import argparse
import itertools
import sys
from pathlib import Path

import numpy as np

import codedcomputing as cc

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # benchmarks/: common.py
from common import random_mlp

GRID = (0.0, 1e-12, 1e-10, 1e-8, 1e-6, 1e-4)
SETTINGS = [  # (num_inputs, num_workers, num_stragglers, pattern)
    (10, 50, 0, "random"),
    (10, 50, 5, "random"),
    (10, 50, 15, "random"),
    (10, 50, 5, "contiguous"),
    (20, 100, 10, "random"),
    (20, 100, 30, "random"),
    (20, 100, 10, "contiguous"),
]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--trials", type=int, default=40)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    rng = np.random.default_rng(args.seed)
    pairs = list(itertools.product(GRID, GRID))
    print(f"median MSE over {args.trials} trials (fresh f, X and stragglers per trial)")
    for num_inputs, num_workers, num_stragglers, pattern in SETTINGS:
        codes = {pair: cc.GCC(num_inputs, num_workers, *pair, decoding="spline") for pair in pairs}
        bacc = cc.BACC(num_inputs, num_workers)
        draw = getattr(cc.stragglers, pattern)
        errors = {pair: [] for pair in pairs}
        errors["bacc"] = []
        for _ in range(args.trials):
            f = random_mlp(rng)
            X = rng.normal(size=(num_inputs, 64))
            truth = f(X)
            alive = draw(num_workers, num_stragglers, rng)
            for key, code in [*codes.items(), ("bacc", bacc)]:
                est = code.decode(f(code.encode(X)[alive]), alive)
                errors[key].append(cc.metrics.mse(est, truth))
        median = {key: float(np.median(v)) for key, v in errors.items()}
        base = median[(0.0, 0.0)]
        best = min(pairs, key=lambda p: median[p])
        print(
            f"\nK={num_inputs} N={num_workers} S={num_stragglers} {pattern}: "
            f"GCC(0,0) {base:.4g}, BACC {median['bacc']:.4g} (BACC/GCC {median['bacc'] / base:.2f}x), "
            f"best {best} {median[best]:.4g} ({median[best] / base:.3f} of (0,0))"
        )
        header = "lambda_enc \\ lambda_dec " + " ".join(f"{lam:>8.0e}" for lam in GRID)
        print(header)
        for lam_enc in GRID:
            row = " ".join(f"{median[(lam_enc, lam_dec)] / base:8.3f}" for lam_dec in GRID)
            print(f"{lam_enc:>24.0e} {row}")


if __name__ == "__main__":
    main()
