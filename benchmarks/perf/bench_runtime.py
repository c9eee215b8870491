"""Runtime costs: the master's overhead, Ray's dispatch overhead, and streaming.

1. Master overhead per call (encode + decode) of GCC and BACC as a fraction of the workers'
   compute, for LeNet-5 at K = 10, N = 50. The workers' compute is the N single-image
   forwards they run (timed one after another on this machine), and, as a stricter
   yardstick, one batched forward of all N coded images.
2. Per-call dispatch overhead of RayCluster against ThreadCluster at N = 8 and 32: a
   trivial f, no injected delays, medians of interleaved calls.
3. ``executor.map`` (encode of the next batch overlapping the current wait) against a loop
   of ``run`` calls, on a ThreadCluster with injected delays.

Usage: python benchmarks/perf/bench_runtime.py [--calls 40] [--skip-ray]
"""

from __future__ import annotations

import argparse
import time

import numpy as np

import codedcomputing as cc
from codedcomputing import datasets


def median_time(fn, repeats: int) -> float:
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return float(np.median(times))


def master_overhead(calls: int) -> None:
    k, n, s = 10, 50, 15
    f = cc.models.numpy_function("lenet5", progress=True)
    images = datasets.mnist().test_x
    rng = np.random.default_rng(0)
    x = images[:k]
    coded = cc.GCC(k, n).encode(x)
    f(coded)  # warm-up
    single = median_time(lambda: [f(coded[i : i + 1]) for i in range(n)], calls)
    batched = median_time(lambda: f(coded), calls)
    print(
        f"workers' compute, N = {n}: {n} single-image forwards {single * 1e3:.2f} ms, "
        f"one batch {batched * 1e3:.2f} ms"
    )
    outputs = f(coded)
    for code in (cc.GCC(k, n), cc.BACC(k, n)):
        results = f(code.encode(x))
        patterns = [np.sort(cc.stragglers.random(n, s, rng)) for _ in range(calls)]
        encode = median_time(lambda code=code: code.encode(x), calls)
        fresh, cached = [], []
        for alive in patterns:
            code.clear_cache()
            start = time.perf_counter()
            code.decode(results[alive], alive)
            fresh.append(time.perf_counter() - start)
            start = time.perf_counter()
            code.decode(results[alive], alive)
            cached.append(time.perf_counter() - start)
        master_fresh = encode + float(np.median(fresh))
        master_cached = encode + float(np.median(cached))
        print(
            f"{code.name}: encode {encode * 1e3:.3f} ms, "
            f"decode {np.median(fresh) * 1e3:.3f} ms (new alive set) / "
            f"{np.median(cached) * 1e3:.3f} ms (cached); master / workers' single-image compute = "
            f"{master_fresh / single:.2%} (new alive set), {master_cached / single:.2%} (cached); "
            f"master / one batched forward = {master_fresh / batched:.2%}"
        )
    del outputs


def dispatch(calls: int, skip_ray: bool) -> None:
    def f(x):
        return x * 2.0

    backends = {"thread": cc.ThreadCluster(num_threads=8, seed=0)}
    if not skip_ray:
        backends["ray"] = cc.RayCluster(seed=0, num_cpus=2)
    for n in (8, 32):
        inputs = np.ones((n, 16))
        for cluster in backends.values():  # warm-up: Ray starts its worker processes
            for _ in range(3):
                cluster.gather(f, inputs, n)
        times = {name: [] for name in backends}
        for _ in range(calls):  # interleaved, so that machine noise hits both alike
            for name, cluster in backends.items():
                start = time.perf_counter()
                cluster.gather(f, inputs, n)
                times[name].append(time.perf_counter() - start)
        medians = {name: float(np.median(t)) for name, t in times.items()}
        line = ", ".join(
            f"{name} {m * 1e3:.2f} ms/call ({m / n * 1e6:.0f} us/task)" for name, m in medians.items()
        )
        if "ray" in medians:
            line += f"; ray / thread = {medians['ray'] / medians['thread']:.1f}x"
        print(f"dispatch, N = {n}: {line}")
    for cluster in backends.values():
        cluster.close()


def streaming(calls: int) -> None:
    k, n = 10, 50
    f = cc.models.numpy_function("lenet5", progress=False)
    images = datasets.mnist().test_x
    batches = [images[i * k : (i + 1) * k] for i in range(calls)]
    for name in ("run loop", "map"):
        with cc.ThreadCluster(num_threads=2, delays=cc.delays.ShiftedExponential(0.005), seed=0) as cluster:
            executor = cc.CodedExecutor(cc.GCC(k, n), f, cluster)
            start = time.perf_counter()
            if name == "map":
                results = list(executor.map(batches, wait_for=n - 10))
            else:
                results = [executor.run(b, wait_for=n - 10) for b in batches]
            elapsed = time.perf_counter() - start
        assert len(results) == calls
        print(f"streaming, {calls} batches: {name} {elapsed / calls * 1e3:.2f} ms/batch")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=40)
    parser.add_argument("--skip-ray", action="store_true")
    args = parser.parse_args()
    master_overhead(args.calls)
    dispatch(args.calls, args.skip_ray)
    streaming(args.calls)


if __name__ == "__main__":
    main()
