"""What the runtime tests share: the cluster kinds under test, fixed-delay traces, inputs whose
rows name their worker, and the check that a gather's alive, failed and dropped split the workers."""

from __future__ import annotations

import numpy as np

import codedcomputing as cc
from codedcomputing.runtime import Gathered

D = cc.delays


def identity(x):
    return x


def make_cluster(kind: str, **kwargs):
    if kind == "thread":
        return cc.ThreadCluster(num_threads=4, **kwargs)
    return cc.SimulatedCluster(**kwargs)


CLUSTER_KINDS = ["thread", "simulated"]


def trace(*latencies) -> D.Trace:
    """One call's fixed delays (the same on every call)."""
    return D.Trace([list(latencies)])


def rows_of(n: int, d: int = 3) -> np.ndarray:
    """``(n, d)`` inputs whose row n is ``n + [0, 0.1, 0.2, ...]``: each row names its worker."""
    return np.arange(n, dtype=np.float64)[:, None] + 0.1 * np.arange(d)[None, :]


def assert_partition(g: Gathered, num_workers: int) -> None:
    """alive, failed and dropped split the workers; latency is finite exactly where they arrived."""
    alive, failed, dropped = list(g.alive.tolist()), set(g.failed), set(g.dropped.tolist())
    assert len(alive) == len(set(alive))
    assert set(alive).isdisjoint(failed) and set(alive).isdisjoint(dropped) and failed.isdisjoint(dropped)
    assert set(alive) | failed | dropped == set(range(num_workers))
    assert g.dropped.tolist() == sorted(dropped)
    arrived = np.zeros(num_workers, dtype=bool)
    arrived[alive + sorted(failed)] = True
    assert np.all(np.isfinite(g.latency[arrived]))
    assert np.all(np.isnan(g.latency[~arrived]))
    assert g.latency.shape == g.delays.shape == (num_workers,)
    if alive:
        assert g.results.shape[0] == len(alive)
    else:
        assert g.results is None


def rms(a) -> float:
    return float(np.sqrt(np.mean(np.square(np.asarray(a, dtype=np.float64)))))
