"""GCC on a torch model with stragglers, on a Ray cluster, against uncoded.

The thread example (``gcc_torch_threads.py``) on Ray: each call sends K MNIST test digits
through LeNet-5 (trained, from the package's cache when it is there; with ``--quick`` and
nothing cached, an untrained LeNet-5), each worker a Ray task whose result takes 100 ms, or
800 ms for the slow ones (probability 0.2), and every call a deadline of 400 ms. Uncoded
loses the images whose worker misses it; GCC decodes all K from the fastest N - S.
``--address`` joins a running cluster (``auto``, ``host:port``); without it a local Ray with
2 CPUs is started and stopped.
The claim checked: GCC's estimates are finite, and it gets fewer images wrong (argmax unlike
the network run directly) than uncoded loses.

``--time-scale`` multiplies the delays and the deadline alike (the test suite raises it when a
busy machine's own delays decide the run).

    .venv/bin/python examples/gcc_torch_ray.py [--quick] [--address auto] [--time-scale 1]
"""

from __future__ import annotations

import argparse
import sys

import numpy as np
import torch

import codedcomputing as cc
from codedcomputing.models.lenet import LeNet5, LeNet5Config

K, N, S, DEADLINE_S = 10, 40, 10, 0.4  # Ray's dispatch costs ms a task: a longer deadline than threads'


def lenet5(quick: bool) -> tuple[torch.nn.Module, str]:
    """The trained LeNet-5 if it is cached (or may be trained: not ``quick``), else an untrained one."""
    if not quick or cc.models.is_cached("lenet5"):
        return cc.models.load("lenet5"), "trained"
    torch.manual_seed(0)
    return LeNet5(LeNet5Config(image_size=28)).eval(), "untrained"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="8 calls per scheme instead of 40")
    parser.add_argument("--address", default=None, help="a running Ray cluster (default: a local Ray)")
    parser.add_argument(
        "--time-scale", type=float, default=1.0, help="multiply the delays and the deadline (a busy machine)"
    )
    args = parser.parse_args()
    deadline = DEADLINE_S * args.time_scale
    model, kind = lenet5(args.quick)
    images = torch.as_tensor(cc.datasets.mnist().test_x)
    calls = 8 if args.quick else 40
    delays = cc.delays.Bimodal(base=0.1 * args.time_scale, p=0.2, slowdown=8.0)
    rng = np.random.default_rng(0)
    schemes = [("uncoded", cc.Uncoded(K, fill=np.nan), None), ("gcc", cc.GCC(K, N), N - S)]
    wrong, mse, latency = {}, {}, {}
    with cc.RayCluster(args.address, delays=delays, seed=0, num_cpus=2) as cluster:
        for name, code, wait_for in schemes:
            executor = cc.CodedExecutor(code, model, cluster, output_shape=(10,))
            executor.run(images[:K], wait_for=wait_for)  # warm-up, no deadline: workers import torch
            wrong[name], mse[name], latency[name] = [], [], []
            for _ in range(calls):
                x = images[rng.choice(len(images), size=K, replace=False)]
                result = executor.run(x, wait_for=wait_for, deadline=deadline)
                with torch.no_grad():
                    truth = model(x).numpy()
                est = result.estimates.numpy()
                returned = np.isfinite(est).all(axis=1)  # uncoded fills a lost image with NaN
                if name == "gcc" and not returned.all():
                    sys.exit(f"GCC returned non-finite estimates: {est}")
                wrong[name].append(1.0 - np.mean(returned & (est.argmax(1) == truth.argmax(1))))
                if returned.any():
                    mse[name].append(cc.metrics.mse(est[returned], truth[returned]))
                latency[name].append(result.report.total_s * 1e3)
    where = f"the Ray cluster at {args.address}" if args.address else "a local Ray (2 CPUs)"
    print(f"{kind} LeNet-5 on {where}, K={K}, N={N}, GCC waits for {N - S}, deadline {deadline:g} s")
    print(f"{'scheme':>8} {'images wrong or lost':>21} {'MSE of returned':>16} {'p50 ms':>7}")
    for name in wrong:
        print(
            f"{name:>8} {np.mean(wrong[name]):>21.1%} {np.mean(mse[name]):>16.3g} "
            f"{np.median(latency[name]):>7.0f}"
        )
    gcc, uncoded = np.mean(wrong["gcc"]), np.mean(wrong["uncoded"])
    if not (np.isfinite(np.mean(mse["gcc"])) and gcc < uncoded):
        sys.exit(f"GCC got {gcc:.1%} of the images wrong, not fewer than the {uncoded:.1%} uncoded lost")
    print(f"ok: GCC got {gcc:.1%} of the images wrong where uncoded lost {uncoded:.1%}")


if __name__ == "__main__":
    main()
