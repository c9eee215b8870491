"""Arrival times of an open-loop stream at a stated offered load: Poisson and bursty.

Offered load is stated as *utilisation* = arrival rate x mean service time / replicas: the busy
fraction each replica would have with no redundancy (:func:`poisson_arrivals`); the mean
service time is the model's :meth:`~codedcomputing.runtime.delays.DelayModel.mean_delay`.
Bursty arrivals are a two-state Markov-modulated Poisson process (MMPP-2) with the same
long-run rate: a calm state and a burst state whose rate is ``burst_ratio`` times the calm
one; the process spends a ``burst_fraction`` of the time in bursts, each lasting
``Exp(mean_burst)``. :func:`~codedcomputing.serving.drive` feeds such a stream to a live server.
"""

from __future__ import annotations

import math

import numpy as np

from .._validation import check_count, check_number, check_probability, check_rng
from ..runtime.delays import DelayModel

__all__ = ["bursty_arrivals", "check_arrivals", "mean_service", "poisson_arrivals"]


def mean_service(service: DelayModel) -> float:
    """The mean of one draw of ``service``: :meth:`~codedcomputing.runtime.delays.DelayModel.mean_delay`."""
    if not isinstance(service, DelayModel):
        raise ValueError(f"service must be a codedcomputing.runtime.delays model, got {service!r}")
    return service.mean_delay()


def poisson_arrivals(num_queries: int, utilisation: float, num_replicas: int, service: DelayModel, rng):
    """``(num_queries,)`` sorted arrival times of a Poisson stream at the offered load ``utilisation``.

    Offered load = arrival rate x mean service time / replicas, so the rate is
    ``utilisation * num_replicas / mean_service(service)``: the busy fraction each replica
    would have with no redundancy. Redundant work (copies, hedges, parities) comes on top.
    """
    num_queries = check_count(num_queries, "num_queries", 1)
    utilisation = check_number(utilisation, "utilisation", low=0.0, low_open=True)
    num_replicas = check_count(num_replicas, "num_replicas", 1)
    mean = mean_service(service)
    if not math.isfinite(mean):
        raise ValueError(f"service has an infinite mean ({service!r}): no utilisation can be stated")
    rate = utilisation * num_replicas / mean
    return np.cumsum(check_rng(rng).exponential(1.0 / rate, num_queries))


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


def check_arrivals(arrivals) -> np.ndarray:
    """``arrivals`` as a sorted, finite, non-negative 1-D float array; ValueError naming what is wrong."""
    try:
        times = np.asarray(arrivals, dtype=np.float64)
    except (TypeError, ValueError):
        raise ValueError(f"arrivals must be a 1-D array of times, got {arrivals!r}") from None
    if times.ndim != 1 or times.size == 0:
        raise ValueError(f"arrivals must be a non-empty 1-D array of times, got shape {times.shape}")
    if not np.all(np.isfinite(times)) or np.any(times < 0):
        raise ValueError("arrivals must be finite times >= 0")
    if np.any(np.diff(times) < 0):
        raise ValueError("arrivals must be sorted (query q is the q-th to arrive)")
    return times
