"""Manifold-aware GCC: each batch's inputs ordered and spaced along the data."""

from __future__ import annotations

import functools
import time
import warnings
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from .. import _arraylib
from .._validation import MAX_COUNT, check_choice, check_count, check_flag, check_number, check_real_array
from ..points import make_points
from ..spline.lambdas import check_lambda
from . import layout as layouts
from .base import Code
from .gcc import GCC
from .input_space import AMPLITUDE, LENGTH, RIDGE, kernel_map
from .layout import BatchLayout, as_layout

if TYPE_CHECKING:
    from scipy.sparse import csr_array

__all__ = [
    "DEGRADED",
    "INPUT_SPACE_MAX_RATIO",
    "MAX_THIN_PLATE_POINTS",
    "InputSpaceGCC",
    "Layout",
    "ManifoldGCC",
    "SiteLayout",
    "ThinPlateCode",
]

DEGRADED = ("auto", "input-space", "spline")
# "auto" decodes missing inputs in input space up to this many workers per input, else by the spline
INPUT_SPACE_MAX_RATIO = 3.0

# A thin-plate decoder solves a dense (|F| + m + 1) system, O(|F|^3): 0.44 s from 1,800
# results here (4.4 s when the solve took every column, not only the K rows needed), and a
# bind lays out N worker sites (2.5 s at N = 2,000; 8.7 s and a 46 s decode at 4,000).
# More inputs or workers than this are refused before anything is allocated.
MAX_THIN_PLATE_POINTS = 2_000

# Directions of an embedding whose spread is below this fraction of the largest are rounding
# noise (inputs on a line embedded in 2-D): they are dropped. Sites this close (in [-1, 1]^m)
# count as one.
_FLAT = 1e-6


@dataclass(frozen=True)
class Layout:
    """One batch's layout: ``order`` (the inputs' indices along the path, a permutation of
    ``0 .. K-1``; identical inputs next to each other), ``alpha`` (input k's point, in the
    batch's own order), what computing it cost, and ``components`` (below). The layout is
    computed for the batch's distinct inputs in lexicographic order, so it does not depend
    on the order of ``X``'s rows (except among identical rows).

    ``components`` is 1 plus the number of shortest links added to connect the
    k-nearest-neighbour graphs behind the layout (the reference's own, and the batch joined
    to it; or the batch's own for ``"spectral"`` and ``"eigenmaps"`` without a reference):
    1 when they were connected or no graph was used; more means the data fell apart into
    pieces (a cluster of near-duplicates, say) and geodesics cross straight links between
    them."""

    order: np.ndarray
    alpha: np.ndarray
    seconds: float
    components: int = 1


@dataclass(frozen=True)
class SiteLayout:
    """One batch's layout for the thin-plate design: ``sites`` (input k's point in the
    embedding, ``(K, m)``, in the batch's own order; ``m`` may be below ``dimensions`` when
    the batch spans fewer), ``worker_sites`` (``(N, m)``, worker order), what computing them
    cost, and ``components`` (as for :class:`Layout`). No ``order``: the inputs are not put
    on a line."""

    sites: np.ndarray
    worker_sites: np.ndarray
    seconds: float
    components: int = 1


def thin_plate_map(knots: np.ndarray, smoothing: float, targets: np.ndarray) -> np.ndarray:
    r"""The ``(T, n)`` matrix taking values at ``knots`` (``(n, m)``) to the thin-plate
    smoothing spline's values at ``targets`` (``(T, m)``)::

        u = argmin_u sum_i ||u(z_i) - y_i||^2 + smoothing * ||u||_phi^2,
        u(z) = sum_i w_i phi(||z - z_i||) + c_0 + c^T z,  phi(r) = r^2 log r,

    i.e. ``[[Phi + smoothing I, P], [P^T, 0]] [w; c] = [y; 0]`` with ``P = [1, z]``
    (scipy's ``RBFInterpolator(kernel="thin_plate_spline", smoothing=smoothing)``). It
    reproduces affine functions of ``z`` exactly. With fewer than ``m + 1`` knots in general
    position (``P`` rank-deficient) the spline is not defined: the map is then the
    least-squares affine fit of least norm in coordinates centred on the knots (one knot:
    its value everywhere). A singular system (repeated knots at ``smoothing = 0``) is
    solved in the least-squares sense, an ill-conditioned one (knots a few millionths apart)
    by whichever of the factorisation and least squares leaves the smaller residual; at
    ``smoothing = 0`` a target on a knot gets that knot's value exactly (the mean over
    repeated knots there), and affine functions are reproduced to rounding (a rank-``m + 1``
    correction after the solve), as the spline does in exact arithmetic. The map is
    ``B S^-1`` restricted to the knots' columns (``B`` the targets' basis, ``S`` the system,
    symmetric): with fewer targets than knots it is solved for as ``(S^-1 B^T)^T``, ``T``
    right-hand sides instead of ``n``.
    No checks are performed."""
    n, m = knots.shape
    centre = knots.mean(axis=0)
    poly_knots = np.c_[np.ones(n), knots - centre]
    poly_targets = np.c_[np.ones(len(targets)), targets - centre]
    if n < m + 1 or np.linalg.matrix_rank(poly_knots) < m + 1:
        return poly_targets @ np.linalg.pinv(poly_knots)
    system = np.zeros((n + m + 1, n + m + 1))
    system[:n, :n] = _thin_plate_kernel(layouts._pairwise_distances(knots)) + smoothing * np.eye(n)
    system[:n, n:], system[n:, :n] = poly_knots, poly_knots.T
    to_knots = layouts._pairwise_distances(targets, knots)
    basis = np.c_[_thin_plate_kernel(to_knots), poly_targets]
    by_rows = len(targets) < n
    rhs = basis.T if by_rows else np.r_[np.eye(n), np.zeros((m + 1, n))]
    solution = _solve_symmetric(system, rhs)
    result = np.ascontiguousarray(solution[:n].T) if by_rows else basis @ solution
    # the exact map reproduces affine functions (result @ poly_knots = poly_targets): restore
    # that to the last digits where clustered knots left the solve a few short
    result += (poly_targets - result @ poly_knots) @ np.linalg.pinv(poly_knots)
    if smoothing == 0:  # an interpolant takes a knot's value at the knot, to the last digit
        at_knot = to_knots == 0.0  # (near-duplicate knots leave the solve a few digits short)
        hit = np.flatnonzero(at_knot.any(axis=1))
        result[hit] = at_knot[hit] / at_knot[hit].sum(axis=1, keepdims=True)
    return result


