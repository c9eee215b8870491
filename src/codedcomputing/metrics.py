"""Accuracy of decoded estimates. Accept numpy arrays or torch tensors of shape ``(K, ...)``."""

from __future__ import annotations

import numpy as np

from . import _arraylib

__all__ = ["accuracy", "mse", "relative_accuracy"]


def _as_array(x, name: str) -> np.ndarray:
    if _arraylib.is_torch(x):
        x = x.detach().cpu()
        x = (x.to(dtype=x.dtype.to_complex()) if x.is_complex() else x.double()).numpy()
    try:
        arr = np.asarray(x)
    except (TypeError, ValueError) as err:  # ragged nesting
        raise ValueError(f"{name} must be an array of numbers: {err}") from None
    if arr.dtype == object or not (np.issubdtype(arr.dtype, np.number) or arr.dtype == bool):
        raise ValueError(f"{name} must hold numbers, got dtype {arr.dtype}")
    arr = arr.astype(np.complex128 if np.iscomplexobj(arr) else np.float64)
    if arr.ndim == 0 or arr.shape[0] == 0:
        raise ValueError(f"{name} must have at least one row (one per input), got shape {arr.shape}")
    return arr


def _argmax_rows(x: np.ndarray, name: str) -> np.ndarray:
    if x.shape[1] == 0:
        raise ValueError(f"{name} has no entries per row to take the argmax of (shape {x.shape})")
    return np.argmax(x, axis=1)


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
    """Argmax agreement: the fraction of inputs whose argmax of ``est`` matches the argmax of
    ``truth`` = f(x), the model's own answer.

    The papers' "relative accuracy": accuracy relative to the model run without coding, not
    to the labels (that is :func:`accuracy`). For an ``f`` whose outputs are not scores, the
    number has no meaning; use :func:`mse`.
    """
    e, t = _paired_rows(est, truth)
    return float(np.mean(_argmax_rows(e, "est") == _argmax_rows(t, "truth")))


def accuracy(est, labels) -> float:
    """Fraction of inputs whose argmax of ``est`` equals the integer label."""
    e = _as_array(est, "est")
    e = e.reshape(e.shape[0], -1)
    y = _as_array(labels, "labels").ravel()
    if np.iscomplexobj(y) or not np.all(np.isfinite(y) & (y == np.round(y))):
        raise ValueError("labels must be integer class labels (finite, integer-valued)")
    if y.shape[0] != e.shape[0]:
        raise ValueError(f"labels must have one entry per row of est ({e.shape[0]}), got {y.shape[0]}")
    return float(np.mean(_argmax_rows(e, "est") == y))
