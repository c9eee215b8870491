"""How :class:`~codedcomputing.ManifoldGCC` lays out a batch: the layout objects it takes, and
the orders, spacings and embeddings they compute.

**Layout objects** (what users pass as ``ManifoldGCC(..., layout=...)``) carry the options of
one design, each checked when the object is built (``ValueError`` naming the option):

- :class:`ChainLayout` (the default): the inputs ordered along a short open path through them;
- :class:`SpectralLayout`: ordered by the Fiedler vector of a k-nearest-neighbour graph;
- :class:`PCALayout`: ordered by the first principal component;
- :class:`RowOrderLayout`: in the batch's own row order (standard GCC's);
- :class:`ThinPlateLayout`: embedded in ``dimensions`` coordinates, thin-plate splines as
  encoder and decoder (:class:`~codedcomputing.codes.manifold.ThinPlateCode`).

The first four put the inputs on GCC's line with a ``spacing``; each takes an optional
``reference`` set of unlabelled samples (prepared once, when the object is built: its own
k-nearest-neighbour graph) for geodesic distances, and ``neighbours``, the k of the graphs.
Layout objects are immutable and compare equal when their options are; one object may serve
many codes (its reference is prepared once for all of them).

>>> import codedcomputing as cc
>>> from codedcomputing.codes.layout import ChainLayout
>>> code = cc.ManifoldGCC(8, 24, layout=ChainLayout(spacing="centripetal"))
>>> code.layout, code.design
(ChainLayout(spacing='centripetal'), 'chain')
>>> cc.ManifoldGCC(8, 24, layout="thin-plate").layout  # a name: that layout's defaults
ThinPlateLayout()

**The computation** (not exported; :class:`~codedcomputing.ManifoldGCC` calls it):

- an **order** of the inputs along the data: a short open path (``chain_order``: the
  travelling-salesman heuristic of a nearest-neighbour chain improved by 2-opt), the Fiedler
  vector of a k-nearest-neighbour graph (``spectral_coordinate``, with an out-of-sample
  extension to new inputs when the graph is built on a reference set), or the first
  principal component;
- a **spacing**: consecutive inputs ``d`` apart along the order get parameters whose gaps are
  proportional to ``d`` (chord-length parametrisation, the standard choice for fitting a
  spline curve through points in space), warped through the code's own data points so that
  equal gaps reproduce them (``arc_positions``).

Distances are Euclidean in the flattened input space, or geodesic (shortest paths in a
k-nearest-neighbour graph over the inputs and a reference set of unlabelled samples) when a
reference is given, so that even K = 10 inputs are ordered by the data's manifold rather than
by straight lines between them. Everything is deterministic and computed in float64.

A k-nearest-neighbour graph can fall apart (a tight cluster of near-duplicates whose
neighbours are all each other): its components are then joined by their shortest links
(``join_components``), so that every geodesic is finite, and the number of links added
is reported. Whatever holds a dense ``n x n`` matrix (a distance matrix, a graph over a batch
or a reference set) takes at most :data:`MAX_POINTS` points.

Each function without a leading underscore checks its arguments once and raises
``ValueError`` naming the one that is bad (arrays: real, finite, of the documented shape;
counts: integers; flags: bools), then calls its private implementation
(``_pairwise_distances``, ...), which performs no checks: ManifoldGCC, which checks its own
inputs, calls those directly, so a bind pays for no check twice.
"""

from __future__ import annotations

import functools
import inspect
from typing import TYPE_CHECKING

import numpy as np

from .. import _arraylib
from .._validation import check_choice, check_count, check_flag, check_real_array

# scipy's sparse, spatial and stats modules are imported where used: loading them takes ~0.5 s,
# which ``import codedcomputing`` (and every ``coded`` command) would otherwise pay.
if TYPE_CHECKING:
    from scipy.sparse import csr_array

__all__ = [
    "LAYOUTS",
    "MAX_POINTS",
    "BatchLayout",
    "ChainLayout",
    "PCALayout",
    "RowOrderLayout",
    "SpectralLayout",
    "ThinPlateLayout",
]

# The most points anything here holds a dense n x n matrix for (a distance matrix, a graph
# over a batch or a reference set): 800 MB per matrix at 10,000, and the chain's and the
# graphs' work grows like n^2 (about 6 s for a chain through 4,000 points here).
MAX_POINTS = 10_000

# Pairs this close (squared distance below this fraction of their squared norms, after
# centring) lose most digits in the matrix-product formula: they are recomputed directly,
# up to _REFINE_BUDGET values of differences per call.
_CLOSE = 1e-6
_REFINE_BUDGET = 2**26


def check_size(count: int, name: str, limit: int = MAX_POINTS) -> None:
    """Raise ``ValueError`` naming ``name`` when ``count`` points exceed ``limit`` (checked
    before anything of size ``count^2`` is allocated)."""
    if count > limit:
        raise ValueError(
            f"{name}: {count:,} points is more than the {limit:,} a dense layout computation takes "
            f"(its matrices grow like {name}^2)"
        )


def _finite_array(values, name: str, ndim: int) -> np.ndarray:
    """``values`` as a float64 array of ``ndim`` dimensions, all finite (``ValueError`` naming
    ``name`` otherwise)."""
    array = check_real_array(values, name)
    if array.ndim != ndim:
        shape = "(n,)" if ndim == 1 else "(n, D)"
        raise ValueError(f"{name} must be a {ndim}-D array {shape}, got shape {array.shape}")
    if not np.all(np.isfinite(array)):
        raise ValueError(f"{name} contains NaN or inf")
    return array


def _check_magnitude(points: np.ndarray, name: str, reason: str, other_peak: float = 0.0) -> None:
    """Raise ``ValueError`` naming ``name``, then ``reason``, when the distances among float64
    ``points`` ``(K, D)``, or from them to points no larger than ``other_peak``, could
    overflow float64: each is at most ``sqrt(D) (max|x| + max|y|)``."""
    peak = float(np.max(np.abs(points), initial=0.0))
    if not np.sqrt(points.shape[1]) * (peak + other_peak) < 1e300:
        raise ValueError(f"values up to {peak:.3g} in {name}: {reason}")


def _checked_distances(distances, name: str = "distances", remedy: str = "") -> np.ndarray:
    """``distances`` as a square float64 matrix, finite and >= 0 (``ValueError`` naming
    ``name``, with ``remedy`` after a non-finite one)."""
    array = check_real_array(distances, name)
    if array.ndim != 2 or array.shape[0] != array.shape[1]:
        raise ValueError(f"{name} must be a square (n, n) matrix, got shape {array.shape}")
    if not np.all(np.isfinite(array)):
        raise ValueError(f"{name} must be finite, got NaN or inf{remedy}")
    if np.any(array < 0):
        raise ValueError(f"{name} must be >= 0, got {float(np.min(array))!r}")
    return array


