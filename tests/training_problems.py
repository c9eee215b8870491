"""Small training problems and delay models shared by the gradient-coding tests."""

from __future__ import annotations

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
