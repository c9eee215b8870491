"""What the argument checks of ``codedcomputing.utils.apply_matrix`` cost over the unchecked
helper the shipped codes call, on a code-sized product: a (50, 10) map applied to (10, d)
results, numpy float32 and CPU torch float32, d = 10 and 1000.

Each repeat times a block of calls of the checked and the unchecked function back to back
(interleaved, the order alternating), so both see the same machine load; prints the median
per-call time of each and the median ratio checked / unchecked with a 95% bootstrap interval
over repeats. Ratios, not absolute times, are the figure to compare across machines.

    python benchmarks/perf/bench_utils_checks.py
    python benchmarks/perf/bench_utils_checks.py --repeats 30 --calls 200
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np

from codedcomputing import _arraylib, utils

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # benchmarks/: common.py
from common import bootstrap


def per_call(function, matrix, x, calls: int) -> float:
    start = time.perf_counter()
    for _ in range(calls):
        function(matrix, x)
    return (time.perf_counter() - start) / calls


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=20)
    parser.add_argument("--calls", type=int, default=100)
    args = parser.parse_args()
    rng = np.random.default_rng(0)
    matrix = rng.normal(size=(50, 10))
    matrix.flags.writeable = False  # as the codes' cached maps
    kinds = {"numpy": lambda a: a}
    try:
        import torch

        kinds["torch"] = torch.from_numpy
    except ImportError:
        pass
    print(f"(50, 10) map, {args.calls} calls a block, {args.repeats} interleaved repeats")
    print(f"{'kind':>6} {'d':>5} {'checked us':>11} {'unchecked us':>13}  checked / unchecked [95% CI]")
    for kind, convert in kinds.items():
        for d in (10, 1000):
            x = convert(rng.normal(size=(10, d)).astype(np.float32))
            for function in (utils.apply_matrix, _arraylib.apply_matrix):  # warm up
                per_call(function, matrix, x, 10)
            checked, unchecked = np.empty(args.repeats), np.empty(args.repeats)
            for r in range(args.repeats):
                if r % 2 == 0:
                    checked[r] = per_call(utils.apply_matrix, matrix, x, args.calls)
                    unchecked[r] = per_call(_arraylib.apply_matrix, matrix, x, args.calls)
                else:
                    unchecked[r] = per_call(_arraylib.apply_matrix, matrix, x, args.calls)
                    checked[r] = per_call(utils.apply_matrix, matrix, x, args.calls)
            ratio = checked / unchecked
            _, low, high = bootstrap(ratio, np.median, rng)
            print(
                f"{kind:>6} {d:>5} {1e6 * np.median(checked):>11.1f} {1e6 * np.median(unchecked):>13.1f}"
                f"  {np.median(ratio):.2f} [{low:.2f}, {high:.2f}]"
            )


if __name__ == "__main__":
    main()
