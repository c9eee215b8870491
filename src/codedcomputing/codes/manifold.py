"""Manifold-aware GCC: each batch's inputs ordered and spaced along the data."""

from __future__ import annotations

import time
from dataclasses import dataclass

import numpy as np

from .. import _arraylib, layout
from .._validation import check_choice, check_count
from ..points import make_points
from .base import Code
from .gcc import GCC

__all__ = ["DESIGNS", "SPACINGS", "Layout", "ManifoldGCC"]

DESIGNS = ("chain", "spectral", "pca", "none")
SPACINGS = ("arc", "rank")


@dataclass(frozen=True)
class Layout:
    """One batch's layout: ``order`` (the inputs' indices along the path), ``alpha`` (input
    k's point, in the batch's own order), and what computing it cost."""

    order: np.ndarray
    alpha: np.ndarray
    seconds: float


class ManifoldGCC(Code):
    r"""GCC whose inputs follow the data: each batch is laid out along a short path through
    its inputs before the spline is passed through them.

    Standard GCC puts input k at ``alpha_k`` in the order the batch came in, so the
    encoder's curve jumps between unrelated inputs and the workers evaluate ``f`` far from
    the data. :meth:`bind` computes a layout for one batch (:mod:`codedcomputing.layout`):

    1. **order** (``design``): ``"chain"`` (default), a short open path through the inputs (nearest-
       neighbour chains improved by 2-opt), on Euclidean distances, or on geodesic ones
       (shortest paths through a k-nearest-neighbour graph) when a ``reference`` set of
       unlabelled samples is given; ``"spectral"``, by the Fiedler vector of a
       k-nearest-neighbour graph (of the reference set, extended to the inputs, when one is
       given; else of the batch); ``"pca"``, by the first principal component; ``"none"``,
       as drawn (standard GCC);
    2. **spacing**: ``"arc"`` (default), consecutive inputs get parameters whose gaps are
       proportional to the distance between them (chord-length parametrisation), warped
       through GCC's own data points so that equal distances reproduce them; ``"rank"``,
       GCC's points in the found order.

    The bound code is a :class:`~codedcomputing.GCC` with those ``alpha`` (in the batch's
    own row order, so estimates come back in input order) and this code's ``beta``,
    lambdas and decoder; its :attr:`layout` records the order, the points and the seconds
    the layout took. ``encode(X)`` binds ``X`` and encodes; ``decode`` needs the layout, so
    decode with the bound code (:class:`~codedcomputing.runtime.CodedExecutor` does).

    Parameters
    ----------
    num_inputs, num_workers : int
        K >= 1 inputs, N >= 2 workers.
    lambda_enc, lambda_dec, decoding, points, beta, assignment
        As for :class:`~codedcomputing.GCC` (``alpha`` is the layout's).
    design : {"chain", "spectral", "pca", "none"}, default "chain"
        How the batch is ordered (above).
    spacing : {"arc", "rank"}, default "arc"
        How far apart the ordered inputs' points are (above).
    reference : array_like, optional
        Unlabelled samples shaped like inputs (M, ...), prepared once (their own
        k-nearest-neighbour graph): geodesic distances for ``"chain"``, the embedding for
        ``"spectral"``.
    neighbours : int, default 10
        k of the k-nearest-neighbour graphs.

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
        design: str = "chain",
        spacing: str = "arc",
        reference=None,
        neighbours: int = 10,
        decoding: str = "auto",
        points: str = "chebyshev",
        beta=None,
        assignment: str = "natural",
    ):
        super().__init__(num_inputs, num_workers, points=points, beta=beta, assignment=assignment)
        self.design = check_choice(design, "design", DESIGNS)
        self.spacing = check_choice(spacing, "spacing", SPACINGS)
        self.neighbours = check_count(neighbours, "neighbours", 1)
        self.assignment, self.decoding = assignment, decoding
        # a GCC with the default alpha: checks the lambdas and the decoding, serves K = 1
        self._template = GCC(
            num_inputs, num_workers, lambda_enc, lambda_dec, decoding=decoding, beta=self.beta, points=points
        )
        self.lambda_enc, self.lambda_dec = self._template.lambda_enc, self._template.lambda_dec
        self.reference = None if reference is None else self._check_reference(reference)
        self._reference = None if reference is None else layout.Reference(self.reference, self.neighbours)

    @staticmethod
    def _check_reference(reference) -> np.ndarray:
        rows = len(reference) if hasattr(reference, "__len__") else -1
        if rows < 2:
            raise ValueError(f"reference must hold at least 2 samples (M, ...), got {reference!r:.80}")
        return _arraylib.to_float64(_arraylib.check_inputs(reference, rows, "reference"))

    @property
    def min_results(self) -> int:
        return self._template.min_results

    def bind(self, X) -> GCC:
        """The GCC that codes the batch ``X``: its layout computed (order, spacing), held in
        the returned code's ``layout`` (:class:`Layout`)."""
        X = _arraylib.check_inputs(X, self.num_inputs)
        start = time.perf_counter()
        flat = _arraylib.to_float64(X)
        if self.reference is not None and flat.shape[1] != self.reference.shape[1]:
            raise ValueError(
                f"X's rows have {flat.shape[1]} values, the reference's {self.reference.shape[1]}: "
                "reference must hold samples shaped like the inputs"
            )
        order = self._order(flat)
        base = make_points(self.points, self.num_inputs, kind="data")
        if self.spacing == "rank" or self.num_inputs < 3:
            sorted_alpha = base
        else:
            gaps = self._distances(flat, pairs=order)
            sorted_alpha = layout.arc_positions(gaps, base)
        alpha = np.empty(self.num_inputs)
        alpha[order] = sorted_alpha  # input order[i] sits at the i-th point
        bound = GCC(
            self.num_inputs,
            self.num_workers,
            self.lambda_enc,
            self.lambda_dec,
            decoding=self.decoding,
            alpha=alpha,
            beta=self.beta,
        )
        bound.layout = Layout(order=order, alpha=alpha, seconds=time.perf_counter() - start)
        return bound

    def _order(self, flat: np.ndarray) -> np.ndarray:
        k = flat.shape[0]
        if self.design == "none" or k < 3:
            return np.arange(k)
        if self.design == "chain":
            return layout.chain_order(self._distances(flat))
        if self.design == "pca":
            centred = flat - flat.mean(axis=0)
            first = np.linalg.svd(centred, full_matrices=False)[2][0]
            return np.argsort(centred @ first, kind="stable")
        if self._reference is not None:
            coordinate = self._reference.coordinate_of(flat)
        else:
            coordinate = layout.spectral_coordinate(
                layout.knn_graph(layout.pairwise_distances(flat), self.neighbours)
            )
        return np.argsort(coordinate, kind="stable")

    def _distances(self, flat: np.ndarray, pairs: np.ndarray | None = None) -> np.ndarray:
        """The inputs' distance matrix (geodesic with a reference), or, with ``pairs`` (an
        order), the ``K - 1`` distances between consecutive inputs of it."""
        full = (
            self._reference.geodesic_distances(flat)
            if self._reference is not None
            else layout.pairwise_distances(flat)
        )
        return full if pairs is None else full[pairs[:-1], pairs[1:]]

    def _encode(self, X):
        return self.bind(X).encode(X)

    def _decode(self, Y, alive):
        raise ValueError(
            "ManifoldGCC lays out each batch anew: decode with the code bound to the batch, "
            "bound = code.bind(X); bound.decode(Y, alive) (CodedExecutor does this for you)"
        )
