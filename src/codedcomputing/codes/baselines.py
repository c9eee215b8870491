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
    """A code where worker n computes ``f(x_{n mod K})`` and decoding copies results back.

    Worker n sits where its input does (``beta = alpha[n mod K]``). An input with no result
    raises :class:`~codedcomputing.errors.MissingResultsError` listing the missing inputs,
    unless ``fill`` (NaN, say) is given: then its rows are ``fill`` and
    ``decode_details(...).info["missing"]`` lists them.
    """

    min_workers = 1

    def __init__(self, num_inputs: int, replicas: int, fill: float | None):
        num_inputs = check_count(num_inputs, "num_inputs", 1)
        self.replicas = check_count(replicas, "replicas", 1)
        self.fill = None if fill is None else _check_fill(fill)
        self.assignment = np.arange(num_inputs * self.replicas) % num_inputs  # input of each worker
        super().__init__(num_inputs, check_count(num_inputs * self.replicas, "num_inputs * replicas", 1))

    def _resolve_points(self, points, alpha, beta):
        """Inputs at Chebyshev points; each worker where its input is (copies share a point)."""
        alpha = make_points("chebyshev", self.num_inputs, kind="data")
        return alpha, alpha[self.assignment]

    def _systematic_assignment(self) -> np.ndarray:
        """Every worker computes its input raw: worker n, input ``n mod K``."""
        return self.assignment

    def missing_inputs(self, alive) -> list[int]:
        """The inputs none of whose workers is in ``alive``."""
        alive = _arraylib.check_alive(alive, self.num_workers)
        covered = np.zeros(self.num_inputs, dtype=bool)
        covered[self.assignment[alive]] = True
        return np.flatnonzero(~covered).tolist()

    def complete(self, alive) -> bool:
        """True once every input has at least one result in ``alive``."""
        return not self.missing_inputs(alive)

    def promised_case(self, rng):
        """Any inputs through any ``f``, from a random alive set with a copy of every input."""
        X = rng.normal(size=(self.num_inputs, 3))
        copies = rng.integers(self.replicas, size=self.num_inputs) * self.num_inputs
        extra = rng.choice(self.num_workers, rng.integers(0, self.num_workers + 1), replace=False)
        alive = np.union1d(np.arange(self.num_inputs) + copies, extra)
        return X, np.tanh, alive

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
        """Copy each input's result back, from the first of its workers in ``alive`` (sorted:
        the lowest index); :meth:`Code.decode_details` then keeps the first to arrive, in the
        order ``alive`` was given, as for every code's systematic workers."""
        missing = self.missing_inputs(alive)
        if missing and self.fill is None:
            raise MissingResultsError(
                f"{self.name}: no result for inputs {missing[:20]} "
                f"({len(missing)} of {self.num_inputs}); build the code with fill=... to decode anyway",
                missing=missing,
            )
        return self._gather(Y, alive, self.fill), {"missing": missing}


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
    missing: :meth:`decode` raises, or fills the gap with ``fill``.

    Parameters
    ----------
    num_inputs : int
        K >= 1 inputs, on N = K workers.
    fill : float, optional
        The value of an input's row when its result is missing (NaN, say); without it,
        :meth:`decode` raises :class:`~codedcomputing.MissingResultsError`.

    Examples
    --------
    >>> import numpy as np, codedcomputing as cc
    >>> code = cc.Uncoded(3, fill=np.nan)
    >>> code.decode(np.ones((2, 1)), [0, 2]).ravel().tolist()
    [1.0, nan, 1.0]
    """

    name = "uncoded"
    description = "Uncoded: N = K workers, a straggler's input is lost"

    def __init__(self, num_inputs: int, *, fill: float | None = None):
        super().__init__(num_inputs, 1, fill)


class Replication(_Assignment):
    """Replication: each input on ``replicas`` workers, ``N = replicas * K``; worker n
    computes ``f(x_{n mod K})`` (round-robin, so a block of fewer than K consecutive
    stragglers never takes every copy of an input). The first copy to arrive wins.

    Promise (tested): exact when at least one copy of every input arrives.

    Parameters
    ----------
    num_inputs : int
        K >= 1 inputs.
    replicas : int, default 2
        Copies of each input, r >= 1 (N = r K workers).
    fill : float, optional
        As for :class:`Uncoded`: the row of an input none of whose copies arrived.

    References
    ----------
    K. Lee, M. Lam, R. Pedarsani, D. Papailiopoulos, K. Ramchandran. Speeding up distributed
    machine learning using codes. IEEE Transactions on Information Theory 64, 2018 (coded
    computation against replication under stragglers).

    Examples
    --------
    >>> import numpy as np, codedcomputing as cc
    >>> code = cc.Replication(2, replicas=3)  # workers 0..5 compute inputs 0, 1, 0, 1, 0, 1
    >>> X = np.array([[1.0], [2.0]])
    >>> code.decode(code.encode(X)[[3, 4]], [3, 4]).ravel().tolist()
    [1.0, 2.0]
    """

    name = "replication"
    description = "Replication: each input on r workers, the first copy to arrive wins"

    def __init__(self, num_inputs: int, replicas: int = 2, *, fill: float | None = None):
        super().__init__(num_inputs, replicas, fill)
