"""numpy / torch interoperability for the codes: validation at the public boundary and
linear maps applied in the caller's array type, dtype and device. Small master-side products
run on one thread (:data:`SMALL_PRODUCT`): the master shares its CPUs with its workers.

Tensors on a device (CUDA) stay there: a read-only map is copied to the device once and kept
while the map lives (:func:`apply_matrix`), and validation reads back one bool per array
(whether all of it is finite: the ``ValueError`` needs the answer on the host), the rows'
finiteness only when some row is not.

torch is never imported here unless the caller already passed a torch tensor.
"""

from __future__ import annotations

import contextlib
import sys
import threading
import warnings
import weakref
from collections.abc import Sequence

import numpy as np

__all__ = [
    "apply_matrix",
    "check_inputs",
    "check_results",
    "complex_like",
    "convert_like",
    "empty_like_rows",
    "from_float64",
    "inference_mode",
    "is_complex",
    "is_torch",
    "multiply_adds",
    "on_host",
    "one_blas_thread",
    "read_only",
    "requires_grad",
    "to_float64",
]


def is_torch(x) -> bool:
    """Whether ``x`` is a torch tensor, without importing torch.

    Safe while another thread is still importing torch: until ``torch.Tensor`` exists, no
    tensor can either.
    """
    tensor = getattr(sys.modules.get("torch"), "Tensor", None)
    return tensor is not None and isinstance(x, tensor)


# Device types whose tensors numpy can read in place. Only tests change it (to pretend that CPU
# tensors are on a device, and so follow the device paths).
_HOST_DEVICES = frozenset({"cpu"})


def on_host(x) -> bool:
    """Whether ``x`` lives in host memory: a numpy array, or a torch tensor on the CPU."""
    return not is_torch(x) or x.device.type in _HOST_DEVICES


def inference_mode(f, x):
    """``torch.no_grad()`` when ``f`` is a torch module or ``x`` a tensor, else a no-op: workers
    run ``f`` for coded inference, so estimates carry no autograd history."""
    torch = sys.modules.get("torch")
    module = getattr(getattr(torch, "nn", None), "Module", None)
    if is_torch(x) or (module is not None and isinstance(f, module)):
        return torch.no_grad()
    return contextlib.nullcontext()


def convert_like(x, like):
    """``x`` (numpy array or torch tensor) as ``like``'s kind: numpy, or torch on ``like``'s
    device; the dtype is kept (numpy has no bfloat16: that becomes float32)."""
    if is_torch(like):
        if is_torch(x):
            return x if x.device == like.device else x.to(like.device)
        import torch

        x = np.asarray(x)
        return torch.as_tensor(x if x.flags.writeable else x.copy(), device=like.device)
    return _to_numpy(x) if is_torch(x) else x


def _to_numpy(x) -> np.ndarray:
    import torch

    x = x.detach().cpu()
    return (x.float() if x.dtype == torch.bfloat16 else x).numpy()


def _as_array(x, name: str):
    """A numpy array or torch tensor; integer and bool data become floating point."""
    if isinstance(x, (list, tuple)) and x and all(is_torch(item) for item in x):
        import torch

        shapes = {tuple(item.shape) for item in x}
        if len(shapes) > 1:
            raise ValueError(f"{name} must be a list of equally shaped tensors, got shapes {sorted(shapes)}")
        x = torch.stack(list(x))
    if is_torch(x):
        if not (x.is_floating_point() or x.is_complex()):
            import torch

            x = x.to(torch.get_default_dtype())
        return x
    try:
        arr = np.asarray(x)
    except (ValueError, TypeError) as err:
        raise ValueError(f"{name} must be an array-like of numbers: {err}") from None
    if arr.dtype == object or (not np.issubdtype(arr.dtype, np.number) and arr.dtype != bool):
        raise ValueError(f"{name} must hold numbers, got dtype {arr.dtype}")
    if not np.issubdtype(arr.dtype, np.inexact):
        arr = arr.astype(np.float64)
    return arr


