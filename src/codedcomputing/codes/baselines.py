"""Uncoded computation and replication, the references every coded scheme is compared to."""

from __future__ import annotations

import numbers

import numpy as np

from .. import _arraylib
from ..errors import MissingResultsError
from ..points import make_points
from .base import Code, check_count

__all__ = ["Replication", "Uncoded"]


class _Assignment(Code):
    """A code where worker n computes ``f(x_{n mod K})`` and decoding copies results back."""

    def __init__(self, num_inputs: int, replicas: int):
        self.num_inputs = check_count(num_inputs, "num_inputs", 1)
        self.replicas = check_count(replicas, "replicas", 1)
        self.num_workers = self.num_inputs * self.replicas
        self.assignment = np.arange(self.num_workers) % self.num_inputs  # input of each worker
        alpha = make_points("chebyshev", self.num_inputs, kind="data")
        self._set_points(alpha, alpha[self.assignment])

    def missing_inputs(self, alive) -> list[int]:
        """The inputs none of whose workers is in ``alive``."""
        alive = _arraylib.check_alive(alive, self.num_workers)
        covered = np.zeros(self.num_inputs, dtype=bool)
        covered[self.assignment[alive]] = True
        return np.flatnonzero(~covered).tolist()

    def complete(self, alive) -> bool:
        """True once every input has at least one result in ``alive``."""
        return not self.missing_inputs(alive)

    def decode(self, Y, alive, *, fill: float | None = None):
        """Copy each input's first result in ``alive`` order (the first to arrive) back.

        An input with no result raises :class:`~codedcomputing.errors.MissingResultsError`
        listing the missing inputs, unless ``fill`` is given (NaN, say): then its row is
        ``fill``.
        """
        if fill is not None:
            fill = _check_fill(fill)
        Y, alive = self._usable_results(Y, alive)
        self._require(alive, self.min_results)
        missing = self.missing_inputs(alive)
        if missing and fill is None:
            raise MissingResultsError(
                f"{self.name}: no result for inputs {missing[:20]} "
                f"({len(missing)} of {self.num_inputs}); pass fill=... to decode anyway",
                missing=missing,
            )
        return self._gather(Y, alive, fill)

    def _gather(self, Y, alive, fill):
        inputs = self.assignment[alive]
        # np.unique returns each input's first occurrence in alive order: the first copy wins
        covered, first = np.unique(inputs, return_index=True)
        out = _arraylib.empty_like_rows(Y, self.num_inputs, np.nan if fill is None else fill)
        if _arraylib.is_torch(Y):
            import torch

            out[torch.as_tensor(covered, device=Y.device)] = Y[torch.as_tensor(first, device=Y.device)]
        else:
            out[covered] = Y[first]
        return out

    def _encode(self, X):
        return _arraylib.take_rows(X, self.assignment)

    def _decode(self, Y, alive):
        return self._gather(Y, alive, None)


def _check_fill(fill) -> float:
    """``fill`` as a float (NaN and inf allowed): the value of rows with no result."""
    if not isinstance(fill, (bool, np.bool_)) and isinstance(fill, numbers.Real):
        try:
            return float(fill)
        except OverflowError:  # an int too large for a float
            pass
    raise ValueError(f"fill must be None or a real number that fits a float (NaN, say), got {fill!r}")


class Uncoded(_Assignment):
    """Uncoded computation: ``N = K`` workers, worker k computes ``f(x_k)``.

    Promise (tested): exact when every input's result arrives. A missing result is
    missing: :meth:`decode` raises, or fills the gap when asked.
    """

    name = "uncoded"
    description = "Uncoded: N = K workers, a straggler's input is lost"

    def __init__(self, num_inputs: int):
        super().__init__(num_inputs, 1)

    def __repr__(self) -> str:
        return f"Uncoded(num_inputs={self.num_inputs})"


class Replication(_Assignment):
    """Replication: each input on ``replicas`` workers, ``N = replicas * K``; worker n
    computes ``f(x_{n mod K})`` (round-robin, so a block of fewer than K consecutive
    stragglers never takes every copy of an input). The first copy to arrive wins.

    Promise (tested): exact when at least one copy of every input arrives.
    """

    name = "replication"
    description = "Replication: each input on r workers, the first copy to arrive wins"

    def __init__(self, num_inputs: int, replicas: int = 2):
        super().__init__(num_inputs, replicas)

    def __repr__(self) -> str:
        return f"Replication(num_inputs={self.num_inputs}, replicas={self.replicas})"
