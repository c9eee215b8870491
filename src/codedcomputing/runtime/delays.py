"""Delay models: how long each worker's result takes to arrive, drawn afresh for every call.

A model's ``sample(num_workers, rng)`` returns one call's delays in seconds, ``(num_workers,)``
floats ``>= 0``. The clusters add them to the time the worker's computation really took
(:class:`~codedcomputing.runtime.ThreadCluster`, :class:`~codedcomputing.runtime.RayCluster`)
or use them as the whole latency on a virtual clock
(:class:`~codedcomputing.runtime.SimulatedCluster`, plus its ``compute_s``). A delay is held
by the master, not slept by the worker, so a delayed worker does not block a CPU or a
thread that another worker needs.

Models with memory (:class:`BurstyMarkov`, :class:`Trace`) advance one step per call;
``reset()`` restarts them. All randomness comes from the ``rng`` the cluster passes, so a
cluster's ``seed`` fixes every delay.
"""

from __future__ import annotations

import csv
import math
from abc import ABC, abstractmethod
from pathlib import Path

import numpy as np

from .._validation import check_count, check_flag, check_number, check_probability, check_rng

__all__ = [
    "AdditiveExponential",
    "Bimodal",
    "BurstyMarkov",
    "DelayModel",
    "Pareto",
    "ShiftedExponential",
    "Trace",
    "expected_order_statistic",
]


class DelayModel(ABC):
    """Per-worker delays for one call: ``sample(num_workers, rng) -> (num_workers,)`` seconds."""

    def sample(self, num_workers: int, rng: np.random.Generator) -> np.ndarray:
        return self._sample(check_count(num_workers, "num_workers", 1), check_rng(rng))

    def reset(self) -> None:  # noqa: B027 - a hook: models without memory have nothing to reset
        """Forget any state carried between calls (models without memory have none)."""

    def mean_delay(self) -> float:
        """The mean of one draw, in closed form (``inf`` where it does not exist). A model of
        your own defines it to be used where a mean is needed (a stream's offered load).
        Not ``mean``: :class:`AdditiveExponential`'s parameter has that name."""
        raise NotImplementedError(f"{type(self).__name__} defines no mean_delay()")

    @abstractmethod
    def _sample(self, num_workers: int, rng: np.random.Generator) -> np.ndarray: ...


class ShiftedExponential(DelayModel):
    """``T = scale * (1 + X)``, ``X ~ Exp(rate)`` (mean ``1 / rate``), independent per worker.

    The classic straggler model: a deterministic part proportional to the worker's load
    (``scale``) plus an exponential tail. The mean of the k-th fastest of n workers is
    ``scale * (1 + (H_n - H_{n-k}) / rate)`` (:func:`expected_order_statistic`).
    """

    def __init__(self, scale: float = 0.01, rate: float = 1.0):
        self.scale = check_number(scale, "scale", low=0.0, low_open=True)
        self.rate = check_number(rate, "rate", low=0.0, low_open=True)

    def _sample(self, num_workers, rng):
        return self.scale * (1.0 + rng.exponential(1.0 / self.rate, num_workers))

    def mean_delay(self) -> float:
        return self.scale * (1.0 + 1.0 / self.rate)

    def __repr__(self) -> str:
        return f"ShiftedExponential(scale={self.scale:g}, rate={self.rate:g})"


class AdditiveExponential(DelayModel):
    """``T = Exp(mean)``: an exponential wait added on top of the worker's real compute time."""

    def __init__(self, mean: float = 0.01):
        self.mean = check_number(mean, "mean", low=0.0, low_open=True)

    def _sample(self, num_workers, rng):
        return rng.exponential(self.mean, num_workers)

    def mean_delay(self) -> float:
        return self.mean

    def __repr__(self) -> str:
        return f"AdditiveExponential(mean={self.mean:g})"


class Pareto(DelayModel):
    """``T = scale * P``, ``P`` Pareto (type I) with minimum 1 and tail index ``alpha``.

    ``P(T > t) = (scale / t)^alpha`` for ``t >= scale``. ``alpha`` in 1.1..3 covers the
    heavy tails measured in data centres; the mean is infinite for ``alpha <= 1``.
    """

    def __init__(self, scale: float = 0.01, alpha: float = 1.5):
        self.scale = check_number(scale, "scale", low=0.0, low_open=True)
        self.alpha = check_number(alpha, "alpha", low=0.0, low_open=True)

    def _sample(self, num_workers, rng):
        return self.scale * (1.0 + rng.pareto(self.alpha, num_workers))

    def mean_delay(self) -> float:
        return math.inf if self.alpha <= 1 else self.scale * self.alpha / (self.alpha - 1.0)

    def __repr__(self) -> str:
        return f"Pareto(scale={self.scale:g}, alpha={self.alpha:g})"


