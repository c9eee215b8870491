"""The interface every code shares: ``encode(X) -> (N, ...)`` and ``decode(Y, alive) -> (K, ...)``."""

from __future__ import annotations

import inspect
import threading
import warnings
from abc import ABC, abstractmethod
from collections import OrderedDict
from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import ClassVar

import numpy as np

from .. import _arraylib
from .._validation import check_choice, check_count, check_flag, check_real_array
from ..errors import InsufficientResultsError, MoreInputsThanWorkersWarning, NonFiniteResultWarning
from ..points import ASSIGNMENTS, POINT_FAMILIES, make_points
from ..points import assignment as worker_assignment
from .layout import _snap_to

__all__ = ["PARITIES", "Code", "Decoded", "systematic_points"]

#: Where a systematic code's N - K parity workers sit (:func:`systematic_points`).
PARITIES = ("between", "ends", "nearest")


def resolve_points(points: str, alpha, beta, num_inputs: int, num_workers: int, assignment: str = "natural"):
    """``(alpha, beta)``: the named family's points, or the explicit arrays given; the
    family's worker points in the order ``assignment`` names (explicit ``beta`` is kept as
    given)."""
    alpha_default = make_points(points, num_inputs, kind="data")  # also validates ``points``
    order = worker_assignment(num_workers, assignment)  # also validates ``assignment``
    beta_default = make_points(points, num_workers, kind="workers")[order]
    alpha = alpha_default if alpha is None else check_points(alpha, num_inputs, "alpha")
    beta = beta_default if beta is None else check_points(beta, num_workers, "beta")
    return alpha, beta


