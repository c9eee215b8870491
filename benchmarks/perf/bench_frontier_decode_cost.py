"""What ``frontier.Config.decode_cost`` should be for LeNet-5 here: the median wall time of one
model call on one MNIST query (the base service time) and of one decode of a systematic code
(the experiment's codes, K = 20, N = 30, GCC's decoder the natural spline, ManifoldGCC bound to
the group) from a random 24 of its 30 results, and their ratio: the decode time in base service
times. Medians over ``--repeats`` timed calls, with 95% bootstrap intervals; the ratio's
interval pairs nothing (the two are timed separately), so it is the ratio of the medians with
the ends of the two intervals crossed.

    OMP_NUM_THREADS=1 python benchmarks/perf/bench_frontier_decode_cost.py [--repeats 300]
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np

from codedcomputing import datasets, models
from codedcomputing.codes import ManifoldGCC
from codedcomputing.experiments import frontier
from codedcomputing.experiments.records import interval

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # benchmarks/: common.py
from common import interleaved


def timed(call, repeats: int) -> np.ndarray:
    """Seconds of each of ``repeats`` calls of ``call`` (no arguments)."""
    return interleaved({"call": lambda _: call()}, repeats)["call"]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=300)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    rng = np.random.default_rng(args.seed)
    k, n = 20, 30
    f = models.numpy_function("lenet5", progress=False)
    pool = datasets.mnist().test_x
    x = pool[rng.choice(len(pool), k, replace=False)]
    f(x[:1])  # warm up
    model = timed(lambda: f(x[:1]), args.repeats)
    model_iv = interval(model, statistic=np.median)
    print(
        f"LeNet-5, one query per call: median {model_iv.estimate * 1e3:.3f} ms "
        f"[{model_iv.low * 1e3:.3f}, {model_iv.high * 1e3:.3f}] ({args.repeats} calls)"
    )
    codes = {
        "gcc-systematic": frontier.systematic_code("gcc", k, n, decoding="spline"),
        "bacc-systematic": frontier.systematic_code("bacc", k, n),
        "manifold-gcc": ManifoldGCC(k, n, decoding="spline").bind(x),
    }
    for name, code in codes.items():
        y = f(code.encode(x)).astype(np.float64)
        alive_sets = iter([np.sort(rng.choice(n, 24, replace=False)) for _ in range(args.repeats)])

        def decode(code=code, y=y, alive_sets=alive_sets):
            alive = next(alive_sets)
            code.decode_details(y[alive], alive)

        decode_iv = interval(timed(decode, args.repeats), statistic=np.median)
        ratio = decode_iv.estimate / model_iv.estimate
        print(
            f"{name}: decode median {decode_iv.estimate * 1e3:.3f} ms [{decode_iv.low * 1e3:.3f}, "
            f"{decode_iv.high * 1e3:.3f}], = {ratio:.2f} [{decode_iv.low / model_iv.high:.2f}, "
            f"{decode_iv.high / model_iv.low:.2f}] LeNet-5 calls"
        )


if __name__ == "__main__":
    main()
