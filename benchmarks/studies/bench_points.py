"""Where GCC stops beating BACC as stragglers grow, and how the choice of points moves it.

For LeNet-5 and the ViT on MNIST test images (K = 10, N = 50, random stragglers), each trial
draws a batch and an alive set, and every scheme codes the same batch for the same alive set.
Schemes: BACC (Chebyshev points) and natural-spline GCC (lambda = 0) with four point designs,
``alpha/beta``:

- ``c1/c2``: Chebyshev first kind / second kind, the library's default;
- ``c1/c1``: Chebyshev first kind for both. For N / K odd every alpha_k is a worker point, so
  the code is systematic: with no stragglers GCC returns f(x_k) exactly;
- ``c2/c2``: second kind for both (the end points are data points: no extrapolated inputs);
- ``eq/eq``: equispaced for both.

Prints, per model and S, the mean MSE of each scheme and BACC's mean MSE over it (> 1: GCC
better) with a 95% paired bootstrap interval, and the share of trials where GCC beats BACC
("exact": GCC's error is at rounding level, over a million times below BACC's).
Run: ``python benchmarks/studies/bench_points.py [--trials 200] [--models vit]``.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np

import codedcomputing as cc
from codedcomputing.points import chebyshev_first, chebyshev_second, equispaced

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # benchmarks/: common.py
from common import ratio_interval

K, N = 10, 50
STRAGGLERS = (0, 5, 10, 15, 20, 25, 30, 35)
DESIGNS = {
    "c1/c2": (chebyshev_first, chebyshev_second),
    "c1/c1": (chebyshev_first, chebyshev_first),
    "c2/c2": (chebyshev_second, chebyshev_second),
    "eq/eq": (equispaced, equispaced),
}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--trials", type=int, default=200)
    parser.add_argument("--models", nargs="+", default=["lenet5", "vit"], choices=sorted(cc.models.MODELS))
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    data = cc.datasets.mnist()
    codes = {"bacc": cc.BACC(K, N)}
    for name, (alpha, beta) in DESIGNS.items():
        codes[f"gcc {name}"] = cc.GCC(K, N, decoding="spline", alpha=alpha(K), beta=beta(N))
    print(f"K={K}, N={N}, random stragglers, {args.trials} trials per S; natural-spline GCC")
    print("ratio = mean MSE of BACC / mean MSE of GCC [95% paired bootstrap]; win = trials GCC < BACC")
    for model in args.models:
        f = cc.models.numpy_function(model)
        print(f"\n{model}")
        header = f"{'S':>3} {'bacc MSE':>9}" + "".join(f" | {'gcc ' + d:>27} {'win':>4}" for d in DESIGNS)
        print(header)
        for s in STRAGGLERS:
            rng = np.random.default_rng(args.seed)
            per_input = {name: np.empty((args.trials, K)) for name in codes}  # squared error per x_k
            for trial in range(args.trials):
                x = data.test_x[rng.choice(len(data.test_x), size=K, replace=False)]
                truth = f(x)
                alive = cc.stragglers.random(N, s, rng)
                for name, code in codes.items():
                    estimate = code.decode(f(code.encode(x))[alive], alive)
                    per_input[name][trial] = ((estimate - truth) ** 2).reshape(K, -1).sum(axis=1)
            errors = {name: e.mean(axis=1) for name, e in per_input.items()}  # = cc.metrics.mse
            boot = np.random.default_rng(args.seed + 1)
            line = f"{s:>3} {errors['bacc'].mean():9.3f}"
            for design in DESIGNS:
                gcc = errors[f"gcc {design}"]
                ratio, low, high = ratio_interval(errors["bacc"], gcc, boot)
                win = np.mean(gcc < errors["bacc"]) * 100
                exact = not np.isfinite(ratio) or ratio > 1e6  # GCC's error at rounding level
                shown = "exact" if exact else f"{ratio:.2f} [{low:.2f}, {high:.2f}]"
                line += f" | {shown:>27} {win:3.0f}%"
            print(line)
        # Where the errors sit, at the largest S: the mean error of each input, alpha_1 .. alpha_K.
        for name in ("bacc", "gcc c1/c2"):
            print(f"    S={s}, per input ({name}):", np.round(per_input[name].mean(axis=0), 1))


if __name__ == "__main__":
    main()
