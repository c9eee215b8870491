"""RayCluster: what skipping the tasks of an answered call saves, and what it costs.

1. Effect. ``f`` busy-loops ``--compute-ms`` per task (each value in turn) on ``--cpus``
   CPUs. A call waits for the first N - S of N workers, and a second call is dispatched at
   once, behind the first call's unstarted tasks. Time of the second call with skipping off
   (``skip_min_s=inf``: the queue runs ``f`` to the end) and on (default), interleaved;
   medians, and how many tasks ran ``f`` per pair of calls.
2. Cost. Dispatch time per call of a trivial ``f`` at N = 8 and 32, no injected delays:
   skipping never, by default (a trivial ``f`` is not worth skipping: no gate) and always
   (``skip_min_s=0``: every task looks at the call's gate); medians of interleaved calls.
3. ``--stress R``: R runs of ``--calls`` coded calls of N = 50 tasks each (``f`` 10 ms,
   skipping always, injected faults with a hang in one call of 5, random ``wait_for``):
   every call must decode, no call may wait long, and the driver must stay alive
   (``ray.cancel`` of such tasks crashed Ray 2.60's driver within 30-40 calls).

Usage: python benchmarks/perf/bench_ray_cancel.py [--repeats 10] [--compute-ms 20 100] [--calls 40]
       [--stress 0]
"""

from __future__ import annotations

import argparse
import os
import tempfile
import time

import numpy as np

import codedcomputing as cc


class BusyCounting:
    """``2 x``, after busy-looping ``seconds``; appends a byte to ``path`` per run."""

    def __init__(self, seconds: float, path: str):
        self.seconds, self.path = seconds, path

    def __call__(self, x):
        with open(self.path, "ab") as runs:
            runs.write(b".")
        end = time.perf_counter() + self.seconds
        while time.perf_counter() < end:
            pass
        return x * 2.0


def runs(path: str) -> int:
    return os.path.getsize(path) if os.path.exists(path) else 0


def effect(repeats: int, compute_ms: float, n: int, s: int, log: str) -> None:
    f = BusyCounting(compute_ms / 1e3, log)
    inputs = np.ones((n, 4))
    clusters = {
        "skipping off": cc.RayCluster(seed=0, skip_min_s=np.inf),
        "skipping on": cc.RayCluster(seed=0),
    }
    drain = n * compute_ms / 1e3 + 0.5  # the whole queue of one call on one CPU, and then some
    for cluster in clusters.values():  # warm-up: worker processes, f timed, the board started
        for _ in range(2):
            cluster.gather(f, inputs, n)
        time.sleep(drain)
    second = {name: [] for name in clusters}
    ran = {name: [] for name in clusters}
    for _ in range(repeats):  # interleaved, so that machine noise hits both alike
        for name, cluster in clusters.items():
            before = runs(log)
            cluster.gather(f, inputs, n - s)
            start = time.perf_counter()
            result = cluster.gather(f, inputs, n - s)
            second[name].append(time.perf_counter() - start)
            assert result.alive.size == n - s
            time.sleep(drain)
            ran[name].append(runs(log) - before)
    medians = {name: float(np.median(t)) for name, t in second.items()}
    line = ", ".join(
        f"{name} {m * 1e3:.0f} ms ({np.median(ran[name]):.0f} of {2 * n} tasks ran f)"
        for name, m in medians.items()
    )
    print(
        f"effect, f {compute_ms:g} ms, N = {n}, wait for {n - s}, second call: {line}; "
        f"on / off = {medians['skipping on'] / medians['skipping off']:.2f}"
    )
    for cluster in clusters.values():
        cluster.close()


