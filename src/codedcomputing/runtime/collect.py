"""Collecting one call's results: the collector that sorts arrivals into usable results and
failures, and the real-time wait loop that the thread and Ray backends share.

A result is *usable* when the task returned without raising and the output is an array of
finite numbers (a tensor, or anything numpy reads as numbers) with one row, shaped like most
of the arrived results (or like the shape the caller declared). Anything else (an exception,
``SystemExit``, a crash, NaN, None, strings, a minority shape) makes the worker a straggler
recorded in :attr:`WorkerRecord.failed`, never an error of the caller.
"""

from __future__ import annotations

import heapq
import math
import os
import time
import traceback
from collections.abc import Callable

import numpy as np

from .. import _arraylib
from .._validation import check_shape
from .record import Gathered, WorkerRecord

__all__ = ["Collector", "wait_real_time"]


def check_output_shape(output_shape) -> tuple[int, ...] | None:
    """``output_shape`` (None, or f's output shape for one input, without the batch axis)."""
    return None if output_shape is None else check_shape(output_shape, "output_shape (or None)")


class Collector:
    """Sorts arrivals into usable results and failures, in arrival order.

    Usable outputs are grouped by shape. Unless the caller declared the shape, the group
    with the most members leads (on a tie, the one that got there first), and only its
    workers count towards ``enough``: one mis-shaped worker arriving first cannot set the
    shape the others are judged by. When the call ends, the other groups' workers are
    failures.

    ``on_usable(worker, latency, output)``, if given, is called the moment a usable result is
    recorded (on the collecting thread, at its arrival time). An answer given on arrival
    cannot wait for a majority, so then the first usable result's shape becomes the declared
    one when none was declared.
    """

    def __init__(
        self,
        num_workers: int,
        enough: Callable[[list[int]], bool],
        output_shape=None,
        on_usable: Callable[[int, float, object], None] | None = None,
    ):
        self.num_workers = num_workers
        self.enough = enough
        self.declared = None if output_shape is None else (1, *output_shape)
        self.on_usable = on_usable
        self.groups: dict[tuple, list[int]] = {}
        self.leader: tuple | None = None
        self.outputs: dict[int, object] = {}
        self.failed: dict[int, str] = {}
        self.latency = np.full(num_workers, np.nan)
        self.compute_s = np.full(num_workers, np.nan)
        self.traceback = ""  # where the first failing worker's exception came from

    @property
    def alive(self) -> list[int]:
        """The workers whose usable results are in the leading shape's group, in arrival order."""
        return self.groups[self.leader] if self.leader is not None else []

    def arrive(self, worker: int, latency: float, outcome, compute_s: float = math.nan) -> None:
        """Record ``outcome`` (an output, or the exception the task raised)."""
        self.latency[worker] = latency
        self.compute_s[worker] = compute_s
        if isinstance(outcome, BaseException):
            self.failed[worker] = f"{type(outcome).__name__}: {outcome}"[:300]
            if not self.traceback:
                self.traceback = _where(outcome)
            return
        output, reason = _usable(outcome)
        if reason is None and self.declared is not None and tuple(output.shape) != self.declared:
            reason = f"returned shape {tuple(output.shape)}, not the declared {self.declared}"
        if reason is not None:
            self.failed[worker] = reason
            return
        shape = tuple(output.shape)
        group = self.groups.setdefault(shape, [])
        group.append(worker)
        self.outputs[worker] = output
        if self.leader is None or len(group) > len(self.groups[self.leader]):
            self.leader = shape
        if self.on_usable is not None:
            if self.declared is None:
                self.declared = shape
            self.on_usable(worker, latency, output)

    @property
    def done(self) -> bool:
        return self.enough(self.alive)

    def gathered(self, delays, faults, wall_s, timed_out, like) -> Gathered:
        """What arrived, with the results converted to the kind of ``like`` (the inputs sent)."""
        failed = dict(self.failed)
        alive = self.alive
        for shape, workers in self.groups.items():
            if shape != self.leader:
                reason = f"returned shape {shape}, unlike the {len(alive)} results of shape {self.leader}"
                failed.update(dict.fromkeys(workers, reason))
        arrived = set(self.outputs) | set(failed)
        dropped = np.array([n for n in range(self.num_workers) if n not in arrived], dtype=np.int64)
        workers = WorkerRecord(
            latency=self.latency,
            compute_s=self.compute_s,
            alive=np.array(alive, dtype=np.int64),
            failed=failed,
            dropped=dropped,
            delays=delays,
            faults=faults,
            traceback=self.traceback,
        )
        return Gathered(_stack([self.outputs[n] for n in alive], like), workers, wall_s, timed_out)


