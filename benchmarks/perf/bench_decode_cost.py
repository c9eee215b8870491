"""What a GCC decode, GCV and the master's small products cost, each against the design it replaced.

Prints medians of interleaved repeats (alternatives timed in turn, so they share the machine's
noise). Sections:

1. decode: K = N / 10, output width 200 (float32), 90% of the workers returned, a new alive
   set at every repeat, lambda in {0, 1e-9, 1e-6}, N = 2000 and 16000. Per row: main's
   decoder (SmoothingMap, built and applied), the chooser (SplineDecoder, built and applied:
   the route it took and what it predicted), the banded fit ``cc.spline.fit(knots, Y,
   lam)(points)``, and both decoders reused on one alive set (GCC caches them); then
   t(8N) / t(N) and the chooser against the banded fit.
2. GCV: the influence matrix's diagonal (the previous row-by-row one against the O(n)
   recurrence) and a whole ``gcv_score``, per lambda, on n alive Chebyshev knots, n = 2000,
   8000, 16000, c = lambda / h^4 in {1e-2, 1e4}; then t(8n) / t(n) and ``gcv_lambda`` over
   the default grid.
3. BLAS threads: GCC's encode (a float32 batch, K = N / 10, width 1000) and its interpolating
   decoder's product, N = 50 .. 2000, with one BLAS thread for small products and without
   (``_arraylib.SMALL_PRODUCT = 0``), beside a subprocess that spins on one CPU; torch
   tensors too; and what limiting costs per call (threadpoolctl's ``threadpool_limits``, a
   kept controller's ``limit``, and ours).
4. The adaptive decoder against the natural spline (lambda = 0), through ``GCC.decode``,
   N = 50 .. 16000, output widths 10, 200 and 1000: a new alive set (the decoder built) and a
   cached one.

Run: ``python benchmarks/perf/bench_decode_cost.py [--quick] [--spinners 1] [--only adaptive]``.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import time
import warnings
from pathlib import Path

import numpy as np
import torch
from threadpoolctl import ThreadpoolController, threadpool_limits

import codedcomputing as cc
from codedcomputing import _arraylib
from codedcomputing.spline import gcv
from codedcomputing.spline.maps import SmoothingMap, SplineDecoder

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # benchmarks/: common.py
from common import median_seconds


def ms(seconds: float) -> str:
    return f"{seconds * 1e3:9.1f}" if seconds >= 0.01 else f"{seconds * 1e3:9.2f}"


# -- 1. decode ------------------------------------------------------------------------------


def decode_row(n_workers: int, lam: float, width: int, repeats: int, rng) -> dict:
    """One row of section 1: the three decodes on fresh alive sets, then the reused ones."""
    code = cc.GCC(n_workers // 10, n_workers)
    alpha, beta = code.alpha, code.beta
    if n_workers >= 8000 and lam > 0:  # main's map takes seconds here: fewer repeats
        repeats = max(2, repeats // 2)

    def setup(_):
        alive = cc.stragglers.random(n_workers, n_workers // 10, rng)
        return beta[alive], rng.normal(size=(alive.size, width)).astype(np.float32)

    routes = []

    def chooser(arg):
        decoder = SplineDecoder(arg[0], lam, alpha)
        routes.append(decoder.plan(width))
        decoder(arg[1])

    t = median_seconds(
        {
            "main": lambda arg: SmoothingMap(arg[0], lam, alpha)(arg[1]),
            "chooser": chooser,
            "fit": lambda arg: cc.spline.fit(arg[0], arg[1], lam)(alpha),
        },
        repeats,
        setup,
        idle=0.1,
    )
    knots, y = setup(0)
    main_map, reused = SmoothingMap(knots, lam, alpha), SplineDecoder(knots, lam, alpha)
    for _ in range(30):  # the reused decoder's steady state (once its savings pay, it builds its map)
        reused(y)
        if reused._map is not None:
            break
    cached = median_seconds(
        {"cached main": lambda _: main_map(y), "cached chooser": lambda _: reused(y)}, repeats, idle=0.1
    )
    costs = SplineDecoder(knots, lam, alpha).costs
    return {
        **t,
        **cached,
        "route": max(set(routes), key=routes.count),
        "cached route": reused.plan(width),
        "predicted": (costs.map_seconds(width), costs.banded_seconds(width)),
    }


def decode(sizes, lambdas, width, repeats, rng):
    print(f"\n1. decode: K = N/10, width {width} float32, 90% returned, a new alive set a repeat (median ms)")
    print(
        f"{'N':>6} {'lambda':>7} | {'main map':>9} {'chooser':>9} {'route':>6} {'banded fit':>10} "
        f"{'chooser/fit':>11} | {'cached main':>11} {'cached chooser':>14} {'route':>6} | "
        "predicted map / banded"
    )
    rows = {}
    for n_workers in sizes:
        for lam in lambdas:
            row = rows[(n_workers, lam)] = decode_row(n_workers, lam, width, repeats, rng)
            print(
                f"{n_workers:>6} {lam:>7g} | {ms(row['main'])} {ms(row['chooser'])} {row['route']:>6} "
                f"{ms(row['fit']):>10} {row['chooser'] / row['fit']:>11.2f} | {ms(row['cached main']):>11} "
                f"{ms(row['cached chooser']):>14} {row['cached route']:>6} | "
                f"{row['predicted'][0] * 1e3:.1f} / {row['predicted'][1] * 1e3:.1f}"
            )
    print("t(8N) / t(N), N = 2000 -> 16000 (8 = linear; goal for the chooser: <= 10):")
    timed = ("main", "chooser", "fit", "cached main", "cached chooser")
    for lam in lambdas:
        if (2000, lam) in rows and (16000, lam) in rows:
            small, big = rows[(2000, lam)], rows[(16000, lam)]
            print(
                f"  lambda = {lam:g}: " + ", ".join(f"{name} {big[name] / small[name]:.1f}" for name in timed)
            )
    worst = max(row["chooser"] / row["fit"] for row in rows.values())
    print(f"chooser / banded fit, worst row (goal: <= 1.5): {worst:.2f}")
    return rows


# -- 2. GCV ---------------------------------------------------------------------------------


def chebyshev_alive(n: int, rng) -> np.ndarray:
    total = round(n / 0.9)
    beta = np.sort(np.cos(np.pi * np.arange(total) / (total - 1)))
    return beta[np.sort(rng.choice(total, size=n, replace=False))]


def gcv_row(t: np.ndarray, y: np.ndarray, c: float, repeats: int, old: bool) -> dict:
    """One row of section 2: the new diagonal, a whole gcv_score and (if ``old``) the old diagonal."""
    n = t.size
    lam = c * (2.0 / (n - 1)) ** 4
    row = median_seconds(
        {
            "new": lambda _: gcv._influence_complement(t, lam),
            "score": lambda _: cc.spline.gcv_score(t, y, lam),
        },
        repeats,
    )
    row["old"] = row["diff"] = float("nan")
    if old:
        kept = {}
        old_repeats = 1 if c > 1 and n > 2000 else max(1, repeats // 2)
        row["old"] = median_seconds(
            {"old": lambda _: kept.update(d=gcv._influence_diagonal_by_rows(t, lam))}, old_repeats
        )["old"]
        row["diff"] = float(np.abs(gcv._influence_complement(t, lam) - (1 - kept["d"])).max())
    return row


def gcv_cost(sizes, cs, repeats, rng, old_limit):
    print("\n2. GCV per lambda on n alive Chebyshev knots (median ms; 'old' = the row-by-row diagonal)")
    print(
        f"{'n':>6} {'c':>6} | {'old diagonal':>12} {'new diagonal':>12} {'speedup':>8} | "
        f"{'gcv_score':>9} | max |new - old|"
    )
    rows = {}
    for n in sizes:
        t = chebyshev_alive(n, rng)
        y = (np.sin(3 * t) + 0.1 * rng.normal(size=n))[:, None]
        for c in cs:
            # the old diagonal's cost grows with the bandwidth, ~ c^(1/4) knots: skip its slowest
            row = rows[(n, c)] = gcv_row(t, y, c, repeats, old=n * max(1.0, c) ** 0.25 <= old_limit)
            print(
                f"{n:>6} {c:>6g} | {ms(row['old']):>12} {ms(row['new']):>12} "
                f"{row['old'] / row['new']:>8.1f} | "
                f"{ms(row['score']):>9} | {row['diff']:.1e}"
            )
    print("t(8n) / t(n), n = 2000 -> 16000 (8 = linear), of the new diagonal and of gcv_score:")
    for c in cs:
        if (2000, c) in rows and (16000, c) in rows:
            small, big = rows[(2000, c)], rows[(16000, c)]
            print(
                f"  c = {c:g}: diagonal {big['new'] / small['new']:.1f}, "
                f"gcv_score {big['score'] / small['score']:.1f}"
            )
    print("gcv_lambda over the default grid (13 lambdas):")
    for n in sizes:
        t = chebyshev_alive(n, rng)
        y = (np.sin(3 * t) + 0.1 * rng.normal(size=n))[:, None]
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)
            seconds = median_seconds(
                {"gcv": lambda _, t=t, y=y: cc.spline.gcv_lambda(t, y)}, max(1, repeats // 2)
            )
        print(f"  n = {n}: {seconds['gcv'] * 1e3:.0f} ms")


# -- 3. BLAS threads --------------------------------------------------------------------------


def spin(count: int) -> list:
    procs = [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(count)]
    time.sleep(0.5)
    return procs


def with_limit(on: bool, fn):
    saved = _arraylib.SMALL_PRODUCT
    _arraylib.SMALL_PRODUCT = saved if on else 0
    try:
        return fn()
    finally:
        _arraylib.SMALL_PRODUCT = saved


def blas_row(n_workers: int, width: int, repeats: int, rng) -> dict:
    """One row of section 3: encode (numpy and torch) and the interpolating decoder's product,
    with and without the limit, interleaved."""
    code = cc.GCC(max(2, n_workers // 10), n_workers)
    x = rng.normal(size=(code.num_inputs, width)).astype(np.float32)
    xt = torch.from_numpy(x)
    alive = cc.stragglers.random(n_workers, n_workers // 10, rng)
    decoder = SmoothingMap(code.beta[alive], 0.0, code.alpha)
    y = code.encode(x)[alive]
    return median_seconds(
        {
            "enc all": lambda _: with_limit(False, lambda: code.encode(x)),
            "enc one": lambda _: with_limit(True, lambda: code.encode(x)),
            "dec all": lambda _: with_limit(False, lambda: decoder(y)),
            "dec one": lambda _: with_limit(True, lambda: decoder(y)),
            "torch all": lambda _: with_limit(False, lambda: code.encode(xt)),
            "torch one": lambda _: with_limit(True, lambda: code.encode(xt)),
        },
        repeats,
        idle=0.2,
    )


def blas_threads(sizes, width, repeats, spinners, rng):
    print(
        f"\n3. master-side products beside {spinners} spinning process(es): K = N/10, width {width} float32 "
        f"(median ms; 'one' = one thread for products up to 2^{int(np.log2(_arraylib.SMALL_PRODUCT))} "
        "multiply-adds, 'all' = the default threads)"
    )
    print(
        f"{'N':>6} | {'encode all':>10} {'one':>8} {'x':>6} | {'decode all':>10} {'one':>8} {'x':>6} | "
        f"{'torch enc all':>13} {'one':>8} {'x':>6}"
    )
    procs = spin(spinners)
    try:
        for n_workers in sizes:
            t = blas_row(n_workers, width, repeats, rng)
            cells = [
                f"{ms(t[f'{kind} all']):>{w}} {ms(t[f'{kind} one']):>8} "
                f"{t[f'{kind} all'] / t[f'{kind} one']:>6.1f}"
                for kind, w in (("enc", 10), ("dec", 10), ("torch", 13))
            ]
            print(f"{n_workers:>6} | " + " | ".join(cells))
    finally:
        for proc in procs:
            proc.kill()
    controller = ThreadpoolController()

    def fresh(_):
        with threadpool_limits(1, user_api="blas"):
            pass

    def kept(_):
        with controller.limit(limits=1, user_api="blas"):
            pass

    def ours(_):
        with _arraylib.one_blas_thread:
            pass

    t = median_seconds({"fresh": fresh, "kept": kept, "ours": ours}, 200)
    print(
        f"cost of limiting, per call: threadpool_limits {t['fresh'] * 1e6:.0f} us, a kept controller's "
        f"limit {t['kept'] * 1e6:.1f} us, ours {t['ours'] * 1e6:.1f} us "
        f"({len(_arraylib.one_blas_thread.libraries)} BLAS libraries)"
    )


# -- 4. the adaptive decoder ----------------------------------------------------------------


def adaptive_row(n: int, width: int, repeats: int, rng) -> tuple[dict, dict]:
    """One row of section 4: both decoders on fresh alive sets (caches cleared), then on one
    alive set decoded again."""
    spline, adaptive = cc.GCC(n // 10, n, decoding="spline"), cc.GCC(n // 10, n, decoding="adaptive")

    def setup(_):
        alive = cc.stragglers.random(n, n // 10, rng)
        return alive, rng.normal(size=(alive.size, width)).astype(np.float32)

    def fresh(code):
        def call(arg):
            code.clear_cache()
            code.decode(arg[1], arg[0])

        return call

    new = median_seconds({"spline": fresh(spline), "adaptive": fresh(adaptive)}, repeats, setup)
    alive, y = setup(0)
    spline.decode(y, alive), adaptive.decode(y, alive)  # warm the caches

    def again(code):
        return lambda _: code.decode(y, alive)

    return new, median_seconds({"spline": again(spline), "adaptive": again(adaptive)}, repeats)


def adaptive_cost(sizes, widths, repeats, rng):
    """GCC's adaptive decoder against its natural-spline decoder (lambda = 0), through
    ``GCC.decode``: a new alive set at every repeat (the decoder is built), and one alive set
    decoded again (cached). BLAS runs on one thread: on the shared machine a second thread
    only adds noise to the comparison (goal: adaptive / spline <= 2 in every cell)."""
    print("\n4. adaptive decoder vs natural spline, GCC.decode, K = N/10, 90% returned")
    print("   (median ms, one BLAS thread)")
    print(
        f"{'N':>6} {'width':>5} | {'spline new':>10} {'adaptive new':>12} {'x':>5} | "
        f"{'spline cached':>13} {'adaptive cached':>15} {'x':>5}"
    )
    with threadpool_limits(1, user_api="blas"):
        for n in sizes:
            for width in widths:
                new, cached = adaptive_row(n, width, repeats, rng)
                print(
                    f"{n:>6} {width:>5} | {ms(new['spline'])} {ms(new['adaptive']):>12} "
                    f"{new['adaptive'] / new['spline']:5.2f} | {ms(cached['spline']):>13} "
                    f"{ms(cached['adaptive']):>15} {cached['adaptive'] / cached['spline']:5.2f}",
                    flush=True,
                )


SECTIONS = ("decode", "gcv", "blas", "adaptive")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="fewer repeats; skip main's slowest maps")
    parser.add_argument("--spinners", type=int, default=1, help="busy processes beside section 3")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--only", nargs="+", choices=SECTIONS, default=SECTIONS, help="sections to run")
    args = parser.parse_args()
    rng = np.random.default_rng(args.seed)
    repeats = 3 if args.quick else 7
    if "decode" in args.only:
        decode([2000, 16000], [0.0, 1e-9, 1e-6], 200, repeats, rng)
    if "gcv" in args.only:
        gcv_cost([2000, 8000, 16000], [1e-2, 1e4], repeats, rng, old_limit=4000 if args.quick else 10**5)
    if "blas" in args.only:
        blas_threads([50, 100, 250, 500, 1000, 2000], 1000, 5 if args.quick else 15, args.spinners, rng)
    if "adaptive" in args.only:
        adaptive_cost([50, 250, 2000, 16000], [10, 200, 1000], 3 * repeats, rng)


if __name__ == "__main__":
    main()
