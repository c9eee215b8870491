"""Soak: a thread server answers a long stream of queries in bounded memory.

For each scheme (``none``, and ``coded``: BACC 4 + 2 with the straggling rule), one
ThreadServer (4 replicas, a small numpy model, no per-query record) answers ``--queries``
queries submitted in windows of 256 (each window waited for before the next). The process's
resident memory (RSS, from /proc) is read after ``--warmup`` queries and at the end; the
script prints both, their difference, the queries and tasks still held at the end
(``ThreadServer.stats()["in_flight"]``), and the queries per second. The goal (issue 33):
growth under 30 MB over 1M queries after warm-up.

Usage: OMP_NUM_THREADS=1 python benchmarks/perf/soak_serving.py [--queries 1000000] [--warmup 50000]
"""

from __future__ import annotations

import argparse
import time

import numpy as np

import codedcomputing as cc
from codedcomputing import serving


def rss_mb() -> float:
    with open("/proc/self/statm") as handle:
        return int(handle.read().split()[1]) * 4096 / 2**20


def soak(name: str, queries: int, warmup: int, progress_every: int) -> dict:
    weights = np.random.default_rng(0).normal(size=(8, 4))

    def f(x):
        return np.tanh(x @ weights)

    if name == "none":
        scheme = serving.NoRedundancy()
    else:
        scheme = serving.Coded(cc.BACC(4, 6, systematic=True), tau=50.0, max_group_wait=5.0)
    inputs = np.random.default_rng(1).normal(size=(256, 8))
    before = None
    start = time.perf_counter()
    with serving.ThreadServer(f, 4, scheme, time_unit=0.001) as server:
        window = []
        for q in range(queries):
            window.append(server.submit(inputs[q % 256]))
            if len(window) == 256:
                for future in window:
                    future.result(timeout=120)
                window.clear()
            if q + 1 == warmup:
                before = rss_mb()
            if (q + 1) % progress_every == 0:
                print(f"  {name}: {q + 1:,} queries, RSS {rss_mb():.1f} MB", flush=True)
        for future in window:
            future.result(timeout=120)
        seconds = time.perf_counter() - start
        deadline = time.monotonic() + 30  # the last parities may still run
        while server.stats()["in_flight"]["tasks"] and time.monotonic() < deadline:
            time.sleep(0.05)
        held = server.stats()["in_flight"]
        counts = server.stats()["queries"]
    return {"before": before, "after": rss_mb(), "held": held, "qps": queries / seconds, "counts": counts}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--queries", type=int, default=1_000_000)
    parser.add_argument("--warmup", type=int, default=50_000)
    args = parser.parse_args()
    if not 0 < args.warmup < args.queries:
        parser.error("--warmup must be between 0 and --queries")
    for name in ("none", "coded"):
        print(f"{name}: {args.queries:,} queries", flush=True)
        out = soak(name, args.queries, args.warmup, max(args.queries // 10, 1))
        growth = out["after"] - out["before"]
        print(
            f"{name}: RSS {out['before']:.1f} MB after {args.warmup:,} queries, {out['after']:.1f} MB at "
            f"the end: growth {growth:+.1f} MB; held at the end {out['held']}; {out['qps']:,.0f} queries/s; "
            f"answers {out['counts']}",
            flush=True,
        )


if __name__ == "__main__":
    main()
