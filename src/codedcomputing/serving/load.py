"""Open-loop load: arrival times (Poisson and bursty) at a stated utilisation, and a driver.

Offered load is stated as *utilisation* = arrival rate x mean service time / replicas: the busy
fraction each replica would have with no redundancy (:func:`poisson_arrivals`). Bursty arrivals
are a two-state Markov-modulated Poisson process (MMPP-2) with the same long-run rate: a calm
state and a burst state whose rate is ``burst_ratio`` times the calm one; the process spends a
``burst_fraction`` of the time in bursts, each lasting ``Exp(mean_burst)``. The driver submits
each query at its wall-clock time and never waits for answers (open loop), so a slow server
meets the same arrivals as a fast one.
"""

from __future__ import annotations

import math
import time

import numpy as np

from .._validation import check_count, check_number, check_probability, check_rng
from ..runtime.delays import DelayModel
from .server import _check_arrivals, mean_service, poisson_arrivals

__all__ = ["bursty_arrivals", "drive", "poisson_arrivals"]


def bursty_arrivals(
    num_queries: int,
    utilisation: float,
    num_replicas: int,
    service: DelayModel,
    rng,
    *,
    burst_ratio: float = 4.0,
    burst_fraction: float = 0.2,
    mean_burst: float | None = None,
):
    """``(num_queries,)`` sorted arrival times of an MMPP-2 at the offered load ``utilisation``.

    The long-run rate is ``lam = utilisation * num_replicas / mean_service(service)``, split as
    ``lam_calm = lam / (1 - b + r b)`` and ``lam_burst = r lam_calm`` (``r = burst_ratio``,
    ``b = burst_fraction``). Sojourns are exponential: bursts of mean ``mean_burst`` (clock
    units; None: 20 mean service times), calm spells of mean ``mean_burst (1 - b) / b``. The
    first state is drawn from the stationary law (a burst with probability ``b``).
    """
    num_queries = check_count(num_queries, "num_queries", 1)
    utilisation = check_number(utilisation, "utilisation", low=0.0, low_open=True)
    num_replicas = check_count(num_replicas, "num_replicas", 1)
    ratio = check_number(burst_ratio, "burst_ratio", low=1.0)
    fraction = check_probability(burst_fraction, "burst_fraction", allow_one=False)
    if fraction <= 0:
        raise ValueError(f"burst_fraction must be in (0, 1), got {burst_fraction!r}")
    mean = mean_service(service)
    if not math.isfinite(mean):
        raise ValueError(f"service has an infinite mean ({service!r}): no utilisation can be stated")
    rate = utilisation * num_replicas / mean
    burst = (
        20.0 * mean if mean_burst is None else check_number(mean_burst, "mean_burst", low=0.0, low_open=True)
    )
    calm_rate = rate / (1.0 - fraction + ratio * fraction)
    rates = (calm_rate, ratio * calm_rate)
    sojourn = (burst * (1.0 - fraction) / fraction, burst)
    rng = check_rng(rng)
    state = int(rng.random() < fraction)
    ends = rng.exponential(sojourn[state])
    now, times = 0.0, np.empty(num_queries)
    i = 0
    while i < num_queries:
        gap = rng.exponential(1.0 / rates[state])
        if now + gap > ends:  # memoryless: restart the clock of the next state at the switch
            now, state = ends, 1 - state
            ends = now + rng.exponential(sojourn[state])
            continue
        now += gap
        times[i] = now
        i += 1
    return times


def drive(server, arrivals, inputs) -> list:
    """Submit ``inputs[q]`` to a running ``server`` at ``arrivals[q]`` clock units after its start,
    open loop (never waiting for answers); the futures, in order.

    A query whose time has passed (the driver fell behind) goes out at once; its recorded
    arrival is when it was submitted."""
    arrivals = _check_arrivals(arrivals)
    inputs = np.asarray(inputs)
    if inputs.shape[0] != arrivals.size:
        raise ValueError(f"inputs must have one row per arrival ({arrivals.size}), got shape {inputs.shape}")
    run = server._run
    if run is None:
        raise ValueError("server must be started before drive")
    futures = []
    for when, x in zip(arrivals.tolist(), inputs, strict=True):
        wait = (when - run.clock()) * run.unit
        if wait > 0:
            time.sleep(wait)
        futures.append(server.submit(x))
    return futures
