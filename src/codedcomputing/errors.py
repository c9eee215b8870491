"""Exceptions and warnings shared by codes and runtimes."""

from __future__ import annotations

__all__ = [
    "DamagedCacheWarning",
    "InsufficientResultsError",
    "MissingResultsError",
    "MoreInputsThanWorkersWarning",
    "NonFiniteResultWarning",
]


class InsufficientResultsError(ValueError):
    """Too few usable worker results to decode.

    ``needed`` is the minimum the code requires and ``alive`` the workers whose usable
    results did arrive.
    """

    def __init__(self, message: str, *, needed: int, alive):
        super().__init__(message)
        self.needed = needed
        self.alive = list(alive)


class MissingResultsError(ValueError):
    """Some inputs have no result at all (uncoded, replication); ``missing`` lists them."""

    def __init__(self, message: str, *, missing):
        super().__init__(message)
        self.missing = list(missing)


class NonFiniteResultWarning(RuntimeWarning):
    """A worker returned NaN or inf; its result was treated as an erasure."""


class DamagedCacheWarning(UserWarning):
    """A cached file (trained weights, parsed data) was unreadable or failed its checks; it was
    rebuilt from scratch and cached anew."""


class MoreInputsThanWorkersWarning(UserWarning):
    """A code was built with more inputs than workers (``K > N``): even with every result
    it can only approximate, and the two counts may have been swapped."""
