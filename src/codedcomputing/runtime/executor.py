"""Coded computation on a cluster: encode, gather the fastest workers, decode."""

from __future__ import annotations

import dataclasses
import itertools
import time
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

import numpy as np

from ..codes import Code, Decoded
from ..errors import InsufficientResultsError, MissingResultsError
from .clusters import Cluster, check_deadline
from .collect import check_output_shape
from .faults import Adversarial
from .record import Gathered, PerWorker, WorkerRecord

__all__ = ["CodedExecutor", "Report", "Result"]


@dataclass(eq=False)
class Report(PerWorker):
    """Where one :meth:`CodedExecutor.run` spent its time and what each worker did.

    - ``workers``: the call's :class:`~codedcomputing.runtime.record.WorkerRecord`; its
      fields read through: ``latency`` (``(N,)`` seconds from dispatch to each worker's
      arrival, NaN if never in time), ``compute_s``, ``alive`` (workers whose results were
      taken, in arrival order), ``failed`` (``{worker: reason}``: raised, crashed, NaN or
      mis-shaped output), ``dropped`` (not waited for), ``delays`` and ``faults`` (what was
      injected).
    - ``encode_s``, ``wait_s``, ``decode_s``, ``total_s``: the call's time split (``wait_s``
      is the cluster's; virtual seconds on a simulated cluster, where ``total_s`` is
      ``encode_s + wait_s + decode_s``).
    - ``timed_out``: the deadline ended the wait before ``wait_for`` results were in.
    - ``decoded``: the code's :class:`~codedcomputing.codes.Decoded` (its ``info``: what
      the decode chose, such as the lambda GCV picked); None when decoding failed.
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


@dataclass(eq=False)
class Result:
    """``estimates`` ``(K, ...)`` of ``f(x_k)``; ``alive``: the workers used, sorted; ``report``."""

    estimates: object
    alive: np.ndarray
    report: Report


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
            if gathered.results is None:
                raise InsufficientResultsError(
                    f"{self.code.name}: no usable result arrived "
                    f"({len(gathered.failed)} failed, {gathered.dropped.size} dropped)",
                    needed=self.code.min_results,
                    alive=[],
                )
            decoded = code.decode_details(gathered.results, gathered.alive)
        except (InsufficientResultsError, MissingResultsError) as err:
            summary = gathered.workers.failure_summary()
            if summary:  # say why the workers failed, not only that they did
                err.args = (f"{err.args[0]}; {summary}", *err.args[1:])
            err.report = _report(gathered, encode_s, time.perf_counter() - start)
            err.results = gathered.results
            raise
        report = _report(gathered, encode_s, time.perf_counter() - start, decoded)
        return Result(estimates=decoded.estimates, alive=decoded.alive, report=report)

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
