"""The thread server against the simulated server, and the server's own work per query.

1. Same arrivals, same scheme objects, same seed (paired service draws): for each of
   ``--seeds`` seeds, ``--queries`` Poisson queries at ``--load`` on R replicas with rare heavy
   stragglers (``Bimodal(base=1, p, slowdown=10)``, one clock unit = ``--unit`` seconds), run
   on the ThreadServer (a tiny numpy f) and on the SimulatedServer. Per scheme and backend:
   p50, p99, the decoded share, each a mean over seeds with a 95% bootstrap interval; and the
   paired ratio thread / simulated of p50 and p99.
2. The master's work per query (frontend: every event it handles, the code's encode and
   decode among it; its CPU time on whichever thread ran it) on the ThreadServer with the coded
   scheme (BACC, K = 10, 20, 50, N = 1.5 K replicas, LeNet-5's input and output shapes, a
   trivial f so that the replicas cost nothing), against one LeNet-5 call on one input measured
   next to each run; interleaved on the same stream: no redundancy (the event handling alone)
   and the coded scheme, each on the three frontends (``events``: every result handed back to
   the frontend thread; ``inline``: the replica thread runs the result hook under the
   frontend's lock; ``direct``: as inline, and the submitting thread handles its arrival), with
   paired ratios to ``events`` of the frontend's CPU, the whole process's CPU and p50; and
   (2b) the live encode and decode alone, the fast route against the code's checked public
   API, call by call on the same groups and arrived sets, without threads.
3. Real interference: two LeNet-5 replicas pinned to two cores (``affinity``), 400 queries/s,
   with and without a busy process (:class:`~codedcomputing.serving.Interference`) pinned to
   the first replica's core; each replica's task service times and the queries' p99.

Usage: OMP_NUM_THREADS=1 python benchmarks/perf/bench_serving_threads.py [--seeds 3] [--queries 300]
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np
import torch

import codedcomputing as cc
from codedcomputing import serving

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # benchmarks/: common.py
from common import bootstrap

RNG = np.random.default_rng(0)


def fmt(values) -> str:
    mean, low, high = bootstrap(values, np.mean, RNG)
    return f"{mean:6.2f} [{low:5.2f}, {high:5.2f}]"


def compare(args) -> None:
    replicas = args.replicas
    service = cc.runtime.delays.Bimodal(base=1.0, p=args.p, slowdown=10.0)
    weights = np.random.default_rng(1).normal(size=(16, 10))

    def f(x):
        return np.tanh(x @ weights)

    schemes = {
        "none": serving.NoRedundancy(),
        "replication x2": serving.Replication(2),
        f"hedge after {args.hedge:g}": serving.Hedge(args.hedge),
        f"coded BACC {args.group}/{replicas}": serving.Coded(
            cc.BACC(args.group, replicas, systematic=True), tau=args.tau, max_group_wait=args.group_wait
        ),
    }
    rows = {
        name: {key: [] for key in ("sim50", "thr50", "sim99", "thr99", "simdec", "thrdec")}
        for name in schemes
    }
    for seed in range(args.seeds):
        arrivals = serving.poisson_arrivals(args.queries, args.load, replicas, service, rng=100 + seed)
        inputs = np.random.default_rng(200 + seed).normal(size=(args.queries, 16))
        simulated = serving.SimulatedServer(replicas, service, seed=seed)
        for name, scheme in schemes.items():  # the same draws and arrivals for every scheme
            sim = simulated.run(scheme, arrivals)
            thr = serving.ThreadServer(
                f, replicas, scheme, service=service, time_unit=args.unit, seed=seed
            ).run(arrivals, inputs)
            for tag, record in (("sim", sim), ("thr", thr)):
                rows[name][tag + "50"].append(record.percentile(50))
                rows[name][tag + "99"].append(record.percentile(99))
                rows[name][tag + "dec"].append(record.counts()["decoded"] / record.num_queries)
    print(
        f"1. {replicas} replicas, load {args.load}, {args.queries} queries x {args.seeds} seeds, stragglers "
        f"p={args.p} x10, 1 unit = {args.unit * 1e3:g} ms; latencies in units, mean [95% bootstrap CI]"
    )
    print(
        f"{'scheme':22s} {'p50 sim':>22s} {'p50 thread':>22s} {'p99 sim':>22s} {'p99 thread':>22s} "
        f"{'thr/sim p50':>12s} {'thr/sim p99':>12s} {'decoded sim/thr':>16s}"
    )
    for name, row in rows.items():
        r50 = np.array(row["thr50"]) / np.array(row["sim50"])
        r99 = np.array(row["thr99"]) / np.array(row["sim99"])
        print(
            f"{name:22s} {fmt(row['sim50']):>22s} {fmt(row['thr50']):>22s} {fmt(row['sim99']):>22s} "
            f"{fmt(row['thr99']):>22s} {np.mean(r50):12.2f} {np.mean(r99):12.2f} "
            f"{np.mean(row['simdec']):7.3f}/{np.mean(row['thrdec']):.3f}"
        )


class CheckedCoded(serving.Coded):
    """The coded scheme with the live encode and decode through the code's public, checked
    ``encode`` and ``decode_details`` (the route before the fast path), for a paired comparison."""

    def _parity_inputs(self, run, group, count):
        start = time.thread_time()
        members = self.members[group]
        inputs = np.stack([run.input(q) for q in members])
        code = self.code_for(len(members)).bind(inputs)
        workers = np.flatnonzero(np.asarray(code.systematic_inputs) < 0)
        self.bound[group] = (code, workers)
        coded = np.asarray(code.encode(inputs))[workers]
        run.account("encode", time.thread_time() - start)
        return [(coded[j], None) for j in range(count)]

    def _decode_live(self, run, group, queries):
        code, workers = self.bound[group]
        m = len(self.members[group])
        alive = [
            int(code.systematic_workers[i]) if i < m else int(workers[i - m]) for i in self.arrived[group]
        ]
        result = code.decode_details(np.stack(self.results[group]), np.array(alive))
        positions = [self.position[q] for q in queries]
        return np.asarray(result.estimates)[positions], np.asarray(result.info["exact"])[positions]


def lenet_call(lenet, x, calls: int = 100) -> float:
    """The median seconds of one LeNet-5 call on one input, over ``calls`` calls."""
    seconds = []
    for _ in range(calls):
        start = time.perf_counter()
        lenet(x)
        seconds.append(time.perf_counter() - start)
    return float(np.median(seconds))


def master_work(args) -> None:
    """Per seed and K, interleaved on the same stream (arrivals, inputs, service draws): no
    redundancy and the coded scheme, each on the three frontends (``events``, ``inline``,
    ``direct``: ThreadServer's ``frontend``), the order reversed on odd seeds, and a LeNet-5 call
    measured next to each run. Per run: the frontend's CPU per query (``master_s``, on
    whichever thread ran it) and the whole process's CPU per query (every thread: the driver,
    the replicas with a trivial f, the hand-offs); per K: medians [min, max] over seeds, the
    frontend / LeNet-5 ratio, and the paired ratios to ``events`` with 95% bootstrap intervals
    of their mean."""
    lenet = cc.models.numpy_function("lenet5", progress=False)
    x = np.random.default_rng(0).normal(size=(1, 1, 28, 28)).astype(np.float32)
    lenet(x)
    print(
        f"\n2. the frontend's CPU per query against one LeNet-5 call on one input (median of 100 calls next "
        f"to each run, torch threads {torch.get_num_threads()}); {args.seeds} seeds x {args.master_queries} "
        "queries, medians [min, max]; the three frontends interleaved on the same streams"
    )
    service = cc.runtime.delays.Bimodal(base=1.0, p=args.p, slowdown=10.0)

    def trivial(batch):  # LeNet-5's output shape, no work
        return np.asarray(batch, dtype=np.float32).reshape(batch.shape[0], -1)[:, :10]

    def cell(values, scale=1.0, form="{:.0f}"):
        v = np.asarray(values) * scale
        return f"{form.format(np.median(v))} [{form.format(v.min())}, {form.format(v.max())}]"

    def ratio(rows, a, b):
        mean, low, high = bootstrap(np.array(rows[a]) / np.array(rows[b]), np.mean, RNG)
        return f"{mean:.2f} [{low:.2f}, {high:.2f}]"

    print(
        f"{'K':>4s} {'N':>4s} {'LeNet us':>9s} {'scheme':>7s} {'frontend':>8s} {'decoded':>8s} "
        f"{'frontend us/q':>15s} {'enc+dec':>8s} {'frontend / LeNet':>20s} {'frontend CPU / events':>22s} "
        f"{'process CPU / events':>21s} {'p50 / events':>18s}"
    )
    frontends = ("events", "inline", "direct")
    for k in (10, 20, 50):
        n = k + k // 2
        rows: dict[str, list[float]] = {}
        for seed in range(args.seeds):
            arrivals = serving.poisson_arrivals(args.master_queries, args.load, n, service, rng=300 + seed)
            inputs = (
                np.random.default_rng(seed).normal(size=(args.master_queries, 1, 28, 28)).astype(np.float32)
            )
            runs = [(scheme, frontend) for scheme in ("none", "coded") for frontend in frontends]
            for scheme, frontend in runs if seed % 2 == 0 else runs[::-1]:
                made = (
                    serving.NoRedundancy()
                    if scheme == "none"
                    else serving.Coded(
                        cc.BACC(k, n, systematic=True), tau=args.tau, max_group_wait=args.group_wait
                    )
                )
                call = lenet_call(lenet, x)
                cpu = time.process_time()
                record = serving.ThreadServer(
                    trivial,
                    n,
                    made,
                    service=service,
                    time_unit=args.master_unit,
                    seed=seed,
                    frontend=frontend,
                ).run(arrivals, inputs)
                cpu = time.process_time() - cpu
                q = record.num_queries
                us = record.master_s["frontend"] / q * 1e6
                key = f"{scheme} {frontend}"
                for name, value in (
                    ("", us),
                    (" /lenet", us / (call * 1e6)),
                    (" process", cpu / q * 1e6),
                    (" p50", record.percentile(50)),
                    (" code", (record.master_s["encode"] + record.master_s["decode"]) / q * 1e6),
                    (" decoded", record.counts()["decoded"] / q),
                ):
                    rows.setdefault(key + name, []).append(value)
                rows.setdefault("lenet", []).append(call * 1e6)
        for scheme in ("none", "coded"):
            for frontend in frontends:
                key, ev = f"{scheme} {frontend}", f"{scheme} events"
                paired = (
                    [ratio(rows, key + tag, ev + tag) for tag in ("", " process", " p50")]
                    if frontend != "events"
                    else ["-"] * 3
                )
                print(
                    f"{k:4d} {n:4d} {np.median(rows['lenet']):9.0f} {scheme:>7s} {frontend:>8s} "
                    f"{np.median(rows[key + ' decoded']):8.3f} {cell(rows[key]):>15s} "
                    f"{np.median(rows[key + ' code']):8.1f} "
                    f"{cell(rows[key + ' /lenet'], 100, '{:.1f}%'):>20s} "
                    f"{paired[0]:>22s} {paired[1]:>21s} {paired[2]:>18s}"
                )


class _Frontend:
    """What the coded scheme's live encode and decode ask of a server (route costs, below)."""

    live = True

    def __init__(self, inputs):
        self.inputs = inputs

    def input(self, query):
        return self.inputs[query]

    def account(self, kind, seconds):
        pass