class Bimodal(DelayModel):
    """Each worker is slow with probability ``p``: ``T = base * (slowdown if slow else 1) * (1 + jitter U)``.

    ``U ~ Uniform(0, 1)`` spreads the two modes a little so that arrival order is not
    decided by ties. Slow machines typically run 5 to 10 times slower.
    """

    def __init__(self, base: float = 0.01, p: float = 0.1, slowdown: float = 8.0, jitter: float = 0.1):
        self.base = check_number(base, "base", low=0.0, low_open=True)
        self.p = check_probability(p, "p")
        self.slowdown = check_number(slowdown, "slowdown", low=0.0, low_open=True)
        self.jitter = check_number(jitter, "jitter", low=0.0)

    def _sample(self, num_workers, rng):
        slow = rng.random(num_workers) < self.p
        return self.base * np.where(slow, self.slowdown, 1.0) * (1.0 + self.jitter * rng.random(num_workers))

    def mean_delay(self) -> float:
        return self.base * (1.0 + (self.slowdown - 1.0) * self.p) * (1.0 + self.jitter / 2.0)

    def __repr__(self) -> str:
        return f"Bimodal(base={self.base:g}, p={self.p:g}, slowdown={self.slowdown:g})"


class BurstyMarkov(DelayModel):
    """Each worker is a two-state Markov chain (fast, slow) that steps once per call.

    A fast worker turns slow with probability ``p_slow``; a slow one recovers with
    probability ``p_recover``. So slowness comes in bursts of mean length ``1 / p_recover``
    calls, and the long-run slow fraction is ``p_slow / (p_slow + p_recover)``. The first
    call draws each worker's state from that stationary distribution. Delay:
    ``base * (slowdown if slow else 1) * (1 + jitter U)``, ``U ~ Uniform(0, 1)``.
    """

    def __init__(
        self,
        base: float = 0.01,
        p_slow: float = 0.05,
        p_recover: float = 0.3,
        slowdown: float = 8.0,
        jitter: float = 0.1,
    ):
        self.base = check_number(base, "base", low=0.0, low_open=True)
        self.p_slow = check_probability(p_slow, "p_slow")
        self.p_recover = check_probability(p_recover, "p_recover")
        if self.p_slow + self.p_recover == 0:
            raise ValueError("p_slow and p_recover cannot both be 0")
        self.slowdown = check_number(slowdown, "slowdown", low=0.0, low_open=True)
        self.jitter = check_number(jitter, "jitter", low=0.0)
        self._slow: np.ndarray | None = None

    @property
    def slow_fraction(self) -> float:
        """The long-run fraction of calls on which a worker is slow."""
        return self.p_slow / (self.p_slow + self.p_recover)

    def reset(self) -> None:
        self._slow = None

    def _sample(self, num_workers, rng):
        if self._slow is None or self._slow.size != num_workers:
            self._slow = rng.random(num_workers) < self.slow_fraction
        else:
            u = rng.random(num_workers)
            self._slow = np.where(self._slow, u >= self.p_recover, u < self.p_slow)
        return (
            self.base
            * np.where(self._slow, self.slowdown, 1.0)
            * (1.0 + self.jitter * rng.random(num_workers))
        )

    def mean_delay(self) -> float:
        """The long-run mean (the chain at its stationary slow fraction)."""
        return self.base * (1.0 + (self.slowdown - 1.0) * self.slow_fraction) * (1.0 + self.jitter / 2.0)

    def __repr__(self) -> str:
        return (
            f"BurstyMarkov(base={self.base:g}, p_slow={self.p_slow:g}, "
            f"p_recover={self.p_recover:g}, slowdown={self.slowdown:g})"
        )


