"""What a ``wait_for`` predicate costs a gather against the same count as an integer.

``cluster.gather(f, inputs, wait_for)`` stops after ``w`` usable results either way; with a
predicate (``lambda alive: alive.size >= w``) the collector hands it the arrived workers as a
new int array after every arrival (and a simulated cluster also while it plans which
workers to run). Both forms run on two :class:`~codedcomputing.SimulatedCluster` s with the
same seed, so call ``i`` of each sees the same delays; calls alternate between the two.
Reported: median master milliseconds per call and the paired ratio predicate / integer,
median with a 95% bootstrap interval.

Usage: python benchmarks/perf/bench_gather_predicate.py [--calls 60] [--sizes 200 2000]
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np

import codedcomputing as cc

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # benchmarks/: common.py
from common import bootstrap

RNG = np.random.default_rng(0)


def measure(num_workers: int, calls: int) -> tuple[float, float, tuple[float, float, float]]:
    wait = int(0.9 * num_workers)
    inputs = np.random.default_rng(1).normal(size=(num_workers, 2))
    delays = cc.delays.ShiftedExponential(scale=1.0, rate=1.0)
    counted = cc.SimulatedCluster(delays=delays, seed=0)
    predicated = cc.SimulatedCluster(delays=delays, seed=0)
    rule = lambda alive: alive.size >= wait  # noqa: E731
    seconds = np.zeros((calls, 2))
    for i in range(calls + 1):  # the first call of each warms up and is not counted
        start = time.perf_counter()
        a = counted.gather(np.tanh, inputs, wait)
        middle = time.perf_counter()
        b = predicated.gather(np.tanh, inputs, rule)
        end = time.perf_counter()
        assert np.array_equal(a.alive, b.alive)  # the same draws, the same workers
        if i:
            seconds[i - 1] = middle - start, end - middle
    ms = 1e3 * np.median(seconds, axis=0)
    return float(ms[0]), float(ms[1]), bootstrap(seconds[:, 1] / seconds[:, 0], np.median, RNG)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--calls", type=int, default=60)
    parser.add_argument("--sizes", type=int, nargs="*", default=[200, 2000])
    args = parser.parse_args(argv)
    print(f"{'N':>6} {'w':>6} {'integer ms':>11} {'predicate ms':>13}   ratio [95% CI]")
    for n in args.sizes:
        count_ms, rule_ms, (ratio, low, high) = measure(n, args.calls)
        interval = f"{ratio:.3f} [{low:.3f}, {high:.3f}]"
        print(f"{n:>6} {int(0.9 * n):>6} {count_ms:>11.2f} {rule_ms:>13.2f}   {interval}")


if __name__ == "__main__":
    main()