def route_costs(args) -> None:
    """The live encode and decode alone, without threads: per call, the fast route and the
    checked route on the same groups and the same random sets of arrived results (each call
    of one timed next to the same call of the other), K = 10, 20, 50, N = 1.5 K."""
    rng = np.random.default_rng(0)
    print(
        "\n2b. the live encode (per group) and decode (per call, up to 3 missing queries decoded) alone: "
        "median us of the fast route and of the checked route, and the median of the paired ratios"
    )
    print(
        f"{'K':>4s} {'encode fast':>12s} {'checked':>8s} {'ratio':>6s} "
        f"{'decode fast':>12s} {'checked':>8s} {'ratio':>6s}"
    )
    for k in (10, 20, 50):
        n = k + k // 2
        schemes = [
            scheme(cc.BACC(k, n, systematic=True), tau=1.0) for scheme in (serving.Coded, CheckedCoded)
        ]
        run = _Frontend(rng.normal(size=(k, 1, 28, 28)).astype(np.float32))
        for scheme in schemes:
            scheme.prepare(None)
            scheme.members.append(list(range(k)))
            scheme.position.extend(range(k))
            scheme.arrived.append([])
            scheme.results.append([])
        outputs = rng.normal(size=(n, 10)).astype(np.float32)
        times = {"encode": ([], []), "decode": ([], [])}
        for _ in range(args.route_calls):
            for i, scheme in enumerate(schemes):
                start = time.thread_time()
                scheme._parity_inputs(run, 0, n - k)
                times["encode"][i].append(time.thread_time() - start)
            arrived = rng.permutation(n)[: int(rng.integers(k - 2, n))].tolist()
            missing = [q for q in range(k) if q not in arrived][:3] or [0]
            for i, scheme in enumerate(schemes):
                scheme.arrived[0], scheme.results[0] = arrived, [outputs[j] for j in arrived]
                start = time.thread_time()
                scheme._decode_live(run, 0, missing)
                times["decode"][i].append(time.thread_time() - start)
        cells = []
        for kind in ("encode", "decode"):
            fast, checked = (np.array(t) * 1e6 for t in times[kind])
            cells.append(
                f"{np.median(fast):12.0f} {np.median(checked):8.0f} {np.median(fast / checked):6.2f}"
            )
        print(f"{k:4d} {cells[0]} {cells[1]}")


