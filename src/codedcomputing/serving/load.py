"""The open-loop driver: submit each query at its wall-clock time, never waiting for answers, so
a slow server meets the same arrivals as a fast one (arrival times: :mod:`.arrivals`).
"""

from __future__ import annotations

import time

import numpy as np

from .arrivals import check_arrivals

__all__ = ["drive"]


def drive(server, arrivals, inputs) -> list:
    """Submit ``inputs[q]`` to a running ``server`` at ``arrivals[q]`` clock units after its start,
    open loop (never waiting for answers); the futures, in order.

    A query whose time has passed (the driver fell behind) goes out at once; its recorded
    arrival is when it was submitted."""
    arrivals = check_arrivals(arrivals)
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
