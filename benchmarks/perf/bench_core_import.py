"""What ``import codedcomputing`` costs now that the models, datasets, cache and gradient
coding load at first use, against also importing them (what the package's import loaded
before they became lazy).

Each trial starts one fresh interpreter per variant, in alternating order (a trial shares
the machine's load at that moment); it prints the module counts and the median import time of
each variant, and the median of the per-pair time ratio with a 95% bootstrap interval. On a
shared machine read the ratio, not the absolute times.

    OMP_NUM_THREADS=1 nice -n 10 .venv/bin/python benchmarks/perf/bench_core_import.py --pairs 15
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # benchmarks/: common.py
from common import bootstrap

EXTRA = ("models", "datasets", "cache", "gradient_coding")
TIMED = """
import json, sys, time
start = time.perf_counter()
import codedcomputing
{extra}
elapsed = time.perf_counter() - start
print(json.dumps({{"s": elapsed, "modules": len(sys.modules),
                  "package": sum(m.startswith("codedcomputing") for m in sys.modules)}}))
"""
VARIANTS = {
    "core (lazy)": TIMED.format(extra=""),
    "core + models, datasets, cache, gradient_coding": TIMED.format(
        extra="\n".join(f"import codedcomputing.{name}" for name in EXTRA)
    ),
    # the floor: layout.py's scipy.stats.qmc, with numpy, is most of the package's import
    "numpy and scipy.stats alone": TIMED.replace("import codedcomputing", "import numpy, scipy.stats").format(
        extra=""
    ),
}


def measure(script: str) -> dict:
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, check=True)
    return json.loads(done.stdout)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--pairs", type=int, default=15)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    names = list(VARIANTS)
    measure(VARIANTS[names[0]])  # warm the file cache once, untimed
    rows: dict[str, list[dict]] = {name: [] for name in names}
    for pair in range(args.pairs):
        for name in names if pair % 2 == 0 else names[::-1]:
            rows[name].append(measure(VARIANTS[name]))
    for name in names:
        first = rows[name][0]
        times = np.array([r["s"] for r in rows[name]]) * 1e3
        print(
            f"{name}: {first['modules']} modules in sys.modules ({first['package']} of the package); "
            f"import {np.median(times):.0f} ms median of {args.pairs}"
        )
    # the ratio compares the first two variants; the third is printed as the floor
    ratio = np.array([a["s"] / b["s"] for a, b in zip(rows[names[0]], rows[names[1]], strict=True)])
    median, low, high = bootstrap(ratio, np.median, np.random.default_rng(args.seed), draws=10_000)
    print(f"time ratio core / (core + those four), paired: median {median:.3f} (95% CI {low:.3f}-{high:.3f})")


if __name__ == "__main__":
    main()