def _finite_rows(x) -> np.ndarray:
    """``(rows,)`` bool on the host: which rows of ``x`` are all finite. A tensor on a device
    is reduced there; one bool comes back, the row mask only when some row is not finite."""
    if is_torch(x):
        host = _numpy_view(x)
        if host is None:
            finite = x.reshape(x.shape[0], _row_size(x)).isfinite().all(dim=1)
            if bool(finite.all()):  # the one read (a sync) the check needs
                return np.ones(x.shape[0], dtype=bool)
            return finite.cpu().numpy()
        x = host
    return np.isfinite(x.reshape(x.shape[0], -1)).all(axis=1)


def _row_size(x) -> int:
    return int(np.prod(tuple(x.shape[1:]), dtype=np.int64))


def _numpy_view(x) -> np.ndarray | None:
    """A CPU tensor as a numpy array sharing its memory (for reading), or None (other devices,
    dtypes numpy lacks). Reading through numpy keeps small master-side work off torch's thread
    pool, whose size is process-wide: beside one busy process on 2 cores, torch's isfinite on a
    (50, 1000) float32 batch took ~30 ms, numpy's on a view ~0.03 ms."""
    import torch

    if x.device.type not in _HOST_DEVICES or x.dtype not in (torch.float16, torch.float32, torch.float64):
        return None
    return x.detach().resolve_conj().resolve_neg().numpy()


def check_inputs(x, num_rows: int, name: str = "X"):
    """Validate the master's inputs: leading dimension ``num_rows``, all finite."""
    x = _as_array(x, name)
    if x.ndim == 0 or x.shape[0] != num_rows:
        raise ValueError(f"{name} must have leading dimension {num_rows}, got shape {tuple(x.shape)}")
    bad = ~_finite_rows(x)
    if bad.any():
        raise ValueError(f"{name} contains NaN or inf (rows {np.flatnonzero(bad).tolist()[:10]})")
    return x


def check_alive(alive, num_workers: int, name: str = "alive") -> np.ndarray:
    """``alive`` (distinct indices in ``0 .. num_workers - 1``, maybe none) as an int64 array;
    rejects non-integers (whole-number floats pass), out-of-range and duplicate indices with
    a ``ValueError`` naming ``name``."""
    if is_torch(alive):
        alive = alive.cpu().numpy()
    try:
        arr = np.asarray(alive)
    except (TypeError, ValueError) as err:  # ragged nesting
        raise ValueError(f"{name} must be a one-dimensional sequence of indices: {err}") from None
    if arr.ndim != 1:
        raise ValueError(f"{name} must be a one-dimensional sequence of indices, got shape {arr.shape}")
    if arr.size == 0:  # of any dtype (an empty list is float64)
        return np.zeros(0, dtype=np.int64)
    if not np.issubdtype(arr.dtype, np.integer):
        if not (np.issubdtype(arr.dtype, np.floating) and np.all(arr == np.round(arr))):
            raise ValueError(f"{name} must hold integer indices, got dtype {arr.dtype}")
    out_of_range = (arr < 0) | (arr >= num_workers)  # before casting, so the message shows them as given
    if out_of_range.any():
        raise ValueError(
            f"{name} has indices outside [0, {num_workers - 1}]: {arr[out_of_range].tolist()[:10]}"
        )
    arr = arr.astype(np.int64)
    ordered = np.sort(arr)  # a sort and a comparison: np.unique's counts cost several times more
    repeated = ordered[1:] == ordered[:-1]
    if repeated.any():
        raise ValueError(f"{name} has duplicate indices: {np.unique(ordered[1:][repeated]).tolist()[:10]}")
    return arr


