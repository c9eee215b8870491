"""The simulated-clock server: how fast it runs, and the schemes' latencies at equal resources.

1. Speed: wall seconds of one timing-only run of ``--queries`` Poisson queries on R replicas
   at ``--load`` for each scheme (median of ``--repeats`` runs), and queries per second.
2. Latency: for each of ``--seeds`` seeds, fresh Poisson arrivals and service draws shared by
   every scheme (paired), rare heavy stragglers (service ``Bimodal(base=1, p, slowdown=10)``);
   per scheme p50, p99, p99.9, the share of exact answers, the utilisation and the extra
   load, each a mean over seeds with a 95% bootstrap interval, and the paired ratio of each
   scheme's p99.9 to no redundancy's.

Usage: OMP_NUM_THREADS=1 python benchmarks/perf/bench_serving_sim.py [--queries 100000] [--seeds 5]
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np

import codedcomputing as cc
from codedcomputing import serving

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # benchmarks/: common.py
from common import bootstrap

RNG = np.random.default_rng(0)


def schemes(replicas: int, group: int, tau: float, hedge: float, wait: float):
    return {
        "none": serving.NoRedundancy(),
        "replication x2": serving.Replication(2),
        f"hedge after {hedge:g}": serving.Hedge(hedge),
        f"coded BACC {group}/{replicas}": serving.Coded(
            cc.BACC(group, replicas, systematic=True), tau=tau, max_group_wait=wait
        ),
        "parm k=2": serving.ParM(2, max_group_wait=wait),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--queries", type=int, default=100_000)
    parser.add_argument("--replicas", type=int, default=15)
    parser.add_argument("--group", type=int, default=10, help="K of the coded scheme (N = replicas)")
    parser.add_argument("--load", type=float, default=0.5)
    parser.add_argument("--p", type=float, default=0.01, help="probability a task is a straggler (x10)")
    parser.add_argument("--tau", type=float, default=1.5)
    parser.add_argument("--hedge", type=float, default=1.5)
    parser.add_argument("--group-wait", type=float, default=5.0, help="max_group_wait of coded and parm")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--seeds", type=int, default=5)
    args = parser.parse_args()
    service = cc.runtime.delays.Bimodal(base=1.0, p=args.p, slowdown=10.0)
    print(
        f"R = {args.replicas} replicas, offered load {args.load}, service {service!r} "
        f"(mean {serving.mean_service(service):.3f}), {args.queries:,} queries per run"
    )

    print("\n1. simulator speed (timing only, one core), median of", args.repeats, "runs")
    arrivals = serving.poisson_arrivals(args.queries, args.load, args.replicas, service, rng=0)
    server = serving.SimulatedServer(args.replicas, service, seed=0)
    for name, scheme in schemes(args.replicas, args.group, args.tau, args.hedge, args.group_wait).items():
        seconds = []
        for _ in range(args.repeats):
            start = time.perf_counter()
            record = server.run(scheme, arrivals)
            seconds.append(time.perf_counter() - start)
        tasks = record.tasks["replica"].size
        median = float(np.median(seconds))
        print(f"{name:>22}: {median:6.2f} s  {args.queries / median:9,.0f} queries/s  {tasks:,} tasks")

    print(f"\n2. latency over {args.seeds} seeds (mean [95% bootstrap CI]; ratio = paired p99.9 / none's)")
    rows: dict[str, dict[str, list[float]]] = {}
    for seed in range(args.seeds):
        arrivals = serving.poisson_arrivals(args.queries, args.load, args.replicas, service, rng=1000 + seed)
        server = serving.SimulatedServer(args.replicas, service, seed=seed)
        for name, scheme in schemes(args.replicas, args.group, args.tau, args.hedge, args.group_wait).items():
            summary = server.run(scheme, arrivals).summary()
            row = rows.setdefault(name, {})
            for key in ("p50", "p99", "p99.9", "exact_fraction", "utilisation", "extra_load"):
                row.setdefault(key, []).append(summary[key])
    baseline = np.array(rows["none"]["p99.9"])
    columns = "".join(f"{name:>21}" for name in ("p50", "p99", "p99.9", "p99.9 / none"))
    print(f"{'scheme':>22}{columns} {'exact':>6} {'util':>5} {'extra':>5}")
    for name, row in rows.items():
        cells = [bootstrap(row[key], np.mean, RNG) for key in ("p50", "p99", "p99.9")]
        cells.append(bootstrap(np.array(row["p99.9"]) / baseline, np.mean, RNG))
        text = " ".join(f"{m:7.3f} [{lo:5.2f},{hi:5.2f}]" for m, lo, hi in cells)
        print(
            f"{name:>22} {text} {np.mean(row['exact_fraction']):6.3f} {np.mean(row['utilisation']):5.2f} "
            f"{np.mean(row['extra_load']):5.2f}"
        )


if __name__ == "__main__":
    main()
