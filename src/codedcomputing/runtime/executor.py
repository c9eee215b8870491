"""Coded computation on a cluster: encode, gather the fastest workers, decode."""

from __future__ import annotations

import dataclasses
import itertools
import math
import time
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

import numpy as np

from .. import _arraylib
from .._validation import check_number
from ..codes import Code, Decoded
from ..errors import InsufficientResultsError, MissingResultsError
from .clusters import Cluster, SimulatedCluster, check_deadline
from .collect import check_output_shape
from .faults import Adversarial
from .record import Gathered, PerWorker, WorkerRecord

__all__ = ["Answers", "CodedExecutor", "Report", "Result"]


@dataclass(eq=False)
class Report(PerWorker):
    """Where one :meth:`CodedExecutor.run` spent its time and what each worker did.

    - ``workers``: the call's :class:`~codedcomputing.runtime.record.WorkerRecord`; its
      fields read through: ``latency`` (``(N,)`` seconds from dispatch to each worker's
      arrival, NaN if never in time), ``compute_s``, ``alive`` (workers whose usable results
      were taken, in arrival order, erasures included: :attr:`Result.alive` is the decode's,
      sorted), ``failed`` (``{worker: reason}``: raised, crashed, NaN or
      mis-shaped output), ``dropped`` (not waited for), ``delays`` and ``faults`` (what was
      injected).
    - ``encode_s``, ``wait_s``, ``decode_s``, ``total_s``: the call's time split (``wait_s``
      is the cluster's; virtual seconds on a simulated cluster, where ``total_s`` is
      ``encode_s + wait_s + decode_s``).
    - ``timed_out``: the deadline ended the wait before ``wait_for`` results were in.
    - ``decoded``: the code's :class:`~codedcomputing.codes.Decoded` (its ``info``: what
      the decode chose, such as the lambda GCV picked); None when decoding failed, or (in
      :meth:`CodedExecutor.run_queries`) when every input was answered by its own worker.
    """

    workers: WorkerRecord
    encode_s: float
    wait_s: float
    decode_s: float
    timed_out: bool
    decoded: Decoded | None = None

    @property
    def total_s(self) -> float:
        return self.encode_s + self.wait_s + self.decode_s

    @property
    def master_s(self) -> float:
        """The master's own work: ``encode_s + decode_s``."""
        return self.encode_s + self.decode_s

    def summary(self) -> str:
        """A few lines a person reads: who returned, who failed and why, who was not waited
        for, the time split; ``str(report)`` gives it. The arrays stay on the attributes."""
        n = self.latency.size
        taken = self.latency[self.alive] if self.alive.size else np.empty(0)
        lines = [
            f"{self.alive.size} of {n} workers' results used"
            + (", the deadline ended the wait" if self.timed_out else ""),
            f"time: encode {_ms(self.encode_s)}, wait {_ms(self.wait_s)}, decode {_ms(self.decode_s)}, "
            f"total {_ms(self.total_s)}",
        ]
        if taken.size:
            lines.append(
                f"used workers' latency: median {_ms(float(np.median(taken)))}, "
                f"slowest {_ms(float(np.max(taken)))}"
            )
        if self.dropped.size:
            lines.append(f"not waited for: {_workers(self.dropped.size)} {_few(self.dropped.tolist())}")
        if self.failed:
            lines.append(f"failed: {_workers(len(self.failed))} {_few(sorted(self.failed))}")
            lines.append(f"  {self.workers.failure_summary()}")
        if self.faults:
            lines.append(f"faults injected: {_few(sorted(self.faults.items()))}")
        if self.decoded is not None:
            exact = np.asarray(self.decoded.info.get("exact", ()), dtype=bool)
            chose = [
                f"{key}={value:.3g}" if isinstance(value, float) else f"{key}={value}"
                for key, value in self.decoded.info.items()
                if key != "exact" and isinstance(value, int | float | str | np.number)
            ]
            lines.append(
                f"decode: {int(exact.sum())} of {exact.size} estimates exact" + "; ".join(["", *chose])
            )
        return "\n".join(lines)

    def __str__(self) -> str:
        return self.summary()

    def __repr__(self) -> str:
        return (
            f"Report(used={self.alive.size}/{self.latency.size}, total_s={self.total_s:.4g}, "
            f"failed={len(self.failed)}, dropped={self.dropped.size}, timed_out={self.timed_out})"
        )


