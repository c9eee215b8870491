"""The server on Ray actor replicas against thread replicas, and a node lost mid-stream.

1. Same arrivals, same scheme objects, same seed (paired service draws): for each of
   ``--seeds`` seeds, ``--queries`` Poisson queries at ``--load`` on R replicas with rare heavy
   stragglers (``Bimodal(base=1, p, slowdown=10)``, one clock unit = ``--unit`` seconds, a tiny
   numpy f), on :class:`ThreadServer` and on :class:`RayServer` (a local Ray of ``--cpus``
   CPUs, actors taking no CPU). Per scheme and backend: p50 and p99 in ms, each a mean over
   seeds with a 95% bootstrap interval; and the paired difference Ray - threads. A last row:
   no injected delay at low load (``--bare`` queries, 20 per second), the per-query cost of
   the actor round trip at p50.
2. Node loss: a ``ray.cluster_utils.Cluster`` on 127.0.0.1 (a head node and a node holding two
   of four replicas, fast health checks), the second node removed (processes killed) 0.8 s into
   a 150-query stream; per scheme and run: lost tasks, queries the node held, how those were
   answered (decoded, re-dispatched), failed queries, the p99 of the queries it held and of the
   others (ms).

Usage: OMP_NUM_THREADS=1 python benchmarks/perf/bench_serving_ray.py [--seeds 3] [--queries 150]
       [--loss-runs 2]
"""

from __future__ import annotations

import argparse
import sys
import threading
import time
from pathlib import Path

import numpy as np
import ray

import codedcomputing as cc
from codedcomputing import serving

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # benchmarks/: common.py
from common import bootstrap

RNG = np.random.default_rng(0)
WEIGHTS = np.random.default_rng(1).normal(size=(16, 10))
FAST_HEALTH_CHECKS = {
    "health_check_initial_delay_ms": 0,
    "health_check_period_ms": 500,
    "health_check_timeout_ms": 500,
    "health_check_failure_threshold": 3,
}


def f(x):
    return np.tanh(np.asarray(x) @ WEIGHTS)


def fmt(values) -> str:
    mean, low, high = bootstrap(values, np.mean, RNG)
    return f"{mean:7.2f} [{low:6.2f}, {high:6.2f}]"


def schemes(replicas: int) -> dict:
    return {
        "none": serving.NoRedundancy(),
        "hedge after 1.5": serving.Hedge(1.5),
        f"coded BACC {replicas - 1}/{replicas}": serving.Coded(
            cc.BACC(replicas - 1, replicas, systematic=True), tau=1.5, max_group_wait=3.0
        ),
    }


def compare(args) -> None:
    ray.init(num_cpus=args.cpus, include_dashboard=False, log_to_driver=False, configure_logging=False)
    try:
        r = args.replicas
        service = cc.runtime.delays.Bimodal(base=1.0, p=args.p, slowdown=10.0)
        ms = args.unit * 1e3
        rows: dict = {}
        for seed in range(args.seeds):
            arrivals = serving.poisson_arrivals(args.queries, args.load, r, service, rng=seed)
            inputs = np.random.default_rng(seed + 100).normal(size=(args.queries, 16))
            for name, scheme in schemes(r).items():
                for backend in ("thread", "ray"):
                    kwargs = dict(service=service, time_unit=args.unit, seed=seed)
                    if backend == "ray":
                        server = serving.RayServer(f, r, scheme, actor_options={"num_cpus": 0}, **kwargs)
                    else:
                        server = serving.ThreadServer(f, r, scheme, **kwargs)
                    record = server.run(arrivals, inputs, timeout=120)
                    assert record.counts()["failed"] == 0
                    row = rows.setdefault(name, {})
                    row.setdefault(backend + "50", []).append(record.percentile(50) * ms)
                    row.setdefault(backend + "99", []).append(record.percentile(99) * ms)
        print(
            f"Ray actors vs threads: R = {r}, load {args.load}, {args.queries} queries x {args.seeds} seeds, "
            f"stragglers p={args.p} x10, 1 unit = {ms:g} ms; ms, mean [95% bootstrap CI]"
        )
        print(f"{'scheme':22s} {'p50 threads':>24s} {'p50 Ray':>24s} {'p50 Ray-threads':>24s}")
        for name, row in rows.items():
            diff = np.subtract(row["ray50"], row["thread50"])
            print(f"{name:22s} {fmt(row['thread50']):>24s} {fmt(row['ray50']):>24s} {fmt(diff):>24s}")
        print(f"{'scheme':22s} {'p99 threads':>24s} {'p99 Ray':>24s} {'p99 Ray-threads':>24s}")
        for name, row in rows.items():
            diff = np.subtract(row["ray99"], row["thread99"])
            print(f"{name:22s} {fmt(row['thread99']):>24s} {fmt(row['ray99']):>24s} {fmt(diff):>24s}")
        # the actor round trip: no injected delay, 20 queries/s, interleaved backends
        bare: dict = {"thread": [], "ray": []}
        for seed in range(args.seeds):
            arrivals = np.arange(1, args.bare + 1) * 0.05
            inputs = np.random.default_rng(seed).normal(size=(args.bare, 16))
            for backend in ("thread", "ray"):
                cls = serving.RayServer if backend == "ray" else serving.ThreadServer
                options = {"actor_options": {"num_cpus": 0}} if backend == "ray" else {}
                record = cls(f, r, serving.NoRedundancy(), seed=seed, **options).run(arrivals, inputs)
                bare[backend].append(record.percentile(50) * 1e3)
        diff = np.subtract(bare["ray"], bare["thread"])
        print(
            f"no injected delay, 20 queries/s, {args.bare} queries: p50 threads {fmt(bare['thread'])} ms, "
            f"Ray {fmt(bare['ray'])} ms, Ray - threads {fmt(diff)} ms"
        )
    finally:
        ray.shutdown()


