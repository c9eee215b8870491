"""Gradient codes: which partitions each worker sums, and how the master recovers the sum.

``n`` workers, data partitions ``D_1..D_n``, at most ``s`` stragglers. Worker ``i`` sends
``m_i = sum_j B[i, j] g_j`` (``g_j`` the gradient on partition ``j``); from the messages of
any ``n - s`` workers ``F`` the master finds weights ``a`` with ``a^T B_F = 1^T``, so that
``sum_{i in F} a_i m_i = sum_j g_j``, the full gradient (Tandon, Lei, Dimakis, Karampatziakis,
"Gradient coding", ICML 2017).
"""

from __future__ import annotations

import itertools
import math
from abc import ABC, abstractmethod
from typing import ClassVar

import numpy as np

from .._arraylib import check_alive, one_blas_thread
from .._validation import check_count, check_number, check_real_array, check_seed

__all__ = ["CyclicRepetition", "FractionalRepetition", "GradientCode", "TooManyStragglersError"]


class TooManyStragglersError(ValueError):
    """More workers are missing than the code (or an exact training scheme) recovers the
    full gradient without. ``missing``: the partitions (FR, DGD) or the number of results
    (CR, and the schemes that wait for ``n - s``) short. Raised by a training run, it also
    carries ``history``: the steps done before it (step 0 first)."""

    def __init__(self, message: str, *, missing, history=None):
        super().__init__(message)
        self.missing = missing
        self.history = [] if history is None else list(history)


class GradientCode(ABC):
    """A gradient code over ``num_workers`` workers and as many partitions, tolerating
    ``num_stragglers`` (s) missing workers exactly. ``num_workers`` is at most the class's
    ``max_workers`` (checked before anything is allocated).

    Attributes
    ----------
    encoding_matrix : ndarray, shape (n, n)
        ``B``: row ``i`` is worker ``i``'s coefficients over the ``n`` partitions.
    """

    name: ClassVar[str]
    max_workers: ClassVar[int]

    def __init__(self, num_workers: int, num_stragglers: int):
        self.num_workers = check_count(num_workers, "num_workers", 1)
        if self.num_workers > self.max_workers:
            raise ValueError(
                f"num_workers must be at most {self.max_workers:,} for {type(self).__name__} "
                f"({self._why_max}), got {self.num_workers:,}"
            )
        self.num_stragglers = check_count(num_stragglers, "num_stragglers", 0)
        if self.num_stragglers >= self.num_workers:
            raise ValueError(
                f"num_stragglers must be below num_workers = {self.num_workers}, got {self.num_stragglers}"
            )

    @property
    @abstractmethod
    def encoding_matrix(self) -> np.ndarray: ...

    @abstractmethod
    def partitions(self, worker: int) -> np.ndarray:
        """The ``s + 1`` partitions worker ``worker`` holds (its row's support)."""

    def decoding_weights(self, alive) -> np.ndarray:
        """One weight per worker of ``alive`` (in its order: the order results arrived), with
        ``a^T B_alive = 1^T``; raises :class:`TooManyStragglersError` naming what is missing
        when no such weights exist."""
        alive = check_alive(alive, self.num_workers)
        return self._weights(alive)

    def decode(self, messages, alive) -> np.ndarray:
        """``sum_j g_j`` from the messages ``m_i`` (rows, any trailing shape) of ``alive``."""
        messages = check_real_array(messages, "messages")
        weights = self.decoding_weights(alive)
        if messages.ndim == 0 or messages.shape[0] != weights.size:
            raise ValueError(
                f"messages must have one row per entry of alive ({weights.size}), got shape {messages.shape}"
            )
        return np.tensordot(weights, messages, axes=1)

    @abstractmethod
    def _weights(self, alive: np.ndarray) -> np.ndarray:
        """:meth:`decoding_weights` for ``alive`` as distinct in-range int64 indices; no checks
        are performed."""

    def _worker(self, worker) -> int:
        """``worker`` checked: an int in ``0..n-1`` (numpy integers too)."""
        return check_count(worker, "worker", 0, self.num_workers - 1)

    def __repr__(self) -> str:
        return f"{type(self).__name__}(num_workers={self.num_workers}, num_stragglers={self.num_stragglers})"