class Trace(DelayModel):
    """Replays measured latencies: call ``c`` gives worker ``n`` the delay ``latencies[c % C, n % W]``.

    ``latencies`` is a ``(C, W)`` array: ``C`` calls of ``W`` workers, in seconds. With
    ``shuffle=True`` each call draws a random row, and workers beyond ``W`` a random
    column, instead of cycling. :meth:`from_csv` reads a long-format trace (columns
    ``call``, ``worker``, ``latency_s``, one row per measured result), such as the per-worker
    latencies of recorded runs (``report.trace_rows(call)`` for each call, written with
    :class:`csv.DictWriter`).
    """

    def __init__(self, latencies, *, shuffle: bool = False):
        try:
            arr = np.array(latencies, dtype=np.float64)
        except (TypeError, ValueError) as err:
            raise ValueError(f"latencies must be a 2-D array of numbers: {err}") from None
        if arr.ndim != 2 or arr.size == 0:
            raise ValueError(
                f"latencies must be a non-empty 2-D array (calls, workers), got shape {arr.shape}"
            )
        if not np.all(np.isfinite(arr)) or np.any(arr < 0):
            raise ValueError("latencies must be finite and >= 0")
        arr.flags.writeable = False
        self.latencies = arr
        self.shuffle = check_flag(shuffle, "shuffle")
        self._call = 0

    @classmethod
    def from_csv(cls, path, *, shuffle: bool = False) -> Trace:
        """Read a long-format CSV with columns ``call``, ``worker``, ``latency_s``.

        Every call must list the same workers ``0..W-1``; a worker that never returned in
        that call may be given an empty ``latency_s`` (it is replayed as the slowest
        latency measured in the trace).
        """
        path = Path(path)
        with path.open(newline="") as handle:
            rows = list(csv.DictReader(handle))
        missing = {"call", "worker", "latency_s"} - set(rows[0] if rows else {})
        if missing:
            raise ValueError(
                f"{path}: a trace needs columns call, worker, latency_s; missing {sorted(missing)}"
            )
        try:
            calls = sorted({int(row["call"]) for row in rows})
            workers = sorted({int(row["worker"]) for row in rows})
            table = np.full((len(calls), len(workers)), np.nan)
            call_index = {c: i for i, c in enumerate(calls)}
            for row in rows:
                value = row["latency_s"].strip()
                table[call_index[int(row["call"])], int(row["worker"])] = float(value) if value else np.inf
        except (ValueError, IndexError) as err:
            raise ValueError(f"{path}: bad trace row ({err}); workers must be numbered 0..W-1") from None
        if workers != list(range(len(workers))) or np.isnan(table).any():
            raise ValueError(f"{path}: every call must list every worker 0..{len(workers) - 1}")
        finite = table[np.isfinite(table)]
        if finite.size == 0:
            raise ValueError(f"{path}: the trace has no measured latency")
        table[np.isinf(table)] = finite.max()
        return cls(table, shuffle=shuffle)

    def reset(self) -> None:
        self._call = 0

    def _sample(self, num_workers, rng):
        calls, width = self.latencies.shape
        if self.shuffle:
            row = self.latencies[rng.integers(calls)]
            columns = np.arange(num_workers)
            extra = columns >= width
            columns[extra] = rng.integers(width, size=int(extra.sum()))
        else:
            row = self.latencies[self._call % calls]
            columns = np.arange(num_workers) % width
        self._call += 1
        return row[columns].copy()

    def mean_delay(self) -> float:
        """The mean of the recorded latencies."""
        return float(self.latencies.mean())

    def __repr__(self) -> str:
        calls, width = self.latencies.shape
        return f"Trace({calls} calls x {width} workers{', shuffled' if self.shuffle else ''})"


def expected_order_statistic(model: ShiftedExponential, k: int, n: int) -> float:
    """Mean of the k-th smallest of ``n`` independent delays from ``model``.

    ``scale * (1 + (H_n - H_{n-k}) / rate)``, ``H`` the harmonic numbers: the expected wait
    for the fastest ``k`` of ``n`` shifted-exponential workers.
    """
    if not isinstance(model, ShiftedExponential):
        raise ValueError(f"model must be a ShiftedExponential, got {model!r}")
    if not (1 <= k <= n):
        raise ValueError(f"need 1 <= k <= n, got k={k}, n={n}")
    harmonic_gap = float(np.sum(1.0 / np.arange(n - k + 1, n + 1)))
    return model.scale * (1.0 + harmonic_gap / model.rate)
