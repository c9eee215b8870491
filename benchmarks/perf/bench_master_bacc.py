"""What BACC's encode and decode cost the master, with a new alive set at every decode (the
serving case), against GCC's natural-spline decode and against the dense Berrut matrix.

For N in 50, 100, 500, 1000, 2000, 4000, 8000, 16000 (the issue's K = 10, 20 and 100 at
N = 50, 100 and 500, N/10 from N = 1000 on), float64 results of width 10 (``--widths`` for
others), 20% random stragglers: every repeat draws one alive set, one ``X`` and one ``Y``,
and times in turn (the order of calls, and of sizes, rotated from one repeat to the next;
every repeat visits every size, so that load drifting over minutes is shared by all sizes):

- ``encode``: ``BACC.encode(X)``;
- ``decode``: ``BACC.decode(Y, alive)``, the cache cleared first (build + apply);
- ``spline``: ``GCC(K, N, decoding="spline").decode(Y, alive)``, the cache cleared first;
- ``dense enc``: the dense ``(N, K)`` encoder matrix (built once per row) times ``X``;
- ``dense dec``: ``berrut_matrix(beta[alive], alpha) @ Y`` (the dense decoder: build + apply;
  up to N = 8,000);
- ``fmm enc``, ``fmm dec``: the fast multipole path forced (``BerrutMap(..., dense=False)``,
  built once per row), whatever size BACC would switch to it at.

Per row: medians (ms), the paired ratio decode / spline (median of the per-repeat ratios with
a 95% bootstrap interval; goal <= 2 from N = 500 on), and at the end t(8N) / t(N) of every
column (median of the per-repeat ratios, 95% bootstrap interval; goal for BACC <= 10 from
N = 1000 to 8000, and 2000 to 16000).

``--baseline REV`` also times BACC as it was at git revision ``REV`` (``codes/bacc.py``,
``spline/berrut.py`` and ``spline/cauchy.py`` loaded beside the current ones; columns ``encode
@`` and ``decode @``), on the same draws, interleaved, and prints the paired ratios now / then
(medians of per-repeat ratios, 95% bootstrap intervals) and the largest relative difference
between the two versions' results.

One BLAS thread (threadpoolctl). ``--clock cpu`` times the calling thread's CPU time instead of
the elapsed time: on a machine whose cores other processes keep busy, a call of 10 ms is
preempted far more often than one of 0.1 ms, which inflates t(8N) / t(N) for every method
alike; the CPU time leaves that out (one BLAS thread: all the work is this thread's). Run:
``python benchmarks/perf/bench_master_bacc.py [--quick] [--widths 10 1 200] [--max-n 16000]
[--clock wall|cpu] [--sizes 1000 8000] [--baseline REV]``.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np
from threadpoolctl import threadpool_limits

import codedcomputing as cc
from codedcomputing.spline import berrut

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # benchmarks/: common.py
from common import CLOCKS, add_clock_option, bootstrap, load_module_at

berrut_matrix = berrut.berrut_matrix

SIZES = [50, 100, 500, 1000, 2000, 4000, 8000, 16000]


def bacc_at(rev: str):
    """``BACC`` as it was at git revision ``rev``: its ``codes/bacc.py``, ``spline/berrut.py`` and
    ``spline/cauchy.py`` as modules of the installed package beside the current ones (each
    importing the others at that revision)."""
    replace = {
        "from .cauchy import": "from ._cauchy_baseline import",
        "from ..spline.berrut import": "from ..spline._berrut_baseline import",
        # read_only moved from codes.base to _arraylib
        "from .base import Code, by_worker, read_only": (
            "from .base import Code, by_worker\nfrom .._arraylib import read_only"
        ),
    }
    load_module_at(rev, "spline/cauchy", "_cauchy_baseline", replace)
    load_module_at(rev, "spline/berrut", "_berrut_baseline", replace)
    return load_module_at(rev, "codes/bacc", "_bacc_baseline", replace).BACC


def num_inputs(n: int) -> int:
    return {50: 10, 100: 20, 500: 100}.get(n, n // 10)


def fresh(code):
    """A decode on a new alive set: the cache cleared (a serving master rarely sees one twice)."""

    def call(arg):
        code.clear_cache()
        code.decode(arg[2], arg[0])

    return call


def size_calls(n: int, width: int, rng, baseline=None, names=None) -> tuple:
    """``(setup, calls)`` of one size: ``setup()`` draws an alive set, ``X`` and ``Y``; each
    call times one thing on them. The dense decoder stops at N = 8,000 (seconds a call)."""
    k = num_inputs(n)
    bacc, spline = cc.BACC(k, n), cc.GCC(k, n, decoding="spline")
    alpha, beta = bacc.alpha, bacc.beta
    encoder = berrut_matrix(alpha, beta)

    def setup():
        alive = np.sort(rng.choice(n, n - n // 5, replace=False))
        return alive, rng.normal(size=(k, width)), rng.normal(size=(alive.size, width))

    calls = {
        "encode": lambda arg: bacc.encode(arg[1]),
        "decode": fresh(bacc),
        "spline": fresh(spline),
        "dense enc": lambda arg: encoder @ arg[1],
    }
    if n <= 8000:
        calls["dense dec"] = lambda arg: berrut_matrix(beta[arg[0]], alpha) @ arg[2]
    if hasattr(berrut, "BerrutMap"):  # absent before the fast path (for before/after runs)
        fmm_encoder = berrut.BerrutMap(alpha, beta, dense=False)
        fmm_decoder = berrut.BerrutMap(beta, alpha, dense=False)
        calls["fmm enc"] = lambda arg: fmm_encoder(arg[1])
        calls["fmm dec"] = lambda arg: fmm_decoder(arg[2], arg[0])
    if baseline is not None:
        then = baseline(k, n)
        calls["encode @"] = lambda arg: then.encode(arg[1])
        calls["decode @"] = fresh(then)
    calls = {name: call for name, call in calls.items() if names is None or name in names}
    for call in calls.values():  # maps built at the first use, and warm caches
        call(setup())
    return setup, calls


def agreement(n: int, width: int, rng, baseline) -> float:
    """The largest difference between BACC's encode and decode now and at the baseline, on one
    draw, relative to the largest magnitude of the result."""
    k = num_inputs(n)
    now, then = cc.BACC(k, n), baseline(k, n)
    X = rng.normal(size=(k, width))
    alive = np.sort(rng.choice(n, n - n // 5, replace=False))
    Y = np.tanh(now.encode(X)[alive])
    worst = 0.0
    for a, b in ((now.encode(X), then.encode(X)), (now.decode(Y, alive), then.decode(Y, alive))):
        worst = max(worst, float(np.abs(a - b).max() / np.abs(b).max()))
    return worst


def run(
    sizes: list[int], width: int, repeats: int, rng, clock=time.perf_counter, baseline=None, names=None
) -> dict:
    """Seconds of every call of every size at every repeat: each repeat visits every size
    (the order of sizes and of calls rotated from one repeat to the next), so that the
    machine's load, which drifts over minutes, is shared by all sizes and t(8N) / t(N) can
    be taken per repeat."""
    prepared = {n: size_calls(n, width, rng, baseline, names) for n in sizes}
    times = {n: {name: [] for name in prepared[n][1]} for n in sizes}
    for r in range(repeats):
        for n in sizes[r % len(sizes) :] + sizes[: r % len(sizes)]:
            setup, calls = prepared[n]
            arg = setup()
            names = list(calls)
            for name in names[r % len(names) :] + names[: r % len(names)]:
                start = clock()
                calls[name](arg)
                times[n][name].append(clock() - start)
    return {n: {name: np.array(t) for name, t in row.items()} for n, row in times.items()}


def ms(values) -> str:
    return f"{np.median(values) * 1e3:9.3f}" if values is not None else f"{'-':>9}"


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="fewer repeats")
    parser.add_argument("--widths", type=int, nargs="+", default=[10])
    parser.add_argument("--max-n", type=int, default=16000)
    parser.add_argument("--sizes", type=int, nargs="+", help="of SIZES (default: all up to --max-n)")
    parser.add_argument("--repeats", type=int, help="default 31, 11 with --quick")
    parser.add_argument("--baseline", metavar="REV", help="also time BACC at git revision REV, paired")
    parser.add_argument(
        "--skip", nargs="+", default=[], help="columns not to time (e.g. 'dense dec' 'fmm enc')"
    )
    parser.add_argument("--seed", type=int, default=0)
    add_clock_option(parser)
    args = parser.parse_args(argv)
    clock = CLOCKS[args.clock]
    rng = np.random.default_rng(args.seed)
    sizes = args.sizes or [n for n in SIZES if n <= args.max_n]
    repeats = args.repeats or (11 if args.quick else 31)
    baseline = bacc_at(args.baseline) if args.baseline else None
    names = ["encode", "decode", "spline", "dense enc", "dense dec"]
    if hasattr(berrut, "BerrutMap"):
        names += ["fmm enc", "fmm dec"]
    if baseline is not None:
        names += ["encode @", "decode @"]
    names = [name for name in names if name not in args.skip]
    with threadpool_limits(1):
        for width in args.widths:
            rows = run(sizes, width, repeats, rng, clock, baseline, names)
            print(
                f"\nwidth {width}, float64, 20% random stragglers, {repeats} repeats, {args.clock} clock, ms"
            )
            print(
                f"{'N':>6} {'K':>5} | "
                + " ".join(f"{name:>9}" for name in names)
                + " | decode/spline, median of paired ratios [95% CI]"
            )
            for n, t in rows.items():
                both = "decode" in t and "spline" in t
                ratio = bootstrap(t["decode"] / t["spline"], np.median, rng) if both else (np.nan,) * 3
                print(
                    f"{n:>6} {num_inputs(n):>5} | "
                    + " ".join(ms(t.get(name)) for name in names)
                    + f" | {ratio[0]:5.2f} [{ratio[1]:.2f}, {ratio[2]:.2f}]",
                    flush=True,
                )
            print(
                "t(8N) / t(N), median of per-repeat ratios [95% bootstrap interval] (goal for BACC: <= 10):"
            )
            for small in (1000, 2000):
                if small in rows and 8 * small in rows:
                    parts = []
                    for name in names:
                        if name in rows[small] and name in rows[8 * small]:
                            r = bootstrap(rows[8 * small][name] / rows[small][name], np.median, rng)
                            parts.append(f"{name} {r[0]:.1f} [{r[1]:.1f}, {r[2]:.1f}]")
                    print(f"  N = {small} -> {8 * small}: " + ", ".join(parts))
            if baseline is not None:
                print(
                    f"now / at {args.baseline}, median of paired ratios [95% CI]; "
                    "largest relative difference:"
                )
                for n, t in rows.items():
                    parts = []
                    for name in ("encode", "decode"):
                        if name in t and f"{name} @" in t:
                            r = bootstrap(t[name] / t[f"{name} @"], np.median, rng)
                            parts.append(f"{name} {r[0]:.2f} [{r[1]:.2f}, {r[2]:.2f}]")
                    print(f"  N = {n}: " + ", ".join(parts) + f"; {agreement(n, width, rng, baseline):.1e}")


if __name__ == "__main__":
    main()