def systematic_points(
    points: str,
    alpha,
    beta,
    num_inputs: int,
    num_workers: int,
    parity: str = "between",
    assignment: str = "natural",
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``(alpha, beta, inputs)`` of a systematic code: K of the N worker points are the inputs'
    points ``alpha``, and ``inputs[n]`` is the input worker n computes raw (-1: parity).

    With ``beta`` not given, workers ``0..K-1`` sit at ``alpha`` (worker k at ``alpha_k``),
    and workers ``K..N-1`` at the ``N - K`` parity points ``parity`` names, in the order
    ``assignment`` names (natural: sorted), with ``a_0 < ... < a_{K-1}`` the sorted ``alpha``:

    - ``"between"``: in the ``K - 1`` gaps between neighbouring inputs, as evenly as the
      count allows (``floor((N - K) / (K - 1))`` per gap, one more in evenly spread gaps),
      equally spaced inside each gap; with ``K = 1``, as ``"nearest"``;
    - ``"ends"``: the first two at the interval's ends (-1 and 1, or one end gap beyond the
      outermost inputs when those lie on or beyond +-1), where decoders otherwise
      extrapolate; the rest as ``"between"``;
    - ``"nearest"``: the family's N worker points, the K nearest the inputs (in order, least
      total displacement, :func:`~codedcomputing.codes.layout.snap_to`) moved onto them; the other
      ``N - K`` stay (for Chebyshev points: their ends +-1 and denser near the ends).

    With ``beta`` given, it is kept (worker order as given): with ``alpha`` given too, every
    ``alpha_k`` must be one of its points (exactly); without, the inputs go to the ``beta``
    points nearest the family's data points (in order, least total displacement).
    """
    check_choice(points, "points", POINT_FAMILIES)
    check_choice(assignment, "assignment", ASSIGNMENTS)
    check_choice(parity, "parity", PARITIES)
    if num_inputs > num_workers:
        raise ValueError(
            f"systematic=True puts every input at a worker's point: it needs num_inputs <= num_workers, "
            f"got num_inputs = {num_inputs} > num_workers = {num_workers}"
        )
    if beta is not None:
        beta = check_points(beta, num_workers, "beta")
        if alpha is None:
            alpha = _snap_to(make_points(points, num_inputs, kind="data"), beta)
        else:
            alpha = check_points(alpha, num_inputs, "alpha")
        inputs = np.full(num_workers, -1, dtype=np.intp)
        where = {point: n for n, point in enumerate(beta.tolist())}
        missing = [k for k, point in enumerate(alpha.tolist()) if point not in where]
        if missing:
            raise ValueError(
                f"beta must hold every input's point alpha_k when systematic=True: alpha[{missing[0]}] = "
                f"{alpha[missing[0]]!r} is none of beta's points ({len(missing)} of alpha missing)"
            )
        inputs[[where[point] for point in alpha.tolist()]] = np.arange(num_inputs)
        return alpha, beta, inputs
    if alpha is None:
        alpha = make_points(points, num_inputs, kind="data")
    else:
        alpha = check_points(alpha, num_inputs, "alpha")
    parities = _parity_points(np.sort(alpha), num_workers, points, parity)
    if parities.size:
        parities = parities[worker_assignment(parities.size, assignment)]
    beta = np.concatenate([alpha, parities])
    if np.unique(beta).size != num_workers:  # only explicit alpha can meet a parity point
        raise ValueError(f"alpha meets a parity point of parity={parity!r}; give beta explicitly")
    inputs = np.r_[np.arange(num_inputs), np.full(parities.size, -1)].astype(np.intp)
    return alpha, beta, inputs


def _parity_points(sorted_alpha: np.ndarray, num_workers: int, points: str, parity: str) -> np.ndarray:
    """The ``N - K`` parity points of :func:`systematic_points`, sorted. No checks are performed."""
    k = sorted_alpha.size
    count = num_workers - k
    if count == 0:
        return np.zeros(0)
    if parity == "nearest" or k == 1:
        family = np.sort(make_points(points, num_workers, kind="workers"))
        taken = np.isin(family, _snap_to(sorted_alpha, family))
        return family[~taken]
    ends = np.zeros(0)
    if parity == "ends":
        low = -1.0 if sorted_alpha[0] > -1 else sorted_alpha[0] - (sorted_alpha[1] - sorted_alpha[0])
        high = 1.0 if sorted_alpha[-1] < 1 else sorted_alpha[-1] + (sorted_alpha[-1] - sorted_alpha[-2])
        ends = np.array([low, high])[: min(2, count)]
        count -= ends.size
    gaps = k - 1
    per_gap = np.full(gaps, count // gaps)
    extra = count % gaps
    per_gap[((np.arange(extra) + 0.5) * gaps / extra).astype(int) if extra else []] += 1
    inside = [
        sorted_alpha[i] + (sorted_alpha[i + 1] - sorted_alpha[i]) * np.arange(1, c + 1) / (c + 1)
        for i, c in enumerate(per_gap)
    ]
    return np.sort(np.concatenate([ends, *inside]))


def check_points(points, n: int, name: str) -> np.ndarray:
    pts = check_real_array(points, name)
    if pts.shape != (n,):
        raise ValueError(f"{name} must have shape ({n},), got {pts.shape}")
    if not np.all(np.isfinite(pts)):
        raise ValueError(f"{name} contains NaN or inf")
    if np.unique(pts).size != n:
        raise ValueError(f"{name} contains duplicate points")
    return pts


@dataclass(frozen=True, eq=False)
class Decoded:
    """What one decode produced (:meth:`Code.decode_details`).

    - ``estimates``: ``(K, ...)`` estimates of ``f(x_k)``, in the results' type, dtype and
      device (what :meth:`Code.decode` returns);
    - ``alive``: the workers whose results were used, sorted;
    - ``erased``: the workers whose results held NaN or inf and were dropped, sorted;
    - ``info``: what this call chose, read-only. Every code's holds ``"exact"``, a read-only
      bool array of shape ``(K,)``: True where ``estimates[k]`` is a worker's own result of
      ``f(x_k)``, bit for bit (a systematic worker of :attr:`Code.systematic_workers` that
      returned: uncoded, replication, systematic GCC and BACC), or where the decode is exact
      (LCC at or above its recovery threshold: all True; below it all False); all False for
      an approximate decode. By code, besides: GCC ``{"lambda_dec": ...}`` (with
      ``lambda_dec="gcv"``, the lambda GCV picked for these results), uncoded and replication
      ``{"missing": [...]}`` (the inputs filled in).

    A new object per call, so two threads decoding with one code never share one.
    """

    estimates: object
    alive: np.ndarray
    erased: np.ndarray
    info: Mapping[str, object] = field(default_factory=dict)


class Code(ABC):
    """A code for approximate (or exact) coded computing: ``encode`` and ``decode``.

    Every code is built as ``Code(num_inputs, num_workers, ..., *, points=..., alpha=...,
    beta=...)`` (some take fewer) and has the same verbs and attributes, so that runtimes,
    experiments and the CLI take any code. Options are constructor arguments, stored under
    their own names (:meth:`get_params`); ``decode(Y, alive)`` takes no others.

    Attributes
    ----------
    name, description : str
        The scheme's lower-case name and a one-line description (class attributes).
    num_inputs, num_workers : int
        K inputs, N workers. ``K > N`` is allowed (a spline or interpolant through fewer
        points than inputs) but warns (:class:`~codedcomputing.errors.MoreInputsThanWorkersWarning`).
    alpha : ndarray, shape (K,)
        Where input k sits on [-1, 1].
    beta : ndarray, shape (N,)
        Where worker n sits (in worker order: sorted unless ``assignment="golden"``).
    min_results : int
        The fewest usable results :meth:`decode` accepts.
    linear : bool
        Whether decoding is linear in ``Y`` for a fixed alive set: a fixed map of the results.
        GCC's default decoders are not (their blend weights are fitted to the results), nor
        is GCC with ``lambda_dec="gcv"``, ``RobustGCC`` or ApproxIFER.
    systematic_inputs : ndarray of int, shape (N,)
        The input whose raw ``x_k`` worker n computes (its result *is* ``f(x_k)``), or -1
        for a coded (parity) worker. All -1 for non-systematic codes; uncoded and
        replication: worker n computes input ``n mod K``; ``GCC(..., systematic=True)`` and
        ``BACC(..., systematic=True)``: the workers at the inputs' points.
    systematic_workers : ndarray of int, shape (K,)
        The first worker that computes input k raw, or -1 where none does. A decode returns
        that worker's result as input k's estimate, bit for bit, whenever it is in
        ``alive`` (with several, e.g. replication: the first of them in ``alive``'s order),
        and ``decode_details(Y, alive).info["exact"][k]`` is then True.

    Notes
    -----
    A new code is one file in ``codes/`` that subclasses this, implements ``_encode`` and
    ``_decode`` (which receives the results sorted by worker), and passes
    :func:`codedcomputing.testing.check_code`. It may implement :meth:`promised_case` so
    that the suite checks its promise.
    """

    name: ClassVar[str]
    description: ClassVar[str]
    linear = True
    # Fewest workers a code of this kind can have (copying codes: one per input).
    min_workers: ClassVar[int] = 2
    # Decoders for this many alive sets are kept (least recently used dropped first).
    decoder_cache_size: ClassVar[int] = 64

    def __init__(
        self,
        num_inputs,
        num_workers,
        *,
        points="chebyshev",
        alpha=None,
        beta=None,
        assignment="natural",
        systematic=False,
        parity="between",
    ):
        self.num_inputs = check_count(num_inputs, "num_inputs", 1)
        self.num_workers = check_count(num_workers, "num_workers", self.min_workers)
        systematic = check_flag(systematic, "systematic")
        check_choice(parity, "parity", PARITIES)
        if self.num_inputs > self.num_workers and not systematic:
            warnings.warn(
                f"num_inputs = {self.num_inputs} exceeds num_workers = {self.num_workers}: fewer coded "
                "results than inputs recover them only approximately, even with no straggler "
                "(were the two swapped?)",
                MoreInputsThanWorkersWarning,
                stacklevel=3,
            )
        self.points, self._point_order = points, assignment
        if systematic:
            alpha, beta, inputs = systematic_points(
                points, alpha, beta, self.num_inputs, self.num_workers, parity, assignment
            )
        else:
            alpha, beta = self._resolve_points(points, alpha, beta)
        self._alpha = _arraylib.read_only(np.array(alpha, dtype=np.float64))
        self._beta = _arraylib.read_only(np.array(beta, dtype=np.float64))
        if not systematic:
            inputs = np.array(self._systematic_assignment(), dtype=np.intp)
        self._systematic_inputs = _arraylib.read_only(inputs)
        self._systematic_workers = _arraylib.read_only(first_workers(inputs, self.num_inputs))
        raw = inputs[inputs >= 0]
        self._one_worker_per_input = np.unique(raw).size == raw.size  # no input computed twice
        self.clear_cache()

    @property
    def alpha(self) -> np.ndarray:
        return self._alpha

    @property
    def beta(self) -> np.ndarray:
        return self._beta

    @property
    def min_results(self) -> int:
        return 1

    @property
    def systematic_inputs(self) -> np.ndarray:
        """``(N,)`` ints: the input whose raw ``x_k`` worker n computes, or -1 (a parity
        worker). Read-only."""
        return self._systematic_inputs

    @property
    def systematic_workers(self) -> np.ndarray:
        """``(K,)`` ints: the first worker that computes input k raw, or -1 where none does
        (derived from :attr:`systematic_inputs`). Read-only."""
        return self._systematic_workers

    #: True for codes whose layout (points, order) depends on the batch: see :meth:`bind`.
    batch_adaptive: ClassVar[bool] = False

    def bind(self, X) -> Code:
        """The code to encode the batch ``X`` with and to decode its results with.

        Most codes have one layout for every batch and return themselves. A batch-adaptive
        code (:attr:`batch_adaptive`, e.g. :class:`~codedcomputing.ManifoldGCC`) computes
        the layout of this batch (the order of its inputs, their points) and returns a new
        code that holds it: ``bound = code.bind(X); bound.decode(f(bound.encode(X))[alive],
        alive)``. The layout lives in the bound code, never in ``self``, so batches encoded
        while earlier ones are out (:meth:`CodedExecutor.map`) and threads sharing one code
        do not interfere. Estimates always come back in the order of ``X``'s rows.
        """
        return self

    def get_params(self) -> dict:
        """The constructor's arguments, as this code holds them (scikit-learn's convention):
        ``type(code)(**code.get_params())`` builds an equal code."""
        names = [
            name
            for name, parameter in inspect.signature(type(self).__init__).parameters.items()
            if name != "self" and parameter.kind is not parameter.VAR_KEYWORD
        ]
        return {name: getattr(self, name) for name in names}

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
        self._decoders_lock = threading.Lock()

    def __getstate__(self):
        state = self.__dict__.copy()
        state.pop("_decoders", None)  # a cache: rebuilt on demand, not worth shipping
        state.pop("_decoders_lock", None)
        state.pop("_encoder_rows", None)
        return state

    def __setstate__(self, state):
        self.__dict__.update(state)
        self.clear_cache()

    def encode(self, X):
        """The coded inputs: worker ``n`` is to compute ``f(encode(X)[n])``.

        Parameters
        ----------
        X : array_like or torch.Tensor, shape (K, ...)
            The K inputs, any trailing shape; integers and bools become floating point.

        Returns
        -------
        ndarray or torch.Tensor, shape (N, ...)
            The N coded inputs, in ``X``'s type, dtype and device.

        Raises
        ------
        ValueError
            ``X`` does not have K rows, holds NaN or inf, or is not numeric.

        Examples
        --------
        >>> import numpy as np, codedcomputing as cc
        >>> cc.GCC(4, 10).encode(np.ones((4, 3))).shape
        (10, 3)
        """
        X = _arraylib.check_inputs(X, self.num_inputs, "X")
        return self._encode(X)

    def decode(self, Y, alive):
        """Estimates of ``f(x_1), ..., f(x_K)`` from the results of the workers in ``alive``.

        Parameters
        ----------
        Y : array_like or torch.Tensor, shape (len(alive), ...)
            ``Y[i]`` is the result of worker ``alive[i]``. A row with NaN or inf is an
            erasure: it is dropped with a :class:`~codedcomputing.NonFiniteResultWarning`.
        alive : sequence of int
            The workers that returned, in any order, without duplicates.

        Returns
        -------
        ndarray or torch.Tensor, shape (K, ...)
            The estimates, in ``Y``'s type, dtype and device. :meth:`decode_details` also
            returns what the call chose. Integer and bool results are read as floating point
            (float64 for numpy, torch's default dtype for tensors), and the estimates keep
            that dtype: a decoded value is an approximation, not an integer, even from a
            code that is exact.

        Raises
        ------
        InsufficientResultsError
            Fewer usable results than :attr:`min_results` (``.needed``, ``.alive``).
        MissingResultsError
            Uncoded and replication without ``fill``: an input has no result.
        ValueError
            ``Y`` and ``alive`` disagree in length, or ``alive`` has duplicates or
            indices outside ``0..N-1``.

        Examples
        --------
        >>> import numpy as np, codedcomputing as cc
        >>> code = cc.GCC(4, 10)
        >>> X = 3 * code.alpha[:, None] + 1  # affine in alpha ...
        >>> alive = [0, 2, 3, 5, 8, 9]
        >>> est = code.decode(2 * code.encode(X)[alive] + 1, alive)  # ... through f(x) = 2x + 1
        >>> bool(np.allclose(est, 2 * X + 1))
        True
        """
        return self.decode_details(Y, alive).estimates

    def decode_details(self, Y, alive) -> Decoded:
        """:meth:`decode`, returning a :class:`Decoded`: the estimates with the workers used,
        the erasures and what this call chose (the lambda GCV picked, LCC's exactness, ...).
        Thread-safe: nothing of one call is kept on the code."""
        Y, alive, erased = self._usable_results(Y, alive)
        self._require(alive, self.min_results)
        by_worker_Y, by_worker_alive = by_worker(Y, alive)
        estimates, info = self._decode(by_worker_Y, by_worker_alive)
        info = dict(info)
        exact = np.zeros(self.num_inputs, dtype=bool)
        if "exact" in info:  # the decoder's own word (LCC)
            exact |= np.asarray(info["exact"], dtype=bool)
        # in the order given: of two workers that compute one input raw, the first listed wins
        estimates, returned = self._keep_systematic(estimates, Y, alive)
        info["exact"] = _arraylib.read_only(exact | returned)
        return Decoded(estimates, by_worker_alive, np.sort(erased), MappingProxyType(info))

    def decode_rows(self, Y, alive, rows, *, trusted: bool = False):
        """The estimates of the inputs ``rows`` alone, and whether each is exact:
        ``(values, exact)``, ``values`` of shape ``(len(rows), ...)``, ``exact`` ``(len(rows),)``.

        The same numbers as rows ``rows`` of :meth:`decode_details` (its estimates and
        ``info["exact"]``; a systematic worker's own result is its input's value, bit for bit).
        ``trusted=True`` is a serving frontend's fast path: the caller vouches that ``Y`` is
        finite and of one shape, ``alive`` distinct workers in ``0..N-1``, at least
        :attr:`min_results` of them, and ``rows`` inputs in ``0..K-1`` (its own, already
        validated results), so no argument is checked; and a code that decodes a few rows for
        less than all of them (:class:`~codedcomputing.BACC`) does so.
        """
        if not trusted:
            rows = np.asarray(rows)
            if rows.ndim != 1 or (rows.size and (rows.min() < 0 or rows.max() >= self.num_inputs)):
                raise ValueError(
                    f"rows must be a 1-D sequence of inputs in 0..{self.num_inputs - 1}, got {rows!r}"
                )
            decoded = self.decode_details(Y, alive)
            return _arraylib.take_rows(decoded.estimates, rows), np.asarray(decoded.info["exact"])[rows]
        rows = np.asarray(rows, dtype=np.intp)
        Y, alive = by_worker(Y, np.asarray(alive, dtype=np.intp))
        values, exact = self._decode_rows(Y, alive, rows)
        own = self._systematic_inputs[alive]  # per row of Y: the input it computed raw, or -1
        if (own >= 0).any():
            where = {int(k): i for i, k in reversed(list(enumerate(own))) if k >= 0}  # first in alive
            kept = [j for j, k in enumerate(rows.tolist()) if k in where]
            if kept:
                if not _arraylib.is_torch(values) and not values.flags.writeable:
                    values = values.copy()
                own_rows = _arraylib.take_rows(Y, [where[int(rows[j])] for j in kept])
                values = _arraylib.set_rows(values, kept, own_rows)
                exact = exact.copy()
                exact[kept] = True
        return values, exact

    def encoder_rows(self, workers=None) -> np.ndarray | None:
        """``E`` with ``encode(X)[workers] == E @ X`` (rows flattened) for every ``X``: the
        rows of a linear code's encoder, ``(len(workers), K)`` (all ``N`` for None), cached
        and read-only; None for a batch-adaptive code, whose encoder depends on the inputs.
        A serving frontend encodes a group's parities with it: one product."""
        if self.batch_adaptive:
            return None
        matrix = self.__dict__.get("_encoder_rows")
        if matrix is None:  # two threads may both build it: the same matrix
            encoded = np.asarray(self.encode(np.eye(self.num_inputs)))
            matrix = _arraylib.read_only(np.ascontiguousarray(encoded))
            self.__dict__["_encoder_rows"] = matrix
        if workers is None:
            return matrix
        return _arraylib.read_only(matrix[np.asarray(workers, dtype=np.intp)])

    def promised_case(self, rng: np.random.Generator):
        """One instance of this code's promise, for :func:`codedcomputing.testing.check_code`:
        ``(X, f, alive)`` such that ``decode(f(encode(X))[alive], alive)`` equals ``f(X)`` to
        rounding, or None if the code promises nothing exact."""
        return None

    def __repr__(self) -> str:
        shown = []
        for name, parameter in inspect.signature(type(self).__init__).parameters.items():
            if name in ("self", "alpha", "beta"):
                continue
            value = getattr(self, name)
            if name in ("num_inputs", "num_workers") or not _same(value, parameter.default):
                shown.append(f"{name}={value!r}")
        return f"{type(self).__name__}({', '.join(shown)})"

    # -- shared by subclasses -------------------------------------------------------

    def _systematic_assignment(self) -> np.ndarray:
        """``(N,)``: the input each worker computes raw, -1 for a parity worker (called once,
        after the points are resolved; systematic codes override it)."""
        return np.full(self.num_workers, -1, dtype=np.intp)

    def _systematic_case(self, rng: np.random.Generator):
        """The systematic promise as a :meth:`promised_case`: any inputs through any ``f``,
        from every systematic worker and a random share of the others."""
        X = rng.normal(size=(self.num_inputs, 3))
        raw = np.flatnonzero(self._systematic_inputs >= 0)
        extra = rng.choice(self.num_workers, rng.integers(0, self.num_workers + 1), replace=False)
        alive = np.union1d(raw, extra)
        if alive.size < self.min_results:
            alive = np.arange(self.num_workers)
        return X, np.tanh, alive

    def _copy_systematic(self, encoded, X):
        """``encoded`` with each systematic worker's row replaced by its raw input, bit for bit
        (a systematic code's encoder calls this last)."""
        workers = np.flatnonzero(self._systematic_inputs >= 0)
        if workers.size == 0:
            return encoded
        if not _arraylib.is_torch(encoded) and (
            not encoded.flags.writeable or np.may_share_memory(encoded, X)
        ):
            encoded = encoded.copy()
        return _arraylib.set_rows(encoded, workers, _arraylib.take_rows(X, self._systematic_inputs[workers]))

    def _keep_systematic(self, estimates, Y, alive: np.ndarray):
        """``(estimates, returned)``: the estimates with every input whose systematic worker
        is in ``alive`` replaced by that worker's row of ``Y`` (the first such row), and the
        ``(K,)`` mask of those inputs."""
        returned = np.zeros(self.num_inputs, dtype=bool)
        inputs = self._systematic_inputs[alive]  # per row of Y
        rows = np.flatnonzero(inputs >= 0)
        if rows.size == 0:
            return estimates, returned
        if self._one_worker_per_input:  # alive is distinct, so the inputs are
            covered, first = inputs[rows], np.arange(rows.size)
        else:
            covered, first = np.unique(inputs[rows], return_index=True)  # first in alive order
        if not _arraylib.is_torch(estimates) and (
            not estimates.flags.writeable or np.may_share_memory(estimates, Y)
        ):
            estimates = estimates.copy()
        estimates = _arraylib.set_rows(estimates, covered, _arraylib.take_rows(Y, rows[first]))
        returned[covered] = True
        return estimates, returned

    def _resolve_points(self, points, alpha, beta) -> tuple[np.ndarray, np.ndarray]:
        """``(alpha, beta)``: the named family's points, or the explicit arrays given."""
        return resolve_points(points, alpha, beta, self.num_inputs, self.num_workers, self._point_order)

    def _decoder(self, alive_sorted: np.ndarray):
        """The cached decoder for a sorted alive set, built by ``_build_decoder`` on a miss.

        A lock guards the cache (two threads may decode with one code); a decoder is built
        outside it, so a miss in one thread does not hold up the others.
        """
        key = alive_sorted.tobytes()
        with self._decoders_lock:
            decoder = self._decoders.get(key)
            if decoder is not None:
                self._decoders.move_to_end(key)
                return decoder
        decoder = self._build_decoder(alive_sorted)
        with self._decoders_lock:
            self._decoders[key] = decoder
            if len(self._decoders) > self.decoder_cache_size:
                self._decoders.popitem(last=False)
        return decoder

    def _build_decoder(self, alive_sorted: np.ndarray):
        raise NotImplementedError

    def _usable_results(self, Y, alive):
        Y, alive, dropped = _arraylib.check_results(Y, alive, self.num_workers)
        if dropped.size:
            warnings.warn(
                f"workers {dropped.tolist()[:20]} returned NaN or inf; treated as stragglers",
                NonFiniteResultWarning,
                stacklevel=4,
            )
        return Y, alive, dropped

    def _require(self, alive: np.ndarray, needed: int) -> None:
        if alive.size < needed:
            raise InsufficientResultsError(
                f"{self.name} needs at least {needed} usable results to decode, got {alive.size}",
                needed=needed,
                alive=alive.tolist(),
            )

    @abstractmethod
    def _encode(self, X): ...

    def _decode_rows(self, Y, alive: np.ndarray, rows: np.ndarray):
        """``(values, exact)`` of the inputs ``rows`` from checked results in worker order (as
        :meth:`_decode`), before a systematic worker's own result is kept. By default the whole
        :meth:`_decode`, then the rows; a code that decodes a few rows for less overrides it."""
        estimates, info = self._decode(Y, alive)
        exact = np.asarray(info["exact"], dtype=bool)[rows] if "exact" in info else np.zeros(rows.size, bool)
        return _arraylib.take_rows(estimates, rows), exact

    @abstractmethod
    def _decode(self, Y, alive: np.ndarray) -> tuple[object, dict]:
        """``(estimates, info)`` from checked, finite results ``Y`` of workers ``alive``, at
        least :attr:`min_results` of them. ``alive`` is sorted (increasing worker index) and
        ``Y[i]`` is the result of ``alive[i]``: :meth:`decode_details` puts the rows in that
        order, once, for every code."""


def by_worker(Y, alive: np.ndarray):
    """``(Y, alive)`` with the rows in worker order (``alive`` sorted), the rows moved only
    when they are not in that order already."""
    order = np.argsort(alive, kind="stable")
    if np.all(order[:-1] < order[1:]):
        return Y, alive
    return _arraylib.take_rows(Y, order), alive[order]


def first_workers(inputs: np.ndarray, num_inputs: int) -> np.ndarray:
    """``(K,)``: for each input the first worker n with ``inputs[n] == k``, else -1."""
    workers = np.full(num_inputs, -1, dtype=np.intp)
    systematic = np.flatnonzero(inputs >= 0)
    covered, first = np.unique(inputs[systematic], return_index=True)
    workers[covered] = systematic[first]
    return workers


def _same(value, default) -> bool:
    if default is inspect.Parameter.empty:
        return False
    try:
        return bool(value == default) and type(value) is type(default)
    except (TypeError, ValueError):  # arrays
        return False
