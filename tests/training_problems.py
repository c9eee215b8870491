"""Small training problems and delay models shared by the gradient-coding tests."""

from __future__ import annotations

import threading

import numpy as np

from codedcomputing.gradient_coding import Problem
from codedcomputing.runtime.delays import DelayModel


def least_squares(n: int, seed: int = 0) -> Problem:
    """Partition i: rows 10 i .. 10 i + 9 of A x = b; the loss is the mean squared residual."""
    rng = np.random.default_rng(seed)
    A = rng.normal(size=(10 * n, 5))
    b = A @ rng.normal(size=5) + 0.01 * rng.normal(size=10 * n)  # nearly consistent: loss -> ~0
    parts = [(A[10 * i : 10 * i + 10], b[10 * i : 10 * i + 10]) for i in range(n)]

    def gradient(x, i):
        a, y = parts[i]
        return 2 * a.T @ (a @ x - y) / len(y)

    return Problem(gradient, lambda x: float(np.mean((A @ x - b) ** 2)), np.zeros(5), n)


class SlowWorker(DelayModel):
    """Worker 0 is always far slower than the others (persistent slowness)."""

    def _sample(self, num_workers, rng):
        out = rng.exponential(0.1, num_workers)
        out[0] = 100.0
        return out


class Late(DelayModel):
    """The given workers arrive 1,000 s late, the others at once: never waited for when the
    scheme can do without them."""

    def __init__(self, workers):
        self.workers = sorted(workers)

    def _sample(self, num_workers, rng):
        out = np.zeros(num_workers)
        out[self.workers] = 1000.0
        return out


class PartitionFaults:
    """A problem's gradient that misbehaves for some partitions: ``{partition: kind}`` with
    kinds ``"raise"``, ``"nan"``, ``"shape"`` (one entry short) and ``"hang"`` (blocks until
    :meth:`release`, or ``hang_s``), from its ``after``-th call for that partition on (0:
    from the first). Every worker that computes such a partition is faulty that step."""

    def __init__(self, problem: Problem, faults: dict[int, str], after: int = 0, hang_s: float = 60.0):
        self.problem, self.faults, self.after, self.hang_s = problem, dict(faults), after, hang_s
        self.calls: dict[int, int] = {}
        self.lock = threading.Lock()
        self.released = threading.Event()

    def release(self) -> None:
        """End every hang, now and later."""
        self.released.set()

    def gradient(self, theta, partition):
        with self.lock:
            count = self.calls[partition] = self.calls.get(partition, 0) + 1
        value = self.problem.gradient(theta, partition)
        kind = self.faults.get(partition) if count > self.after else None
        if kind == "raise":
            raise RuntimeError(f"partition {partition} is broken")
        if kind == "nan":
            return value * np.nan
        if kind == "shape":
            return value[:-1]
        if kind == "hang":
            self.released.wait(self.hang_s)
        return value

    def as_problem(self) -> Problem:
        return Problem(self.gradient, self.problem.loss, self.problem.initial, self.problem.num_partitions)


class DiesOnce:
    """A problem's gradient whose process dies (SIGKILL) the ``at_call``-th time it computes
    ``partition`` in that process, once across all processes (an exclusive flag file): a Ray
    actor that dies mid-run."""

    def __init__(self, problem: Problem, partition: int, at_call: int, flag):
        self.problem, self.partition, self.at_call, self.flag = problem, partition, at_call, str(flag)
        self.calls = 0

    def gradient(self, theta, partition):
        import os
        import signal

        if partition == self.partition:
            self.calls += 1
            if self.calls >= self.at_call:
                try:
                    with open(self.flag, "x"):
                        pass
                except FileExistsError:
                    pass
                else:
                    os.kill(os.getpid(), signal.SIGKILL)
        return self.problem.gradient(theta, partition)

    def as_problem(self) -> Problem:
        return Problem(self.gradient, self.problem.loss, self.problem.initial, self.problem.num_partitions)
