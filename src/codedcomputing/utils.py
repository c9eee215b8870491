"""Array helpers for writing a code (``docs/own-code.rst``): linear maps and row selections that keep
the caller's array type (numpy array or torch tensor), dtype and device, and the check of a
set of returned workers.

The shipped codes use the same functions; these wrappers check their arguments (a
``ValueError`` names the parameter) and never import torch unless given a tensor.

>>> import numpy as np
>>> from codedcomputing.utils import apply_matrix, check_alive, take_rows
>>> Y = np.arange(6.0, dtype=np.float32).reshape(3, 2)
>>> apply_matrix(np.array([[0.5, 0.5, 0.0]]), Y)
array([[1., 2.]], dtype=float32)
>>> take_rows(Y, check_alive([2, 0], num_workers=3))
array([[4., 5.],
       [0., 1.]], dtype=float32)
"""

from __future__ import annotations

import sys

import numpy as np

from . import _arraylib
from ._validation import check_count, check_real_array

__all__ = ["apply_matrix", "check_alive", "from_float64", "is_torch", "take_rows", "to_float64"]


def is_torch(x) -> bool:
    """Whether ``x`` is a torch tensor (torch is not imported to find out).

    >>> is_torch(np.zeros(3))
    False
    """
    return _arraylib.is_torch(x)


def _check_array(x, name: str):
    """``x`` as a numpy array or torch tensor with at least one axis; integer and bool data
    become floating point (float64, or torch's default dtype), as ``Code.encode`` makes them."""
    if isinstance(x, np.ndarray) and x.dtype.kind in "fc" and x.ndim:  # the common case, in ~0.1 us
        return x
    x = _arraylib._as_array(x, name)
    if x.ndim == 0:
        raise ValueError(f"{name} must have at least one axis (its rows), got a scalar")
    return x


def apply_matrix(matrix, X):
    """``matrix @ X`` over the leading axis of ``X``: row ``i`` of the result is
    ``sum_j matrix[i, j] X[j]``, of shape ``(matrix.shape[0],) + X.shape[1:]``.

    The result has ``X``'s type (numpy array or torch tensor), dtype and device; integer and
    bool ``X`` are made floating point first (float64, or torch's default dtype). ``matrix``
    is a real 2-D numpy array (array-likes are converted) or a ``scipy.sparse`` array, which
    stays sparse, also for torch. A tensor that requires grad keeps its autograd history; on
    a device (CUDA), a read-only ``matrix`` is copied there once and the copy reused while it
    lives. NaN and inf in ``X`` propagate.

    >>> import numpy as np
    >>> average = np.array([[0.5, 0.5]])
    >>> apply_matrix(average, np.array([[1.0, 2.0], [3.0, 4.0]], dtype=np.float32))
    array([[2., 3.]], dtype=float32)
    >>> apply_matrix(average, np.ones((2, 3, 4))).shape
    (1, 3, 4)

    Raises ``ValueError`` naming ``matrix`` (not real, not 2-D) or ``X`` (no rows, not
    numbers, ``X.shape[0] != matrix.shape[1]``).
    """
    scipy_sparse = sys.modules.get("scipy.sparse")  # a sparse matrix exists only if it is loaded
    if scipy_sparse is not None and scipy_sparse.issparse(matrix):
        if matrix.ndim != 2 or not np.issubdtype(matrix.dtype, np.number) or np.iscomplexobj(matrix.data):
            raise ValueError(f"matrix must be a real 2-D sparse array, got {matrix.ndim}-D {matrix.dtype}")
    elif not (isinstance(matrix, np.ndarray) and matrix.dtype.kind == "f" and matrix.ndim == 2):
        matrix = check_real_array(matrix, "matrix")
        if matrix.ndim != 2:
            raise ValueError(f"matrix must be 2-D, got shape {matrix.shape}")
    X = _check_array(X, "X")
    if X.shape[0] != matrix.shape[1]:
        raise ValueError(
            f"X must have one row per column of matrix ({matrix.shape[1]}), got shape {tuple(X.shape)}"
        )
    return _arraylib.apply_matrix(matrix, X)