def node_loss(args) -> None:
    from ray._private import ray_constants
    from ray.cluster_utils import Cluster

    ray_constants.ENABLE_RAY_CLUSTER = False  # every node binds 127.0.0.1 (as in the tests)
    cluster = Cluster(
        initialize_head=True,
        head_node_args={
            "num_cpus": 1,
            "resources": {"node0": 100},
            "node_ip_address": "127.0.0.1",
            "include_dashboard": False,
            "_system_config": FAST_HEALTH_CHECKS,
        },
    )
    unit = 0.02
    service = cc.runtime.delays.Bimodal(base=1.0, p=0.0, slowdown=1.0)
    try:
        ray.init(address=cluster.address, log_to_driver=False, configure_logging=False)
        print(
            "node loss: 4 replicas (2 on the lost node), 150 queries at load 0.3, 20 ms tasks, "
            "node removed 0.8 s in"
        )
        print(
            f"{'scheme':16s} {'run':>3s} {'lost':>5s} {'held':>5s} {'decoded':>8s} {'redisp':>7s} "
            f"{'failed':>7s} {'p99 held':>9s} {'p99 rest':>9s} {'notice s':>9s}"
        )
        for run in range(args.loss_runs):
            for name, scheme in (
                ("none", serving.NoRedundancy()),
                (
                    "coded BACC 3/4",
                    serving.Coded(cc.BACC(3, 4, systematic=True), tau=3.0, max_group_wait=3.0),
                ),
            ):
                doomed = cluster.add_node(num_cpus=1, resources={"doomed": 100}, node_ip_address="127.0.0.1")
                cluster.wait_for_nodes(timeout=120)
                placement = [
                    {"num_cpus": 0, "resources": {key: 1}} for key in ("doomed", "doomed", "node0", "node0")
                ]
                arrivals = serving.poisson_arrivals(150, 0.3, 4, service, rng=run)
                inputs = np.random.default_rng(run).normal(size=(150, 16))
                server = serving.RayServer(
                    f, 4, scheme, actor_options=placement, service=service, time_unit=unit, keep_record=True
                )
                server.start(last_query=149)
                removed = []

                def remove(node=doomed, at=removed, server=server):
                    time.sleep(0.8)
                    at.append(server._run.clock())
                    cluster.remove_node(node, allow_graceful=False)

                remover = threading.Thread(target=remove, daemon=True)
                remover.start()
                serving.drive(server, arrivals, inputs)
                server.close(timeout=60)
                remover.join(60)
                record = server.record()
                lost = record.tasks["lost"]
                held = np.unique(record.tasks["query"][lost & (record.tasks["query"] >= 0)])
                rest = np.setdiff1d(np.arange(150), held)
                decoded = int(np.sum(record.outcome[held] == serving.OUTCOMES.index("decoded")))
                redisp = int(np.sum(record.redispatched[held] > 0))
                latency = record.latency * unit * 1e3
                seen = np.nanmin(np.where(lost, record.tasks["started"] + record.tasks["service"], np.inf))
                print(
                    f"{name:16s} {run:3d} {record.lost_tasks:5d} {held.size:5d} {decoded:8d} {redisp:7d} "
                    f"{record.counts()['failed']:7d} {np.percentile(latency[held], 99):9.0f} "
                    f"{np.percentile(latency[rest], 99):9.0f} {(seen - removed[0]) * unit:9.2f}"
                )
    finally:
        if ray.is_initialized():
            ray.shutdown()
        cluster.shutdown()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--seeds", type=int, default=3)
    parser.add_argument("--queries", type=int, default=150)
    parser.add_argument("--replicas", type=int, default=4)
    parser.add_argument("--load", type=float, default=0.5)
    parser.add_argument("--p", type=float, default=0.05)
    parser.add_argument("--unit", type=float, default=0.01)
    parser.add_argument("--cpus", type=int, default=2)
    parser.add_argument("--bare", type=int, default=60)
    parser.add_argument("--loss-runs", type=int, default=2)
    parser.add_argument("--skip", choices=["compare", "loss"], default=None)
    args = parser.parse_args()
    if args.skip != "compare":
        compare(args)
    if args.skip != "loss":
        node_loss(args)


if __name__ == "__main__":
    main()
