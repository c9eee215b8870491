"""What answering per query costs the master: ``run_queries`` against ``run``.

1. Master seconds per call on the simulated clock (nothing sleeps, so the figure is the
   master's own work: encode, the collecting loop with its predicate and arrival hook,
   decode). Both methods run the same code with the same wait rule (the first ``w`` of N),
   on clusters with the same seed, so every call sees the same delays; calls alternate
   between the two. Codes: non-systematic GCC (the same gather and decode for both: the
   difference is run_queries' bookkeeping) and systematic GCC (run_queries skips the decode
   when every input's own result is in). Paired ratio of per-call seconds: median with a
   95% bootstrap interval.
2. On a ThreadCluster: how late ``on_answer`` fires after the arrival it reports (the
   callback's clock minus the call's dispatch time minus ``answered_s``), against the
   overshoot of a bare 5 ms timed wait measured between the calls (the machine's own
   wake-up latency: the collecting loop is woken the same way), and how much earlier own
   answers come than the call's end (``report.wait_s - answered_s``); medians and 95%
   bootstrap intervals over the own answers of ``--thread-calls`` calls.

Usage: python benchmarks/perf/bench_run_queries.py [--calls 200] [--thread-calls 30]
"""

from __future__ import annotations

import argparse
import sys
import threading
import time
from pathlib import Path

import numpy as np

import codedcomputing as cc

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # benchmarks/: common.py
from common import bootstrap

RNG = np.random.default_rng(0)


def master_cost(calls: int) -> None:
    print("1. master seconds per call, simulated clock (same delays for both methods)")
    print(f"{'code':>22} {'K':>4} {'N':>5} {'w':>5} {'run ms':>8} {'queries ms':>11} {'ratio [95% CI]':>24}")
    delays = cc.delays.Bimodal(base=1.0, p=0.05, slowdown=10.0)
    W = RNG.normal(size=(16, 8)) / 4

    def f(x):
        return np.tanh(x @ W)

    for name, k, n in [
        ("GCC", 10, 15),
        ("GCC systematic", 10, 15),
        ("GCC", 100, 150),
        ("GCC systematic", 100, 150),
        ("GCC systematic", 500, 750),
    ]:
        code = cc.GCC(k, n, systematic=name.endswith("systematic"))
        wait_for = n - n // 10
        plain = cc.CodedExecutor(code, f, cc.SimulatedCluster(delays=delays, seed=7))
        per_query = cc.CodedExecutor(code, f, cc.SimulatedCluster(delays=delays, seed=7))
        batches = [RNG.normal(size=(k, 16)) for _ in range(calls)]
        for X in batches[:3]:  # warm the decoder cache for both alike
            plain.run(X, wait_for=wait_for)
            per_query.run_queries(X, wait_for=wait_for)
        plain = cc.CodedExecutor(code, f, cc.SimulatedCluster(delays=delays, seed=7))
        per_query = cc.CodedExecutor(code, f, cc.SimulatedCluster(delays=delays, seed=7))
        run_s, queries_s = [], []
        methods = [(run_s, plain.run), (queries_s, per_query.run_queries)]
        for i, X in enumerate(batches):
            for times, method in methods if i % 2 == 0 else methods[::-1]:
                start = time.perf_counter()
                method(X, wait_for=wait_for)
                times.append(time.perf_counter() - start)
        ratio, low, high = bootstrap(np.array(queries_s) / np.array(run_s), np.median, RNG)
        print(
            f"{name:>22} {k:>4} {n:>5} {wait_for:>5} {np.median(run_s) * 1e3:8.3f} "
            f"{np.median(queries_s) * 1e3:11.3f} {ratio:8.3f} [{low:.3f}, {high:.3f}]"
        )


def recorder(seen: dict):
    """An ``on_answer`` that notes when each input's answer reached it."""
    return lambda k, estimate, exact, seconds: seen.setdefault(k, time.perf_counter())


def record_calls(cluster) -> list:
    """The calls ``cluster.submit`` makes from now on (each holds its dispatch time, ``started``)."""
    calls = []
    submit = cluster.submit

    def recorded(*args, **kwargs):
        calls.append(submit(*args, **kwargs))
        return calls[-1]

    cluster.submit = recorded
    return calls


def callback_lag(calls: int) -> None:
    print("\n2. ThreadCluster: on_answer's lag behind the arrival it reports, and own answers' lead")
    k, n = 10, 15
    W = RNG.normal(size=(16, 8)) / 4

    def f(x):
        return np.tanh(x @ W)

    settings = {
        "bimodal": cc.delays.Bimodal(base=0.02, p=0.1, slowdown=10.0),  # the fast ones within ~2 ms
        "5 ms apart": cc.delays.Trace([0.01 + 0.005 * RNG.permutation(n)]),  # one arrival at a time
    }
    for setting, delays in settings.items():
        lags, leads, overshoots = [], [], []
        with cc.ThreadCluster(num_threads=4, delays=delays, seed=11) as cluster:
            submitted = record_calls(cluster)
            executor = cc.CodedExecutor(cc.GCC(k, n, systematic=True), f, cluster)
            for _ in range(calls):
                # The machine's own wake-up latency now, for reference: a timed wait's overshoot.
                for _ in range(5):
                    start = time.perf_counter()
                    threading.Event().wait(0.005)
                    overshoots.append(time.perf_counter() - start - 0.005)
                seen = {}
                answers = executor.run_queries(RNG.normal(size=(k, 16)), tau=0.05, on_answer=recorder(seen))
                dispatched = submitted[-1].started
                for q in np.flatnonzero(answers.answered_by >= 0).tolist():
                    lags.append(seen[q] - dispatched - answers.answered_s[q])
                    leads.append(answers.report.wait_s - answers.answered_s[q])
        for label, values in [
            ("on_answer lag (ms)", lags),
            ("a bare 5 ms wait's overshoot (ms)", overshoots),
            ("own answer before the call ends (ms)", leads),
        ]:
            median, low, high = bootstrap(np.array(values) * 1e3, np.median, RNG)
            print(
                f"{setting:>10} {label:>37}: median {median:7.3f} [{low:.3f}, {high:.3f}] over {len(values)}"
            )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=200)
    parser.add_argument("--thread-calls", type=int, default=30)
    args = parser.parse_args()
    master_cost(args.calls)
    callback_lag(args.thread_calls)


if __name__ == "__main__":
    main()
