"""Systematic GCC and BACC: where the parity workers go (``parity="between"``, ``"ends"``,
``"nearest"``), against each other, against non-systematic GCC at the same N and against
ManifoldGCC (systematic by default), on the same draws.

Task: LeNet-5 on MNIST test images, K = 10 and 50 queries per batch, N = 1.5 K workers
(systematic codes: workers 0..K-1 compute the raw queries, K..N-1 the parities). Two
straggler regimes, the same for every scheme in a trial:

- ``missing``: a random 5% of the queries (at least one) lose their systematic worker;
  every parity returns. For non-systematic GCC the same number of random workers is lost;
- ``random``: every worker straggles independently with probability 0.1 (the same worker
  numbers for every scheme; ManifoldGCC's systematic workers are its batch's own).

Measures, per scheme: the MSE of the logits over all K queries (a returned systematic
query's error is 0); the *overall* relative accuracy, the argmax agreement of the estimates
with ``f(x_k)`` over all K queries; and the *degraded-mode* relative accuracy, the same on
the decoded queries only (``info["exact"]`` False; for non-systematic GCC every query is
decoded), pooled over trials. Intervals: 95% paired bootstrap over trials (the same
resampled trials for every scheme); ``diff`` is the scheme's value minus
``gcc-between``'s on the same resamples.

    python benchmarks/studies/bench_systematic.py            # 1000 trials at K = 10, 300 at K = 50
    python benchmarks/studies/bench_systematic.py --quick    # 60 and 20
    python benchmarks/studies/bench_systematic.py --trials 400 --sizes 10
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np

import codedcomputing as cc
from codedcomputing import datasets, models

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # benchmarks/: common.py
from common import say

REFERENCE = "gcc-between"
REGIMES = ("missing", "random")
MISSING_SHARE = 0.05
STRAGGLE = 0.1


def schemes(k: int, n: int) -> dict[str, cc.Code]:
    codes = {f"gcc-{p}": cc.GCC(k, n, systematic=True, parity=p) for p in cc.codes.base.PARITIES}
    codes["bacc-between"] = cc.BACC(k, n, systematic=True)
    codes["gcc"] = cc.GCC(k, n)  # non-systematic, the library's default
    codes["manifold-gcc"] = cc.ManifoldGCC(k, n)  # systematic on its snapped workers
    return codes


def lost_workers(regime: str, code: cc.Code, rng_state: dict) -> np.ndarray:
    """The workers of ``code`` that do not return in this trial (drawn once per trial in
    ``rng_state``, so every scheme loses the same queries or worker numbers)."""
    if regime == "random":
        return np.flatnonzero(rng_state["straggles"])
    systematic = code.systematic_workers
    if (systematic < 0).all():  # non-systematic: as many random workers
        return rng_state["workers"][: rng_state["queries"].size]
    return systematic[rng_state["queries"]]


def run(k: int, trials: int, f, images: np.ndarray, seed: int) -> dict:
    n = round(1.5 * k)
    codes = schemes(k, n)
    rng = np.random.default_rng([seed, k])
    missing = max(1, round(MISSING_SHARE * k))
    # per (regime, scheme): per-trial MSE, decoded count, agreeing decoded, agreeing overall
    out = {(r, s): ([], [], [], []) for r in REGIMES for s in codes}
    seconds = dict.fromkeys(codes, 0.0)
    for _ in range(trials):
        X = images[rng.choice(len(images), size=k, replace=False)]
        truth = f(X)
        label = truth.argmax(axis=1)
        state = {
            "queries": rng.choice(k, size=missing, replace=False),
            "workers": rng.permutation(n),
            "straggles": rng.random(n) < STRAGGLE,
        }
        for name, code in codes.items():
            start = time.perf_counter()
            bound = code.bind(X)
            Y = f(bound.encode(X))
            for regime in REGIMES:
                alive = np.setdiff1d(np.arange(n), lost_workers(regime, bound, state))
                if alive.size < 2:  # nothing to decode from (never at these sizes)
                    alive = np.arange(n)
                details = bound.decode_details(Y[alive], alive)
                decoded = ~details.info["exact"]
                mse, count, agree, overall = out[regime, name]
                agrees = details.estimates.argmax(axis=1) == label
                mse.append(float(np.mean((details.estimates - truth) ** 2)))
                count.append(int(decoded.sum()))
                agree.append(int(agrees[decoded].sum()))
                overall.append(int(agrees.sum()))
            seconds[name] += time.perf_counter() - start
    return {key: tuple(np.array(v) for v in value) for key, value in out.items()}, seconds, n


def interval(values: np.ndarray) -> str:
    lo, hi = np.quantile(values, [0.025, 0.975])
    return f"[{lo:.3g}, {hi:.3g}]"


def report(k: int, n: int, trials: int, results: dict, seconds: dict, seed: int) -> None:
    names = list(seconds)
    index = np.random.default_rng([seed, k, 1]).integers(0, trials, size=(2000, trials))
    for regime in REGIMES:
        say(f"\nLeNet-5/MNIST, K = {k}, N = {n}, regime {regime!r}, {trials} paired trials")
        say(
            f"{'scheme':>14} {'MSE':>7} {'95% CI':>16} {'diff vs ' + REFERENCE:>20} "
            f"{'overall':>7} {'95% CI':>16} {'diff':>18} "
            f"{'degraded':>8} {'95% CI':>16} {'diff':>18} {'decoded':>7}"
        )
        ref_mse, ref_count, ref_agree, ref_overall = results[regime, REFERENCE]
        ref_mse_boot = ref_mse[index].mean(axis=1)
        ref_all_boot = ref_overall[index].mean(axis=1) / k
        ref_acc_boot = ref_agree[index].sum(axis=1) / np.maximum(ref_count[index].sum(axis=1), 1)
        for name in names:
            mse, count, agree, overall = results[regime, name]
            mse_boot = mse[index].mean(axis=1)
            all_boot = overall[index].mean(axis=1) / k
            acc = agree.sum() / max(count.sum(), 1)
            acc_boot = agree[index].sum(axis=1) / np.maximum(count[index].sum(axis=1), 1)
            say(
                f"{name:>14} {mse.mean():7.3g} {interval(mse_boot):>16} "
                f"{interval(mse_boot - ref_mse_boot):>20} {overall.mean() / k:7.4f} "
                f"{interval(all_boot):>16} {interval(all_boot - ref_all_boot):>18} "
                f"{acc:8.3f} {interval(acc_boot):>16} {interval(acc_boot - ref_acc_boot):>18} "
                f"{count.sum():7d}"
            )
    say(
        "seconds per trial (bind + encode + f + two decodes): "
        + ", ".join(f"{name} {seconds[name] / trials * 1e3:.1f} ms" for name in names)
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="60 trials at K = 10, 20 at K = 50")
    parser.add_argument("--trials", type=int, nargs="*", help="trials per size (one, or one per size)")
    parser.add_argument("--sizes", type=int, nargs="*", default=[10, 50])
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    default = {10: 60, 50: 20} if args.quick else {10: 1000, 50: 300}
    if args.trials:
        trials = args.trials * len(args.sizes) if len(args.trials) == 1 else args.trials
    else:
        trials = [default.get(k, 40 if args.quick else 100) for k in args.sizes]
    f = models.numpy_function("lenet5", progress=False)
    images = datasets.mnist().test_x
    for k, count in zip(args.sizes, trials, strict=True):
        start = time.perf_counter()
        results, seconds, n = run(k, count, f, images, args.seed)
        report(k, n, count, results, seconds, args.seed)
        say(f"(K = {k}: {time.perf_counter() - start:.0f} s)")


if __name__ == "__main__":
    main()
