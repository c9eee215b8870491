"""RayServer: what shipping ParM's parity function once per actor saves per parity task.

One Ray actor (the RayServer's replica actor) runs parity tasks of one group each: a LeNet-5
(random weights, the size of ParM's parity model) over the sum of a group of ``--k`` 28x28
inputs. Two protocols, interleaved call by call on the same actor and inputs:

- ``every call``: the task carries the parity function's object-store reference, so the
  actor fetches and unpickles the function for every task (what RayServer did before);
- ``once``: the first task carries it, later tasks its key alone (what RayServer does now).

Prints the round-trip time per task of each (median and mean, ms) and the paired ratio
once / every call (median and mean of per-pair ratios, 95% bootstrap intervals). Absolute times
depend on the machine's load; the ratio of interleaved pairs is the figure to quote.

Usage: python benchmarks/perf/bench_ray_parity_shipping.py [--calls 200] [--k 2] [--seed 0]
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # benchmarks/: common.py
from common import bootstrap


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--calls", type=int, default=200)
    parser.add_argument("--k", type=int, default=2)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()

    import ray
    import torch

    from codedcomputing.models.lenet import LeNet5
    from codedcomputing.serving.ray_server import _Replica

    torch.manual_seed(args.seed)
    model = LeNet5().eval()

    def parity_f(groups):
        with torch.no_grad():
            return model(torch.as_tensor(np.asarray(groups, dtype=np.float32).sum(axis=1))).numpy()

    rng = np.random.default_rng(args.seed)
    groups = rng.normal(size=(args.calls, 1, args.k, 1, 28, 28)).astype(np.float32)
    ray.init(num_cpus=1, include_dashboard=False, log_to_driver=False, configure_logging=False)
    try:
        ref = ray.put(parity_f)
        actor = ray.remote(max_restarts=0)(_Replica).options(num_cpus=0).remote(lambda x: x)
        for _ in range(5):  # warm-up: the actor up, torch loaded there, the function held
            ray.get(actor.call.remote(0, [ref], groups[0], 0.0))
        times = {"every call": [], "once": []}
        for i in range(args.calls):
            order = ("every call", "once") if i % 2 == 0 else ("once", "every call")
            for protocol in order:
                began = time.perf_counter()
                # every call: the reference passed bare, so Ray fetches the function into every task
                # (the old protocol); once: passed unresolved, the actor uses the copy it holds
                source = ref if protocol == "every call" else [ref]
                out = ray.get(actor.call.remote(0, source, groups[i], 0.0))
                times[protocol].append(time.perf_counter() - began)
            assert out.shape == (1, 10)
        shipped = ray.get(actor.shipped.remote())
    finally:
        ray.shutdown()
    every, once = (np.array(times[p]) for p in ("every call", "once"))
    size = len(ray.cloudpickle.dumps(parity_f))
    print(f"parity function: LeNet-5 over groups of k = {args.k}, {size / 1e3:.0f} kB pickled")
    print(
        f"functions the actor received: {shipped} "
        "(1: the first warm-up call fetched it; the 'every call' tasks had it fetched by Ray, unused)"
    )
    for name, t in (("every call", every), ("once", once)):
        print(f"{name:>10}: median {np.median(t) * 1e3:.2f} ms, mean {t.mean() * 1e3:.2f} ms per task")
    ratio = once / every
    boot = np.random.default_rng(args.seed + 1)
    _, lo, hi = bootstrap(ratio, np.median, boot)
    _, mlo, mhi = bootstrap(ratio, np.mean, boot)
    print(
        f"once / every call, {args.calls} interleaved pairs: median ratio {np.median(ratio):.3f} "
        f"[{lo:.3f}, {hi:.3f}], mean ratio {ratio.mean():.3f} [{mlo:.3f}, {mhi:.3f}] (95% bootstrap)"
    )


if __name__ == "__main__":
    main()