def interference(args) -> None:
    """Two LeNet-5 replicas pinned to two cores, a busy process on the first one's core or none."""
    import os

    if not serving.can_pin() or len(os.sched_getaffinity(0)) < 2:
        print("\n3. interference: needs os.sched_setaffinity and two cores; skipped")
        return
    first, second = sorted(os.sched_getaffinity(0))[:2]
    lenet = cc.models.numpy_function("lenet5", progress=False)
    inputs = np.random.default_rng(0).normal(size=(args.interference_queries, 1, 28, 28)).astype(np.float32)
    arrivals = np.arange(args.interference_queries) / args.interference_rate
    print(
        f"\n3. LeNet-5 on 2 replicas pinned to cores {first} and {second}, {inputs.shape[0]} queries at "
        f"{args.interference_rate:g}/s, {args.interference_processes} busy process(es); task service ms: "
        "median and p90 per replica"
    )
    for label, busy in (("no interference", None), (f"busy process on core {first}", {first})):
        runs = []
        for seed in range(args.seeds):
            server = serving.ThreadServer(
                lenet, 2, serving.NoRedundancy(), balancer="jsq", seed=seed, affinity=[{first}, {second}]
            )
            if busy is None:
                runs.append(server.run(arrivals, inputs))
            else:
                with serving.Interference(cores=busy, processes=args.interference_processes):
                    runs.append(server.run(arrivals, inputs))
        cells = []
        for replica in (0, 1):
            service = np.concatenate([r.tasks["service"][r.tasks["replica"] == replica] for r in runs]) * 1e3
            cells.append(f"replica {replica}: {np.median(service):5.2f} / {np.percentile(service, 90):5.2f}")
        p99 = [r.percentile(99) * 1e3 for r in runs]
        print(f"{label:28s} {cells[0]}   {cells[1]}   query p99 {fmt(p99)} ms")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--queries", type=int, default=300)
    parser.add_argument("--master-queries", type=int, default=1000)
    parser.add_argument("--replicas", type=int, default=6)
    parser.add_argument("--group", type=int, default=4, help="K of the coded scheme (N = replicas)")
    parser.add_argument("--load", type=float, default=0.5)
    parser.add_argument("--p", type=float, default=0.02, help="probability a task is a straggler (x10)")
    parser.add_argument("--tau", type=float, default=1.5)
    parser.add_argument("--hedge", type=float, default=1.5)
    parser.add_argument("--group-wait", type=float, default=3.0)
    parser.add_argument("--unit", type=float, default=0.02, help="seconds per clock unit (part 1)")
    parser.add_argument("--master-unit", type=float, default=0.01, help="seconds per clock unit (part 2)")
    parser.add_argument("--seeds", type=int, default=3)
    parser.add_argument("--interference-queries", type=int, default=400)
    parser.add_argument("--interference-processes", type=int, default=3)
    parser.add_argument("--interference-rate", type=float, default=400.0)
    parser.add_argument("--route-calls", type=int, default=500, help="calls per route and K (part 2b)")
    parser.add_argument(
        "--part", choices=("all", "compare", "master", "routes", "interference"), default="all"
    )
    args = parser.parse_args()
    start = time.perf_counter()
    if args.part in ("all", "compare"):
        compare(args)
    if args.part in ("all", "master"):
        master_work(args)
    if args.part in ("all", "master", "routes"):
        route_costs(args)
    if args.part in ("all", "interference"):
        interference(args)
    print(f"\n{time.perf_counter() - start:.0f} s")


if __name__ == "__main__":
    main()
