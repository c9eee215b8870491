"""Accuracy of decoded estimates. Accept numpy arrays or torch tensors of shape ``(K, ...)``."""

from __future__ import annotations

import numpy as np

from . import _arraylib

__all__ = ["accuracy", "mse", "relative_accuracy"]


def _rows(x, name: str) -> np.ndarray:
    if _arraylib.is_torch(x):
        x = x.detach().cpu().numpy()
    arr = np.asarray(x, dtype=np.float64)
    if arr.ndim == 0:
        raise ValueError(f"{name} must have a leading dimension (one row per input)")
    return arr.reshape(arr.shape[0], -1)


def _same_shape(est, truth):
    if est.shape != truth.shape:
        raise ValueError(f"est and truth must have the same shape, got {est.shape} and {truth.shape}")


def mse(est, truth) -> float:
    """Mean over the K inputs of the squared error norm ``||est_k - truth_k||^2``."""
    e, t = _rows(est, "est"), _rows(truth, "truth")
    _same_shape(e, t)
    return float(np.mean(np.sum((e - t) ** 2, axis=1)))


def relative_accuracy(est, truth) -> float:
    """Fraction of inputs whose argmax of ``est`` matches the argmax of ``truth`` = f(x)."""
    e, t = _rows(est, "est"), _rows(truth, "truth")
    _same_shape(e, t)
    return float(np.mean(np.argmax(e, axis=1) == np.argmax(t, axis=1)))


def accuracy(est, labels) -> float:
    """Fraction of inputs whose argmax of ``est`` equals the integer label."""
    e = _rows(est, "est")
    y = np.asarray(labels.detach().cpu().numpy() if _arraylib.is_torch(labels) else labels).ravel()
    if y.shape[0] != e.shape[0]:
        raise ValueError(f"labels must have one entry per row of est ({e.shape[0]}), got {y.shape[0]}")
    return float(np.mean(np.argmax(e, axis=1) == y))
