"""ManifoldGCC's two decoders for a query whose own worker is missing, by redundancy: the mean
MSE over every query, and the agreement with the network on the decoded ones.

``degraded="input-space"`` (a Gaussian-process mean on the returned coded inputs and results)
against ``degraded="spline"`` (GCC's decoder), on the same batches (random MNIST test images
through LeNet-5 or the ViT) and the same random stragglers, at N = 1.5, 2, 3 and 5 K workers
and 10% and 30% of them missing. Prints the paired ratio of mean MSEs (input-space over spline)
with a 95% bootstrap interval over trials, and each decoder's degraded-mode agreement. This is
the measurement behind ``degraded="auto"`` switching to the spline above 3 K workers.

    OMP_NUM_THREADS=1 python benchmarks/studies/bench_degraded_mse.py [--model lenet5] [--trials 30]
"""

from __future__ import annotations

import argparse

import numpy as np

import codedcomputing as cc
from codedcomputing import datasets, models

DECODERS = ("spline", "input-space")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", choices=("lenet5", "vit"), default="lenet5")
    parser.add_argument("--trials", type=int, default=30)
    parser.add_argument("--seed", type=int, default=5)
    args = parser.parse_args()
    f = models.numpy_function(models.load(args.model, progress=False), progress=False)
    images = datasets.load("mnist").test_x
    rng = np.random.default_rng(args.seed)
    print(f"{args.model}, {args.trials} paired trials per row")
    for k in (10, 50):
        for level in (1.5, 2, 3, 5):
            n = round(level * k)
            for fraction in (0.1, 0.3):
                s = round(fraction * n)
                mse = {name: [] for name in DECODERS}
                agree = {name: [] for name in DECODERS}
                for _ in range(args.trials):
                    X = images[rng.choice(len(images), k, replace=False)]
                    FX = f(X)
                    alive = np.sort(rng.choice(n, n - s, replace=False))
                    for name in DECODERS:
                        bound = cc.ManifoldGCC(k, n, degraded=name).bind(X)
                        decoded = bound.decode_details(f(bound.encode(X))[alive], alive)
                        missing = ~np.asarray(decoded.info["exact"])
                        mse[name].append(np.mean(np.sum((decoded.estimates - FX) ** 2, axis=1)))
                        if missing.any():
                            same = decoded.estimates[missing].argmax(1) == FX[missing].argmax(1)
                            agree[name].append(np.mean(same))
                new, old = np.array(mse["input-space"]), np.array(mse["spline"])
                boot = np.random.default_rng(0).integers(0, args.trials, (500, args.trials))
                low, high = np.percentile(new[boot].mean(1) / old[boot].mean(1), [2.5, 97.5])
                print(
                    f"K = {k:3d}, N = {n:3d} ({level:g}x), S = {s:3d}: MSE input-space / spline "
                    f"{new.mean() / old.mean():.2f} [{low:.2f}, {high:.2f}]; degraded agreement "
                    f"spline {np.mean(agree['spline']):.3f}, input-space {np.mean(agree['input-space']):.3f}",
                    flush=True,
                )


if __name__ == "__main__":
    main()
