"""The interface every code shares: ``encode(X) -> (N, ...)`` and ``decode(Y, alive) -> (K, ...)``."""

from __future__ import annotations

import warnings
from abc import ABC, abstractmethod
from collections import OrderedDict
from typing import ClassVar

import numpy as np

from .. import _arraylib
from .._validation import check_count, check_real_array
from ..errors import InsufficientResultsError, NonFiniteResultWarning
from ..points import make_points

__all__ = ["Code", "check_count"]


def resolve_points(points: str, alpha, beta, num_inputs: int, num_workers: int):
    """``(alpha, beta)``: the named family's points, or the explicit arrays given."""
    alpha_default = make_points(points, num_inputs, kind="data")  # also validates ``points``
    beta_default = make_points(points, num_workers, kind="workers")
    alpha = alpha_default if alpha is None else check_points(alpha, num_inputs, "alpha")
    beta = beta_default if beta is None else check_points(beta, num_workers, "beta")
    return alpha, beta


def read_only(array):
    """``array`` (dense or scipy.sparse) marked read-only, so cached maps cannot be edited."""
    data = array.data if hasattr(array, "nnz") else array
    data.flags.writeable = False
    return array


def check_points(points, n: int, name: str) -> np.ndarray:
    pts = check_real_array(points, name)
    if pts.shape != (n,):
        raise ValueError(f"{name} must have shape ({n},), got {pts.shape}")
    if not np.all(np.isfinite(pts)):
        raise ValueError(f"{name} contains NaN or inf")
    if np.unique(pts).size != n:
        raise ValueError(f"{name} contains duplicate points")
    return pts


class Code(ABC):
    """A code for approximate (or exact) coded computing.

    Attributes: ``name`` (lower-case scheme name), ``description`` (one line),
    ``num_inputs`` (K), ``num_workers`` (N),
    ``alpha`` (``(K,)``, where input k sits on [-1, 1]), ``beta`` (``(N,)``, where worker n
    sits), ``min_results`` (fewest usable results ``decode`` accepts).

    ``encode(X)`` takes ``X`` of shape ``(K, ...)`` (numpy array or torch tensor) and returns
    the ``N`` coded inputs ``(N, ...)`` in the same type, dtype and device. ``decode(Y,
    alive)`` takes the results ``Y[i]`` of workers ``alive[i]`` (any order, no duplicates)
    and returns estimates ``(K, ...)`` of ``f(x_k)``. A row of ``Y`` with NaN or inf is an
    erasure: it is dropped with a :class:`NonFiniteResultWarning`.
    """

    name: ClassVar[str]
    description: ClassVar[str]
    num_inputs: int
    num_workers: int
    # Decoders for this many alive sets are kept (least recently used dropped first).
    decoder_cache_size: ClassVar[int] = 64

    @property
    def alpha(self) -> np.ndarray:
        return self._alpha

    @property
    def beta(self) -> np.ndarray:
        return self._beta

    @property
    def min_results(self) -> int:
        return 1

    def complete(self, alive) -> bool:
        """True once the results of ``alive`` are all this code can use to keep its promise.

        What a runtime waits for when told no count: approximate codes (GCC, BACC) improve
        with every result, so only all ``N`` are complete; exact codes override this (LCC:
        its recovery threshold; uncoded and replication: one result per input).
        """
        return _arraylib.check_alive(alive, self.num_workers).size >= self.num_workers

    def clear_cache(self) -> None:
        """Forget the cached decoders (they are rebuilt on demand)."""
        self._decoders = OrderedDict()

    def __getstate__(self):
        state = self.__dict__.copy()
        state.pop("_decoders", None)  # a cache: rebuilt on demand, not worth shipping
        return state

    def __setstate__(self, state):
        self.__dict__.update(state)
        self.clear_cache()

    def encode(self, X):
        X = _arraylib.check_inputs(X, self.num_inputs, "X")
        return self._encode(X)

    def decode(self, Y, alive):
        Y, alive = self._usable_results(Y, alive)
        self._require(alive, self.min_results)
        return self._decode(Y, alive)

    def __repr__(self) -> str:
        return f"{type(self).__name__}(num_inputs={self.num_inputs}, num_workers={self.num_workers})"

    # -- shared by subclasses -------------------------------------------------------

    def _set_points(self, alpha: np.ndarray, beta: np.ndarray) -> None:
        self._alpha = read_only(np.array(alpha, dtype=np.float64))
        self._beta = read_only(np.array(beta, dtype=np.float64))
        self.clear_cache()

    def _decoder(self, alive_sorted: np.ndarray):
        """The cached decoder for a sorted alive set, built by ``_build_decoder`` on a miss."""
        key = alive_sorted.tobytes()
        decoders = self.__dict__.setdefault("_decoders", OrderedDict())
        if key in decoders:
            decoders.move_to_end(key)
            return decoders[key]
        decoder = decoders[key] = self._build_decoder(alive_sorted)
        if len(decoders) > self.decoder_cache_size:
            decoders.popitem(last=False)
        return decoder

    def _build_decoder(self, alive_sorted: np.ndarray):
        raise NotImplementedError

    def _usable_results(self, Y, alive):
        Y, alive, dropped = _arraylib.check_results(Y, alive, self.num_workers)
        if dropped.size:
            warnings.warn(
                f"workers {dropped.tolist()[:20]} returned NaN or inf; treated as stragglers",
                NonFiniteResultWarning,
                stacklevel=3,
            )
        return Y, alive

    def _require(self, alive: np.ndarray, needed: int) -> None:
        if alive.size < needed:
            raise InsufficientResultsError(
                f"{self.name} needs at least {needed} usable results to decode, got {alive.size}",
                needed=needed,
                alive=alive.tolist(),
            )

    @abstractmethod
    def _encode(self, X): ...

    @abstractmethod
    def _decode(self, Y, alive: np.ndarray): ...