def _ms(seconds: float) -> str:
    return f"{seconds:.3g} s" if seconds >= 1 else f"{seconds * 1e3:.3g} ms"


def _describe(array) -> str:
    """``<numpy float64 (10, 3)>``: an array's kind, dtype and shape, not its values."""
    if array is None:
        return "None"
    kind = "torch" if _arraylib.is_torch(array) else type(array).__module__.split(".")[0]
    return f"<{kind} {str(array.dtype).removeprefix('torch.')} {tuple(array.shape)}>"


def _workers(count: int) -> str:
    return f"{count} worker" + ("" if count == 1 else "s")


def _few(items: list, shown: int = 8) -> str:
    """``items`` in brackets, at most ``shown`` of them, then how many more."""
    more = f", ... {len(items) - shown} more" if len(items) > shown else ""
    return f"[{', '.join(map(str, items[:shown]))}{more}]"


@dataclass(eq=False)
class Result:
    """What :meth:`CodedExecutor.run` returns.

    - ``estimates``: ``(K, ...)`` estimates of ``f(x_k)``;
    - ``alive``: the workers whose results the decode used, sorted: the decode's
      ``Decoded.alive`` (``report.decoded.alive``), without the erasures (results with NaN or
      inf, ``report.decoded.erased``);
    - ``report``: the run's :class:`Report`, whose ``report.alive`` is every usable result
      taken, in arrival order (the rows of the gathered results).
    """

    estimates: object
    alive: np.ndarray
    report: Report

    def __repr__(self) -> str:
        estimates, alive = _describe(self.estimates), _workers(self.alive.size)
        return f"Result(estimates={estimates}, alive={alive}, report={self.report!r})"


@dataclass(eq=False)
class Answers:
    """What :meth:`CodedExecutor.run_queries` got: one answer per input (query).

    - ``estimates``: ``(K, ...)`` estimates of ``f(x_k)`` in the results' kind (numpy, or torch
      on the inputs' device); rows of unanswered inputs are NaN (or, from uncoded and
      replication built with ``fill``, the fill). None if no usable result arrived at all
      (nothing tells the output's shape).
    - ``answered``: ``(K,)`` bool, True where input k got an estimate (its own worker's
      result, or the decode).
    - ``exact``: ``(K,)`` bool, True where the estimate is a worker's own result of
      ``f(x_k)``, bit for bit, or comes from an exact decode (LCC at its threshold).
    - ``answered_s``: ``(K,)`` seconds from dispatch to each answer: the arrival of the
      answering worker's result, or the end of the decode (on a
      :class:`~codedcomputing.runtime.SimulatedCluster`, the virtual time the decode
      started: the master's decode takes no virtual time; its real seconds are
      ``report.decode_s``); NaN where unanswered.
    - ``answered_by``: ``(K,)`` the worker whose own result answered input k, -1 where the
      decode answered it (or nothing did).
    - ``report``: the run's :class:`Report` (``report.decoded`` None when no decode ran or
      it failed).
    - ``error``: None, or the decode's failure
      (:class:`~codedcomputing.errors.InsufficientResultsError`, or
      :class:`~codedcomputing.errors.MissingResultsError` for uncoded and replication), with
      ``.report`` and ``.results`` attached as :meth:`CodedExecutor.run` raises it; the
      inputs answered by their own workers keep their answers.
    """

    estimates: object
    answered: np.ndarray
    exact: np.ndarray
    answered_s: np.ndarray
    answered_by: np.ndarray
    report: Report
    error: Exception | None = None

    def __repr__(self) -> str:
        return (
            f"Answers(estimates={_describe(self.estimates)}, answered={int(self.answered.sum())}"
            f"/{self.answered.size}, exact={int(self.exact.sum())}, report={self.report!r}, "
            f"error={self.error!r})"
        )

    @property
    def decoded(self) -> np.ndarray:
        """``(K,)`` bool: the inputs the decode answered (no own result of theirs arrived)."""
        return self.answered & (self.answered_by < 0)


def _report(gathered: Gathered, encode_s: float, decode_s: float, decoded: Decoded | None = None) -> Report:
    return Report(gathered.workers, encode_s, gathered.wall_s, decode_s, gathered.timed_out, decoded)


