"""The demo's defaults for tau and the hedge delay, chosen on a tuning seed (simulated clock).

The demo's stream (``DemoConfig``: 6 replicas, 50% load, service ``Bimodal(base=1, p=0.02,
slowdown=10)``) of ``--queries`` MNIST test digits, drawn as the demo draws them from
``--seed`` (the tuning seed, not the demo's), served on the simulated clock with LeNet-5's own
outputs: the hedge at each delay, and BACC 4 + 2 under each rule (``straggling``, the default,
and ``group``) at each tau. Per configuration: p50, p99, p99.9 (service units), the share of
queries decoded, agreement (argmax) with the exact model, and the work per query. The demo
takes each scheme's lowest p99.9.

Usage: OMP_NUM_THREADS=1 python benchmarks/studies/tune_demo_defaults.py [--seed 99] [--queries 4000]
"""

from __future__ import annotations

import argparse

import numpy as np

import codedcomputing as cc
from codedcomputing import datasets, models, serving
from codedcomputing.experiments.demo import DemoConfig
from codedcomputing.runtime.delays import Bimodal

DELAYS = (1.5, 2.0, 3.0, 4.0)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seed", type=int, default=99)
    parser.add_argument("--queries", type=int, default=4000)
    args = parser.parse_args()
    config = DemoConfig()
    f = models.numpy_function(models.load("lenet5"))
    digits = datasets.mnist()
    arrivals_rng, digits_rng = np.random.SeedSequence(args.seed).spawn(2)
    service = Bimodal(base=1.0, p=config.straggler_p, slowdown=config.slowdown, jitter=0.1)
    arrivals = serving.poisson_arrivals(
        args.queries, config.utilisation, config.replicas, service, rng=np.random.default_rng(arrivals_rng)
    )
    order = np.random.default_rng(digits_rng).permutation(len(digits.test_y))
    inputs = digits.test_x[np.resize(order, args.queries)]
    model = f(inputs).argmax(axis=1)
    server = serving.SimulatedServer(config.replicas, service, seed=args.seed)
    print(f"tuning seed {args.seed}, {args.queries:,} queries, {config.replicas} replicas", flush=True)
    header = ("p50", "p99", "p99.9", "decoded", "agrees", "work")
    print(f"{'configuration':30s} " + " ".join(f"{h:>7s}" for h in header))
    configurations = [(f"hedge {d:g}", serving.Hedge(d)) for d in DELAYS]
    for rule in ("straggling", "group"):
        for tau in DELAYS:
            code = cc.BACC(config.group_size, config.group_size + config.parities, systematic=True)
            scheme = serving.Coded(code, tau=tau, max_group_wait=config.max_group_wait, rule=rule)
            configurations.append((f"BACC 4+2 {rule} tau {tau:g}", scheme))
    for label, scheme in configurations:
        record = server.run(scheme, arrivals, inputs=inputs, f=f)
        latency = record.answered_at - record.arrival
        p50, p99, p999 = np.quantile(latency, [0.5, 0.99, 0.999])
        agrees = float(np.mean(record.estimates.argmax(axis=1) == model))
        print(
            f"{label:30s} {p50:7.2f} {p99:7.2f} {p999:7.2f} {1 - record.exact.mean():7.3f} {agrees:7.4f} "
            f"{1 + record.extra_load:7.2f}",
            flush=True,
        )


if __name__ == "__main__":
    main()
