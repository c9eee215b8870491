"""Hard knot layouts and a relative error, shared by the spline and the code tests."""

from __future__ import annotations

import numpy as np
import torch


def relative_error(a, b) -> float:
    """``max |a - b| / max |b|`` in float64, for numpy arrays or torch tensors."""
    a = a.detach().double().numpy() if isinstance(a, torch.Tensor) else np.asarray(a, dtype=np.float64)
    b = b.detach().double().numpy() if isinstance(b, torch.Tensor) else np.asarray(b, dtype=np.float64)
    return float(np.max(np.abs(a - b)) / np.max(np.abs(b)))


def paired_knots(n: int, ratio: float) -> np.ndarray:
    """n sorted knots on [-1, 1] in near-coincident pairs: gaps alternate 1 and ``ratio``
    (relative). What a user gets who puts two workers at (almost) the same place, since exact
    duplicates are rejected."""
    h = np.where(np.arange(n - 1) % 2 == 0, 1.0, ratio)
    t = np.concatenate([[0.0], np.cumsum(h)])
    return 2 * t / t[-1] - 1
