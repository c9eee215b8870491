"""Accuracy of decoded estimates. Accept numpy arrays or torch tensors of shape ``(K, ...)``."""

from __future__ import annotations

import numpy as np

from . import _arraylib

__all__ = ["accuracy", "mse", "relative_accuracy"]


def _as_array(x, name: str) -> np.ndarray:
    if _arraylib.is_torch(x):
        x = x.detach().cpu()
        x = (x.to(dtype=x.dtype.to_complex()) if x.is_complex() else x.double()).numpy()
    arr = np.asarray(x)
    arr = arr.astype(np.complex128 if np.iscomplexobj(arr) else np.float64)
    if arr.ndim == 0:
        raise ValueError(f"{name} must have a leading dimension (one row per input)")
    return arr


def _paired_rows(est, truth) -> tuple[np.ndarray, np.ndarray]:
    e, t = _as_array(est, "est"), _as_array(truth, "truth")
    if e.shape != t.shape:
        raise ValueError(f"est and truth must have the same shape, got {e.shape} and {t.shape}")
    return e.reshape(e.shape[0], -1), t.reshape(t.shape[0], -1)


def mse(est, truth) -> float:
    """Mean over the K inputs of the squared error norm ``||est_k - truth_k||^2``."""
    e, t = _paired_rows(est, truth)
    return float(np.mean(np.sum(np.abs(e - t) ** 2, axis=1)))


def relative_accuracy(est, truth) -> float:
    """Fraction of inputs whose argmax of ``est`` matches the argmax of ``truth`` = f(x)."""
    e, t = _paired_rows(est, truth)
    return float(np.mean(np.argmax(e, axis=1) == np.argmax(t, axis=1)))


def accuracy(est, labels) -> float:
    """Fraction of inputs whose argmax of ``est`` equals the integer label."""
    e = _as_array(est, "est")
    e = e.reshape(e.shape[0], -1)
    y = np.asarray(labels.detach().cpu().numpy() if _arraylib.is_torch(labels) else labels).ravel()
    if y.shape[0] != e.shape[0]:
        raise ValueError(f"labels must have one entry per row of est ({e.shape[0]}), got {y.shape[0]}")
    return float(np.mean(np.argmax(e, axis=1) == y))