def _solve_symmetric(system: np.ndarray, rhs: np.ndarray) -> np.ndarray:
    """``system^-1 rhs`` by a symmetric factorisation; when that is singular or reported
    ill-conditioned (knots a few millionths apart), whichever of it and the least-squares
    solution has the smaller residual."""
    import scipy.linalg

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", scipy.linalg.LinAlgWarning)
        try:
            solution = scipy.linalg.solve(system, rhs, assume_a="sym")
        except np.linalg.LinAlgError:
            solution = None
    if solution is not None and not any(issubclass(w.category, scipy.linalg.LinAlgWarning) for w in caught):
        return solution
    fallback = np.linalg.lstsq(system, rhs, rcond=None)[0]
    if solution is None or not np.all(np.isfinite(solution)):
        return fallback
    residual = np.max(np.abs(system @ solution - rhs))
    return fallback if np.max(np.abs(system @ fallback - rhs)) < residual else solution


def _thin_plate_kernel(r: np.ndarray) -> np.ndarray:
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.where(r > 0, r * r * np.log(np.where(r > 0, r, 1.0)), 0.0)


class ThinPlateCode(Code):
    r"""A code on an ``m``-dimensional layout: input ``k`` at a site ``z_k`` in R^m, worker
    ``n`` at ``w_n``, thin-plate smoothing splines as encoder and decoder
    (:meth:`ManifoldGCC.bind` with ``layout="thin-plate"`` returns one per batch)::

        u_enc = argmin_u (1/K) sum_k ||u(z_k) - x_k||^2 + lambda_enc ||u||_phi^2    (worker n: u_enc(w_n))
        u_dec = argmin_u (1/|F|) sum_{n in F} ||u(w_n) - y_n||^2 + lambda_dec ||u||_phi^2  (x_k: u_dec(z_k))

    with ``phi(r) = r^2 log r`` plus an affine term (:func:`thin_plate_map`; the mean
    convention, so scipy's ``smoothing`` is ``n * lambda``). Both are linear maps of the
    data. With fewer than ``m + 1`` returned results in general position the decoder is
    the least-squares affine fit of least norm (two results: the line through them, held
    constant across it); with one, that result.

    Promise (tested): inputs affine in the sites through an affine ``f`` are recovered
    exactly from any ``m + 1`` or more results in general position, at any lambdas.

    Each decoder solves a dense system of the returned results' size (``O(|F|^3)``, 0.44 s
    from 1,800 results here): K and N are at most :data:`MAX_THIN_PLATE_POINTS` (2,000).
    Workers are labels: the decoder depends on the returned sites, not on which worker
    numbers carry them (relabelling the workers does not change the estimates).

    Parameters
    ----------
    num_inputs, num_workers : int
        1 <= K <= 2,000 inputs, 2 <= N <= 2,000 workers.
    lambda_enc, lambda_dec : float, default 0
        The smoothing parameters (mean convention), >= 0; 0 interpolates.
    sites : array_like, shape (K, m)
        Where the inputs sit. Sites may repeat (the code :meth:`ManifoldGCC.bind` returns
        puts identical inputs on one site): the encoder's spline then fits the inputs there
        as the objective says (at ``lambda_enc = 0``, it takes their mean), and the decoder
        gives them one estimate.
    worker_sites : array_like, shape (N, m)
        Where the workers sit, in worker order.
    systematic : bool, default False
        Every input's site is a worker's site (exactly; ``ValueError`` naming
        ``worker_sites`` otherwise): the first worker at input k's site is sent ``x_k`` itself
        and a decode returns its result as input k's estimate, bit for bit
        (:attr:`~codedcomputing.codes.Code.systematic_workers`; at a site that several
        inputs share, the first of them). :meth:`ManifoldGCC.bind` builds it so when its
        design includes the inputs' sites.

    ``alpha`` and ``beta`` are GCC's Chebyshev points, labels only: the geometry is
    ``sites`` and ``worker_sites``.

    Examples
    --------
    >>> import numpy as np, codedcomputing as cc
    >>> from codedcomputing.codes.manifold import ThinPlateCode
    >>> rng = np.random.default_rng(0)
    >>> sites, worker_sites = rng.uniform(-1, 1, (4, 2)), rng.uniform(-1, 1, (12, 2))
    >>> code = ThinPlateCode(4, 12, sites=sites, worker_sites=worker_sites)
    >>> X = code.sites @ rng.normal(size=(2, 3)) + 1.0  # affine in the sites
    >>> alive = [0, 2, 5, 7, 11]
    >>> bool(np.allclose(code.decode(code.encode(X)[alive], alive), X))
    True
    """

    name = "thin-plate"
    description = "thin-plate smoothing-spline encoder and decoder on a multi-dimensional layout"

    def __init__(
        self,
        num_inputs: int,
        num_workers: int,
        lambda_enc: float = 0.0,
        lambda_dec: float = 0.0,
        *,
        sites,
        worker_sites,
        systematic: bool = False,
    ):
        num_inputs = check_count(num_inputs, "num_inputs", 1, MAX_THIN_PLATE_POINTS)
        num_workers = check_count(num_workers, "num_workers", 2, MAX_THIN_PLATE_POINTS)
        lambda_enc = check_lambda(lambda_enc, "lambda_enc")
        lambda_dec = check_lambda(lambda_dec, "lambda_dec")
        sites = self._check_sites(sites, num_inputs, "sites", None)
        worker_sites = self._check_sites(worker_sites, num_workers, "worker_sites", sites.shape[1])
        self.systematic = check_flag(systematic, "systematic")
        self._site_inputs = _site_inputs(sites, worker_sites) if self.systematic else None
        if self.systematic:
            held = set(map(tuple, worker_sites.tolist()))
            missing = [k for k, site in enumerate(map(tuple, sites.tolist())) if site not in held]
            if missing:
                raise ValueError(
                    f"worker_sites must hold every input's site when systematic=True: sites[{missing[0]}] "
                    f"is none of them ({len(missing)} of the sites missing)"
                )
        super().__init__(num_inputs, num_workers)
        self.lambda_enc, self.lambda_dec = lambda_enc, lambda_dec
        self.sites, self.worker_sites = sites, worker_sites
        self._encoder = _arraylib.read_only(
            _canonical_map(self.sites, self.num_inputs * self.lambda_enc, self.worker_sites)
        )

    @staticmethod
    def _check_sites(sites, rows: int, name: str, columns: int | None) -> np.ndarray:
        array = np.array(check_real_array(sites, name), dtype=np.float64)
        if (
            array.ndim != 2
            or array.shape[0] != rows
            or array.shape[1] < 1
            or (columns is not None and array.shape[1] != columns)
        ):
            want = f"({rows}, {'m' if columns is None else columns})"
            raise ValueError(f"{name} must have shape {want}, got {array.shape}")
        if not np.all(np.isfinite(array)):
            raise ValueError(f"{name} contains NaN or inf")
        array.flags.writeable = False
        return array

    @property
    def dimensions(self) -> int:
        return self.sites.shape[1]

    @property
    def min_results(self) -> int:
        return 2

    def promised_case(self, rng):
        """Inputs affine in the sites through an affine ``f``, from ``m + 1`` or more results
        whose sites are in general position."""
        m = self.dimensions
        a, b = rng.normal(size=3), rng.normal(size=(m, 3))
        weights, shift = rng.normal(size=(3, 2)), rng.normal(size=2)
        X = a + self.sites @ b
        low = min(m + 1, self.num_workers)
        for _ in range(100):
            alive = rng.choice(self.num_workers, rng.integers(low, self.num_workers + 1), replace=False)
            if np.linalg.matrix_rank(np.c_[np.ones(alive.size), self.worker_sites[alive]]) == m + 1:
                break
        else:
            alive = np.arange(self.num_workers)
        if np.linalg.matrix_rank(np.c_[np.ones(self.num_inputs), self.sites]) < m + 1:
            return None  # too few inputs to pin down an affine map: nothing exact to promise
        return X, lambda x: x @ weights + shift, np.sort(alive)

    def _build_decoder(self, alive_sorted: np.ndarray):
        knots = self.worker_sites[alive_sorted]
        return _arraylib.read_only(_canonical_map(knots, alive_sorted.size * self.lambda_dec, self.sites))

    def _systematic_assignment(self) -> np.ndarray:
        if self._site_inputs is None:
            return super()._systematic_assignment()
        return self._site_inputs

    def _encode(self, X):
        return self._copy_systematic(_arraylib.apply_matrix(self._encoder, X), X)

    def _decode(self, Y, alive):  # alive sorted by worker, Y's rows with it (Code.decode_details)
        return _arraylib.apply_matrix(self._decoder(alive), Y), {}