class FractionalRepetition(GradientCode):
    """Fractional repetition: ``(s + 1)`` divides ``n``; the workers form ``n / (s + 1)``
    groups of ``s + 1``, and every member of group ``k`` holds that group's ``s + 1``
    partitions and sends their sum (``B`` is block-diagonal with blocks of ones). The master
    takes the first arrival of each group (weight 1, the others 0): exact whenever every
    group has a member in ``alive``, which at most ``s`` missing workers guarantee.

    >>> import numpy as np
    >>> code = FractionalRepetition(6, 1)
    >>> code.decoding_weights([1, 2, 5, 4]).tolist()
    [1.0, 1.0, 1.0, 0.0]
    """

    name = "fr"
    max_workers = 10_000
    _why_max = "its dense n x n encoding matrix takes 8 n^2 bytes: 800 MB at that size"

    def __init__(self, num_workers: int, num_stragglers: int):
        super().__init__(num_workers, num_stragglers)
        if self.num_workers % (self.num_stragglers + 1):
            raise ValueError(
                f"fractional repetition needs num_stragglers + 1 = {self.num_stragglers + 1} to divide "
                f"num_workers = {self.num_workers}"
            )
        self.group_size = self.num_stragglers + 1
        self.num_groups = self.num_workers // self.group_size
        self._matrix = None  # built on first use: decoding and training never need it

    @property
    def encoding_matrix(self) -> np.ndarray:
        if self._matrix is None:
            groups = np.arange(self.num_workers) // self.group_size
            matrix = (groups[:, None] == groups[None, :]).astype(np.float64)
            matrix.setflags(write=False)
            self._matrix = matrix
        return self._matrix

    def partitions(self, worker: int) -> np.ndarray:
        """Its group's partitions, ascending (the same for every member; ``worker`` an int in
        ``0..n-1``)."""
        return self._partitions(self._worker(worker))

    def group(self, worker: int) -> int:
        """The group of ``worker`` (an int in ``0..n-1``): its partitions are ``group * (s + 1)``
        onwards."""
        return self._worker(worker) // self.group_size

    def _partitions(self, worker: int) -> np.ndarray:
        """:meth:`partitions` for a valid ``worker``; no checks are performed."""
        start = worker // self.group_size * self.group_size
        return np.arange(start, start + self.group_size)

    def _weights(self, alive):
        weights = np.zeros(alive.size)
        seen = set()
        for position, worker in enumerate(alive.tolist()):
            group = worker // self.group_size
            if group not in seen:
                seen.add(group)
                weights[position] = 1.0
        missing = sorted(set(range(self.num_groups)) - seen)
        if missing:
            partitions = [p for g in missing for p in range(g * self.group_size, (g + 1) * self.group_size)]
            raise TooManyStragglersError(
                f"fractional repetition: no worker of groups {missing} returned, so partitions "
                f"{partitions} are missing ({self.num_workers - alive.size} workers missing, the code "
                f"tolerates {self.num_stragglers})",
                missing=partitions,
            )
        return weights