def _checked_graph(graph, *, connected: bool = False, symmetric: bool = False) -> csr_array:
    """``graph`` (a scipy sparse array or matrix: square, real weights, finite and > 0) as a
    float64 ``csr_array``; ``connected``, ``symmetric``: refuse it when it is not."""
    from scipy.sparse import csr_array, issparse
    from scipy.sparse.csgraph import connected_components

    if not issparse(graph):
        raise ValueError(f"graph must be a scipy sparse array or matrix, got {type(graph).__name__}")
    if graph.ndim != 2 or graph.shape[0] != graph.shape[1]:
        raise ValueError(f"graph must be square (n, n), got shape {graph.shape}")
    if not np.issubdtype(graph.dtype, np.number) or np.issubdtype(graph.dtype, np.complexfloating):
        raise ValueError(f"graph must hold real weights, got dtype {graph.dtype}")
    graph = csr_array(graph, dtype=np.float64)
    if not (np.all(np.isfinite(graph.data)) and np.all(graph.data > 0)):
        raise ValueError(
            "graph's weights (edge lengths) must be finite and > 0 (knn_graph stores 1e-300 for 0)"
        )
    if symmetric and (graph != graph.T).nnz:
        raise ValueError("graph must be symmetric (an undirected graph)")
    if connected:
        count = int(connected_components(graph, directed=False)[0])
        if count > 1:
            raise ValueError(
                f"graph must be connected, it has {count} components (join_components joins them)"
            )
    return graph


def _power_of_two_scale(peak: float) -> float:
    """A power of two near ``peak`` (``peak / scale`` in [0.5, 2)): dividing by it is exact and
    keeps squares and sums of values up to 1e308 finite; 1 for 0 or a non-finite peak."""
    if not (peak > 0.0 and np.isfinite(peak)):
        return 1.0
    return float(np.ldexp(1.0, int(np.frexp(peak)[1]) - 1))


def pairwise_distances(a: np.ndarray, b: np.ndarray | None = None) -> np.ndarray:
    """Euclidean distances between the rows of ``a`` and of ``b`` (``a`` itself if ``None``).

    One matrix product, ``||a||^2 + ||b||^2 - 2 a b^T`` (clipped at 0), on the rows centred
    on their common mean and divided by a power of two near their largest magnitude: centring
    keeps a common offset (1e7) from cancelling the distances' digits, the scale keeps the
    squares of values near 1e160 finite. Pairs whose squared distance is below 1e-6 of their
    squared norms (near-duplicates far from the mean) are recomputed from their differences
    (up to 2^26 values per call), so duplicates are exactly 0 apart. Distances beyond float64's
    range come back inf.

    ``a`` is ``(n, D)`` and ``b`` ``(m, D)``, real and finite; ``n``, or ``n m``, at most
    :data:`MAX_POINTS` (``MAX_POINTS^2``): ``ValueError`` naming the one that is not."""
    a = _finite_array(a, "a", 2)
    if b is None:
        check_size(a.shape[0], "a")
    else:
        b = _finite_array(b, "b", 2)
        if b.shape[1] != a.shape[1]:
            raise ValueError(f"b must have a's {a.shape[1]} columns, got shape {b.shape}")
        if a.shape[0] * b.shape[0] > MAX_POINTS**2:
            raise ValueError(
                f"a and b: {a.shape[0]:,} x {b.shape[0]:,} distances is more than the "
                f"{MAX_POINTS:,}^2 a layout computation takes"
            )
    return _pairwise_distances(a, b)