class InputSpaceGCC(GCC):
    r"""A systematic :class:`~codedcomputing.GCC` bound to one batch whose inputs with a
    missing systematic worker are decoded in input space (what :meth:`ManifoldGCC.bind`
    returns with ``degraded="input-space"``, and with the default ``"auto"`` up to
    ``N = 3 K`` workers). It holds the batch; an input
    ``k`` whose systematic worker did not return (``info["exact"][k]`` False) gets::

        estimate_k = kernel_estimates(encode(batch), Y, alive, batch[k], amplitude, length, ridge)

    (:func:`~codedcomputing.codes.input_space.kernel_estimates`: a Gaussian-process
    posterior mean on the returned (coded input, result) pairs, kernel affine plus RBF),
    instead of the spline decoder's value; a returned systematic worker's result stays its
    input's estimate, bit for bit. The estimates are linear in ``Y`` (the map
    :func:`~codedcomputing.codes.input_space.kernel_map` depends on the batch and ``alive``
    only), applied in ``Y``'s array library: numpy or torch, ``Y``'s dtype and device,
    autograd kept. ``ridge`` is :data:`~codedcomputing.codes.input_space.RIDGE` (1e-6).
    ``info["input_space"]`` lists the inputs so decoded. :meth:`decoder` is the spline's
    (it knows nothing of the batch): decode with :meth:`decode`. Decode results of
    this batch only: ``encode(X)`` of another ``X`` is the spline code's, but the missing
    inputs are estimated from the held batch's coded inputs.

    Promise: the systematic one only (:meth:`promised_case`). GCC's affine promise (inputs
    affine in ``alpha`` through an affine ``f``, recovered from any two results) does not
    hold for the inputs decoded in input space: where a returned parity covers a missing
    input, that input is an affine combination of returned coded inputs, so any decoder
    exact for every affine ``f`` must give the affine inversion there (``amplitude = 0``),
    and the RBF term, which is what raised the degraded accuracy over the inversion, departs
    from it by design.

    Parameters
    ----------
    batch : array_like, shape (K, ...)
        The batch the code is bound to (held as float64 rows, read-only).
    amplitude, length : float, default from :mod:`codedcomputing.codes.input_space`
        The RBF term's weight (>= 0) and length (> 0), as for ``kernel_estimates``.
    others
        As for :class:`~codedcomputing.GCC`.
    """

    def __init__(
        self,
        num_inputs: int,
        num_workers: int,
        lambda_enc: float = 0.0,
        lambda_dec: float | str = 0.0,
        *,
        batch,
        amplitude: float = AMPLITUDE,
        length: float = LENGTH,
        decoding: str = "auto",
        points: str = "chebyshev",
        alpha=None,
        beta=None,
        assignment: str = "natural",
        systematic: bool = True,
        parity: str = "between",
    ):
        super().__init__(
            num_inputs,
            num_workers,
            lambda_enc,
            lambda_dec,
            decoding=decoding,
            points=points,
            alpha=alpha,
            beta=beta,
            assignment=assignment,
            systematic=systematic,
            parity=parity,
        )
        batch = _arraylib.check_inputs(batch, self.num_inputs, "batch")
        if _arraylib.is_complex(batch):
            raise ValueError(f"batch must be real, got complex {batch.dtype}")
        self.batch = _arraylib.read_only(_arraylib.to_float64(batch).copy())
        self.amplitude = check_number(amplitude, "amplitude", low=0.0)
        self.length = check_number(length, "length", low=0.0, low_open=True)

    @functools.cached_property
    def _coded_batch(self) -> np.ndarray:
        """The coded inputs the master sent for :attr:`batch`, ``(N, d)`` float64, summed over
        the inputs in the order of their points, so that a permuted batch gets the same
        coded inputs to the last digit (the kernel's solve would magnify the difference)."""
        matrix = _arraylib.to_float64(GCC._encode(self, np.eye(self.num_inputs)))  # (N, K), exact
        order = np.argsort(self.alpha, kind="stable")
        coded = matrix[:, order] @ self.batch[order]
        coded[self.systematic_inputs >= 0] = self.batch[self.systematic_inputs[self.systematic_inputs >= 0]]
        return _arraylib.read_only(coded)

    def promised_case(self, rng):
        """The systematic promise: any inputs through any ``f``, from every systematic worker
        and random others (the class docstring says why GCC's affine one is not kept)."""
        return self._systematic_case(rng)

    def _decode(self, Y, alive):
        estimates, info = super()._decode(Y, alive)
        workers = self.systematic_workers
        missing = np.flatnonzero((workers >= 0) & ~np.isin(workers, alive))
        if missing.size == 0:
            return estimates, info
        # built on the returned workers in the order of their points, so that which worker
        # carries which point (a label) does not change even the rounding of the kernel's solve
        by_point = np.argsort(self.beta[alive], kind="stable")
        mapping = kernel_map(
            self._coded_batch,
            alive[by_point],
            self.batch[missing],
            amplitude=self.amplitude,
            length=self.length,
            ridge=RIDGE,
        )
        mapping = np.ascontiguousarray(mapping[:, np.argsort(by_point)])  # in alive's order, as Y's rows
        values = _arraylib.apply_matrix(mapping, Y)
        if not _arraylib.is_torch(estimates) and (
            not estimates.flags.writeable or np.may_share_memory(estimates, Y)
        ):
            estimates = estimates.copy()
        estimates = _arraylib.set_rows(estimates, missing, values)
        return estimates, {**info, "input_space": _arraylib.read_only(missing)}

    def __repr__(self) -> str:
        shown = super().__repr__().replace(f", batch={self.batch!r}", "")
        return shown[:-1] + f", batch=<{self.batch.shape[0]} x {self.batch.shape[1]}>)"


