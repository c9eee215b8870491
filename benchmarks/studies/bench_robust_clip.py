"""RobustGCC without a bound: three rules for the clip of step 1, paired trials, every loss.

    python benchmarks/studies/bench_robust_clip.py [--trials 60]

Each rule clips each output coordinate to ``[lo - w, hi + w]`` from the ``(q+1)``-th smallest
and largest values: ``global`` (the rule before) of the results themselves; ``trend`` of
their residuals from a robust trend (block medians, or a repeated-median line on few
results); ``hull`` (the library's) to the hull of both ranges. Settings:

- ``honest, one-sided``: no liar; the returned workers are the 3q + 2 with the lowest points
  plus the top one (a rack near one end answered, one far worker too): the global range of
  the majority cuts the far honest result;
- ``sign-flip`` and ``garbage``: ``q = ceil(sqrt(N))`` liars among 90% of the workers (random),
  the unbounded attacks a bound-less decoder meets.

``f`` is a random tanh layer (3 -> 16 -> 4) on K = 9 normal inputs. Prints, per setting and
loss, the median MSE of each rule and the median of the paired ratios to ``global`` with
95% bootstrap intervals (below 1: better than the rule before).
"""

from __future__ import annotations

import argparse
import math

import numpy as np

import codedcomputing as cc
from codedcomputing.codes import robust


class GlobalClip(cc.RobustGCC):
    """RobustGCC with the former bound-less clip: around the results' own range."""

    def _clip_to_trend(self, knots, flat):
        n, q = flat.shape[0], self.num_adversaries
        if q == 0 or n <= 2 * q:
            return flat
        ordered = np.sort(flat, axis=0)
        low, high = ordered[q], ordered[n - 1 - q]
        width = high - low
        return np.clip(flat, low - width, high + width)


class TrendClip(cc.RobustGCC):
    """RobustGCC clipping only the residuals from the robust trend."""

    def _clip_to_trend(self, knots, flat):
        n, q = flat.shape[0], self.num_adversaries
        if q == 0 or n < 2 * q + 2:
            return flat
        if n >= 2 * (2 * q + 1):
            trend = robust.block_medians(knots, flat, 2 * q + 1)
        else:
            trend = robust.repeated_median_line(knots, flat)
        residual = flat - trend
        ordered = np.sort(residual, axis=0)
        low, high = ordered[q], ordered[n - 1 - q]
        width = high - low
        return trend + np.clip(residual, low - width, high + width)


def _interval(ratios: np.ndarray, rng: np.random.Generator) -> tuple[float, float]:
    draws = rng.choice(ratios, (2000, ratios.size))
    medians = np.median(draws, axis=1)
    return float(np.quantile(medians, 0.025)), float(np.quantile(medians, 0.975))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--trials", type=int, default=60)
    parser.add_argument("--sizes", nargs="+", type=int, default=[50, 200])
    args = parser.parse_args()
    K = 9
    weights = np.random.default_rng(5)
    W1, W2 = weights.normal(size=(3, 16)), weights.normal(size=(16, 4)) / 4

    def f(x):
        return np.tanh(x @ W1) @ W2

    boot = np.random.default_rng(1)
    rules = {"global": GlobalClip, "trend": TrendClip, "hull": cc.RobustGCC}
    print(f"K = {K}, tanh layer 3 -> 16 -> 4, {args.trials} paired trials; MSE medians; ratios to global")
    print(
        f"{'N':>5} {'setting':<18} {'loss':<8} {'global':>9} {'trend':>9} {'hull':>9} "
        f"{'trend/global [95% CI]':>26} {'hull/global [95% CI]':>26}"
    )
    for n in args.sizes:
        q = math.ceil(math.sqrt(n))
        for setting in ("honest, one-sided", "sign-flip", "garbage"):
            for loss in ("squared", "huber", "tukey", "median"):
                codes = {name: rule(K, n, q, None, loss=loss) for name, rule in rules.items()}
                errors = {name: [] for name in codes}
                for trial in range(args.trials):
                    rng = np.random.default_rng([n, trial])
                    X = rng.normal(size=(K, 3))
                    truth = f(X)
                    plain = codes["hull"]
                    if setting == "honest, one-sided":
                        alive = np.r_[np.arange(3 * q + 2), n - 1]
                        Y = f(plain.encode(X))[alive]
                    else:
                        alive = np.sort(rng.choice(n, n - n // 10, replace=False))
                        attack = cc.adversaries.make_attack(setting, q)
                        Y = attack.corrupt(plain, f(plain.encode(X))[alive], alive, rng).results
                    for name, code in codes.items():
                        with np.errstate(all="ignore"):
                            errors[name].append(float(np.mean((code.decode(Y, alive) - truth) ** 2)))
                mse = {name: np.array(values) for name, values in errors.items()}
                cells = []
                for name in ("trend", "hull"):
                    ratios = (mse[name] + 1e-300) / (mse["global"] + 1e-300)
                    low, high = _interval(ratios, boot)
                    cells.append(f"{np.median(ratios):>7.3g} [{low:.3g}, {high:.3g}]")
                print(
                    f"{n:>5} {setting:<18} {loss:<8} {np.median(mse['global']):>9.3g} "
                    f"{np.median(mse['trend']):>9.3g} {np.median(mse['hull']):>9.3g} "
                    f"{cells[0]:>26} {cells[1]:>26}",
                    flush=True,
                )


if __name__ == "__main__":
    import warnings

    warnings.simplefilter("ignore", cc.NonFiniteResultWarning)
    main()
