"""GCC's decoders against BACC as stragglers grow: the natural spline and the adaptive blend.

Each trial draws a batch (K = 10 MNIST test images for LeNet-5 and the ViT; Gaussian inputs
and a fresh random two-layer tanh MLP for ``mlp``) and an alive set, and every scheme codes
the same batch for the same alive set. Schemes: BACC; GCC with the natural cubic spline
decoder (``decoding="spline"``, lambda = 0); GCC with the adaptive decoder
(``decoding="adaptive"``: the piecewise-linear and the natural cubic interpolant blended by
leave-one-out, both held constant beyond the returned workers).

Prints, per model and S, BACC's mean MSE over each scheme's (> 1: the scheme beats BACC) with
a 95% paired bootstrap interval over trials, the share of trials the scheme beats BACC, and
the mean theta the adaptive decoder chose. Patterns: ``random`` (S workers chosen at random),
``contiguous`` (a block of S neighbouring workers).

Run: ``python benchmarks/studies/bench_decoders.py [--trials 200] [--models lenet5 vit mlp]
[--pattern random] [--workers 50] [--stragglers 0 5 10 ...]``.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np

import codedcomputing as cc

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # benchmarks/: common.py
from common import random_mlp, ratio_interval

STRAGGLERS = (0, 5, 10, 15, 20, 25, 30, 35)


def schemes(num_inputs: int, num_workers: int) -> dict[str, cc.Code]:
    return {
        "bacc": cc.BACC(num_inputs, num_workers),
        "gcc spline": cc.GCC(num_inputs, num_workers, decoding="spline"),
        "gcc adaptive": cc.GCC(num_inputs, num_workers, decoding="adaptive"),
    }


def run(model: str, num_inputs: int, num_workers: int, s: int, pattern: str, trials: int, seed: int):
    """``{scheme: (trials,) MSE}`` and the adaptive decoder's thetas, on paired draws."""
    K = num_inputs
    rng = np.random.default_rng([seed, s])
    codes = schemes(num_inputs, num_workers)
    data = cc.datasets.mnist() if model != "mlp" else None
    f = cc.models.numpy_function(model) if model != "mlp" else None
    errors = {name: np.empty(trials) for name in codes}
    thetas = np.empty(trials)
    draw = getattr(cc.stragglers, pattern)
    for trial in range(trials):
        if model == "mlp":
            g = random_mlp(rng)
            x = rng.normal(size=(K, 64))
        else:
            g = f
            x = data.test_x[rng.choice(len(data.test_x), size=K, replace=False)]
        truth = g(x)
        alive = draw(num_workers, s, rng)
        for name, code in codes.items():
            decoded = code.decode_details(g(code.encode(x))[alive], alive)
            errors[name][trial] = cc.metrics.mse(decoded.estimates, truth)
            if name == "gcc adaptive":
                thetas[trial] = decoded.info["theta"]
    return errors, thetas


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--trials", type=int, default=200)
    parser.add_argument("--models", nargs="+", default=["lenet5", "vit", "mlp"])
    parser.add_argument("--pattern", default="random", choices=["random", "contiguous"])
    parser.add_argument("--inputs", type=int, default=10)
    parser.add_argument("--workers", type=int, default=50)
    parser.add_argument("--stragglers", type=int, nargs="+", default=list(STRAGGLERS))
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    print(
        f"K={args.inputs}, N={args.workers}, {args.pattern} stragglers, {args.trials} paired trials per S\n"
        "ratio = mean MSE of BACC / mean MSE of the scheme [95% paired bootstrap]; win = trials the "
        "scheme beats BACC; theta = the adaptive decoder's mean blend weight (1: cubic, 0: linear)"
    )
    names = [name for name in schemes(args.inputs, args.workers) if name != "bacc"]
    for model in args.models:
        start = time.perf_counter()
        print(f"\n{model}")
        columns = "".join(f" | {name:>26} {'win':>4}" for name in names)
        print(f"{'S':>3} {'bacc MSE':>10}{columns} | theta")
        for s in args.stragglers:
            errors, thetas = run(model, args.inputs, args.workers, s, args.pattern, args.trials, args.seed)
            boot = np.random.default_rng(args.seed + 1)
            line = f"{s:>3} {errors['bacc'].mean():10.4g}"
            for name in names:
                ratio, low, high = ratio_interval(errors["bacc"], errors[name], boot, draws=4000)
                win = np.mean(errors[name] < errors["bacc"]) * 100
                exact = not np.isfinite(ratio) or ratio > 1e6  # the scheme's error is at rounding level
                shown = "exact" if exact else f"{ratio:.2f} [{low:.2f}, {high:.2f}]"
                line += f" | {shown:>26} {win:3.0f}%"
            print(line + f" | {thetas.mean():.2f}", flush=True)
        print(f"({time.perf_counter() - start:.0f} s)")


if __name__ == "__main__":
    main()