class CodedExecutor:
    """Runs ``f`` on a batch through ``code`` on ``cluster``: encode, gather, decode.

    ``code``: any :class:`~codedcomputing.codes.Code`; ``f``: a batch callable (numpy in and
    out, or torch in and out), run by each worker on its one coded input; ``cluster``: a
    :class:`~codedcomputing.runtime.Cluster`. The executor does not own the cluster.
    ``output_shape``: the shape of ``f``'s output for one input (without the batch axis), if
    known; results of another shape are then failures. Without it, the shape most arrived
    results share is used (:meth:`Cluster.gather`): declare it when waiting for very few
    results.

    Torch tensors on a device (CUDA) stay there: the coded inputs, the workers' results,
    their stacking and a decode by a cached map run on the device, and the estimates come
    back on it. What reads from the device: one bool per checked array (the inputs, each
    worker's output, the gathered results: whether all are finite), and the decoders that
    fit weights to the results (GCC's adaptive and gap-aware blends, ``lambda_dec="gcv"``,
    :class:`~codedcomputing.RobustGCC`), which compute on the host; a batch-adaptive code
    (:class:`~codedcomputing.ManifoldGCC`) lays out each batch on the host at ``bind``.
    """

    def __init__(self, code: Code, f: Callable, cluster: Cluster, *, output_shape=None):
        if not isinstance(code, Code):
            raise ValueError(f"code must be a codedcomputing code (GCC, BACC, ...), got {code!r}")
        if not callable(f):
            raise ValueError(f"f must be callable, got {f!r}")
        if not isinstance(cluster, Cluster):
            raise ValueError(
                f"cluster must be a codedcomputing cluster (ThreadCluster, ...), got {cluster!r}"
            )
        self.code, self.f, self.cluster = code, f, cluster
        self.output_shape = check_output_shape(output_shape)

    def _wait_for(self, wait_for):
        if wait_for is None:
            return self.code.complete
        if isinstance(wait_for, bool) or not isinstance(wait_for, (int, np.integer)):
            raise ValueError(f"wait_for must be an integer number of results or None, got {wait_for!r}")
        n = self.code.num_workers
        if not self.code.min_results <= wait_for <= n:
            raise ValueError(
                f"wait_for must be in {self.code.min_results}..{n} for {self.code.name} "
                f"(it needs {self.code.min_results} results to decode, N = {n}), got {wait_for}"
            )
        return int(wait_for)

    def run(self, X, wait_for: int | None = None, deadline: float | None = None) -> Result:
        """Estimates of ``f(x_k)`` for the ``K`` rows of ``X`` from the fastest workers.

        ``wait_for``: use the first this many usable results (``N - S`` for S stragglers);
        ``None`` waits until the code is complete (:meth:`Code.complete`: all N for GCC and
        BACC, LCC's threshold, one copy per input for uncoded and replication).
        ``deadline``: seconds after dispatch; decode whatever arrived by then.

        If too few usable results arrived to decode, raises
        :class:`~codedcomputing.errors.InsufficientResultsError` (or
        :class:`~codedcomputing.errors.MissingResultsError` for uncoded and replication) with
        the run's :class:`Report` as ``error.report`` and the arrived results as
        ``error.results``.
        """
        wait_for = self._wait_for(wait_for)
        check_deadline(deadline)  # before the encode, not after it
        start = time.perf_counter()
        code = self.code.bind(X)  # the code itself, or its layout for this batch
        coded = code.encode(X)
        return self._finish(code, coded, time.perf_counter() - start, wait_for, deadline)

    def _finish(self, code, coded, encode_s: float, wait_for, deadline) -> Result:
        gathered = self.cluster.gather(self.f, coded, wait_for, deadline, output_shape=self.output_shape)
        if isinstance(self.cluster.faults, Adversarial) and gathered.results is not None:
            gathered = self._attacked(code, gathered)
        start = time.perf_counter()
        try:
            decoded = self._decode(code, gathered, deadline)
        except (InsufficientResultsError, MissingResultsError) as err:
            err.report = _report(gathered, encode_s, time.perf_counter() - start)
            err.results = gathered.results
            raise
        report = _report(gathered, encode_s, time.perf_counter() - start, decoded)
        return Result(estimates=decoded.estimates, alive=decoded.alive, report=report)

    def run_queries(
        self,
        X,
        tau: float | None = None,
        *,
        wait_for: int | Callable | None = None,
        on_answer: Callable | None = None,
    ) -> Answers:
        """Answers per input: each as soon as its own result arrives, the rest decoded.

        Input ``k`` is answered the moment a worker ``w`` with ``code.systematic_inputs[w] ==
        k`` returns a usable result (uncoded, each replication copy, systematic GCC and BACC,
        :class:`~codedcomputing.ManifoldGCC`'s bound code): the estimate is that result, bit
        for bit. The inputs still unanswered are decoded, from every usable result arrived
        by then, at the first of:

        - every input answered by its own worker (no decode runs);
        - ``wait_for`` usable results in (``None``: the code is complete,
          :meth:`Code.complete`, as in :meth:`run`), or, for a callable ``wait_for``, once
          ``wait_for(alive)`` is true for the workers whose usable results are in (an
          ``(n,)`` int array, in arrival order; it must depend on them alone: a simulated
          cluster calls it on the arrivals ahead to plan its work), e.g. once enough
          parity workers are in;
        - ``tau`` seconds after dispatch (``None``: no deadline);
        - nothing more can arrive.

        A non-systematic code answers every input at the decode. ``on_answer(k, estimate,
        exact, seconds)``, if given, is called once per answered input: on the thread that
        called this, at the result's arrival for an input's own result (during the wait, not
        after it, on threads and Ray alike; in virtual-time order on a simulated cluster),
        and after the decode for the decoded ones, in input order. ``estimate`` is the row
        ``f(x_k)`` without the batch axis. It runs inside the wait, so the time it takes
        delays the delivery of the answers behind it (their ``answered_s`` still records
        their arrival), and past ``tau`` results not yet taken are lost: hand slow work to
        another thread. An exception it raises ends the call and propagates.

        When the decode fails (too few usable results; uncoded or replication with an input
        missing), nothing is raised: the inputs answered by their own workers keep their
        answers, the others are unanswered (``answered`` False, NaN rows and times), and
        ``error`` holds the failure. Results are judged by ``output_shape`` when the executor
        declares it, else by the first usable result's shape (an answer given on arrival
        cannot wait for a majority shape). A cluster with
        :class:`~codedcomputing.runtime.faults.Adversarial` faults is refused: that model
        corrupts the gathered results after the wait, after the answers went out.
        """
        if wait_for is None or isinstance(wait_for, (int, np.integer)):
            wait_for = self._wait_for(wait_for)
        elif not callable(wait_for):  # else a rule of the caller's on the arrived workers
            raise ValueError(
                "wait_for must be an integer number of results, a predicate on the arrived "
                f"workers, or None, got {wait_for!r}"
            )
        if tau is not None:
            tau = check_number(
                tau, "tau (seconds after dispatch, or None)", low=0.0, low_open=True, high_open=True
            )
        if on_answer is not None and not callable(on_answer):
            raise ValueError(
                f"on_answer must be None or a callable (k, estimate, exact, seconds), got {on_answer!r}"
            )
        if isinstance(self.cluster.faults, Adversarial):
            raise ValueError(
                "run_queries cannot use a cluster with Adversarial faults (they corrupt the "
                "results after the wait, when answers have gone out): use run()"
            )
        start = time.perf_counter()
        code = self.code.bind(X)
        coded = code.encode(X)
        encode_s = time.perf_counter() - start

        num_inputs = code.num_inputs
        systematic = np.asarray(code.systematic_inputs, dtype=np.int64)
        answered_by = np.full(num_inputs, -1, dtype=np.int64)
        answered_s = np.full(num_inputs, np.nan)

        def arrived(worker: int, latency: float, output) -> None:
            k = int(systematic[worker])
            if k < 0 or answered_by[k] >= 0:  # a parity worker, or a later copy
                return
            answered_by[k], answered_s[k] = worker, latency
            if on_answer is not None:
                on_answer(k, _arraylib.convert_like(output, coded)[0], True, float(latency))

        covers_all = _Coverage(systematic, num_inputs)

        def enough(alive: np.ndarray) -> bool:  # pure: the simulated clock looks ahead with it
            if isinstance(wait_for, int):
                if alive.size >= wait_for:
                    return True
            elif wait_for(alive):  # the caller's rule, or the code's complete
                return True
            return covers_all(alive)  # every input answered by its own worker

        call = self.cluster.submit(self.f, coded)
        gathered = self.cluster.collect(call, enough, tau, output_shape=self.output_shape, on_usable=arrived)

        missing = answered_by < 0
        decoded, error, decode_s = None, None, 0.0
        if missing.any():
            decode_start = time.perf_counter()
            try:
                decoded = self._decode(code, gathered, tau)
            except (InsufficientResultsError, MissingResultsError) as err:
                error = err
            decode_s = time.perf_counter() - decode_start
        report = _report(gathered, encode_s, decode_s, decoded)
        if error is not None:
            error.report, error.results = report, gathered.results

        estimates, exact = self._answers(decoded, gathered, answered_by)
        answered = ~missing
        if decoded is not None:
            answered[:] = True
            filled = decoded.info.get("missing", ())
            if len(filled):  # uncoded and replication built with fill=: the fill is no answer
                answered[np.asarray(filled, dtype=np.int64)] = False
            # The master sees a decoded answer when the decode ends (on a virtual clock the
            # decode is instantaneous, so simulated latencies stay reproducible).
            virtual = isinstance(self.cluster, SimulatedCluster)
            decoded_s = gathered.wall_s if virtual else time.perf_counter() - call.started
            now_answered = np.flatnonzero(missing & answered)
            answered_s[now_answered] = decoded_s
            if on_answer is not None:
                for k in now_answered.tolist():
                    on_answer(k, estimates[k], bool(exact[k]), float(decoded_s))
        return Answers(estimates, answered, exact, answered_s, answered_by, report, error)

    def _decode(self, code, gathered: Gathered, deadline=None) -> Decoded:
        """The code's decode of ``gathered``; its error says why the workers failed and, when
        the ``deadline`` (seconds) ended the wait, names it and what to change."""
        try:
            if gathered.results is None:
                raise InsufficientResultsError(
                    f"{self.code.name}: no usable result arrived "
                    f"({len(gathered.failed)} failed, {gathered.dropped.size} dropped)",
                    needed=self.code.min_results,
                    alive=[],
                )
            return code.decode_details(gathered.results, gathered.alive)
        except (InsufficientResultsError, MissingResultsError) as err:
            summary = gathered.workers.failure_summary()
            if summary:  # say why the workers failed, not only that they did
                err.args = (f"{err.args[0]}; {summary}", *err.args[1:])
            if gathered.timed_out and deadline is not None:
                err.args = (
                    f"{err.args[0]}; the deadline of {deadline:g} s expired with "
                    f"{len(gathered.alive)} usable results in, {code.min_results} needed: give a longer "
                    "deadline (or a code that needs fewer results)",
                    *err.args[1:],
                )
            raise

    @staticmethod
    def _answers(decoded: Decoded | None, gathered: Gathered, answered_by: np.ndarray):
        """``(estimates, exact)``: the decode's estimates (or NaN rows, with no decode) with
        each input answered by its own worker given that worker's row of the results."""
        exact = np.zeros(answered_by.size, dtype=bool)
        results = gathered.results
        if results is None:  # nothing usable arrived: nothing was answered either
            return None, exact
        if decoded is not None:
            estimates = decoded.estimates
            exact |= decoded.info["exact"]
        else:
            estimates = _arraylib.empty_like_rows(_floating(results), answered_by.size, math.nan)
        own = np.flatnonzero(answered_by >= 0)
        if own.size:  # every usable result is in gathered.alive (the first one set the shape)
            row_of = {worker: i for i, worker in enumerate(gathered.alive.tolist())}
            rows = _arraylib.take_rows(results, np.array([row_of[w] for w in answered_by[own].tolist()]))
            if decoded is not None and not _arraylib.is_torch(estimates):
                estimates = estimates.copy()  # the decode's array may be shared or read-only
            estimates = _arraylib.set_rows(estimates, own, rows)
            exact[own] = True
        return estimates, exact

    def _attacked(self, code, gathered: Gathered) -> Gathered:
        """The gathered results after the cluster's colluding adversaries
        (:class:`~codedcomputing.runtime.faults.Adversarial`); the corrupted workers are
        added to the record's ``faults``."""
        model = self.cluster.faults
        corruption = model.corrupt(code, gathered.results, gathered.alive, self.cluster.rng)
        faults = dict(gathered.workers.faults)
        faults.update({int(n): f"adversary: {model.attack.name}" for n in corruption.workers})
        workers = dataclasses.replace(gathered.workers, faults=faults)
        return dataclasses.replace(gathered, results=corruption.results, workers=workers)

    def map(
        self, batches: Iterable, wait_for: int | None = None, deadline: float | None = None
    ) -> Iterator[Result]:
        """``run`` over many batches, encoding the next batch while waiting on this one.

        Yields one :class:`Result` per batch, in order. The encode of batch ``i + 1`` runs
        on a helper thread during batch ``i``'s wait, so the master's encode time leaves
        the critical path; ``report.encode_s`` still records it. If ``batches`` raises, or
        a batch fails to encode, every batch before it is still yielded, then the error is
        raised.
        """
        wait_for = self._wait_for(wait_for)  # checked now, not at the first next()
        check_deadline(deadline)
        try:
            iterator = iter(batches)
        except TypeError:
            raise ValueError(f"batches must be an iterable of input batches, got {batches!r}") from None
        return self._stream(iterator, wait_for, deadline)

    def _stream(self, iterator: Iterator, wait_for, deadline) -> Iterator[Result]:
        count = itertools.count()

        def encode(X):
            index = next(count)
            start = time.perf_counter()
            try:
                code = self.code.bind(X)  # each batch its own layout (batch-adaptive codes)
                coded = code.encode(X)
            except ValueError as err:
                raise ValueError(f"batches[{index}]: {err}") from None
            return code, coded, time.perf_counter() - start

        with ThreadPoolExecutor(1, thread_name_prefix="codedcomputing-encode") as encoder:
            try:
                upcoming = encoder.submit(encode, next(iterator))
            except StopIteration:
                return
            while upcoming is not None:
                code, coded, encode_s = upcoming.result()
                error = None
                try:
                    upcoming = encoder.submit(encode, next(iterator))
                except StopIteration:
                    upcoming = None
                except Exception as err:  # the batches' own error: raised once this batch is out
                    upcoming, error = None, err
                yield self._finish(code, coded, encode_s, wait_for, deadline)
                if error is not None:
                    raise error

    def __repr__(self) -> str:
        f_name = getattr(self.f, "__name__", type(self.f).__name__)
        shape = "" if self.output_shape is None else f", output_shape={self.output_shape}"
        return f"CodedExecutor({self.code!r}, {f_name}, {self.cluster!r}{shape})"


