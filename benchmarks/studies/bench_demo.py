"""``coded demo``'s serving comparison over several seeds: how stable its table and verdict are.

For each of ``--seeds`` seeds, the demo's default configuration (6 LeNet-5 replica threads,
1000 Poisson MNIST queries at 50% utilisation, 20 ms service, 2% stragglers x10; every scheme on
the same arrivals, digits and service draws) via :func:`codedcomputing.experiments.demo.run`.
Prints per scheme the mean over seeds of p50, p99, p99.9, accuracy and the decoded share, with
95% bootstrap intervals for p99.9 and accuracy; then per coded scheme the paired ratio of its
p99.9 to the best exact baseline's (replication or hedging) in the same seed, its accuracy cost
against the exact model in points, and which scheme each seed's verdict named.

Usage: OMP_NUM_THREADS=1 python benchmarks/studies/bench_demo.py [--seeds 3] [--queries 1000]
"""

from __future__ import annotations

import argparse
import dataclasses
import sys
import time
from pathlib import Path

import numpy as np
import torch

from codedcomputing import datasets, models
from codedcomputing.experiments import demo
from codedcomputing.models import parity

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # benchmarks/: common.py
from common import bootstrap

RNG = np.random.default_rng(0)


def interval(values) -> str:
    """The mean of ``values`` and its 95% bootstrap interval, as text."""
    mean, low, high = bootstrap(values, np.mean, RNG)
    return f"{mean:7.2f} [{low:.2f}, {high:.2f}]"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, default=3)
    parser.add_argument("--queries", type=int, default=1000)
    parser.add_argument("--utilisation", type=float, default=0.5)
    args = parser.parse_args()
    torch.set_num_threads(1)
    config = dataclasses.replace(demo.DemoConfig(), queries=args.queries, utilisation=args.utilisation)
    f = models.numpy_function("lenet5", progress=False)
    parity_f = None
    if parity.is_cached("lenet5", 2):
        parity_f = parity.parity_function(parity.load_parity("lenet5", 2, progress=False))
    data = datasets.mnist()
    start = time.perf_counter()
    runs = [
        demo.run(config, f, data.test_x, data.test_y, seed, parity_f=parity_f) for seed in range(args.seeds)
    ]
    print(
        f"{config.replicas} thread replicas, {config.queries} queries x {args.seeds} seeds at "
        f"{config.utilisation:.0%} utilisation, service {config.unit_ms:g} ms, stragglers "
        f"p={config.straggler_p} x{config.slowdown:g}; ms, mean over seeds [95% bootstrap CI]"
    )
    header = ("scheme", "work", "p50", "p99", "p99.9", "accuracy %", "decoded")
    print(
        " ".join(
            f"{h:{w}s}" for h, w in zip(header, ("20", ">5", ">7", ">7", ">24", ">24", ">8"), strict=True)
        )
    )
    names = [row["scheme"] for row in runs[0]]
    for i, name in enumerate(names):
        rows = [run[i] for run in runs]
        print(
            f"{name:20s} {np.mean([1 + r['extra_load'] for r in rows]):5.2f} "
            f"{np.mean([r['p50_ms'] for r in rows]):7.1f} {np.mean([r['p99_ms'] for r in rows]):7.1f} "
            f"{interval([r['p99.9_ms'] for r in rows]):>24s} "
            f"{interval([100 * r['accuracy'] for r in rows]):>24s} "
            f"{np.mean([r['decoded'] for r in rows]):8.3f}"
        )
    print(f"exact model's accuracy on the queries: {np.mean([run[0]['exact_accuracy'] for run in runs]):.2%}")
    for i, name in enumerate(names):
        if runs[0][i]["kind"] not in ("coded", "parm"):
            continue
        ratio, cost = [], []
        for run in runs:
            best_exact = min(r["p99.9_ms"] for r in run if r["kind"] in ("replication", "hedge"))
            ratio.append(run[i]["p99.9_ms"] / best_exact)
            cost.append(100 * (run[i]["exact_accuracy"] - run[i]["accuracy"]))
        print(
            f"{name:20s} p99.9 / best of replication and hedging (paired): {interval(ratio)}; "
            f"accuracy cost, points: {interval(cost)}"
        )
    for seed, run in enumerate(runs):
        print(f"seed {seed} verdict: {demo.verdict(run)}")
    print(f"{time.perf_counter() - start:.0f} s")


if __name__ == "__main__":
    main()
