"""What BACC's encode and decode cost the master, with a new alive set at every decode (the
serving case), against GCC's natural-spline decode and against the dense Berrut matrix.

For N in 50, 100, 500, 1000, 2000, 4000, 8000, 16000 (the issue's K = 10, 20 and 100 at
N = 50, 100 and 500, N/10 from N = 1000 on), float64 results of width 10 (``--widths`` for others), 20% random
stragglers: every repeat draws one alive set, one ``X`` and one ``Y``, and times in turn (the
order rotated from one repeat to the next):

- ``encode``: ``BACC.encode(X)``;
- ``decode``: ``BACC.decode(Y, alive)``, the cache cleared first (build + apply);
- ``spline``: ``GCC(K, N, decoding="spline").decode(Y, alive)``, the cache cleared first;
- ``dense enc``: the dense ``(N, K)`` encoder matrix (built once per row) times ``X``;
- ``dense dec``: ``berrut_matrix(beta[alive], alpha) @ Y`` (the dense decoder: build + apply);
- ``fmm enc``, ``fmm dec``: the fast multipole path forced (``BerrutMap(..., dense=False)``,
  built once per row), whatever size BACC would switch to it at.

Per row: medians (ms), the paired ratio decode / spline (median of the per-repeat ratios with
a 95% bootstrap interval; goal <= 2 from N = 500 on), and at the end t(8N) / t(N) for encode
and decode (goal <= 10 from N = 1000 to 8000, and 2000 to 16000), with a 95% bootstrap
interval of the ratio of medians.

One BLAS thread (threadpoolctl). Run:
``python benchmarks/bench_master_bacc.py [--quick] [--widths 10 1 200] [--max-n 16000]``.
"""

from __future__ import annotations

import argparse
import time

import numpy as np
from threadpoolctl import threadpool_limits

import codedcomputing as cc
from codedcomputing.spline import berrut

berrut_matrix = berrut.berrut_matrix

SIZES = [50, 100, 500, 1000, 2000, 4000, 8000, 16000]


def num_inputs(n: int) -> int:
    return {50: 10, 100: 20, 500: 100}.get(n, n // 10)


def interleaved(fns: dict, repeats: int, setup) -> dict[str, np.ndarray]:
    """Seconds of each callable at every repeat, timed in turn (the order rotated from one
    repeat to the next); ``setup(r)`` (untimed) runs first and its result goes to every one."""
    times = {name: [] for name in fns}
    names = list(fns)
    for r in range(repeats):
        arg = setup(r)
        for name in names[r % len(names) :] + names[: r % len(names)]:
            start = time.perf_counter()
            fns[name](arg)
            times[name].append(time.perf_counter() - start)
    return {name: np.array(t) for name, t in times.items()}


def bootstrap(stat, values: list[np.ndarray], rng, draws: int = 2000) -> tuple[float, float, float]:
    """``stat(*values)`` and a 95% percentile-bootstrap interval (each array resampled on its own)."""
    boot = [stat(*(rng.choice(v, size=v.size, replace=True) for v in values)) for _ in range(draws)]
    low, high = np.percentile(boot, [2.5, 97.5])
    return float(stat(*values)), float(low), float(high)


def fresh(code):
    """A decode on a new alive set: the cache cleared (a serving master rarely sees one twice)."""

    def call(arg):
        code.clear_cache()
        code.decode(arg[2], arg[0])

    return call


def row(n: int, width: int, repeats: int, rng) -> dict[str, np.ndarray]:
    k = num_inputs(n)
    bacc, spline = cc.BACC(k, n), cc.GCC(k, n, decoding="spline")
    alpha, beta = bacc.alpha, bacc.beta
    encoder = berrut_matrix(alpha, beta)
    fast = hasattr(berrut, "BerrutMap")  # absent before the fast path (for before/after runs)
    if fast:
        fmm_encoder = berrut.BerrutMap(alpha, beta, dense=False)
        fmm_decoder = berrut.BerrutMap(beta, alpha, dense=False)

    def setup(_):
        alive = np.sort(rng.choice(n, n - n // 5, replace=False))
        return alive, rng.normal(size=(k, width)), rng.normal(size=(alive.size, width))

    fns = {
        "encode": lambda arg: bacc.encode(arg[1]),
        "decode": fresh(bacc),
        "spline": fresh(spline),
        "dense enc": lambda arg: encoder @ arg[1],
        "dense dec": lambda arg: berrut_matrix(beta[arg[0]], alpha) @ arg[2],
    }
    if fast:
        fns["fmm enc"] = lambda arg: fmm_encoder(arg[1])
        fns["fmm dec"] = lambda arg: fmm_decoder(arg[2], arg[0])
    return interleaved(fns, repeats, setup)


def ms(seconds: float) -> str:
    return f"{seconds * 1e3:9.3f}"


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="fewer repeats")
    parser.add_argument("--widths", type=int, nargs="+", default=[10])
    parser.add_argument("--max-n", type=int, default=16000)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    rng = np.random.default_rng(args.seed)
    names = ["encode", "decode", "spline", "dense enc", "dense dec"]
    if hasattr(berrut, "BerrutMap"):
        names += ["fmm enc", "fmm dec"]
    with threadpool_limits(1):
        for width in args.widths:
            print(f"\nwidth {width}, float64, 20% random stragglers, a new alive set a repeat (median ms)")
            print(
                f"{'N':>6} {'K':>5} {'rep':>4} | "
                + " ".join(f"{name:>9}" for name in names)
                + " | decode/spline [95% CI]"
            )
            rows = {}
            for n in [n for n in SIZES if n <= args.max_n]:
                repeats = (15 if n <= 4000 else 7) if args.quick else (51 if n <= 4000 else 21)
                if n >= 16000:
                    repeats = max(5, repeats // 3)
                t = rows[n] = row(n, width, repeats, rng)
                ratio = bootstrap(np.median, [t["decode"] / t["spline"]], rng)
                print(
                    f"{n:>6} {num_inputs(n):>5} {repeats:>4} | "
                    + " ".join(ms(np.median(t[name])) for name in names)
                    + f" | {ratio[0]:5.2f} [{ratio[1]:.2f}, {ratio[2]:.2f}]",
                    flush=True,
                )
            print("t(8N) / t(N), ratio of medians [95% bootstrap interval] (goal for BACC: <= 10):")
            for small in (1000, 2000):
                if small in rows and 8 * small in rows:
                    parts = []
                    for name in names:
                        r = bootstrap(
                            lambda a, b: np.median(b) / np.median(a),
                            [rows[small][name], rows[8 * small][name]],
                            rng,
                        )
                        parts.append(f"{name} {r[0]:.1f} [{r[1]:.1f}, {r[2]:.1f}]")
                    print(f"  N = {small} -> {8 * small}: " + ", ".join(parts))


if __name__ == "__main__":
    main()
