"""Manifold-aware GCC, every design, against standard GCC and against BACC with the same
ordering: paired trials (the same inputs and straggler sets for every scheme), mean-MSE
ratios with 95% paired bootstrap intervals; then what the layouts cost.

Tasks: LeNet-5 and the ViT on MNIST test images (K = 10, N = 50 and K = 50, N = 250), and
two polynomial tasks with inputs on a known manifold: a curve and a surface embedded in
R^100 through a fixed random nonlinear map, f a fixed random cubic R^100 -> R^10.
Stragglers: random and contiguous (a block of neighbouring workers), S = 0, 20%, 40%, 60%
of N.

    python benchmarks/studies/bench_manifold.py            # 60 trials per setting
    python benchmarks/studies/bench_manifold.py --quick    # 12 trials, K = 10 only, smaller cost section
    python benchmarks/studies/bench_manifold.py --tasks lenet5 curve --sizes 10
    python benchmarks/studies/bench_manifold.py --tasks    # the cost section only

A ratio below 1 means the scheme's mean MSE is below the baseline's; the interval is over
trials (resampled in pairs), so an interval that excludes 1 is a paired difference.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np

import codedcomputing as cc
from codedcomputing.codes import layout
from codedcomputing.codes.layout import LAYOUTS, ChainLayout, ThinPlateLayout

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # benchmarks/: common.py
from common import ratio_interval, say

FRACTIONS = (0.0, 0.2, 0.4, 0.6)
PATTERNS = ("random", "contiguous")


def manifold_task(dim: int, seed: int = 7):
    """``(sample(rng, K) -> X, f)``: inputs ``x = sin(A t + b)`` for latent ``t`` uniform in
    [0, 1]^dim (a curve or a surface in R^100), ``f`` a fixed random cubic to R^10 (in 20
    random projections of ``x``)."""
    rng = np.random.default_rng(seed)
    lift, shift = rng.normal(0.0, 2.0, size=(dim, 100)), rng.uniform(0, 2 * np.pi, 100)
    project = rng.normal(size=(100, 20)) / np.sqrt(100)
    c1, c2, c3 = (rng.normal(size=(20, 10)) / np.sqrt(20) for _ in range(3))

    def sample(draw, k):
        return np.sin(draw.uniform(0, 1, (k, dim)) @ lift + shift)

    def f(x):
        p = np.asarray(x, dtype=np.float64).reshape(len(x), -1) @ project
        return p @ c1 + (p**2) @ c2 + (p**3) @ c3

    return sample, f


def task(name: str, data):
    if name in ("curve", "surface"):
        return manifold_task(1 if name == "curve" else 2)
    f = cc.models.numpy_function(name)
    pool = data.test_x

    def sample(draw, k):
        return pool[draw.choice(len(pool), k, replace=False)]

    return sample, f


def schemes(K: int, N: int, reference) -> dict:
    out = {"gcc": cc.GCC(K, N)}
    for design in LAYOUTS:
        if design == "none":
            continue
        out[design] = cc.ManifoldGCC(K, N, layout=design)
    out["chain-rank"] = cc.ManifoldGCC(K, N, layout=ChainLayout(spacing="rank"))
    out["chain-unsnapped"] = cc.ManifoldGCC(K, N, systematic=False)
    out["thin-plate-eigenmaps"] = cc.ManifoldGCC(K, N, layout=ThinPlateLayout(embedding="eigenmaps"))
    out["thin-plate-unsnapped"] = cc.ManifoldGCC(K, N, layout="thin-plate", systematic=False)
    if reference is not None:
        out["chain-reference"] = cc.ManifoldGCC(K, N, layout=ChainLayout(reference=reference))
        out["thin-plate-reference"] = cc.ManifoldGCC(K, N, layout=ThinPlateLayout(reference=reference))
    return out


def compare(name: str, K: int, trials: int, data, reference, seed: int = 0) -> None:
    N = 5 * K
    sample, f = task(name, data)
    codes = schemes(K, N, reference if name not in ("curve", "surface") else None)
    bacc, chain = cc.BACC(K, N), cc.ManifoldGCC(K, N)
    rng = np.random.default_rng([seed, K])
    settings = [(p, round(fr * N)) for p in PATTERNS for fr in FRACTIONS]
    names = [*codes, "bacc", "bacc-chain"]
    errors = {(s, c): [] for s in settings for c in names}
    start = time.perf_counter()
    for trial in range(trials):
        X = sample(rng, K)
        truth = f(X)
        alive_sets = {s: getattr(cc.stragglers, s[0])(N, s[1], rng) for s in settings}
        results = {}
        for code_name, code in codes.items():
            bound = code.bind(X)
            results[code_name] = (bound, f(bound.encode(X)), None)
        order = chain.bind(X).layout.order
        results["bacc"] = (bacc, f(bacc.encode(X)), None)
        results["bacc-chain"] = (bacc, f(bacc.encode(X[order])), np.argsort(order))
        for s, alive in alive_sets.items():
            for code_name, (bound, Y, back) in results.items():
                est = bound.decode(Y[alive], alive)
                errors[s, code_name].append(cc.metrics.mse(est if back is None else est[back], truth))
        if (trial + 1) % max(1, trials // 4) == 0:
            say(f"  {name} K={K}: trial {trial + 1}/{trials} ({time.perf_counter() - start:.0f} s)")
    boot = np.random.default_rng(1)
    shown = [c for c in names if c != "gcc"]
    say(f"\n{name}, K = {K}, N = {N}, {trials} trials: mean MSE / standard GCC's [95% paired bootstrap]")
    say(f"{'stragglers':>16} {'gcc MSE':>9} " + " ".join(f"{c:>22}" for c in shown))
    for s in settings:
        base = np.array(errors[s, "gcc"])
        cells = []
        for c in shown:
            r, lo, hi = ratio_interval(np.array(errors[s, c]), base, boot)
            cells.append(f"{r:6.2f} [{lo:4.2f},{hi:5.2f}]")
        say(f"{s[0]:>10} S={s[1]:<3d} {base.mean():9.3g} " + " ".join(f"{c:>22}" for c in cells))
    say(
        f"{'vs bacc-chain':>16} {'':>9} "
        + " ".join(f"{c:>22}" for c in shown if c.startswith(("chain", "thin")))
    )
    for s in settings:
        base = np.array(errors[s, "bacc-chain"])
        cells = []
        for c in shown:
            if c.startswith(("chain", "thin")):
                r, lo, hi = ratio_interval(np.array(errors[s, c]), base, boot)
                cells.append(f"{r:6.2f} [{lo:4.2f},{hi:5.2f}]")
        say(f"{s[0]:>10} S={s[1]:<3d} {'':>9} " + " ".join(f"{c:>22}" for c in cells))


def cost(sizes, data, reference) -> None:
    say("\ncost: layout seconds per bind (MNIST images, 784 values; median of 3), N = 5K")
    images = data.train_x.reshape(len(data.train_x), -1).astype(np.float64)
    say(f"{'design':>24} " + " ".join(f"{'K=' + str(k):>10}" for k in sizes))
    variants = {d: {"layout": d} for d in LAYOUTS if d != "none"}
    variants["chain-reference"] = {"layout": ChainLayout(reference=reference)}
    variants["thin-plate-reference"] = {"layout": ThinPlateLayout(reference=reference)}
    for label, options in variants.items():
        cells = []
        for k in sizes:
            X = images[np.arange(k) % len(images)]
            code = cc.ManifoldGCC(k, 5 * k, **options)
            times = sorted(code.bind(X).layout.seconds for _ in range(3))
            cells.append(f"{times[1]:10.3f}")
        say(f"{label:>24} " + " ".join(cells))
    for model in ("lenet5", "vit"):  # what the layout is set against: f on the N coded inputs
        f, cells = cc.models.numpy_function(model), []
        for k in sizes:
            coded = images[np.arange(5 * k) % len(images)].reshape(-1, *data.train_x.shape[1:])
            times = []
            for _ in range(3):
                t0 = time.perf_counter()
                f(coded)
                times.append(time.perf_counter() - t0)
            cells.append(f"{sorted(times)[1]:10.3f}")
        say(f"{model + ' on the N inputs':>24} " + " ".join(cells) + "   (the workers' compute, one process)")
    say("\ncost: k-nearest-neighbour graph (k = 10) seconds")
    for k in sizes:
        X = images[-k:]
        t0 = time.perf_counter()
        layout.knn_graph(layout.pairwise_distances(X), 10)
        t1 = time.perf_counter()
        ref = layout.Reference(reference, 10)  # the reference's own graph: once per code
        t2 = time.perf_counter()
        ref.geodesic_distances(X)
        t3 = time.perf_counter()
        say(
            f"  K={k}: batch only {t1 - t0:.3f} s; reference of {len(reference)}: its graph {t2 - t1:.3f} s "
            f"(once), the batch joined to it + geodesics {t3 - t2:.3f} s per batch"
        )


def path_statistics(data, trials: int = 100) -> None:
    """What ordering has to work with: the chain's mean step over the drawn order's, and
    over the batch's median pairwise distance (medians over random batches). A step close
    to the typical distance means neighbours in the batch are hardly nearer than strangers,
    so no order makes the encoder's curve short."""
    say(f"\nwhy: the chain's mean step (medians over {trials} random batches)")
    images = data.test_x.reshape(len(data.test_x), -1).astype(np.float64)
    rng = np.random.default_rng(3)
    samplers = {"mnist": lambda draw, k: images[draw.choice(len(images), k, replace=False)]}
    for name in ("curve", "surface"):
        samplers[name] = manifold_task(1 if name == "curve" else 2)[0]
    for name, sample in samplers.items():
        for k in (10, 50):
            rows = []
            for _ in range(trials):
                D = layout.pairwise_distances(sample(rng, k).reshape(k, -1))
                step = layout.path_length(D, layout.chain_order(D)) / (k - 1)
                drawn = layout.path_length(D, np.arange(k)) / (k - 1)
                rows.append((step / drawn, step / np.median(D[np.triu_indices(k, 1)])))
            over_drawn, over_typical = np.median(rows, axis=0)
            say(
                f"  {name:>8} K={k:<3d} step / drawn order's {over_drawn:.2f}, "
                f"/ median distance {over_typical:.2f}"
            )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--trials", type=int, default=None)
    parser.add_argument(
        "--tasks",
        nargs="*",
        default=["lenet5", "vit", "curve", "surface"],
        help="none (--tasks alone) runs the cost section only",
    )
    parser.add_argument("--sizes", nargs="+", type=int, default=None)
    parser.add_argument("--no-cost", action="store_true")
    args = parser.parse_args()
    trials = args.trials or (12 if args.quick else 60)
    sizes = args.sizes or ([10] if args.quick else [10, 50])
    data = cc.datasets.mnist()
    reference = data.train_x[: 1000 if args.quick else 4000]
    for K in sizes:
        for name in args.tasks:
            say(f"{name} K={K}: {trials} trials ...")
            compare(name, K, trials, data, reference)
    path_statistics(data, 30 if args.quick else 100)
    if not args.no_cost:
        cost([100] if args.quick else [100, 1000], data, reference)


if __name__ == "__main__":
    main()