def check_results(y, alive, num_workers: int, name: str = "Y"):
    """Validate ``(Y, alive)``; return ``(Y, alive, nonfinite_workers)``. ``name``: what the
    caller calls ``Y``, for the messages.

    Rows of ``Y`` with NaN or inf are dropped (erasures), in the order given.
    """
    alive = check_alive(alive, num_workers)
    if isinstance(y, Sequence) and not isinstance(y, (str, bytes)) and len(y) == 0:
        y = np.zeros((0,))
    y = _as_array(y, name)
    if y.ndim == 0 or y.shape[0] != alive.size:
        raise ValueError(
            f"{name} must have one row per entry of alive: len({name}) = "
            f"{y.shape[0] if y.ndim else 'scalar'}, len(alive) = {alive.size}"
        )
    if alive.size == 0:
        return y, alive, np.zeros(0, dtype=np.int64)
    finite = _finite_rows(y)
    if finite.all():
        return y, alive, np.zeros(0, dtype=np.int64)
    keep = np.flatnonzero(finite)
    return take_rows(y, keep), alive[keep], alive[~finite]


def take_rows(x, index: np.ndarray):
    if is_torch(x):
        import torch

        return x[torch.as_tensor(index, device=x.device)]
    return x[index]


def set_rows(x, index: np.ndarray, values):
    """``x`` with rows ``index`` replaced by ``values``: in place for numpy arrays, a new
    tensor for torch (``index_put``, which autograd follows)."""
    if is_torch(x):
        import torch

        return x.index_put((torch.as_tensor(index, device=x.device),), values.to(x.dtype))
    x[index] = values
    return x


# Products of at most SMALL_PRODUCT multiply-adds run on one BLAS thread. On one thread they take
# at most ~2-5 ms, so more threads could save little; but the master shares its CPUs with its
# workers (threads of a ThreadCluster, or other processes), and then every extra BLAS thread
# waits for a core: beside one busy process on 2 cores, a (50 x 25) @ (25 x 1000) float32
# product took 3-28 ms with 2 threads and 0.03-0.04 ms with one (torch's pool: 24-32 ms
# against 0.05-0.07 ms). BLAS runs products below TINY_PRODUCT on one thread anyway
# (OpenBLAS's own threshold is 2^18), so those skip the limiter's ~2 us a library.
# SMALL_PRODUCT = 0 turns the limit off.
SMALL_PRODUCT = 2**27
TINY_PRODUCT = 2**18


class _OneBlasThread:
    """While any caller is inside, the BLAS libraries loaded in the process run on one thread.

    BLAS thread counts are process-wide, so overlapping callers are counted: the first one in
    saves the counts and sets them to 1, the last one out restores them. A product another
    thread runs meanwhile runs on one thread too (on CPUs shared with busy workers, that is no
    loss). The libraries are found once, through threadpoolctl (a fresh ``threadpool_limits``
    looks them up at each call, ~0.7 ms); without threadpoolctl this does nothing.
    """

    def __init__(self):
        self._lock = threading.Lock()
        self._depth = 0
        self._libraries = None
        self._saved: list[int] = []

    @staticmethod
    def _find_libraries() -> list:
        try:
            from threadpoolctl import ThreadpoolController

            return list(ThreadpoolController().select(user_api="blas").lib_controllers)
        except Exception:  # not installed, or a library it cannot drive: keep the threads
            return []

    @property
    def libraries(self) -> list:
        if self._libraries is None:
            with self._lock:
                if self._libraries is None:
                    self._libraries = self._find_libraries()
        return self._libraries

    def __enter__(self):
        libraries = self.libraries
        with self._lock:
            if self._depth == 0:
                self._saved = [library.get_num_threads() for library in libraries]
                for library, count in zip(libraries, self._saved, strict=True):
                    if count != 1:
                        library.set_num_threads(1)
            self._depth += 1
        return self

    def __exit__(self, *exc):
        with self._lock:
            self._depth -= 1
            if self._depth == 0:
                for library, count in zip(self.libraries, self._saved, strict=True):
                    if count != 1:
                        library.set_num_threads(count)
        return False


