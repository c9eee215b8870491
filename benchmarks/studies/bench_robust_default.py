"""The default RobustGCC against plain GCC under every attack, paired trials.

Goal (issue 24): the default-constructed ``RobustGCC(K, N, num_adversaries=q, bound=M)`` at
most 1/10 of plain GCC's MSE on every attack of ``cc.adversaries`` and on liars concentrated
at an end (the q highest-beta workers report M: ``Concentrated(q, M, at=1)``) and in the
middle (``Concentrated(q, M)``, the library's ``concentrated``), for q up to sqrt(N), on x sin
x, LeNet-5 and a random tanh MLP.

Setting: K = 9, every worker returns, q in {ceil(N^0.25), ceil(N^0.5)}. x sin x: sorted inputs
uniform on [-10, 10], M = 100 (the experiment's); LeNet-5: MNIST test images; MLP: a fresh
two-layer tanh network (64 -> 128 -> 10) and Gaussian inputs per trial. For LeNet-5 and the
MLP, M is the largest honest |y| of the trial: a true bound, with the liars at the edge of the
honest range (``coded experiment adversarial`` takes LeNet-5's M from a calibration batch,
which some trials' honest logits exceed: the clip then corrupts honest results). Each trial draws the
inputs (and network) once and each attack once, and every scheme decodes the same corrupted
results (paired). Schemes: plain ``gcc`` (its default decoder); ``default`` (RobustGCC as
constructed by default: the Tukey loss); ``squared`` (``loss="squared"``, the published
decoder, the schedule's lambda); ``tukey-before`` (the Tukey loss as it was before issue 24:
no trimming at the start, the last interpolating spline as the final fit).

Prints per (function, N, q, attack) the mean MSE of plain GCC and each scheme's mean MSE over
plain GCC's (the ratio of means) with a 95% paired bootstrap interval over trials; ``goal`` says
whether the default's ratio is at most 0.1 (and marks cells whose interval reaches above it,
and cells where the attack left plain GCC within 10x of its MSE on the honest results: the
goal is moot there). Then the count of cells meeting it.

    python benchmarks/studies/bench_robust_default.py
    python benchmarks/studies/bench_robust_default.py --trials 20 --sizes 200 1000 --functions xsinx mlp
"""

from __future__ import annotations

import argparse
import math
import sys
import warnings
from pathlib import Path

import numpy as np

import codedcomputing as cc

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # benchmarks/: common.py
from common import random_mlp, ratio_interval

K = 9
ATTACKS = ("random", "concentrated", "greedy", "sign-flip", "garbage", "end")


class TukeyBefore(cc.RobustGCC):
    """The Tukey loss before issue 24: no trimming at the start, the final fit the last
    interpolating spline through the kept results."""

    _trims = False
    _blends = False


def functions(names, seed):
    """``{name: draw(rng) -> (f, X, M or None)}``; None: M is set from the trial's results."""
    out = {}
    for name in names:
        if name == "xsinx":
            out[name] = lambda rng: (
                lambda x: x * np.sin(x),
                np.sort(rng.uniform(-10, 10, (K, 1)), axis=0),
                100.0,
            )
        elif name == "lenet5":
            f = cc.models.numpy_function("lenet5", progress=False)
            pool = cc.datasets.mnist().test_x
            out[name] = lambda rng, f=f, pool=pool: (f, pool[rng.choice(len(pool), K, replace=False)], None)
        elif name == "mlp":
            out[name] = lambda rng: (random_mlp(rng), rng.normal(size=(K, 64)), None)
        else:
            raise ValueError(f"unknown function {name!r}")
    return out


def attack_of(name: str, q: int, bound: float) -> cc.adversaries.Attack:
    if name == "end":
        return cc.adversaries.Concentrated(q, bound, at=1.0)
    return cc.adversaries.make_attack(name, q, bound)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--trials", type=int, default=12)
    parser.add_argument("--sizes", nargs="+", type=int, default=[200, 1000])
    parser.add_argument("--exponents", nargs="+", type=float, default=[0.25, 0.5])
    parser.add_argument("--functions", nargs="+", default=["xsinx", "lenet5", "mlp"])
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    warnings.simplefilter("ignore", cc.errors.NonFiniteResultWarning)  # garbage's NaN rows
    boot = np.random.default_rng([args.seed, 99])
    schemes = ("default", "squared", "tukey-before")
    print(
        f"K = {K}, {args.trials} paired trials; cells: mean MSE of plain GCC, then each scheme's mean "
        "MSE / plain GCC's [95% paired bootstrap interval]; goal: default <= 0.1"
    )
    met = certain = total = harmless = missed_harmful = 0
    for name, draw in functions(args.functions, args.seed).items():
        for n in args.sizes:
            for a in args.exponents:
                q = math.ceil(n**a)
                rng = np.random.default_rng([args.seed, n, q, len(name)])
                errors = {attack: {s: [] for s in ("gcc", *schemes)} for attack in ATTACKS}
                gcc = cc.GCC(K, n)
                alive = np.arange(n)
                honest = []
                for _ in range(args.trials):
                    f, X, bound = draw(rng)
                    Y = f(gcc.encode(X))
                    truth = f(X)
                    bound = float(np.abs(Y).max()) if bound is None else bound
                    honest.append(cc.metrics.mse(gcc.decode(Y, alive), truth))
                    codes = {
                        "gcc": gcc,
                        "default": cc.RobustGCC(K, n, num_adversaries=q, bound=bound),
                        "squared": cc.RobustGCC(K, n, num_adversaries=q, bound=bound, loss="squared"),
                        "tukey-before": TukeyBefore(K, n, num_adversaries=q, bound=bound),
                    }
                    for attack in ATTACKS:
                        corrupted = attack_of(attack, q, bound).corrupt(gcc, Y, alive, rng).results
                        for scheme, code in codes.items():
                            errors[attack][scheme].append(
                                cc.metrics.mse(code.decode(corrupted, alive), truth)
                            )
                for attack in ATTACKS:
                    base = np.asarray(errors[attack]["gcc"])
                    cells = []
                    for scheme in schemes:
                        ratio, low, high = ratio_interval(np.asarray(errors[attack][scheme]), base, boot)
                        cells.append(f"{scheme} {ratio:.3g} [{low:.3g}, {high:.3g}]")
                        if scheme == "default":
                            goal, sure = ratio <= 0.1, high <= 0.1
                    moot = base.mean() <= 10 * np.mean(honest)
                    met += goal
                    certain += sure
                    total += 1
                    harmless += moot
                    missed_harmful += not goal and not moot
                    print(
                        f"{name:6s} N = {n:4d} q = {q:3d} {attack:12s} gcc {base.mean():9.3g} | "
                        + " | ".join(cells)
                        + (" | goal met" if goal else " | goal MISSED")
                        + ("" if sure or not goal else " (interval above)")
                        + (" (plain GCC unharmed)" if moot else ""),
                        flush=True,
                    )
    print(
        f"default <= 0.1 x plain GCC: {met} of {total} cells (the interval's upper end too: {certain}); "
        f"{harmless} cells left plain GCC unharmed; missed where plain GCC was harmed: {missed_harmful}"
    )


if __name__ == "__main__":
    main()