def _site_inputs(sites: np.ndarray, worker_sites: np.ndarray) -> np.ndarray:
    """``(N,)``: the first input whose site is worker n's site (exactly), else -1; only the
    first worker at a site gets one (a repeated worker site computes the coded value). No
    checks are performed."""
    first_input = {}
    for k, site in enumerate(map(tuple, sites.tolist())):
        first_input.setdefault(site, k)
    inputs = np.full(len(worker_sites), -1, dtype=np.intp)
    for n, site in enumerate(map(tuple, worker_sites.tolist())):
        k = first_input.pop(site, None)
        if k is not None:
            inputs[n] = k
    return inputs


def _canonical_map(knots: np.ndarray, smoothing: float, targets: np.ndarray) -> np.ndarray:
    """:func:`thin_plate_map` built on the knots and the targets in lexicographic order, its
    columns and rows put back in their order: which worker carries which site, or which row
    an input is in, are labels, and must not change even the rounding of an ill-conditioned
    solve (a matrix product rounds a row differently by where it sits in the block)."""
    canonical, rows = np.lexsort(knots.T[::-1]), np.lexsort(targets.T[::-1])
    mapped = thin_plate_map(knots[canonical], smoothing, targets[rows])
    return np.ascontiguousarray(mapped[np.argsort(rows)][:, np.argsort(canonical)])


def _span(sites: np.ndarray) -> np.ndarray:
    """``sites`` as they are when they span all ``m`` directions; else their coordinates on
    the principal axes along which they spread (singular values above ``1e-6`` of the
    largest; one zero column when all sites are equal). Sites on a line in the plane
    (inputs on a line; an extension that averages the same two reference points) would
    leave the thin-plate spline undefined: they get a 1-D layout instead."""
    centred = sites - sites.mean(axis=0)
    _, spread, axes = np.linalg.svd(centred, full_matrices=False)
    keep = spread > _FLAT * spread[0] if spread[0] > 0 else np.arange(spread.size) == 0
    if keep.size == sites.shape[1] and np.all(keep):
        return sites
    return centred @ axes[keep].T