one_blas_thread = _OneBlasThread()


def multiply_adds(matrix, columns: int) -> int:
    """Multiply-adds of ``matrix @ x`` for ``x`` with ``columns`` columns (stored entries of a
    sparse matrix)."""
    entries = matrix.size if isinstance(matrix, np.ndarray) else matrix.nnz
    return int(entries) * int(columns)


def apply_matrix(matrix, x):
    """``matrix @ x`` over the leading axis of ``x``, in ``x``'s type, dtype and device.

    ``matrix`` is a numpy array or a ``scipy.sparse`` array (kept sparse, also in torch).
    Small products (at most ``SMALL_PRODUCT`` multiply-adds) run on one thread: dense ones
    on one BLAS thread, and on CPU torch tensors that need no grad through numpy or scipy on
    a view of the tensor rather than torch's thread pool, whose size is process-wide. On a
    device, a read-only ``matrix`` is copied there at its first use and the copy reused while
    it lives (:data:`device_copies`); ``x`` never leaves the device.
    """
    rows = matrix.shape[0]
    shape = (rows, *tuple(x.shape[1:]))
    flat = x.reshape(x.shape[0], -1)
    sparse = not isinstance(matrix, np.ndarray)
    small = multiply_adds(matrix, flat.shape[1]) <= SMALL_PRODUCT
    if sparse and x.dtype.itemsize < 4:  # no half-precision sparse kernels: use float32
        half = x.dtype
        out = apply_matrix(matrix, x.float() if is_torch(x) else x.astype(np.float32))
        return out.to(half) if is_torch(x) else out.astype(half)
    if is_torch(x):
        import torch

        if small and x.dtype in (torch.float32, torch.float64) and not x.requires_grad:
            host = _numpy_view(flat)
            if host is not None:
                return torch.from_numpy(_apply_numpy(matrix, host, sparse, small)).reshape(shape)
        if on_host(x):
            m = _torch_matrix(matrix, x.dtype, x.device)
        else:  # uploaded once per map, dtype and device
            m = device_copies.get(matrix, x.dtype, x.device)
        return (m @ flat).reshape(shape)
    return _apply_numpy(matrix, flat, sparse, small).reshape(shape)


def _torch_matrix(matrix, dtype, device):
    """A torch copy of ``matrix`` (numpy, or ``scipy.sparse`` as a sparse CSR tensor)."""
    import torch

    if isinstance(matrix, np.ndarray):
        return torch.tensor(matrix, dtype=dtype, device=device)  # a copy: maps are read-only
    csr = matrix.tocsr()
    with warnings.catch_warnings():  # "sparse CSR support is in beta"
        warnings.simplefilter("ignore", UserWarning)
        return torch.sparse_csr_tensor(
            torch.as_tensor(csr.indptr, dtype=torch.int64, device=device),
            torch.as_tensor(csr.indices, dtype=torch.int64, device=device),
            torch.tensor(csr.data, dtype=dtype, device=device),  # a copy, as above
            size=csr.shape,
            check_invariants=False,  # built by scipy, valid by construction
        )


