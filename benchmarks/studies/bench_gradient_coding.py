"""Gradient coding on real threads against the simulated clock, for one setting: every
scheme's wall-clock time to DGD's loss at a target step, and whether the two clocks order
the schemes alike.

Logistic regression on the MNIST images, n = 12 workers (a thread each), s = 3, exponential
delays with mean equal to the measured per-partition compute (slept by each worker after its
compute). Real threads share this machine's cores, so the compute of concurrent workers
contends: the real times are noisier than the virtual ones.

    python benchmarks/studies/bench_gradient_coding.py [--steps 60] [--target-step 40] [--s 3] [--trials 3]
"""

from __future__ import annotations

import argparse

import numpy as np
from threadpoolctl import threadpool_limits

import codedcomputing as cc
from codedcomputing.experiments.gradient_coding import Config, measure_compute, problem
from codedcomputing.gradient_coding import SCHEMES, simulate, train_on_cluster


def time_to(history, target):
    return next((step.wall_time_s for step in history if step.loss <= target), float("nan"))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=60)
    parser.add_argument("--target-step", type=int, default=40)
    parser.add_argument("--s", type=int, default=3)
    parser.add_argument("--trials", type=int, default=3)
    parser.add_argument("--dataset", default="mnist")
    args = parser.parse_args()
    import torch

    torch.set_num_threads(1)  # workers are the threads: no intra-op pool under them
    task = problem(Config(dataset=args.dataset), 0)
    c = measure_compute(task)
    delays = cc.delays.AdditiveExponential(mean=c)
    target = simulate("dgd", task, args.s, args.target_step, lr=0.5)[-1].loss
    print(f"per-partition compute {c * 1e3:.2f} ms; s = {args.s}; target loss {target:.4f}", flush=True)
    real = {scheme: [] for scheme in SCHEMES}
    virtual = {scheme: [] for scheme in SCHEMES}
    with threadpool_limits(1), cc.ThreadCluster(48, seed=0) as threads:
        for trial in range(args.trials):
            for scheme in SCHEMES:  # interleaved: the machine's load hits every scheme alike
                history = train_on_cluster(
                    scheme, task, args.s, args.steps, threads, lr=0.5, delays=delays, seed=trial,
                    step_timeout_s=60.0,  # no fault is injected: a loaded machine is only slow
                )
                real[scheme].append(time_to(history, target))
                sim = simulate(
                    scheme, task, args.s, args.steps, lr=0.5, compute_s=c, delays=delays, seed=trial
                )
                virtual[scheme].append(time_to(sim, target))
            print(f"  trial {trial + 1}/{args.trials} done", flush=True)
    print(f"{'scheme':>8} {'threads s':>10} {'simulated s':>12}")
    for scheme in SCHEMES:
        print(f"{scheme:>8} {np.median(real[scheme]):10.3f} {np.median(virtual[scheme]):12.3f}")
    order_real = sorted(SCHEMES, key=lambda k: np.median(real[k]))
    order_virtual = sorted(SCHEMES, key=lambda k: np.median(virtual[k]))
    print("fastest first, threads:  ", " < ".join(order_real))
    print("fastest first, simulated:", " < ".join(order_virtual))
    for pair in (("pgc-fr", "gc-fr"), ("pgc-cr", "gc-cr")):
        ratio_real = np.median(real[pair[1]]) / np.median(real[pair[0]])
        ratio_virtual = np.median(virtual[pair[1]]) / np.median(virtual[pair[0]])
        print(f"{pair[1]} / {pair[0]}: threads {ratio_real:.2f}x, simulated {ratio_virtual:.2f}x")


if __name__ == "__main__":
    main()