def _separate(sites: np.ndarray) -> np.ndarray:
    """``sites`` of distinct inputs (in [-1, 1]^m, rows in the inputs' lexicographic order)
    never at one point: an embedding can put two different inputs (nearly) on one point
    (eigenmaps of a graph that fell apart, one reference neighbour), where no interpolant
    takes both values. Each cluster of sites within ``1e-6`` of each other is spread around
    its mean, ``1e-3`` apart (on a segment in 1-D, a circle otherwise), in row order: what
    ``arc_positions`` does with zero gaps on a line."""
    count, m = sites.shape
    close = layouts._pairwise_distances(sites) <= _FLAT
    if count < 2 or np.count_nonzero(close) == count:  # only the diagonal
        return sites
    from scipy.sparse import csr_array
    from scipy.sparse.csgraph import connected_components

    clusters = connected_components(csr_array(close), directed=False)[1]
    sites = sites.copy()
    for cluster in np.unique(clusters):
        members = np.flatnonzero(clusters == cluster)
        size = members.size
        if size < 2:
            continue
        if m == 1:
            offsets = (np.arange(size) - (size - 1) / 2)[:, None] * 1e-3
        else:
            radius = 1e-3 / (2 * np.sin(np.pi / size)) if size > 2 else 5e-4
            angle = 2 * np.pi * np.arange(size) / size
            offsets = np.zeros((size, m))
            offsets[:, 0], offsets[:, 1] = radius * np.cos(angle), radius * np.sin(angle)
        sites[members] = sites[members].mean(axis=0) + offsets
    return sites


class _Geometry:
    """One batch's distances and graph, each computed at most once per bind and only when a
    step asks for it: ``matrix``, the ``(K, K)`` distances between the distinct inputs
    ``flat`` (geodesic through the reference when the code has one, else Euclidean);
    ``graph``, the batch's own k-nearest-neighbour graph on them, its pieces joined (the
    spectral order and eigenmaps without a reference); ``components`` (:class:`Layout`)
    counts the pieces of the graphs used so far; and the gaps along an order."""

    def __init__(self, code: ManifoldGCC, flat: np.ndarray):
        self._code, self.flat = code, flat

    @functools.cached_property
    def _geodesics(self) -> tuple[np.ndarray, int]:
        """``(matrix, components)``: the distances, and how many pieces the batch's graph
        joined to the reference's had (1 without a reference: no graph)."""
        reference = self._code.layout._reference
        if reference is None:
            return layouts._pairwise_distances(self.flat), 1
        return reference._geodesics(self.flat)

    @functools.cached_property
    def _knn_graph(self) -> tuple[csr_array, int]:
        """``(graph, components)``: the batch's joined graph on :attr:`matrix` and how many
        pieces it had."""
        return layouts._joined_knn_graph(self.matrix, self._code.layout.neighbours)

    @property
    def matrix(self) -> np.ndarray:
        return self._geodesics[0]

    @property
    def graph(self) -> csr_array:
        return self._knn_graph[0]

    @property
    def components(self) -> int:
        """1 plus the shortest links added to connect the reference's graph (when the code
        has one) and the batch's graphs computed so far."""
        reference = self._code.layout._reference
        count = 1 if reference is None else reference.components
        for computed in ("_geodesics", "_knn_graph"):
            if computed in self.__dict__:  # a cached property that has been read
                count += self.__dict__[computed][1] - 1
        return count

    def gaps(self, order: np.ndarray) -> np.ndarray:
        """The ``K - 1`` distances between consecutive inputs of ``order``: from the matrix
        when it is geodesic or the order was read off it (the chain's, so that the spacing
        follows the distances the path minimised); else from the consecutive inputs'
        differences, ``O(K D)`` with no matrix (the pca and spectral orders)."""
        if self._code.layout._reference is None and self._code.design != "chain":
            return layouts._consecutive_distances(self.flat[order])
        return self.matrix[order[:-1], order[1:]]