class _DeviceCopies:
    """Torch copies of read-only maps on devices, one per map, dtype and device, each kept
    while its map lives: a cached decoder's map crosses to the device once, not per call.

    Maps that can still change (writeable numpy data) are copied per call, never kept.
    Thread-safe; two threads missing at once may both copy, and one copy is kept. The lock is
    reentrant: a garbage collection inside it may free a map, whose finaliser drops its copies.
    """

    def __init__(self):
        self._lock = threading.RLock()
        self._copies: dict[int, tuple[weakref.ref, dict]] = {}  # id(map) -> (map, {(dtype, device): copy})

    def get(self, matrix, dtype, device):
        key = (dtype, device)
        with self._lock:
            entry = self._copies.get(id(matrix))
            if entry is not None and entry[0]() is matrix and key in entry[1]:
                return entry[1][key]
        import torch

        with torch.inference_mode(False):  # a copy made in inference mode could not join autograd later
            copy = _torch_matrix(matrix, dtype, device)
        if (matrix.data if hasattr(matrix, "nnz") else matrix).flags.writeable:
            return copy
        try:
            ref = weakref.ref(matrix)
        except TypeError:  # no weak references: nothing would tell when to drop the copy
            return copy
        with self._lock:
            entry = self._copies.get(id(matrix))
            if entry is None or entry[0]() is not matrix:
                entry = self._copies[id(matrix)] = (ref, {})
                finalizer = weakref.finalize(matrix, self._drop, id(matrix), ref)
                finalizer.atexit = False  # at exit nothing needs dropping (nor CUDA touching)
            return entry[1].setdefault(key, copy)

    def _drop(self, key: int, ref: weakref.ref) -> None:
        with self._lock:
            entry = self._copies.get(key)
            if entry is not None and entry[0] is ref:
                del self._copies[key]

    def __len__(self) -> int:
        with self._lock:
            return sum(len(copies) for _, copies in list(self._copies.values()))

    def clear(self) -> None:
        with self._lock:
            self._copies.clear()


device_copies = _DeviceCopies()


def _apply_numpy(matrix, flat: np.ndarray, sparse: bool, small: bool) -> np.ndarray:
    """``matrix @ flat`` for a 2-D numpy ``flat``, on one BLAS thread when dense and ``small``
    (scipy's sparse products are single-threaded already)."""
    m = matrix.astype(flat.dtype, copy=False)
    if sparse or not small or multiply_adds(matrix, flat.shape[1]) <= TINY_PRODUCT:
        return np.asarray(m @ flat)
    with one_blas_thread:
        return np.asarray(m @ flat)


def to_float64(x) -> np.ndarray:
    """``x`` flattened to ``(rows, d)`` as a float64 numpy array (host memory)."""
    if is_torch(x):
        x = _to_numpy(x)
    x = np.asarray(x, dtype=np.float64)
    return x.reshape(x.shape[0], int(np.prod(x.shape[1:], dtype=np.int64)))  # (0, d) too


def from_float64(values: np.ndarray, like):
    """float64 host ``values`` in ``like``'s type, dtype and device (the way back from
    :func:`to_float64`)."""
    if is_torch(like):
        import torch

        return torch.from_numpy(np.ascontiguousarray(values)).to(device=like.device, dtype=like.dtype)
    return values.astype(like.dtype, copy=False)


def is_complex(x) -> bool:
    return x.is_complex() if is_torch(x) else np.iscomplexobj(x)


def complex_like(real, imag, like):
    """``real + i imag`` (both of ``like``'s kind and real dtype) with ``like``'s complex dtype."""
    if is_torch(like):
        import torch

        return torch.complex(real, imag).to(like.dtype)
    return (real + 1j * imag).astype(like.dtype, copy=False)


def requires_grad(x) -> bool:
    """Whether ``x`` is a torch tensor that autograd records through (grad enabled)."""
    if not is_torch(x):
        return False
    import torch

    return bool(x.requires_grad and torch.is_grad_enabled())


def empty_like_rows(like, rows: int, fill: float):
    """A ``(rows,) + like.shape[1:]`` array of ``fill`` in ``like``'s type."""
    shape = (rows, *tuple(like.shape[1:]))
    if is_torch(like):
        import torch

        return torch.full(shape, fill, dtype=like.dtype, device=like.device)
    return np.full(shape, fill, dtype=like.dtype)


def read_only(array):
    """``array`` (a numpy array or a scipy.sparse matrix, whose data is marked) made read-only,
    and returned: a cached map or point set cannot then be edited in place, and a device's copy
    of it (:func:`apply_matrix`) stays valid while it lives."""
    (array.data if hasattr(array, "nnz") else array).flags.writeable = False
    return array
