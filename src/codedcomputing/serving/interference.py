"""Real interference for thread replicas: CPU-bound background processes the caller starts and stops.

A replica slowed by a neighbour, not by a drawn delay: :class:`Interference` runs ``processes``
busy loops in separate Python processes (so the parent's GIL is untouched), each busy a
``load`` share of every 10 ms, and, where the system can (``os.sched_setaffinity``, Linux),
pins them to ``cores``. Thread replicas can be pinned too (``ThreadServer(..., affinity=...)``),
but they share one interpreter: interference on one replica's core slows the whole server
(through the GIL and the frontend), and one busy loop barely slows a mostly sleeping replica
thread (the scheduler lets it preempt the loop); see docs/serving.rst for measurements.
Per-replica real stragglers need replicas in separate processes. Where pinning is not
available, ``cores`` must be None (the scheduler places the loops).
"""

from __future__ import annotations

import os
import subprocess
import sys

from .._validation import check_count, check_number

__all__ = ["Interference", "can_pin"]

_BUSY_LOOP = """
import sys, time
busy = float(sys.argv[1]) * 0.01
idle = 0.01 - busy
while True:
    end = time.perf_counter() + busy
    while time.perf_counter() < end:
        pass
    if idle > 0:
        time.sleep(idle)
"""


def can_pin() -> bool:
    """Whether this system can pin processes and threads to cores (``os.sched_setaffinity``)."""
    return hasattr(os, "sched_setaffinity")


def check_cores(cores, name: str) -> set[int] | None:
    """``cores`` as a non-empty set of core ids this process may use, or None."""
    if cores is None:
        return None
    if not can_pin():
        raise ValueError(f"{name} needs os.sched_setaffinity, which this system lacks: pass None")
    try:
        wanted = {int(core) for core in cores}
    except (TypeError, ValueError):
        raise ValueError(f"{name} must be a set of core ids, got {cores!r}") from None
    allowed = os.sched_getaffinity(0)
    if not wanted or not wanted <= allowed:
        raise ValueError(
            f"{name} must be a non-empty subset of the cores allowed here {sorted(allowed)}, got {cores!r}"
        )
    return wanted


class Interference:
    """``processes`` CPU-bound background processes, busy ``load`` of the time, pinned to ``cores``.

    Use as a context manager or :meth:`start` / :meth:`stop`; :meth:`stop` ends the processes it
    started (and only those).
    """

    def __init__(self, cores=None, *, processes: int = 1, load: float = 1.0):
        self.cores = check_cores(cores, "cores")
        self.processes = check_count(processes, "processes", 1, 64)
        self.load = check_number(load, "load", low=0.0, high=1.0, low_open=True)
        self._children: list[subprocess.Popen] = []

    @property
    def running(self) -> bool:
        return any(child.poll() is None for child in self._children)

    def start(self) -> Interference:
        if self._children:
            raise RuntimeError("this Interference is already started")
        for _ in range(self.processes):
            child = subprocess.Popen(
                [sys.executable, "-c", _BUSY_LOOP, repr(self.load)],
                stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
            )
            self._children.append(child)
            if self.cores is not None:
                os.sched_setaffinity(child.pid, self.cores)
        return self

    def stop(self) -> None:
        for child in self._children:
            if child.poll() is None:
                child.terminate()
        for child in self._children:
            try:
                child.wait(timeout=5)
            except subprocess.TimeoutExpired:
                child.kill()
                child.wait()
        self._children = []

    def __enter__(self) -> Interference:
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()

    def __repr__(self) -> str:
        cores = None if self.cores is None else sorted(self.cores)
        return f"Interference(cores={cores}, processes={self.processes}, load={self.load:g})"
