"""RobustGCC against plain GCC when some workers lie.

K = 9 inputs of f(z) = z sin z, N = 200 workers on a thread cluster, q = 10 of them
adversarial: ``cc.faults.Adversarial`` hands each call's results to the concentrated attack
(the q workers nearest the middle of the points report +M, M = 100, a bound on every result)
before the master decodes. Plain GCC's decoder follows the liars; ``cc.RobustGCC``
clips the results to [-M, M] and fits with Tukey's loss from a block-median start, without
searching for the liars.
The claim checked: RobustGCC's mean MSE is below a tenth of plain GCC's.

    .venv/bin/python examples/robust_decode_adversaries.py [--quick]
"""

from __future__ import annotations

import argparse
import sys

import numpy as np

import codedcomputing as cc

K, N, Q, BOUND = 9, 200, 10, 100.0


def f(z):
    return z * np.sin(z)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="5 calls per code instead of 20")
    args = parser.parse_args()
    calls = 5 if args.quick else 20
    attack = cc.adversaries.Concentrated(Q, bound=BOUND)
    codes = {
        "gcc": cc.GCC(K, N),
        "robust-gcc (tukey)": cc.RobustGCC(K, N, num_adversaries=Q, bound=BOUND, loss="tukey"),
    }
    rng = np.random.default_rng(0)
    batches = [np.sort(rng.uniform(-10, 10, (K, 1)), axis=0) for _ in range(calls)]
    errors = {}
    with cc.ThreadCluster(num_threads=4, faults=cc.faults.Adversarial(attack), seed=0) as cluster:
        for name, code in codes.items():
            executor = cc.CodedExecutor(code, f, cluster)
            errors[name] = []
            for X in batches:
                result = executor.run(X)  # every worker returns; the attack corrupts Q of them
                liars = [n for n, fault in result.report.faults.items() if fault.startswith("adversary")]
                assert len(liars) == Q, result.report.faults
                errors[name].append(cc.metrics.mse(result.estimates, f(X)))
    print(f"K={K}, N={N}, {Q} workers in the concentrated attack (+{BOUND:g}), {calls} calls")
    print(f"{'decoder':>20} {'mean MSE':>10} {'worst MSE':>10}")
    for name, values in errors.items():
        print(f"{name:>20} {np.mean(values):>10.3g} {np.max(values):>10.3g}")
    plain, robust = np.mean(errors["gcc"]), np.mean(errors["robust-gcc (tukey)"])
    if not robust < plain / 10:
        sys.exit(f"RobustGCC's MSE {robust:.3g} is not below a tenth of plain GCC's {plain:.3g}")
    print(f"ok: RobustGCC's MSE is {robust / plain:.2g}x plain GCC's")


if __name__ == "__main__":
    main()
