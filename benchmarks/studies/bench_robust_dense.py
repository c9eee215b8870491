"""Why every decoder stays in the hundreds on LeNet-5 at q = N^0.75: what the liars cover.

``coded experiment adversarial``'s setting (K = 9 MNIST test images, LeNet-5, all N workers
return, q = ceil(N^0.75) liars at the bound M, M the largest honest logit magnitude of the trial).
For each attack and N, paired trials print the mean MSE of plain GCC, of the default RobustGCC
(Tukey), of the block medians (``loss="median"``) and of an oracle that knows the liars: plain
GCC on the honest results alone (the liars erased). If the oracle is in the hundreds too, no
decoder can do better from these results. Then, for the concentrated attack, the share of
[-1, 1] the liars' points span, which of the K inputs' points ``alpha_k`` lie inside that span
(no honest result near them: their outputs must be guessed from other images' neighbourhoods),
and the oracle's MSE on those inputs and on the others; and for the random attack, the share of
the blocks of 2q + 1 neighbouring results (the robust start's) in which the liars are a
majority (a block's median is then a liar's value).

    python benchmarks/studies/bench_robust_dense.py
    python benchmarks/studies/bench_robust_dense.py --sizes 200 2000 --trials 8
"""

from __future__ import annotations

import argparse
import math
import warnings

import numpy as np

import codedcomputing as cc

K = 9


def mean_ci(values, rng, draws=2000):
    values = np.asarray(values, dtype=float)
    boot = values[rng.integers(0, values.size, (draws, values.size))].mean(axis=1)
    return values.mean(), *np.quantile(boot, [0.025, 0.975])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", nargs="+", type=int, default=[200, 2000])
    parser.add_argument("--trials", type=int, default=8)
    parser.add_argument("--exponent", type=float, default=0.75)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    warnings.simplefilter("ignore", cc.errors.NonFiniteResultWarning)
    f = cc.models.numpy_function("lenet5", progress=False)
    pool = cc.datasets.mnist().test_x
    boot = np.random.default_rng([args.seed, 99])
    for n in args.sizes:
        q = math.ceil(n**args.exponent)
        rng = np.random.default_rng([args.seed, n])
        gcc = cc.GCC(K, n)
        alive = np.arange(n)
        errors: dict = {}
        inside_err, outside_err, majority = [], [], []
        energy = []
        for _ in range(args.trials):
            X = pool[rng.choice(len(pool), K, replace=False)]
            Y, truth = f(gcc.encode(X)), f(X)
            energy.append(float(np.mean(np.sum(truth**2, axis=1))))
            bound = float(np.abs(Y).max())
            for attack in ("random", "concentrated", "greedy", "sign-flip", "garbage"):
                corruption = cc.adversaries.make_attack(attack, q, bound).corrupt(gcc, Y, alive, rng)
                honest = np.setdiff1d(alive, corruption.workers)
                estimates = {
                    "gcc": gcc.decode(corruption.results, alive),
                    "default": cc.RobustGCC(K, n, q, bound).decode(corruption.results, alive),
                    "median": cc.RobustGCC(K, n, q, bound, loss="median").decode(corruption.results, alive),
                    "oracle": gcc.decode(Y[honest], honest),
                }
                for name, est in estimates.items():
                    errors.setdefault(attack, {}).setdefault(name, []).append(cc.metrics.mse(est, truth))
                if attack == "concentrated":
                    span = gcc.beta[corruption.workers]
                    inside = (gcc.alpha > span.min()) & (gcc.alpha < span.max())
                    sq = np.sum((estimates["oracle"] - truth) ** 2, axis=1)  # per input, as metrics.mse
                    inside_err.append(sq[inside].mean() if inside.any() else np.nan)
                    outside_err.append(sq[~inside].mean())
                    width = (span.max() - span.min()) / 2
                    covered = np.flatnonzero(inside)
                if attack == "random":
                    liar = np.zeros(n, dtype=bool)
                    liar[corruption.workers] = True
                    by_point = liar[np.argsort(gcc.beta)]
                    size = 2 * q + 1
                    blocks = [by_point[i : i + size] for i in range(0, n - size + 1, size)]
                    majority.append(np.mean([b.sum() > size // 2 for b in blocks]) if blocks else np.nan)
        print(
            f"N = {n}, q = {q} (q/N = {q / n:.2f}); mean ||f(x)||^2 {np.mean(energy):.1f}; "
            "mean MSE [95% bootstrap]:"
        )
        for attack, cells in errors.items():
            text = " | ".join(
                "{} {:.3g} [{:.3g}, {:.3g}]".format(name, *mean_ci(v, boot)) for name, v in cells.items()
            )
            print(f"  {attack:12s} {text}")
        print(
            f"  concentrated: the liars span {width:.2f} of [-1, 1]'s length; inputs inside: "
            f"{covered.size} of {K} (alpha = {np.round(gcc.alpha[covered], 3).tolist()}); the oracle's "
            f"MSE on them {np.nanmean(inside_err):.3g}, on the others {np.mean(outside_err):.3g}"
        )
        print(
            f"  random: blocks of 2q + 1 = {2 * q + 1} results, {n // (2 * q + 1)} of them; share with "
            f"a liar majority {np.nanmean(majority):.2f}"
        )


if __name__ == "__main__":
    main()