def _pairwise_distances(a: np.ndarray, b: np.ndarray | None = None) -> np.ndarray:
    """:func:`pairwise_distances` of float64 ``(n, D)`` and ``(m, D)`` arrays (``b`` None:
    ``a`` itself). No checks are performed."""
    same = b is None
    a = np.asarray(a, dtype=np.float64)
    b = a if same else np.asarray(b, dtype=np.float64)
    if a.shape[0] == 0 or b.shape[0] == 0:
        return np.zeros((a.shape[0], b.shape[0]))
    scale = _power_of_two_scale(max(np.max(np.abs(a), initial=0.0), np.max(np.abs(b), initial=0.0)))
    a = a / scale
    total = a.sum(axis=0) if same else a.sum(axis=0) + (b / scale).sum(axis=0)
    centre = total / (a.shape[0] if same else a.shape[0] + b.shape[0])
    a = a - centre
    b = a if same else b / scale - centre
    norms_a = np.einsum("ij,ij->i", a, a)
    norms_b = norms_a if same else np.einsum("ij,ij->i", b, b)
    norms = norms_a[:, None] + norms_b[None, :]
    squared = norms - 2.0 * (a @ b.T)
    np.maximum(squared, 0.0, out=squared)
    close = squared < _CLOSE * norms
    if same:
        np.fill_diagonal(close, False)
        np.fill_diagonal(squared, 0.0)
    rows, cols = np.nonzero(close)
    if rows.size and rows.size * a.shape[1] <= _REFINE_BUDGET:
        step = max(1, 2**22 // max(a.shape[1], 1))
        for start in range(0, rows.size, step):
            i, j = rows[start : start + step], cols[start : start + step]
            difference = a[i] - b[j]
            squared[i, j] = np.einsum("ij,ij->i", difference, difference)
    with np.errstate(over="ignore"):
        return np.sqrt(squared) * scale


def consecutive_distances(points: np.ndarray) -> np.ndarray:
    """The ``n - 1`` Euclidean distances between consecutive rows of ``points`` (``(n, D)``),
    from their differences (``O(n D)``, no ``n x n`` matrix), on the rows divided by a power
    of two near their largest magnitude so the squares cannot overflow. ``points`` must be
    real and finite (``ValueError``)."""
    return _consecutive_distances(_finite_array(points, "points", 2))


def _consecutive_distances(points: np.ndarray) -> np.ndarray:
    """:func:`consecutive_distances` of float64 ``(n, D)`` points. No checks are performed."""
    points = np.asarray(points, dtype=np.float64)
    scale = _power_of_two_scale(float(np.max(np.abs(points), initial=0.0)))
    steps = np.diff(points / scale, axis=0)
    with np.errstate(over="ignore"):
        return np.sqrt(np.einsum("ij,ij->i", steps, steps)) * scale


def knn_graph(distances: np.ndarray, neighbours: int, *, join: bool = True) -> csr_array:
    """The symmetric k-nearest-neighbour graph of a square distance matrix (edge weights: the
    distances; ties to the lowest index), with its components joined by their shortest links
    (:func:`join_components`) so that every geodesic is finite; ``join=False`` leaves them.
    ``distances`` finite and >= 0, ``neighbours`` an integer >= 1 (``n - 1`` are used when
    it is more), ``join`` a bool: ``ValueError`` naming the one that is not."""
    distances = _checked_distances(distances)
    neighbours = check_count(neighbours, "neighbours", 1)
    if check_flag(join, "join"):
        return _joined_knn_graph(distances, neighbours)[0]
    return _knn_graph(distances, neighbours)


def _joined_knn_graph(distances: np.ndarray, neighbours: int) -> tuple[csr_array, int]:
    """``(graph, components)``: :func:`knn_graph` of a square float64 matrix, and how many
    components it had before they were joined. No checks are performed."""
    return _join_components(_knn_graph(distances, neighbours), distances)


def _knn_graph(distances: np.ndarray, neighbours: int) -> csr_array:
    """:func:`knn_graph` of a square float64 matrix with ``join=False``. No checks are
    performed."""
    from scipy.sparse import csr_array

    n = distances.shape[0]
    k = min(neighbours, n - 1)
    if k < 1:
        return csr_array((n, n))
    masked = distances.copy()
    np.fill_diagonal(masked, np.inf)
    nearest = np.argpartition(masked, k - 1, axis=1)[:, :k]
    rows = np.repeat(np.arange(n), k)
    cols = nearest.ravel()
    weights = np.maximum(distances[rows, cols], 1e-300)  # a zero weight would be no edge
    graph = csr_array((weights, (rows, cols)), shape=(n, n))
    return graph.maximum(graph.T)


def join_components(
    graph: csr_array, distances: np.ndarray, rows: np.ndarray | None = None
) -> tuple[csr_array, int]:
    """``(graph, components)``: ``graph`` with its connected components joined by their
    shortest links, and how many components it had (1: it was connected, nothing added).

    ``distances`` are ``(R, n)``: from the nodes ``rows`` (all ``n`` nodes when ``None``) to
    every node; every component but one must lie within ``rows`` (the one outside: a
    reference set's graph, connected already). Boruvka's rounds: each component within
    ``rows`` gets the shortest link from its nodes to a node of another component (ties: the
    lowest row, then the lowest node), so the count at least halves per round and the links
    added are those of a minimum spanning forest of the components. ``O(R n)`` per round.
    Raises ``ValueError`` when no component has a finite link out (non-finite distances).

    ``graph``: a scipy sparse ``(n, n)`` array or matrix with weights finite and > 0;
    ``distances``: real, ``>= 0`` (``inf``: no link); ``rows``: distinct indices of nodes
    (integers or whole-number floats). Anything else raises ``ValueError`` naming the
    argument."""
    graph = _checked_graph(graph)
    n = graph.shape[0]
    rows = np.arange(n) if rows is None else _arraylib.check_alive(rows, n, "rows")
    distances = check_real_array(distances, "distances")
    if distances.shape != (rows.size, n):
        raise ValueError(
            f"distances must have shape ({rows.size}, {n}), from each of the {rows.size} rows to "
            f"each of graph's {n} nodes, got {distances.shape}"
        )
    if np.any(np.isnan(distances)) or np.any(distances < 0):
        raise ValueError("distances must be >= 0 (inf: no link), got NaN or a negative value")
    return _join_components(graph, distances, rows)


def _join_components(
    graph: csr_array, distances: np.ndarray, rows: np.ndarray | None = None
) -> tuple[csr_array, int]:
    """:func:`join_components` of a sparse graph and float64 distances. No checks are
    performed (but the documented ``ValueError`` when no finite link is left)."""
    from scipy.sparse import csr_array
    from scipy.sparse.csgraph import connected_components

    n = graph.shape[0]
    rows = np.arange(n) if rows is None else np.asarray(rows)
    count, labels = connected_components(graph, directed=False)
    components = int(count)
    while count > 1:
        own = labels[rows]
        masked = np.where(own[:, None] == labels[None, :], np.inf, distances)
        nearest = np.argmin(masked, axis=1)
        length = masked[np.arange(rows.size), nearest]
        by_component = np.lexsort((length, own))  # stable: the lowest row among equal lengths
        first = by_component[np.r_[True, own[by_component][1:] != own[by_component][:-1]]]
        first = first[np.isfinite(length[first])]
        if first.size == 0:
            raise ValueError("distances must be finite to join the graph's components")
        # two pieces may pick the same link: keep it once (a sparse constructor sums repeats)
        pairs = np.sort(np.c_[rows[first], nearest[first]], axis=1)
        pairs, keep = np.unique(pairs, axis=0, return_index=True)
        weights = np.maximum(length[first][keep], 1e-300)
        ends = (np.r_[pairs[:, 0], pairs[:, 1]], np.r_[pairs[:, 1], pairs[:, 0]])
        graph = graph.maximum(csr_array((np.r_[weights, weights], ends), shape=(n, n)))
        count, labels = connected_components(graph, directed=False)
    return graph, components


def first_principal_axis(centred: np.ndarray) -> np.ndarray:
    """The leading right singular vector of centred data ``(K, D)``, from the smaller of the
    two Gram matrices (``K x K`` or ``D x D``) by a symmetric eigensolver: a full SVD of a
    1000 x 784 batch took seconds where this takes milliseconds. The data are divided by a
    power of two near their largest magnitude first, so the Gram matrix cannot overflow.
    ``centred`` must be real and finite, with a row and a column at least (``ValueError``)."""
    centred = _finite_array(centred, "centred", 2)
    if 0 in centred.shape:
        raise ValueError(f"centred must have at least one row and one column, got shape {centred.shape}")
    return _first_principal_axis(centred)


def _first_principal_axis(centred: np.ndarray) -> np.ndarray:
    """:func:`first_principal_axis` of float64 ``(K, D)`` data, ``K, D >= 1``. No checks are
    performed."""
    centred = centred / _power_of_two_scale(float(np.max(np.abs(centred), initial=0.0)))
    if centred.shape[0] < centred.shape[1]:
        vectors = np.linalg.eigh(centred @ centred.T)[1]
        axis = centred.T @ vectors[:, -1]
    else:
        vectors = np.linalg.eigh(centred.T @ centred)[1]
        axis = vectors[:, -1]
    norm = float(np.linalg.norm(axis))
    return axis / norm if norm > 0.0 else np.eye(centred.shape[1])[0]


def path_length(distances: np.ndarray, order: np.ndarray) -> float:
    """The length of the open path visiting the points in ``order`` (distinct indices into
    ``distances``, integers or whole-number floats, as ``alive`` takes them) through
    ``distances`` (a square matrix, finite and >= 0); ``ValueError`` naming either."""
    distances = _checked_distances(distances)
    return _path_length(distances, _arraylib.check_alive(order, distances.shape[0], "order"))


def _path_length(distances: np.ndarray, order: np.ndarray) -> float:
    """:func:`path_length` of an integer array ``order``. No checks are performed."""
    return float(np.sum(distances[order[:-1], order[1:]]))


def chain_order(distances: np.ndarray, *, starts: int = 64, max_passes: int = 50) -> np.ndarray:
    """A short open path through all points of a square distance matrix: the best greedy
    nearest-neighbour chain over up to ``starts`` starting points (all of them for small
    batches; otherwise the points farthest from the others first), improved by 2-opt
    (reversing a stretch of the path whenever that shortens it) until no reversal helps or
    ``max_passes`` sweeps are done. ``O(starts K^2 + passes K^2)``; past 500 points both
    counts shrink with K (about 32,000 / K starts and 50,000 / K sweeps, at least 4 and 3).
    Ties go to the lowest index, so the result is always a permutation of ``0 .. K-1``;
    ``distances`` must be finite and >= 0, ``starts`` an integer >= 1 and ``max_passes`` one
    >= 0 (``ValueError`` naming the one that is not)."""
    # an infinite row would send the chain back to node 0
    distances = _checked_distances(distances, remedy=": join the graph's components first (join_components)")
    starts = check_count(starts, "starts", 1)
    max_passes = check_count(max_passes, "max_passes", 0)
    return _chain_order(distances, starts=starts, max_passes=max_passes)


def _chain_order(distances: np.ndarray, *, starts: int = 64, max_passes: int = 50) -> np.ndarray:
    """:func:`chain_order` of a square float64 matrix, finite and >= 0. No checks are
    performed."""
    n = distances.shape[0]
    if n <= 2:
        return np.arange(n)
    if n > 500:  # each start and each sweep costs O(n^2): fewer of both for large batches
        starts, max_passes = min(starts, max(4, 32_000 // n)), min(max_passes, max(3, 50_000 // n))
    if n <= starts:
        candidates = np.arange(n)
    else:  # outer points first: an open path's ends lie at the data's extremes
        candidates = np.argsort(-distances.sum(axis=1), kind="stable")[:starts]
    orders = _greedy_chains(distances, candidates)
    lengths = np.sum(distances[orders[:, :-1], orders[:, 1:]], axis=1)
    best = 0
    for index in range(1, len(orders)):  # ties: the first start
        if lengths[index] < lengths[best] * (1.0 - 1e-12):
            best = index
    return _two_opt(distances, orders[best], max_passes)


def _greedy_chains(distances: np.ndarray, starts: np.ndarray) -> np.ndarray:
    """``(len(starts), n)``: the greedy nearest-neighbour chain from each start, all grown
    together (one ``(starts, n)`` step at a time; ties go to the lowest index)."""
    n, count = distances.shape[0], len(starts)
    orders = np.empty((count, n), dtype=np.intp)
    orders[:, 0] = starts
    visited = np.zeros((count, n), dtype=bool)
    rows = np.arange(count)
    visited[rows, orders[:, 0]] = True
    for step in range(1, n):
        row = distances[orders[:, step - 1]]
        row[visited] = np.inf
        orders[:, step] = np.argmin(row, axis=1)
        visited[rows, orders[:, step]] = True
    return orders


def _two_opt(distances: np.ndarray, order: np.ndarray, max_passes: int) -> np.ndarray:
    """2-opt for an open path: reverse ``order[i+1 .. j]`` when ``d(o_i, o_j) + d(o_i+1,
    o_j+1) < d(o_i, o_i+1) + d(o_j, o_j+1)`` (a missing ``o_j+1`` past the end costs 0),
    and reverse a prefix when that shortens the path; one vectorised scan per ``i``."""
    order = order.copy()
    n = order.size
    for _ in range(max_passes):
        improved = False
        for i in range(-1, n - 2):
            b = order[i + 1]
            c = order[i + 2 :]  # o_j for j = i+2 .. n-1
            after = order[i + 3 :]  # o_j+1 for all but the last j
            gain = np.zeros(c.size)
            if i >= 0:
                gain += distances[order[i], b] - distances[order[i], c]
            gain[:-1] += distances[c[:-1], after] - distances[b, after]
            best = int(np.argmax(gain))
            old = (distances[order[i], b] if i >= 0 else 0.0) + (
                distances[c[best], after[best]] if best < after.size else 0.0
            )
            if gain[best] > 1e-12 * max(float(old), 1e-300):
                j = i + 2 + best
                order[i + 1 : j + 1] = order[i + 1 : j + 1][::-1].copy()
                improved = True
        if not improved:
            break
    return order


def spectral_coordinate(graph: csr_array) -> np.ndarray:
    """The Fiedler vector of a connected weighted graph's normalised Laplacian (Gaussian
    affinities ``exp(-d^2 / sigma^2)``, ``sigma`` the median edge length), sign fixed so its
    first entry is at most 0: a one-dimensional embedding in which graph neighbours sit
    close (Laplacian eigenmaps with m = 1). ``graph``: a scipy sparse array or matrix,
    square, symmetric and connected, with weights finite and > 0 (``ValueError``)."""
    return _spectral_coordinate(_checked_graph(graph, connected=True, symmetric=True))


def _spectral_coordinate(graph: csr_array) -> np.ndarray:
    """:func:`spectral_coordinate` of a sparse graph. No checks are performed."""
    n = graph.shape[0]
    if n <= 2:
        return np.linspace(-1.0, 1.0, n)
    return _spectral_embedding(graph, 1)[:, 0]


def spectral_embedding(graph: csr_array, dimensions: int) -> np.ndarray:
    """Laplacian eigenmaps: ``(n, m)`` coordinates, the eigenvectors ``2 .. m + 1`` of a
    connected weighted graph's normalised Laplacian (Gaussian affinities ``exp(-d^2 /
    sigma^2)``, ``sigma`` the median edge length), mapped back by ``D^-1/2``, each column's
    sign fixed so its first entry is at most 0. ``graph`` as for :func:`spectral_coordinate`;
    ``dimensions`` an integer ``1 <= m <= n - 2`` (``ValueError`` naming either)."""
    graph = _checked_graph(graph, connected=True, symmetric=True)
    return _spectral_embedding(graph, _checked_dimensions(dimensions, graph.shape[0], "graph"))


def _checked_dimensions(dimensions, n: int, what: str) -> int:
    """``dimensions`` as an int in ``1 .. n - 2`` (Laplacian eigenmaps of ``what``'s ``n`` nodes)."""
    dimensions = check_count(dimensions, "dimensions", 1)
    if dimensions > n - 2:
        raise ValueError(
            f"dimensions must be at most n - 2 = {n - 2} for eigenmaps of {what}'s {n} nodes, "
            f"got {dimensions}"
        )
    return dimensions


def _spectral_embedding(graph: csr_array, dimensions: int) -> np.ndarray:
    """:func:`spectral_embedding` of a sparse graph (``m`` columns for ``m <= n - 2``, fewer
    past ``n - 1``). No checks are performed."""
    from scipy.sparse import csr_array
    from scipy.sparse.linalg import eigsh

    n = graph.shape[0]
    edges = graph.tocoo()
    lengths = edges.data[edges.data > 1e-300]  # duplicates' edges (1e-300) would make sigma ~0
    sigma = float(np.median(lengths)) if lengths.size else 1.0
    affinity = csr_array((np.exp(-((edges.data / sigma) ** 2)), (edges.row, edges.col)), shape=(n, n))
    degree = np.asarray(affinity.sum(axis=1)).ravel()
    scale = 1.0 / np.sqrt(np.maximum(degree, 1e-300))
    normalised = affinity.multiply(scale[:, None]).multiply(scale[None, :]).tocsr()
    if n <= 200:  # dense is faster and exact
        vectors = np.linalg.eigh(normalised.toarray())[1][:, ::-1][:, 1 : dimensions + 1]
    else:
        # shift-invert just above the top eigenvalue (1): the leading eigenvalues of a
        # smooth manifold's graph lie within ~1e-7 of each other, where plain Lanczos
        # (which="LA") did not converge on a 1-D curve of 300-2,000 points
        values, vectors = eigsh(
            normalised, k=dimensions + 1, sigma=1.0 + 1e-6, which="LM", v0=np.full(n, 1.0 / np.sqrt(n))
        )
        vectors = vectors[:, np.argsort(-values)[1:]]
    coordinates = vectors * scale[:, None]  # back from the normalised problem: D^-1/2 v
    return coordinates * np.where(coordinates[0] > 0, -1.0, 1.0)


def mds_embedding(distances: np.ndarray, dimensions: int) -> np.ndarray:
    """Classical multidimensional scaling: ``(n, m)`` coordinates whose Euclidean distances
    best match ``distances`` (the top ``m`` eigenpairs of the double-centred ``-D^2 / 2``;
    Isomap when ``distances`` are geodesic), each column's sign fixed so its first entry is
    at most 0. Directions with no spread get coordinate 0. The distances are divided by a
    power of two near the largest before squaring (no overflow). ``distances`` must be square,
    finite and >= 0, ``dimensions`` an integer in ``1 ..`` :data:`MAX_POINTS` (``ValueError``
    naming either)."""
    distances = _checked_distances(distances, remedy=" (classical MDS needs every distance)")
    return _mds_embedding(distances, check_count(dimensions, "dimensions", 1, MAX_POINTS))


def _mds_embedding(distances: np.ndarray, dimensions: int) -> np.ndarray:
    """:func:`mds_embedding` of a square float64 matrix, finite. No checks are performed."""
    n = distances.shape[0]
    scale = _power_of_two_scale(float(np.max(distances, initial=0.0)))
    squared = (distances / scale) ** 2
    centred = -0.5 * (squared - squared.mean(axis=0) - squared.mean(axis=1)[:, None] + squared.mean())
    values, vectors = np.linalg.eigh((centred + centred.T) / 2)
    top = np.argsort(-values, kind="stable")[:dimensions]
    coordinates = vectors[:, top] * np.sqrt(np.maximum(values[top], 0.0)) * scale
    if coordinates.shape[1] < dimensions:
        coordinates = np.pad(coordinates, ((0, 0), (0, dimensions - coordinates.shape[1])))
    return coordinates * np.where(coordinates[0] > 0, -1.0, 1.0) if n else coordinates


def hull_design(sites: np.ndarray, count: int, *, include: bool = False, candidates: int = 32) -> np.ndarray:
    """``count`` points spread over the convex hull of ``sites`` (``(K, m)``; sites that span
    fewer than ``m`` dimensions, a flat hull, get their bounding box instead): a greedy
    maximin design (each new point the candidate farthest from those chosen) over
    ``candidates * count`` points (fewer per point past 4,096 points) of a scrambled Sobol
    sequence (fixed seed) inside the hull (topped up with points drawn uniformly from the
    hull's simplices, fixed seed, when too few of 2^20 Sobol points fall inside a thin
    hull), started from the hull's vertices, or from the distinct ``sites`` when
    ``include`` (then the design holds every distinct site when there are at most
    ``count``, else the first ``count`` in the order given). In one dimension the hull is
    an interval and the points are Chebyshev points of the second kind on it (with
    ``include`` and at most ``count`` distinct sites, those nearest the sites moved onto
    them, :func:`snap_to`). The result is ordered along a short open path
    (:func:`chain_order`; two 2-opt sweeps past 2,000 points), so that points with
    neighbouring indices are neighbours in space. The greedy pass keeps each pool point's
    squared distance to the design and updates it one coordinate at a time,
    ``O(count * pool * m)``. ``count`` is an integer in ``1 ..``
    :data:`MAX_POINTS`, ``candidates`` one >= 1, ``include`` a bool, ``sites`` real and
    finite with a site and a coordinate at least (``ValueError`` naming the one that is
    not). Deterministic."""
    sites = _finite_array(sites, "sites", 2)
    if 0 in sites.shape:
        raise ValueError(f"sites must have at least one site and one coordinate, got shape {sites.shape}")
    count = check_count(count, "count", 1)
    check_size(count, "count")
    include = check_flag(include, "include")
    return _hull_design(sites, count, include=include, candidates=check_count(candidates, "candidates", 1))


def _hull_design(sites: np.ndarray, count: int, *, include: bool = False, candidates: int = 32) -> np.ndarray:
    """:func:`hull_design` of float64 ``(K, m)`` sites and a Python int ``count``. No checks are
    performed."""
    from scipy.spatial import Delaunay, QhullError, cKDTree

    k, m = sites.shape
    if m == 1:
        low, high = float(sites.min()), float(sites.max())
        points = low + (high - low) * (1 - np.cos(np.pi * np.arange(count) / max(count - 1, 1))) / 2
        ordered = np.unique(sites[:, 0])  # sorted, each distinct site once
        if include and ordered.size <= count and high > low:  # the nearest points moved onto them
            points[np.searchsorted(points, _snap_to(ordered, points))] = ordered
        return np.sort(points)[:, None]
    try:
        hull = Delaunay(sites)
        vertices = np.unique(hull.convex_hull)
    except QhullError:  # a flat hull: fall back to the bounding box
        hull, vertices = None, np.arange(k)
    low, high = sites.min(axis=0), sites.max(axis=0)
    candidates = min(candidates, max(4, 2**17 // count))  # the greedy pass is O(count * pool)
    need = candidates * count
    power = int(np.ceil(np.log2(max(need, 256))))
    while True:  # more Sobol points until enough fall inside the hull (or 2^20 were drawn)
        pool = low + (high - low) * _sobol(m, power)
        if hull is not None:
            pool = pool[hull.find_simplex(pool) >= 0]
        if len(pool) >= need or power >= 20:
            break
        power += 1
    if len(pool) < need:  # a thin hull: few Sobol points fall inside it
        pool = np.r_[pool, _uniform_in_hull(sites, hull, need - len(pool))]
    pool = pool[:need]
    if include:  # each distinct site once, in the order given
        start = sites[np.sort(np.unique(sites, axis=0, return_index=True)[1])]
    else:
        start = sites[vertices]
    chosen = [*start[:count]]
    nearest = cKDTree(np.asarray(chosen)).query(pool)[0] ** 2
    columns = [np.ascontiguousarray(pool[:, j]) for j in range(m)]  # squared distances to one
    gap, step = np.empty(len(pool)), np.empty(len(pool))  # point, a coordinate at a time
    while len(chosen) < count:
        best = int(np.argmax(nearest))
        chosen.append(pool[best])
        np.subtract(columns[0], pool[best, 0], out=gap)
        np.multiply(gap, gap, out=step)
        for j in range(1, m):
            np.subtract(columns[j], pool[best, j], out=gap)
            step += gap * gap
        np.minimum(nearest, step, out=nearest)
    design = np.asarray(chosen)
    design = design[np.lexsort(design.T[::-1])]  # a canonical order first: the path then
    passes = 50 if count <= 2_000 else 2  # a rough path is enough for thousands of workers
    return design[_chain_order(_pairwise_distances(design), max_passes=passes)]  # the set alone


@functools.lru_cache(maxsize=16)
def _sobol(dimensions: int, power: int) -> np.ndarray:
    """The first ``2^power`` points of the scrambled Sobol sequence (seed 0) in [0, 1)^m,
    read-only and kept: scrambling the engine costs ~50 ms, every thin-plate bind needs it."""
    from scipy.stats import qmc

    points = qmc.Sobol(dimensions, scramble=True, seed=0).random_base2(power)
    points.flags.writeable = False
    return points


def _uniform_in_hull(sites: np.ndarray, hull, count: int) -> np.ndarray:
    """``count`` points drawn uniformly from the convex hull (a Delaunay triangulation of
    ``sites``): a simplex chosen by volume, then flat Dirichlet weights on its vertices."""
    rng = np.random.default_rng(0)
    corners = sites[hull.simplices]  # (simplices, m + 1, m)
    volumes = np.abs(np.linalg.det(corners[:, 1:] - corners[:, :1]))
    chosen = rng.choice(len(corners), size=count, p=volumes / volumes.sum())
    weights = rng.dirichlet(np.ones(sites.shape[1] + 1), size=count)
    return np.einsum("tv,tvm->tm", weights, corners[chosen])


def snap_to(positions: np.ndarray, targets: np.ndarray) -> np.ndarray:
    """The sorted ``positions`` (``K``) moved to distinct ``targets`` (``N >= K``) in the
    same order, with the least total displacement ``sum_k |targets[j_k] - positions[k]|``
    over ``j_1 < ... < j_K`` (dynamic programming; ties to the lowest targets).

    Position ``k`` (0-based) only ever goes to a target within ``k`` places right of the
    first target ``>= x_k``, or ``K - 1 - k`` places left of the last ``<= x_k``: further out,
    some target in between is free and moving the block of positions there one place
    back lowers the cost. So each position has a window of at most ``K + 2`` targets and
    the work and memory are ``O(K min(K, N))``, not ``O(K N)``.

    ``positions`` sorted, ``targets`` in any order, no fewer: 1-D, real and finite
    (``ValueError`` naming the one that is not)."""
    positions = _finite_array(positions, "positions", 1)
    targets = _finite_array(targets, "targets", 1)
    if np.any(np.diff(positions) < 0):
        raise ValueError("positions must be sorted (non-decreasing)")
    if targets.size < positions.size:
        raise ValueError(
            f"targets must be at least as many as positions: {targets.size} targets for "
            f"{positions.size} positions"
        )
    if positions.size == 0:
        return np.zeros(0)
    return _snap_to(positions, targets)


def _snap_to(positions: np.ndarray, targets: np.ndarray) -> np.ndarray:
    """:func:`snap_to` of sorted float64 ``positions`` (at least one) and no fewer
    ``targets``. No checks are performed."""
    positions = np.asarray(positions, dtype=np.float64)
    targets = np.sort(np.asarray(targets, dtype=np.float64))
    k, n = positions.size, targets.size
    index = np.arange(k)
    low = np.maximum(index, np.searchsorted(targets, positions, side="right") - 1 - (k - 1 - index))
    high = np.minimum(n - k + index, np.searchsorted(targets, positions, side="left") + index)
    windows = [np.arange(low[i], high[i] + 1) for i in range(k)]
    cost = np.abs(positions[0] - targets[windows[0]])
    choices = [np.zeros(0, dtype=np.intp)]  # choices[i][w]: where position i-1 went, i at windows[i][w]
    for i in range(1, k):
        previous, window = windows[i - 1], windows[i]
        best = np.minimum.accumulate(cost)  # best[w]: position i-1 at a target <= previous[w]
        lower = np.r_[True, cost[1:] < best[:-1]]  # a new running minimum at w
        where = np.maximum.accumulate(np.where(lower, np.arange(cost.size), 0))  # its argmin
        before = np.searchsorted(previous, window, side="left")  # how many of previous lie below
        new = np.full(window.size, np.inf)
        choice = np.zeros(window.size, dtype=np.intp)
        fits = before > 0
        new[fits] = best[before[fits] - 1] + np.abs(positions[i] - targets[window[fits]])
        choice[fits] = previous[where[before[fits] - 1]]
        choices.append(choice)
        cost = new
    placed = np.empty(k, dtype=np.intp)
    placed[-1] = windows[-1][int(np.argmin(cost))]
    for i in range(k - 1, 0, -1):
        placed[i - 1] = choices[i][placed[i] - windows[i][0]]
    return targets[placed]


class Reference:
    """A reference set of unlabelled samples for geodesic distances and a spectral
    coordinate, prepared once: its points (flattened, float64), its own k-nearest-neighbour
    graph (components joined by their shortest links; ``components``: how many it had)
    and (lazily) its Fiedler coordinate.

    ``samples``: ``M`` samples ``(M, ...)``, ``2 <= M <=`` :data:`MAX_POINTS`, real and
    finite, whose distances do not overflow float64; ``neighbours``: an integer >= 1 (``M -
    1`` are used when it is more). The methods take inputs ``(K, D)`` with ``K >= 1`` and
    ``D`` the samples' flattened size. Anything else raises ``ValueError`` naming the
    argument."""

    def __init__(self, samples, neighbours: int):
        points = check_real_array(samples, "samples")
        if points.ndim == 0 or points.shape[0] < 2:
            raise ValueError(f"samples must hold at least 2 samples (M, ...), got shape {points.shape}")
        check_size(points.shape[0], "samples")
        if not np.all(np.isfinite(points)):
            raise ValueError("samples contains NaN or inf")
        self._prepare(
            points.reshape(points.shape[0], -1), check_count(neighbours, "neighbours", 1), "samples"
        )

    @classmethod
    def _of_points(cls, points: np.ndarray, neighbours: int, name: str) -> Reference:
        """The reference of float64 ``points`` ``(M, D)``, ``M >= 2``, finite, and an int
        ``neighbours >= 1``. No checks are performed but the overflow of the distances
        (``ValueError`` naming ``name``)."""
        reference = cls.__new__(cls)
        reference._prepare(points, neighbours, name)
        return reference

    def _prepare(self, points: np.ndarray, neighbours: int, name: str) -> None:
        self.points = np.asarray(points, dtype=np.float64).reshape(len(points), -1)
        self.neighbours = neighbours
        self._peak = float(np.max(np.abs(self.points), initial=0.0))  # for the inputs' check
        distances = _pairwise_distances(self.points)
        if not np.all(np.isfinite(distances)):
            raise ValueError(f"{name}: its samples' distances overflow float64 (values near 1e308)")
        self.graph, self.components = _joined_knn_graph(distances, neighbours)
        self._coordinate = None
        self._embeddings = {}

    def _checked_inputs(self, inputs) -> np.ndarray:
        """``inputs`` as float64 ``(K, D)``, K >= 1, finite, of the samples' width ``D``, whose
        distances to the samples cannot overflow."""
        inputs = _finite_array(inputs, "inputs", 2)
        width = self.points.shape[1]
        if inputs.shape[0] < 1 or inputs.shape[1] != width:
            raise ValueError(
                f"inputs must have shape (K, {width}), K >= 1: rows of the samples' flattened "
                f"size, got {inputs.shape}"
            )
        check_size(inputs.shape[0], "inputs")
        _check_magnitude(inputs, "inputs", "their distances to the samples overflow float64", self._peak)
        return inputs

    @property
    def coordinate(self) -> np.ndarray:
        if self._coordinate is None:
            self._coordinate = _spectral_coordinate(self.graph)
        return self._coordinate

    def embedding(self, dimensions: int) -> np.ndarray:
        """The reference's Laplacian eigenmap, ``(M, m)`` (computed once per ``m``), ``1 <= m
        <= M - 2``."""
        return self._embedding(_checked_dimensions(dimensions, self.points.shape[0], "the samples"))

    def _embedding(self, dimensions: int) -> np.ndarray:
        if dimensions not in self._embeddings:
            self._embeddings[dimensions] = _spectral_embedding(self.graph, dimensions)
        return self._embeddings[dimensions]

    def geodesic_distances(self, inputs: np.ndarray) -> np.ndarray:
        """``(K, K)`` shortest-path distances between the inputs through the reference's
        graph joined with them (:meth:`geodesics`, without the count)."""
        return self._geodesics(self._checked_inputs(inputs))[0]

    def geodesics(self, inputs: np.ndarray) -> tuple[np.ndarray, int]:
        """``(distances, components)``: the ``(K, K)`` shortest-path distances between the
        inputs through the reference's graph joined with them, and how many components that
        joined graph had. Each input is linked to its ``neighbours`` nearest points among
        the reference samples and the other inputs together, so that two inputs are linked
        directly only when they are near each other. A cluster of inputs nearer each other
        than to any sample (near-duplicates) links only among itself: such pieces are joined
        to the rest by their shortest links (:func:`join_components`), so every distance is
        finite (``components`` > 1 says this happened)."""
        return self._geodesics(self._checked_inputs(inputs))

    def _geodesics(self, inputs: np.ndarray) -> tuple[np.ndarray, int]:
        """:meth:`geodesics` of float64 ``(K, D)`` inputs. No checks are performed."""
        from scipy.sparse import csr_array
        from scipy.sparse.csgraph import shortest_path

        k, m = inputs.shape[0], self.points.shape[0]
        to_all = np.concatenate(
            [_pairwise_distances(inputs, self.points), _pairwise_distances(inputs)], axis=1
        )
        to_all[np.arange(k), m + np.arange(k)] = np.inf  # not its own neighbour
        count = min(self.neighbours, m + k - 1)
        nearest = np.argpartition(to_all, count - 1, axis=1)[:, :count]
        rows = m + np.repeat(np.arange(k), count)  # nodes 0..m-1: the reference; then the inputs
        cols = nearest.ravel()
        weights = np.maximum(to_all[rows - m, cols], 1e-300)
        links = csr_array((weights, (rows, cols)), shape=(m + k, m + k))
        reference = self.graph.tocoo()
        base = csr_array((reference.data, (reference.row, reference.col)), shape=(m + k, m + k))
        graph = base.maximum(links).maximum(links.T)
        graph, components = _join_components(graph, to_all, rows=m + np.arange(k))
        distances = shortest_path(graph, method="D", directed=False, indices=m + np.arange(k))[:, m:]
        return distances, components

    def coordinate_of(self, inputs: np.ndarray) -> np.ndarray:
        """The reference's spectral coordinate extended to new inputs: the average over each
        input's nearest reference points, weighted by Gaussian affinity (Nystrom-style)."""
        return self._coordinate_of(self._checked_inputs(inputs))

    def _coordinate_of(self, inputs: np.ndarray) -> np.ndarray:
        return self._extend(inputs, self.coordinate[:, None])[:, 0]

    def embedding_of(self, inputs: np.ndarray, dimensions: int) -> np.ndarray:
        """The reference's ``m``-dimensional eigenmap extended to new inputs, as
        :meth:`coordinate_of` extends the first coordinate (``1 <= m <= M - 2``)."""
        inputs = self._checked_inputs(inputs)
        return self._embedding_of(
            inputs, _checked_dimensions(dimensions, self.points.shape[0], "the samples")
        )

    def _embedding_of(self, inputs: np.ndarray, dimensions: int) -> np.ndarray:
        return self._extend(inputs, self._embedding(dimensions))

    def _extend(self, inputs: np.ndarray, values: np.ndarray) -> np.ndarray:
        to_reference = _pairwise_distances(inputs, self.points)
        count = min(self.neighbours, self.points.shape[0])
        nearest = np.argpartition(to_reference, count - 1, axis=1)[:, :count]
        d = np.take_along_axis(to_reference, nearest, axis=1)
        sigma = np.maximum(np.median(d, axis=1, keepdims=True), 1e-300)
        w = np.exp(-((d / sigma) ** 2))
        return np.einsum("kj,kjm->km", w, values[nearest]) / np.sum(w, axis=1)[:, None]


def arc_positions(gaps: np.ndarray, points: np.ndarray) -> np.ndarray:
    """Parameters for a path with consecutive gaps ``gaps`` (``K - 1`` lengths >= 0): the
    normalised arc length ``s`` in [0, 1] mapped through the piecewise-linear map that sends
    ``s = k / (K - 1)`` to the sorted ``points[k]``, so equal gaps give back ``points``.
    Zero or tiny gaps are widened to 1e-3 of the mean gap, so positions stay distinct; all
    gaps zero give ``points`` back. ``points``: one or more, real and finite; ``gaps``:
    ``K - 1`` of them, finite and >= 0 (``ValueError`` naming the one that is not)."""
    points = _finite_array(points, "points", 1)
    if points.size == 0:
        raise ValueError("points must hold at least one point")
    gaps = _finite_array(gaps, "gaps", 1)
    if gaps.size != points.size - 1:
        raise ValueError(f"gaps must hold K - 1 = {points.size - 1} lengths for K points, got {gaps.size}")
    if np.any(gaps < 0):
        raise ValueError(f"gaps must be >= 0, got {float(np.min(gaps))!r}")
    return _arc_positions(gaps, points)


def _arc_positions(gaps: np.ndarray, points: np.ndarray) -> np.ndarray:
    """:func:`arc_positions` of ``K - 1`` float64 gaps, finite and >= 0, and ``K >= 1``
    points. No checks are performed."""
    points = np.sort(np.asarray(points, dtype=np.float64))
    count = points.size
    gaps = np.asarray(gaps, dtype=np.float64)
    if count == 1:
        return points.copy()
    gaps = gaps / _power_of_two_scale(float(np.max(gaps, initial=0.0)))  # exact; the sum cannot overflow
    total = float(np.sum(gaps))
    if not total > 0.0:
        return points.copy()
    gaps = np.maximum(gaps, 1e-3 * total / gaps.size)
    s = np.r_[0.0, np.cumsum(gaps)] / np.sum(gaps)
    return np.interp(s * (count - 1), np.arange(count), points)


# -- layout objects: what ManifoldGCC(layout=...) takes -------------------------------------

SPACINGS = ("arc", "centripetal", "rank")
EMBEDDINGS = ("isomap", "eigenmaps")


def _checked_reference(reference) -> np.ndarray:
    """``reference`` (``(M, ...)``, ``2 <= M <=`` :data:`MAX_POINTS`, real and finite) as
    read-only float64 rows ``(M, D)``; ``ValueError`` naming ``reference`` otherwise."""
    try:
        rows = len(reference) if hasattr(reference, "__len__") and np.ndim(reference) > 0 else -1
    except ValueError:  # numpy refuses ragged nested lists
        raise ValueError(
            f"reference must be an array of samples of one shape (M, ...), got a ragged {reference!r:.80}"
        ) from None
    if rows < 2:
        raise ValueError(f"reference must hold at least 2 samples (M, ...), got {reference!r:.80}")
    check_size(rows, "reference")
    array = _arraylib.check_inputs(reference, rows, "reference")
    if _arraylib.is_complex(array):
        raise ValueError(f"reference must hold real numbers, got dtype {array.dtype}")
    array = _arraylib.to_float64(array)
    if array is reference:  # never share (nor freeze) the caller's array
        array = array.copy()
    array.flags.writeable = False
    return array


class BatchLayout:
    """The options of one layout design (the base of :class:`ChainLayout`,
    :class:`SpectralLayout`, :class:`PCALayout`, :class:`RowOrderLayout` and
    :class:`ThinPlateLayout`).

    Every design takes ``reference`` and ``neighbours``:

    reference : array_like, optional
        Unlabelled samples shaped like the inputs, ``(M, ...)``, ``2 <= M <=``
        :data:`MAX_POINTS`, real and finite. Prepared once, when the object is built (its
        own k-nearest-neighbour graph): distances become geodesic (shortest paths through the
        reference's graph joined with the batch), and the spectral order and eigenmaps
        extend the reference's to the inputs. Held as read-only float64 rows ``(M, D)``.
    neighbours : int, default 10
        k of the k-nearest-neighbour graphs (the reference's, the batch joined to it, and the
        batch's own for the spectral order and eigenmaps), >= 1.

    Layout objects are immutable; two are equal when they are of one type with equal options.
    :meth:`get_params` returns the options (``type(layout)(**layout.get_params())`` builds an
    equal one).
    """

    #: the design's name, as ``ManifoldGCC(layout=name)`` takes it
    design = ""

    def __init__(self, *, reference=None, neighbours: int = 10):
        self.neighbours = check_count(neighbours, "neighbours", 1)
        self.reference = None if reference is None else _checked_reference(reference)
        self._reference = (
            None
            if self.reference is None
            else Reference._of_points(self.reference, self.neighbours, "reference")
        )
        self._frozen = True

    def __setattr__(self, name, value):
        if self.__dict__.get("_frozen", False):
            raise AttributeError(f"{type(self).__name__} is immutable: build a new one with other options")
        object.__setattr__(self, name, value)

    def get_params(self) -> dict:
        """The options, by name, as the constructor takes them."""
        names = [name for name in inspect.signature(type(self).__init__).parameters if name != "self"]
        return {name: getattr(self, name) for name in names}

    def _key(self) -> tuple:
        return tuple(
            (name, None if value is None else (value.shape, value.tobytes()))
            if name == "reference"
            else (name, value)
            for name, value in self.get_params().items()
        )

    def __eq__(self, other) -> bool:
        return type(other) is type(self) and self._key() == other._key()

    def __hash__(self) -> int:
        return hash((type(self), self._key()))

    def __repr__(self) -> str:
        shown = []
        for name, parameter in inspect.signature(type(self).__init__).parameters.items():
            value = getattr(self, name, None)
            if name == "self" or (value is None if name == "reference" else value == parameter.default):
                continue
            shown.append(
                f"{name}=<{value.shape[0]} x {value.shape[1]}>"
                if name == "reference"
                else f"{name}={value!r}"
            )
        return f"{type(self).__name__}({', '.join(shown)})"


class _LineLayout(BatchLayout):
    """A design that orders the batch on GCC's line, then spaces it."""

    def __init__(self, *, spacing: str = "arc", reference=None, neighbours: int = 10):
        self.spacing = check_choice(spacing, "spacing", SPACINGS)
        super().__init__(reference=reference, neighbours=neighbours)


_SPACING_DOC = """
    spacing : {"arc", "centripetal", "rank"}, default "arc"
        How far apart the ordered inputs' points are: ``"arc"``, gaps proportional to the
        distances between consecutive inputs (chord-length parametrisation), warped through
        GCC's own data points so that equal distances reproduce them; ``"centripetal"``,
        proportional to the distances' square roots; ``"rank"``, GCC's points in the found
        order.
    reference, neighbours
        As for :class:`BatchLayout`."""


class ChainLayout(_LineLayout):
    __doc__ = (
        """The inputs ordered along a short open path through them (nearest-neighbour chains
    improved by 2-opt), on Euclidean distances, or on geodesic ones through the
    ``reference``'s graph when one is given; then spaced on GCC's line. The default layout
    of :class:`~codedcomputing.ManifoldGCC`.

    Parameters
    ----------"""
        + _SPACING_DOC
    )

    design = "chain"


class SpectralLayout(_LineLayout):
    __doc__ = (
        """The inputs ordered by the Fiedler vector of a k-nearest-neighbour graph: the
    reference's, extended to the inputs, when a ``reference`` is given; else the batch's own.
    Then spaced on GCC's line.

    Parameters
    ----------"""
        + _SPACING_DOC
    )

    design = "spectral"


class PCALayout(_LineLayout):
    __doc__ = (
        """The inputs ordered by their first principal component, then spaced on GCC's line
    (by geodesic distances when a ``reference`` is given).

    Parameters
    ----------"""
        + _SPACING_DOC
    )

    design = "pca"


class RowOrderLayout(_LineLayout):
    __doc__ = (
        """The inputs in the batch's own row order (standard GCC's), spaced on GCC's line
    (``spacing="rank"``: GCC's own points).

    Parameters
    ----------"""
        + _SPACING_DOC
    )

    design = "none"


class ThinPlateLayout(BatchLayout):
    """The inputs embedded in ``dimensions`` coordinates, scaled into [-1, 1]^m; the workers
    get sites spread over the inputs' convex hull; thin-plate smoothing splines are the
    encoder and decoder (:class:`~codedcomputing.codes.manifold.ThinPlateCode`).

    Parameters
    ----------
    dimensions : int, default 2
        m, the embedding's dimension, >= 1 (at most K - 1 are used, and directions in which
        the batch does not spread are dropped).
    embedding : {"isomap", "eigenmaps"}, default "isomap"
        ``"isomap"``: classical MDS of the distances (geodesic through the ``reference`` when
        one is given); ``"eigenmaps"``: Laplacian eigenmaps of the batch's
        k-nearest-neighbour graph, or the reference's extended to the inputs.
    reference, neighbours
        As for :class:`BatchLayout`.
    """

    design = "thin-plate"

    def __init__(
        self, *, dimensions: int = 2, embedding: str = "isomap", reference=None, neighbours: int = 10
    ):
        self.dimensions = check_count(dimensions, "dimensions", 1)
        self.embedding = check_choice(embedding, "embedding", EMBEDDINGS)
        super().__init__(reference=reference, neighbours=neighbours)


#: The layouts by name: ``ManifoldGCC(layout=name)`` is ``ManifoldGCC(layout=LAYOUTS[name]())``.
LAYOUTS = {
    kind.design: kind for kind in (ChainLayout, SpectralLayout, PCALayout, ThinPlateLayout, RowOrderLayout)
}


def as_layout(layout) -> BatchLayout:
    """``layout`` (a layout object, or a name of :data:`LAYOUTS`) as a layout object;
    ``ValueError`` naming ``layout`` otherwise."""
    if type(layout) in LAYOUTS.values():
        return layout
    if isinstance(layout, str) and layout in LAYOUTS:
        return LAYOUTS[layout]()
    raise ValueError(
        f"layout must be a layout object ({', '.join(k.__name__ + '()' for k in LAYOUTS.values())}) "
        f"or one of the names {', '.join(LAYOUTS)}; got {layout!r:.80}"
    )