def take_rows(Y, rows):
    """``Y[rows]``: the rows ``rows`` of ``Y`` in that order (repeats allowed), in ``Y``'s type,
    dtype and device (a torch index is moved to ``Y``'s device).

    ``rows`` holds integer indices in ``0 .. len(Y) - 1`` (whole-number floats pass; an empty
    sequence selects nothing).

    >>> import numpy as np
    >>> take_rows(np.array([10.0, 20.0, 30.0]), [2, 0, 2])
    array([30., 10., 30.])

    Raises ``ValueError`` naming ``Y`` (a scalar, not numbers) or ``rows`` (not a 1-D sequence of
    integers, out of range).
    """
    Y = _check_array(Y, "Y")
    if is_torch(rows):
        rows = rows.cpu().numpy()
    try:
        index = np.asarray(rows)
    except (TypeError, ValueError) as err:  # ragged nesting
        raise ValueError(f"rows must be a one-dimensional sequence of indices: {err}") from None
    if index.ndim != 1:
        raise ValueError(f"rows must be a one-dimensional sequence of indices, got shape {index.shape}")
    if index.size == 0:
        index = np.zeros(0, dtype=np.int64)
    elif not np.issubdtype(index.dtype, np.integer):
        if not (np.issubdtype(index.dtype, np.floating) and np.all(index == np.round(index))):
            raise ValueError(f"rows must hold integer indices, got dtype {index.dtype}")
    outside = (index < 0) | (index >= Y.shape[0])
    if outside.any():
        raise ValueError(f"rows has indices outside [0, {Y.shape[0] - 1}]: {index[outside].tolist()[:10]}")
    return _arraylib.take_rows(Y, index.astype(np.int64))


def check_alive(alive, num_workers: int) -> np.ndarray:
    """``alive`` as an int64 numpy array in the order given: distinct worker indices in
    ``0 .. num_workers - 1`` (a list, array or tensor; whole-number floats pass; maybe none).

    ``np.sort`` it where a decoder wants the workers in order (and reorder ``Y``'s rows with
    :func:`take_rows` and ``np.argsort``).

    >>> check_alive([3, 0, 1.0], num_workers=4)
    array([3, 0, 1])
    >>> check_alive([0, 0], num_workers=4)
    Traceback (most recent call last):
    ...
    ValueError: alive has duplicate indices: [0]

    Raises ``ValueError`` naming ``alive`` (not integers, out of range, repeated) or
    ``num_workers`` (not an integer >= 1).
    """
    num_workers = check_count(num_workers, "num_workers", 1)
    return _arraylib.check_alive(alive, num_workers)


def to_float64(Y) -> np.ndarray:
    """``Y`` as a float64 numpy array of shape ``(len(Y), d)`` (``d`` the product of the other
    axes), in host memory: where a decoder computes in float64 with numpy or scipy. Complex
    ``Y`` is refused (its imaginary part would be lost).

    >>> to_float64(np.ones((2, 3, 4), dtype=np.float32)).shape
    (2, 12)

    Raises ``ValueError`` naming ``Y``.
    """
    Y = _check_array(Y, "Y")
    if _arraylib.is_complex(Y):
        raise ValueError(f"Y must be real, got dtype {Y.dtype}")
    return _arraylib.to_float64(Y)


def from_float64(values, like):
    """float64 ``values`` (a numpy array) in ``like``'s type (numpy array or torch tensor),
    dtype and device: the way back from :func:`to_float64`. The shape is ``values``'s; reshape
    it to ``(len(values),) + like.shape[1:]`` where the rows are ``like``'s.

    >>> Y = np.ones((2, 3), dtype=np.float32)
    >>> from_float64(to_float64(Y) / 2, like=Y)
    array([[0.5, 0.5, 0.5],
           [0.5, 0.5, 0.5]], dtype=float32)

    Raises ``ValueError`` naming ``values`` (not real numbers) or ``like`` (neither a numpy
    array nor a torch tensor, or of an integer or bool dtype).
    """
    values = check_real_array(values, "values")
    if not (isinstance(like, np.ndarray) or is_torch(like)):
        raise ValueError(f"like must be a numpy array or a torch tensor, got {type(like).__name__}")
    if not (
        like.is_floating_point() or like.is_complex()
        if is_torch(like)
        else np.issubdtype(like.dtype, np.inexact)
    ):
        raise ValueError(f"like must have a floating-point dtype, got {like.dtype}")
    return _arraylib.from_float64(values, like)