def _where(error: BaseException) -> str:
    """``file:line in function`` of the innermost frame that raised ``error`` (empty if unknown)."""
    frames = traceback.extract_tb(error.__traceback__) if error.__traceback__ else []
    if not frames:
        return ""
    frame = frames[-1]
    return f"{os.path.basename(frame.filename)}:{frame.lineno} in {frame.name}"


def _usable(out) -> tuple[object, str | None]:
    """``(out as an array or tensor, None)``, or ``(None, why it is unusable)``."""
    if out is None:
        return None, "returned None"
    if not (_arraylib.is_torch(out) or isinstance(out, np.ndarray)):
        try:
            out = np.asarray(out, dtype=np.float64)  # a list or a scalar of numbers
        except (TypeError, ValueError, OverflowError):
            return None, f"returned {type(out).__name__}, not an array of numbers"
    if not _arraylib.is_torch(out) and not (np.issubdtype(out.dtype, np.number) or out.dtype == bool):
        return None, f"returned an array of dtype {out.dtype}, not numbers"
    shape = tuple(out.shape)
    if len(shape) == 0 or shape[0] != 1:
        return None, f"returned shape {shape}; a task's output needs one row (f on a batch of one)"
    finite = bool(out.isfinite().all()) if _arraylib.is_torch(out) else bool(np.all(np.isfinite(out)))
    if not finite:
        return None, "returned NaN or inf"
    return out, None


def _stack(outputs: list, like):
    """``outputs`` as one array of ``like``'s kind: numpy, or torch on ``like``'s device."""
    if not outputs:
        return None
    outputs = [_arraylib.convert_like(out, like) for out in outputs]
    if _arraylib.is_torch(like):
        import torch

        return torch.cat(outputs)
    return np.concatenate(outputs)


class Arrivals:
    """Results held back until their injected delay has passed: a heap of release times."""

    def __init__(self):
        self._heap: list = []

    def push(self, release: float, worker: int, payload) -> None:
        heapq.heappush(self._heap, (release, worker, payload))

    def pop_due(self, now: float):
        while self._heap and self._heap[0][0] <= now:
            yield heapq.heappop(self._heap)

    def next_release(self) -> float:
        return self._heap[0][0] if self._heap else math.inf

    def __len__(self) -> int:
        return len(self._heap)


def wait_real_time(collector: Collector, delays, start: float, deadline_s: float, poll, resolve) -> bool:
    """The real-time wait loop shared by the thread and Ray backends; returns ``timed_out``.

    ``poll(timeout)`` waits up to ``timeout`` seconds (``None``: no limit) for tasks to
    finish and returns ``[(worker, finished_at, payload)]`` (empty on timeout), or ``None``
    once no task can finish any more. Each result is held back until ``finished_at`` plus
    the worker's injected delay, then ``resolve(payload) -> (output or exception,
    compute_s)`` hands it to ``collector``.
    """
    arrivals = Arrivals()
    exhausted = False
    while not collector.done:
        for release, n, payload in arrivals.pop_due(time.perf_counter()):
            outcome, compute_s = resolve(payload)
            collector.arrive(n, release - start, outcome, compute_s)
            if collector.done:
                return False
        if exhausted and not len(arrivals):
            return False
        now = time.perf_counter()
        if now - start >= deadline_s:
            return True
        wait = min(arrivals.next_release(), start + deadline_s) - now
        if exhausted:
            time.sleep(max(wait, 0.0))
            continue
        finished = poll(None if math.isinf(wait) else max(wait, 0.0))
        if finished is None:
            exhausted = True
            continue
        for n, finished_at, payload in finished:
            arrivals.push(finished_at + delays[n], n, payload)
    return False