class ManifoldGCC(Code):
    r"""GCC whose inputs follow the data: each batch is laid out along a short path through
    its inputs before the spline is passed through them.

    Standard GCC puts input k at ``alpha_k`` in the order the batch came in, so the
    encoder's curve jumps between unrelated inputs and the workers evaluate ``f`` far from
    the data. :meth:`bind` computes a layout for one batch, as the ``layout`` object says
    (:mod:`codedcomputing.codes.layout`; each carries its design's options):

    1. **order**: :class:`~codedcomputing.codes.layout.ChainLayout` (the default), a short
       open path through the inputs (nearest-neighbour chains improved by 2-opt), on
       Euclidean distances, or on geodesic ones (shortest paths through a k-nearest-neighbour
       graph) when the layout has a ``reference`` set of unlabelled samples;
       :class:`~codedcomputing.codes.layout.SpectralLayout`, by the Fiedler vector of a
       k-nearest-neighbour graph (of the reference set, extended to the inputs, when one is
       given; else of the batch); :class:`~codedcomputing.codes.layout.PCALayout`, by the
       first principal component; :class:`~codedcomputing.codes.layout.RowOrderLayout`, as
       drawn (standard GCC);
    2. **spacing** (the layout's ``spacing``): ``"arc"`` (default), consecutive inputs get
       parameters whose gaps are proportional to the distance between them (chord-length
       parametrisation), warped through GCC's own data points so that equal distances
       reproduce them; ``"centripetal"``, gaps proportional to the distances' square roots;
       ``"rank"``, GCC's points in the found order;
    3. **systematic** (default True): each ``alpha_k`` then moved to a distinct worker's
       point ``beta_n``, keeping the order, with the least total displacement (``snap_to``
       of :mod:`codedcomputing.codes.layout`): the worker there computes ``f(x_k)``
       itself, raw (the bound code is a systematic GCC: its ``systematic_workers`` name
       these workers), and a decode returns that worker's result as input k's estimate, bit
       for bit, whenever it returns (every input, with no straggler; ``info["exact"]``).
       Needs ``K <= N`` (else skipped).

    The bound code is a :class:`~codedcomputing.GCC` with those ``alpha`` (in the batch's
    own row order, so estimates come back in input order) and this code's ``beta``,
    lambdas and decoder; its ``layout`` attribute (a :class:`Layout`) records the order,
    the points, the seconds the layout took and ``components``.

    **Disconnected graphs.** A k-nearest-neighbour graph falls apart when part of the data
    is nearer itself than anything else (a cluster of near-duplicates of one input, a
    reference far from the batch): its pieces are joined by their shortest links (a
    minimum spanning forest of the pieces, ``join_components``),
    so geodesics follow the data inside each piece and a straight line between pieces, and
    the chain visits each piece in one run. ``layout.components`` counts the pieces (1: the
    graph was connected); nothing else changes, and the bound code keeps every promise.

    :class:`~codedcomputing.codes.layout.ThinPlateLayout` uses more than one intrinsic
    dimension instead: the inputs are embedded in ``m = dimensions`` coordinates
    (``embedding="isomap"``: classical MDS of
    the distances, geodesic through the reference when one is given;
    ``"eigenmaps"``: Laplacian eigenmaps of the batch's k-nearest-neighbour graph, or the
    reference's extended to the inputs), scaled into [-1, 1]^m; the workers get ``N``
    sites spread over the inputs' convex hull (a greedy maximin design over scrambled
    Sobol points, the inputs' sites among them when ``systematic``, ordered along a short
    path so that neighbouring workers sit close: ``hull_design``);
    the bound code is a :class:`ThinPlateCode` (thin-plate smoothing splines as encoder
    and decoder; its ``layout`` is a :class:`SiteLayout`, with no ``order``).
    ``decoding`` does not apply to it; ``lambda_dec`` must be a number. Coordinates in which
    the batch does not spread (inputs on a line, all equal) are dropped, so ``m`` may be
    smaller than ``dimensions``.

    **Sizes.** Every layout but the pca and row-order ones (without a reference) holds
    ``K x K`` (or ``K x M``) distances: ``num_inputs`` is at most
    :data:`~codedcomputing.codes.layout.MAX_POINTS` (10,000) for them and the reference at
    most as many samples; the thin-plate layout takes at most :data:`MAX_THIN_PLATE_POINTS` (2,000) inputs
    and workers. Larger sizes raise ``ValueError`` naming the parameter, before anything is
    allocated. Inputs whose distances would overflow float64 (values near 1e300) raise
    ``ValueError`` naming ``X``; distances are computed on centred, rescaled inputs, so a
    common offset (1e7) or a large scale (1e160) costs no accuracy.

    ``encode(X)`` binds ``X`` and encodes; ``decode`` needs the layout, so decode with the
    bound code (:class:`~codedcomputing.runtime.CodedExecutor` does).

    Measured (``coded experiment manifold``, 50 paired trials, mean MSE over standard
    GCC's): LeNet-5 and the ViT on MNIST under random stragglers 0.15-0.31 at K = 50
    (N = 250, S up to 60%) and 0.18-0.64 at K = 10 (N = 50), so 0.5x is missed at some S
    for K = 10; 0.00-0.04 under contiguous stragglers (mostly the assignment's; 0.13-0.64
    against GCC with the same assignment); 0.00-0.08 on a cubic of inputs on a curve in
    R^100. The thin-plate design lost to the chain on MNIST (2.5-22x standard GCC in
    ``benchmarks/studies/bench_manifold.py``) and won on a surface under contiguous stragglers.

    Parameters
    ----------
    num_inputs, num_workers : int
        K >= 1 inputs, N >= 2 workers (bounded by the design: see Sizes above).
    lambda_enc, lambda_dec, decoding, points, beta
        As for :class:`~codedcomputing.GCC` (``alpha`` is the layout's; ``beta`` in worker
        order, sorted or not: the layout snaps to the sorted points, and relabelling the
        workers does not change the estimates).
    assignment : {"golden", "natural"}, default "golden"
        As for :class:`~codedcomputing.GCC`, but golden by default: a block of neighbouring
        workers (a rack) then removes points spread over the whole line instead of a run
        of them. With neighbouring workers straggling (``cc.stragglers.contiguous``) this
        did most of the work: LeNet-5 and the ViT at K = 10 and 50, blocks of 20-60% of N,
        ManifoldGCC's mean MSE was 0.0007-0.04x standard GCC's (natural assignment) and
        0.15-0.43x GCC's with the golden assignment too, except 0.81-1.19x at 10 of 50
        (40 and 15 paired trials). Random stragglers are unaffected by the assignment.
    layout : layout object or str, default "chain"
        How the batch is ordered and spaced, or embedded, with that design's options
        (above): a :class:`~codedcomputing.codes.layout.ChainLayout`,
        :class:`~codedcomputing.codes.layout.SpectralLayout`,
        :class:`~codedcomputing.codes.layout.PCALayout`,
        :class:`~codedcomputing.codes.layout.RowOrderLayout` or
        :class:`~codedcomputing.codes.layout.ThinPlateLayout`, or the name of one
        (``"chain"``, ``"spectral"``, ``"pca"``, ``"none"``, ``"thin-plate"``: that layout
        with its default options). Held as the object (``code.layout``; ``code.design`` is
        its name).
    systematic : bool, default True
        Put the inputs at workers' points (above).
    degraded : {"auto", "input-space", "spline"}, default "auto"
        How an input whose systematic worker did not return is decoded. ``"input-space"``:
        the bound code is an :class:`InputSpaceGCC`, which holds the batch and replaces the
        spline's estimate of such an input by a Gaussian-process posterior mean on the
        returned (coded input, result) pairs
        (:func:`~codedcomputing.codes.input_space.kernel_estimates`, amplitude 1 and length
        0.5, chosen on a calibration split); returned systematic results stay exact, bit for
        bit. ``"spline"``: GCC's own decoder for every input (the bound code a plain
        :class:`~codedcomputing.GCC`). ``"auto"`` (the default): ``"input-space"`` when
        ``N <= 3 K`` (:data:`INPUT_SPACE_MAX_RATIO`), ``"spline"`` above. It applies to the
        chain, pca, spectral and row-order layouts when the layout is systematic
        (``systematic=True`` and K <= N); not to the thin-plate one (unmeasured there: that
        design lost to the chain on MNIST) nor to a non-systematic layout (no input is
        exact, nothing was measured). Measured (``docs/degraded.rst``, LeNet-5 and the ViT on
        MNIST, 5% of the queries missing, 200 paired trials, held-out split): LeNet-5 at
        K = 50, degraded-mode agreement with the network 0.67 -> 0.80 at 1.25 K workers and
        0.77 -> 0.89 at 1.5 K; K = 100: 0.74 -> 0.88 and 0.82 -> 0.93; the ViT at K = 50:
        +0.11 to +0.12 up to 1.5 K; +0.03 to +0.04 at 2 K; paired 95% intervals excluding 0.
        The mean MSE over every input (LeNet-5, K = 10 and 50, 10% and 30% random
        stragglers, 30 paired trials) was 0.60-0.89x the spline's from 1.5 K to 3 K workers
        but 1.5-4.3x at 5 K, where the spline through many parities is already close (the
        degraded-mode agreement equal), hence the switch at 3 K. ``"input-space"`` gives up
        GCC's affine promise for those inputs (:class:`InputSpaceGCC` says why).

    References
    ----------
    P. Moradi, M. A. Maddah-Ali. Manifold-aware encoding for general coded computing
    (the construction here is ours: the paper's is not available to us).

    E. T. Y. Lee. Choosing nodes in parametric curve interpolation. Computer-Aided Design
    21, 1989 (chord-length parametrisation).

    Examples
    --------
    >>> import numpy as np, codedcomputing as cc
    >>> code = cc.ManifoldGCC(num_inputs=8, num_workers=24)
    >>> t = np.random.default_rng(0).permutation(8) / 7.0
    >>> X = np.stack([np.cos(3 * t), np.sin(3 * t)], axis=1)  # on a curve, shuffled
    >>> bound = code.bind(X)
    >>> alive = cc.stragglers.random(24, 6, rng=0)
    >>> est = bound.decode(bound.encode(X)[alive], alive)  # f = identity
    >>> est.shape, bool(np.max(np.abs(est - X)) < 0.05)
    ((8, 2), True)
    """

    name = "manifold-gcc"
    description = "GCC with each batch ordered and spaced along the data (manifold-aware encoding)"
    batch_adaptive = True
    linear = False  # the layout, hence the maps, depend on the batch

    def __init__(
        self,
        num_inputs: int,
        num_workers: int,
        lambda_enc: float = 0.0,
        lambda_dec: float | str = 0.0,
        *,
        layout: BatchLayout | str = "chain",
        systematic: bool = True,
        degraded: str = "auto",
        decoding: str = "auto",
        points: str = "chebyshev",
        beta=None,
        assignment: str = "golden",
    ):
        self.layout = as_layout(layout)
        self._check_sizes(num_inputs, num_workers, self.layout)
        super().__init__(num_inputs, num_workers, points=points, beta=beta, assignment=assignment)
        self.systematic = check_flag(systematic, "systematic")
        self.degraded = check_choice(degraded, "degraded", DEGRADED)
        self._input_space = self.degraded == "input-space" or (
            self.degraded == "auto" and self.num_workers <= INPUT_SPACE_MAX_RATIO * self.num_inputs
        )
        if self.design == "thin-plate" and isinstance(lambda_dec, str) and lambda_dec == "gcv":
            raise ValueError("lambda_dec='gcv' is GCC's: layout=ThinPlateLayout() takes a number >= 0")
        self.assignment, self.decoding = assignment, decoding
        # a GCC with the default alpha: checks the lambdas and the decoding, serves K = 1
        self._template = GCC(
            num_inputs, num_workers, lambda_enc, lambda_dec, decoding=decoding, beta=self.beta, points=points
        )
        self.lambda_enc, self.lambda_dec = self._template.lambda_enc, self._template.lambda_dec

    @property
    def design(self) -> str:
        """The layout's name: ``"chain"``, ``"spectral"``, ``"pca"``, ``"thin-plate"`` or
        ``"none"`` (the batch's row order)."""
        return self.layout.design

    @staticmethod
    def _check_sizes(num_inputs, num_workers, layout: BatchLayout) -> None:
        """Refuse sizes whose layout would not fit, before anything is allocated."""
        most = MAX_THIN_PLATE_POINTS if layout.design == "thin-plate" else MAX_COUNT
        num_inputs = check_count(num_inputs, "num_inputs", 1, most)
        check_count(num_workers, "num_workers", 2, most)
        if layout.design in ("chain", "spectral") or layout.reference is not None:  # K x K distances
            layouts.check_size(num_inputs, "num_inputs")

    @property
    def min_results(self) -> int:
        return self._template.min_results

    def bind(self, X) -> GCC | InputSpaceGCC | ThinPlateCode:
        """The code for the batch ``X``: a :class:`~codedcomputing.GCC` with the batch's
        order and spacing (its ``layout`` attribute: a :class:`Layout`), an
        :class:`InputSpaceGCC` (a GCC holding the batch) when the layout is systematic and
        ``degraded`` resolves to ``"input-space"``, or for a
        :class:`~codedcomputing.codes.layout.ThinPlateLayout` a :class:`ThinPlateCode` on the
        batch's embedding (its ``layout`` attribute: a :class:`SiteLayout`)."""
        X = _arraylib.check_inputs(X, self.num_inputs)
        if _arraylib.is_complex(X):  # the layout needs real distances
            raise ValueError(f"X must be real for a batch layout, got complex {X.dtype}")
        start = time.perf_counter()
        flat = _arraylib.to_float64(X)
        reference = self.layout.reference
        if reference is not None and flat.shape[1] != reference.shape[1]:
            raise ValueError(
                f"X's rows have {flat.shape[1]} values, the reference's {reference.shape[1]}: "
                "the layout's reference must hold samples shaped like the inputs"
            )
        layouts._check_magnitude(
            flat,
            "X",
            "distances between such inputs overflow float64; scale X down (the layout does not "
            "depend on X's scale)",
            0.0 if self.layout._reference is None else self.layout._reference._peak,
        )
        # the layout is computed for the distinct inputs in lexicographic order, so that it
        # cannot depend on the batch's row order (ties, degenerate spectra) and identical
        # inputs get one place
        distinct, inverse = np.unique(flat, axis=0, return_inverse=True)
        inverse = inverse.ravel()
        if self.design == "thin-plate":
            return self._bind_sites(distinct, inverse, start)
        geometry = _Geometry(self, distinct)
        if self.design == "none":
            order = np.arange(self.num_inputs)
        else:  # identical inputs next to each other, in row order
            rank = np.empty(len(distinct), dtype=np.intp)
            rank[self._order(geometry)] = np.arange(len(distinct))
            order = np.argsort(rank[inverse], kind="stable")
        base = make_points(self.points, self.num_inputs, kind="data")
        spacing = self.layout.spacing
        if spacing == "rank" or self.num_inputs < 3:
            sorted_alpha = base
        else:
            gaps = geometry.gaps(inverse[order])  # 0 between identical inputs
            if spacing == "centripetal":  # square roots of the chords (Catmull-Rom's choice)
                gaps = np.sqrt(gaps)
            sorted_alpha = layouts._arc_positions(gaps, base)
        snapped = self.systematic and self.num_inputs <= self.num_workers
        if snapped:
            sorted_alpha = layouts._snap_to(sorted_alpha, self.beta)
        alpha = np.empty(self.num_inputs)
        alpha[order] = sorted_alpha  # input order[i] sits at the i-th point
        options = {"decoding": self.decoding, "alpha": alpha, "beta": self.beta, "systematic": snapped}
        if snapped and self._input_space:  # missing inputs decoded from the batch
            options["batch"] = flat
        kind = InputSpaceGCC if "batch" in options else GCC
        # snapped: the workers at the inputs' points compute them raw
        bound = kind(self.num_inputs, self.num_workers, self.lambda_enc, self.lambda_dec, **options)
        bound.layout = Layout(
            order=order, alpha=alpha, seconds=time.perf_counter() - start, components=geometry.components
        )
        return bound

    def _bind_sites(self, distinct: np.ndarray, inverse: np.ndarray, start: float) -> ThinPlateCode:
        k, n, count = self.num_inputs, self.num_workers, len(distinct)
        m = max(1, min(self.layout.dimensions, count - 1))
        components, include = 1, self.systematic
        if count == 1:  # one input, or all equal: every site at 0, the workers on a line
            sites, workers = np.zeros((k, 1)), make_points(self.points, n, kind="workers")[:, None]
            if include:  # systematic: the worker nearest 0 moves onto the inputs' site
                workers[np.argmin(np.abs(workers[:, 0])), 0] = 0.0
        else:
            geometry = _Geometry(self, distinct)
            distinct_sites, components = self._embed(geometry, m), geometry.components
            include = self.systematic and count <= n
            workers = layouts._hull_design(distinct_sites, n, include=include)
            sites = distinct_sites[inverse]  # identical inputs share their site
        held = include and (_site_inputs(sites, workers) >= 0).sum() == count  # every site a worker's
        bound = ThinPlateCode(
            k, n, self.lambda_enc, self.lambda_dec, sites=sites, worker_sites=workers, systematic=held
        )
        bound.layout = SiteLayout(
            sites=bound.sites,
            worker_sites=bound.worker_sites,
            seconds=time.perf_counter() - start,
            components=components,
        )
        return bound

    def _embed(self, geometry: _Geometry, m: int) -> np.ndarray:
        """The distinct inputs' sites in R^m, Isomap (classical MDS of the distances,
        geodesic with a reference) or Laplacian eigenmaps (of the batch's graph, or the
        reference's eigenmap extended to the inputs); directions with no spread dropped
        (:func:`_span`); signs fixed by the columns' third moments (so that a permuted batch
        gets the permuted sites), scaled into [-1, 1]^m with the aspect kept."""
        reference = self.layout._reference
        if self.layout.embedding == "isomap":
            sites = layouts._mds_embedding(geometry.matrix, m)
        elif reference is not None:
            sites = reference._embedding_of(geometry.flat, m)
        elif geometry.flat.shape[0] >= m + 2:
            sites = layouts._spectral_embedding(geometry.graph, m)
        else:  # too few inputs for m non-trivial eigenvectors
            sites = layouts._mds_embedding(geometry.matrix, m)
        sites = _span(sites)
        sites = sites - (sites.max(axis=0) + sites.min(axis=0)) / 2
        extent = float(np.max(np.abs(sites)))
        sites = sites / extent if extent > 0 else sites  # before the cubes: no overflow
        sites = sites * np.where(np.sum(sites**3, axis=0) < 0, -1.0, 1.0)
        return _separate(sites)

    def _order(self, geometry: _Geometry) -> np.ndarray:
        """The distinct inputs' order for the chain, pca and spectral designs."""
        flat = geometry.flat
        if flat.shape[0] < 3:
            return np.arange(flat.shape[0])
        if self.design == "chain":
            return layouts._chain_order(geometry.matrix)
        if self.design == "pca":
            centred = flat - flat.mean(axis=0)
            first = layouts._first_principal_axis(centred)
            return np.argsort(centred @ first, kind="stable")
        if self.layout._reference is not None:
            coordinate = self.layout._reference._coordinate_of(flat)
        else:
            coordinate = layouts._spectral_coordinate(geometry.graph)
        return np.argsort(coordinate, kind="stable")

    def _encode(self, X):
        return self.bind(X).encode(X)

    def _decode(self, Y, alive):
        raise ValueError(
            "ManifoldGCC lays out each batch anew: decode with the code bound to the batch, "
            "bound = code.bind(X); bound.decode(Y, alive) (CodedExecutor does this for you)"
        )
