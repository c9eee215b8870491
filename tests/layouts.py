"""Hard knot layouts, hard batches and a relative error, shared by the spline and the code tests."""

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


# Batches that break layouts: what a fuzzer feeds a batch-adaptive code (ManifoldGCC).
BATCH_KINDS = (
    "normal",
    "clusters",
    "near-duplicates",
    "tight-duplicates",
    "exact-duplicates",
    "all-equal",
    "line",
    "offset",
    "huge",
    "tiny",
)


def hard_batch(kind: str, rng: np.random.Generator, k: int, d: int) -> np.ndarray:
    """A ``(k, d)`` batch of one of :data:`BATCH_KINDS`: standard normal; three far-apart
    tight clusters (a k-nearest-neighbour graph falls apart); a few normal points and the
    rest near-duplicates of one point 3 away (noise 1e-3, or 1e-9 for ``tight``); exact
    duplicates of k/3 points; all rows equal; points on a line; normal plus 1e7; normal times
    1e160 or 1e-160."""
    head = min(4, k)
    if kind == "normal":
        return rng.normal(size=(k, d))
    if kind == "clusters":
        centres = 50.0 * rng.normal(size=(3, d))
        return centres[rng.integers(0, 3, k)] + 0.1 * rng.normal(size=(k, d))
    if kind in ("near-duplicates", "tight-duplicates"):
        noise = 1e-3 if kind == "near-duplicates" else 1e-9
        return np.r_[rng.normal(size=(head, d)), 3.0 + noise * rng.normal(size=(k - head, d))]
    if kind == "exact-duplicates":
        distinct = rng.normal(size=(max(1, k // 3), d))
        return distinct[rng.integers(0, len(distinct), k)]
    if kind == "all-equal":
        return np.tile(rng.normal(size=d), (k, 1))
    if kind == "line":
        return rng.normal(size=d) + rng.uniform(-1, 1, (k, 1)) * rng.normal(size=d)
    if kind == "offset":
        return 1e7 + rng.normal(size=(k, d))
    if kind == "huge":
        return 1e160 * rng.normal(size=(k, d))
    if kind == "tiny":
        return 1e-160 * rng.normal(size=(k, d))
    raise ValueError(f"kind must be one of {BATCH_KINDS}, got {kind!r}")