def cost(calls: int) -> None:
    def f(x):
        return x * 2.0

    clusters = {
        "never": cc.RayCluster(seed=0, skip_min_s=np.inf),
        "default": cc.RayCluster(seed=0),
        "always": cc.RayCluster(seed=0, skip_min_s=0.0),
    }
    for n in (8, 32):
        inputs = np.ones((n, 16))
        for cluster in clusters.values():  # warm-up: worker processes, f timed, the board started
            for _ in range(3):
                cluster.gather(f, inputs, n)
        times = {name: [] for name in clusters}
        for _ in range(calls):
            for name, cluster in clusters.items():
                start = time.perf_counter()
                cluster.gather(f, inputs, n)
                times[name].append(time.perf_counter() - start)
        medians = {name: float(np.median(t)) for name, t in times.items()}
        line = ", ".join(f"{name} {m * 1e3:.1f} ms/call" for name, m in medians.items())
        extra = (medians["always"] - medians["never"]) / n
        print(f"cost, trivial f, N = {n}: {line}; gate looked at by every task: {extra * 1e6:+.0f} us/task")
    for cluster in clusters.values():
        cluster.close()


class FaultsAndAHang(cc.faults.FaultModel):
    """Independent ``"raise"`` and ``"nan"`` faults, and one hang in 5 calls (two would hold
    both CPUs of a 2-CPU node until the deadline)."""

    def __init__(self):
        self.independent = cc.faults.Independent({"raise": 0.02, "nan": 0.02})

    def _sample(self, num_workers, rng):
        faults = self.independent.sample(num_workers, rng)
        if rng.random() < 0.2:
            faults[int(rng.integers(num_workers))] = "hang"
        return faults


def stress(num_runs: int, calls: int, log: str) -> None:
    n, k = 50, 10
    rng = np.random.default_rng(0)
    code = cc.GCC(k, n)
    f = BusyCounting(0.01, log)
    for run in range(num_runs):
        cluster = cc.RayCluster(faults=FaultsAndAHang(), seed=run, skip_min_s=0.0)
        executor = cc.CodedExecutor(code, f, cluster)
        start, before, hangs, slowest = time.perf_counter(), runs(log), 0, 0.0
        for _ in range(calls):
            x = rng.normal(size=(k, 4))
            result = executor.run(x, wait_for=int(rng.integers(k + 5, n - 5)), deadline=60)
            alive = result.alive
            expected = code.decode(2.0 * code.encode(x)[alive], alive)
            np.testing.assert_allclose(result.estimates, expected, rtol=1e-9, atol=1e-12)
            hangs += list(result.report.faults.values()).count("hang")
            slowest = max(slowest, result.report.wait_s)
        cluster.close()
        print(
            f"stress run {run + 1}/{num_runs}: {calls}/{calls} calls of N = {n} decoded, driver alive; "
            f"{runs(log) - before} of {calls * n} tasks ran f, {hangs} hangs ended; slowest wait "
            f"{slowest:.2f} s, {time.perf_counter() - start:.1f} s in all"
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=10)
    parser.add_argument("--calls", type=int, default=40)
    parser.add_argument("--compute-ms", type=float, nargs="+", default=[20.0, 100.0])
    parser.add_argument("--workers", type=int, default=24)
    parser.add_argument("--stragglers", type=int, default=12)
    parser.add_argument("--cpus", type=int, default=2)
    parser.add_argument("--stress", type=int, default=0, help="stress runs (0: none)")
    args = parser.parse_args()
    import ray

    os.environ.setdefault("RAY_IGNORE_UNHANDLED_ERRORS", "1")  # injected faults nobody waited for
    ray.init(num_cpus=args.cpus, include_dashboard=False, log_to_driver=False, configure_logging=False)
    with tempfile.TemporaryDirectory() as folder:
        log = os.path.join(folder, "runs")
        for compute_ms in args.compute_ms:
            effect(args.repeats, compute_ms, args.workers, args.stragglers, log)
        cost(args.calls)
        if args.stress:
            stress(args.stress, args.calls, log)
    ray.shutdown()


if __name__ == "__main__":
    main()