class _Coverage:
    """Whether the own results of the arrived workers (an int array, or a list) cover every
    input: a pure function of them, incremental when called with longer and longer arrays
    that extend the last one (as collecting does)."""

    def __init__(self, systematic: np.ndarray, num_inputs: int):
        self.systematic = systematic.tolist()
        self.num_inputs = num_inputs
        self.possible = bool(np.all(np.bincount(systematic[systematic >= 0], minlength=num_inputs) > 0))
        self._reset()

    def _reset(self) -> None:
        self.seen = np.zeros(0, dtype=np.int64)
        self.answered = [False] * self.num_inputs
        self.covered = 0

    def __call__(self, alive) -> bool:
        if not isinstance(alive, np.ndarray):
            alive = np.array(alive, dtype=np.int64)
        if not self.possible or alive.size < self.num_inputs:
            return False
        known = self.seen.size
        if alive.size < known or alive[:known].tobytes() != self.seen.tobytes():
            self._reset()
            known = 0
        for worker in alive[known:].tolist():
            k = self.systematic[worker]
            if k >= 0 and not self.answered[k]:
                self.answered[k] = True
                self.covered += 1
        self.seen = alive  # the collecting loop hands a new array each call
        return self.covered == self.num_inputs


def _floating(results):
    """``results`` with a floating dtype (decodes read integers and bools as floats too)."""
    if _arraylib.is_torch(results):
        import torch

        return results if results.is_floating_point() else results.to(torch.get_default_dtype())
    return results if np.issubdtype(results.dtype, np.floating) else results.astype(np.float64)