class CyclicRepetition(GradientCode):
    r"""Cyclic repetition (Tandon et al., Algorithm 1): worker ``i`` holds partitions ``i, i + 1,
    ..., i + s`` (mod n). A random ``H`` (``s x n``, Gaussian from ``seed``, its last column
    set so that ``H 1 = 0``) fixes ``B``: ``B[i, i] = 1`` and the row's other ``s`` entries
    solve ``H[:, i+1..i+s] x = -H[:, i]``, so every row lies in ``null(H)``, whose dimension is
    ``n - s``; any ``n - s`` rows then span it (with probability one), and ``1`` is in it.

    The master uses the first ``n - s`` workers of ``alive`` (the fastest) and solves
    ``a^T B_F = 1^T`` by least squares in float64 (the other workers get weight 0); the
    residual is checked. At construction the conditioning of the ``B_F`` is checked over
    every ``F`` with ``|F| = n - s`` when there are at most ``max_subsets`` of them, else over
    ``max_subsets`` sets: contiguous ones (a block of neighbouring stragglers, the usual
    worst case; up to half of them, evenly spread over the ``n`` starts) and random ones.
    A draw whose worst condition number exceeds ``max_condition`` is redrawn (seeds
    ``seed, seed + 1, ...``, up to ``retries`` times) or refused (``ValueError``).
    ``condition_number`` holds the worst one found, ``checked_subsets`` how many sets were
    checked.

    Each check is an SVD of an ``(n - s) x n`` matrix, ``O(n^3)``, and so is each decode:
    ``max_subsets=None`` (the default) checks ``min(2000, max(4, 5e8 / n^3))`` sets (2,000 up
    to n = 62, 500 at n = 100, 4 from n = 500 on: about a second at most), and
    ``num_workers`` is at most :attr:`max_workers` = 1,000. An explicit ``max_subsets`` is
    honoured as given.

    >>> code = CyclicRepetition(5, 2, seed=0)
    >>> a = code.decoding_weights([4, 0, 2])
    >>> bool(np.allclose(a @ code.encoding_matrix[[4, 0, 2]], 1.0))
    True
    """

    name = "cr"
    max_workers = 1_000
    _why_max = "every decode and every conditioning check is an O(n^3) least squares or SVD"

    def __init__(
        self,
        num_workers: int,
        num_stragglers: int,
        seed: int = 0,
        *,
        max_condition: float = 1e10,
        max_subsets: int | None = None,
        retries: int = 10,
    ):
        super().__init__(num_workers, num_stragglers)
        self.seed = check_seed(seed, "seed")
        self.max_condition = check_number(max_condition, "max_condition", low=1.0)
        if max_subsets is None:
            max_subsets = min(2000, max(4, int(5e8 / self.num_workers**3)))
        self.max_subsets = check_count(max_subsets, "max_subsets", 1)
        self.retries = check_count(retries, "retries", 1, maximum=1000)
        self.checked_subsets = 0
        worst = math.inf
        for attempt in range(self.retries):
            matrix = self._draw(self.seed + attempt)
            worst = self._worst_condition(matrix, self.seed + attempt)
            if worst <= self.max_condition:
                break
        else:
            raise ValueError(
                f"cyclic repetition (n = {self.num_workers}, s = {self.num_stragglers}): every one of "
                f"{self.retries} draws from seed {seed} has a B_F with condition number above "
                f"max_condition = {self.max_condition:g} (the last: {worst:.3g})"
            )
        self.drawn_seed = self.seed + attempt
        self.condition_number = worst
        matrix.setflags(write=False)
        self._matrix = matrix

    @property
    def encoding_matrix(self) -> np.ndarray:
        return self._matrix

    def partitions(self, worker: int) -> np.ndarray:
        """``worker, worker + 1, ..., worker + s`` (mod n), its own first (``worker`` an int in
        ``0..n-1``)."""
        return (self._worker(worker) + np.arange(self.num_stragglers + 1)) % self.num_workers

    def _draw(self, seed: int) -> np.ndarray:
        n, s = self.num_workers, self.num_stragglers
        matrix = np.zeros((n, n))
        if s == 0:
            np.fill_diagonal(matrix, 1.0)
            return matrix
        H = np.random.default_rng(seed).normal(size=(s, n))
        H[:, -1] = -H[:, :-1].sum(axis=1)  # H 1 = 0
        for i in range(n):
            others = (i + 1 + np.arange(s)) % n
            matrix[i, i] = 1.0
            matrix[i, others] = np.linalg.solve(H[:, others], -H[:, i])
        return matrix

    def _subsets(self, seed: int):
        n, s = self.num_workers, self.num_stragglers
        size = n - s
        if math.comb(n, s) <= self.max_subsets:
            yield from (np.asarray(F) for F in itertools.combinations(range(n), size))
            return
        blocks = min(n, max(1, self.max_subsets // 2))
        for start in np.unique(np.linspace(0, n, blocks, endpoint=False).astype(np.int64)):
            yield np.sort((start + s + np.arange(size)) % n)  # a block of neighbouring stragglers
        rng = np.random.default_rng([seed, 1])
        for _ in range(self.max_subsets - blocks):
            yield np.sort(rng.choice(n, size, replace=False))

    def _worst_condition(self, matrix: np.ndarray, seed: int) -> float:
        worst, self.checked_subsets = 1.0, 0
        with one_blas_thread:  # on CPUs shared with workers, threaded BLAS was 5-50x slower here
            for F in self._subsets(seed):
                singular = np.linalg.svd(matrix[F], compute_uv=False)
                worst = max(worst, float(singular[0] / singular[-1]) if singular[-1] > 0 else math.inf)
                self.checked_subsets += 1
        return worst

    def _weights(self, alive):
        size = self.num_workers - self.num_stragglers
        if alive.size < size:
            raise TooManyStragglersError(
                f"cyclic repetition needs the results of n - s = {size} workers, got {alive.size} "
                f"({self.num_workers - alive.size} missing, the code tolerates {self.num_stragglers})",
                missing=size - alive.size,
            )
        used = alive[:size]
        rows = self._matrix[used]
        with one_blas_thread:
            solution, *_ = np.linalg.lstsq(rows.T, np.ones(self.num_workers), rcond=None)
        residual = float(np.max(np.abs(solution @ rows - 1.0)))
        if residual > 1e-6:
            raise ValueError(
                f"cyclic repetition: the rows of workers {sorted(used.tolist())} do not span the "
                f"all-ones vector (residual {residual:.2g}); is B ill-conditioned?"
            )
        weights = np.zeros(alive.size)
        weights[:size] = solution
        return weights
