"""Where a batch's inputs sit on the code's line: orders and spacings that follow the data.

GCC puts input ``k`` at ``alpha_k`` and passes a spline through the inputs in that order; the
workers evaluate ``f`` at points of that curve. When consecutive inputs are unrelated (a
batch in the order it was drawn), the curve jumps across the input space and the coded
inputs lie far from the data. These functions choose, for one batch:

- an **order** of the inputs along the data: :func:`chain_order` (a short open path through
  them, the travelling-salesman heuristic of a nearest-neighbour chain improved by 2-opt),
  :func:`spectral_coordinate` (the Fiedler vector of a k-nearest-neighbour graph, with an
  out-of-sample extension to new inputs when the graph is built on a reference set), or the
  first principal component;
- a **spacing**: consecutive inputs ``d`` apart along the order get parameters whose gaps are
  proportional to ``d`` (chord-length parametrisation, the standard choice for fitting a
  spline curve through points in space), warped through the code's own data points so that
  equal gaps reproduce them (:func:`arc_positions`).

Distances are Euclidean in the flattened input space, or geodesic (shortest paths in a
k-nearest-neighbour graph over the inputs and a reference set of unlabelled samples) when a
reference is given, so that even K = 10 inputs are ordered by the data's manifold rather than
by straight lines between them. Everything is deterministic and computed in float64.
"""

from __future__ import annotations

import numpy as np
from scipy.sparse import csr_array
from scipy.sparse.csgraph import connected_components, shortest_path
from scipy.sparse.linalg import eigsh

__all__ = [
    "Reference",
    "arc_positions",
    "chain_order",
    "knn_graph",
    "pairwise_distances",
    "path_length",
    "spectral_coordinate",
]


def pairwise_distances(a: np.ndarray, b: np.ndarray | None = None) -> np.ndarray:
    """Euclidean distances between the rows of ``a`` and of ``b`` (``a`` itself if ``None``),
    from one matrix product (``||a||^2 + ||b||^2 - 2 a b^T``, clipped at 0)."""
    b = a if b is None else b
    squared = np.sum(a * a, axis=1)[:, None] + np.sum(b * b, axis=1)[None, :] - 2.0 * (a @ b.T)
    np.maximum(squared, 0.0, out=squared)
    if b is a:
        np.fill_diagonal(squared, 0.0)
    return np.sqrt(squared)


def knn_graph(distances: np.ndarray, neighbours: int) -> csr_array:
    """The symmetric k-nearest-neighbour graph of a square distance matrix (edge weights: the
    distances), with its components joined by their shortest links so that every geodesic
    is finite."""
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
    graph = graph.maximum(graph.T)
    count, labels = connected_components(graph, directed=False)
    while count > 1:  # join the component of node 0 to its nearest other component
        inside = labels == labels[0]
        block = masked[np.ix_(inside, ~inside)]
        i, j = np.unravel_index(np.argmin(block), block.shape)
        a, b = np.flatnonzero(inside)[i], np.flatnonzero(~inside)[j]
        link = csr_array(([max(distances[a, b], 1e-300)] * 2, ([a, b], [b, a])), shape=(n, n))
        graph = graph.maximum(link)
        count, labels = connected_components(graph, directed=False)
    return graph


def path_length(distances: np.ndarray, order: np.ndarray) -> float:
    """The length of the open path visiting the points in ``order``."""
    return float(np.sum(distances[order[:-1], order[1:]]))


def chain_order(distances: np.ndarray, *, starts: int = 64, max_passes: int = 50) -> np.ndarray:
    """A short open path through all points of a square distance matrix: the best greedy
    nearest-neighbour chain over up to ``starts`` starting points (all of them for small
    batches; otherwise the points farthest from the others first), improved by 2-opt
    (reversing a stretch of the path whenever that shortens it) until no reversal helps or
    ``max_passes`` sweeps are done. ``O(starts K^2 + passes K^2)``."""
    n = distances.shape[0]
    if n <= 2:
        return np.arange(n)
    if n <= starts:
        candidates = np.arange(n)
    else:  # outer points first: an open path's ends lie at the data's extremes
        candidates = np.argsort(-distances.sum(axis=1), kind="stable")[:starts]
    best, best_length = None, np.inf
    for start in candidates:
        order = _greedy_chain(distances, int(start))
        length = path_length(distances, order)
        if best is None or length < best_length * (1.0 - 1e-12):  # ties: the first start
            best, best_length = order, length
    return _two_opt(distances, best, max_passes)


def _greedy_chain(distances: np.ndarray, start: int) -> np.ndarray:
    n = distances.shape[0]
    visited = np.zeros(n, dtype=bool)
    order = np.empty(n, dtype=np.intp)
    order[0], visited[start] = start, True
    for step in range(1, n):
        row = np.where(visited, np.inf, distances[order[step - 1]])
        order[step] = int(np.argmin(row))
        visited[order[step]] = True
    return order


def _two_opt(distances: np.ndarray, order: np.ndarray, max_passes: int) -> np.ndarray:
    """2-opt for an open path: reverse ``order[i+1 .. j]`` when ``d(o_i, o_j) + d(o_i+1,
    o_j+1) < d(o_i, o_i+1) + d(o_j, o_j+1)`` (a missing ``o_j+1`` past the end costs 0),
    and reverse a prefix when that shortens the path; one vectorised scan per ``i``."""
    order = order.copy()
    n = order.size
    for _ in range(max_passes):
        improved = False
        for i in range(-1, n - 2):
            a = order[i] if i >= 0 else None
            b = order[i + 1]
            j = np.arange(i + 2, n)
            c = order[j]
            d = np.r_[order[j[:-1] + 1], -1]  # j ends at n - 1, which has no successor
            has_d = d >= 0
            old = (distances[a, b] if a is not None else 0.0) + np.where(
                has_d, distances[c, np.maximum(d, 0)], 0.0
            )
            new = (distances[a, c] if a is not None else 0.0) + np.where(
                has_d, distances[b, np.maximum(d, 0)], 0.0
            )
            gain = old - new
            best = int(np.argmax(gain))
            if gain[best] > 1e-12 * max(float(old[best]), 1e-300):
                order[i + 1 : j[best] + 1] = order[i + 1 : j[best] + 1][::-1].copy()
                improved = True
        if not improved:
            break
    return order


def spectral_coordinate(graph: csr_array) -> np.ndarray:
    """The Fiedler vector of a connected weighted graph's normalised Laplacian (Gaussian
    affinities ``exp(-d^2 / sigma^2)``, ``sigma`` the median edge length), sign fixed so its
    first entry is at most 0: a one-dimensional embedding in which graph neighbours sit
    close (Laplacian eigenmaps with m = 1)."""
    n = graph.shape[0]
    if n <= 2:
        return np.linspace(-1.0, 1.0, n)
    edges = graph.tocoo()
    sigma = float(np.median(edges.data)) or 1.0
    affinity = csr_array((np.exp(-((edges.data / sigma) ** 2)), (edges.row, edges.col)), shape=(n, n))
    degree = np.asarray(affinity.sum(axis=1)).ravel()
    scale = 1.0 / np.sqrt(np.maximum(degree, 1e-300))
    normalised = affinity.multiply(scale[:, None]).multiply(scale[None, :]).tocsr()
    if n <= 200:  # dense is faster and exact
        values, vectors = np.linalg.eigh(normalised.toarray())
        fiedler = vectors[:, -2]
    else:
        values, vectors = eigsh(normalised, k=2, which="LA", v0=np.full(n, 1.0 / np.sqrt(n)))
        fiedler = vectors[:, np.argsort(values)[0]]
    coordinate = fiedler * scale  # back from the normalised problem: D^-1/2 v
    return -coordinate if coordinate[0] > 0 else coordinate


class Reference:
    """A reference set of unlabelled samples for geodesic distances and a spectral
    coordinate, prepared once: its points (flattened, float64), its own k-nearest-neighbour
    graph and (lazily) its Fiedler coordinate."""

    def __init__(self, samples, neighbours: int):
        self.points = np.asarray(samples, dtype=np.float64).reshape(len(samples), -1)
        self.neighbours = neighbours
        self.graph = knn_graph(pairwise_distances(self.points), neighbours)
        self._coordinate = None

    @property
    def coordinate(self) -> np.ndarray:
        if self._coordinate is None:
            self._coordinate = spectral_coordinate(self.graph)
        return self._coordinate

    def geodesic_distances(self, inputs: np.ndarray) -> np.ndarray:
        """``(K, K)`` shortest-path distances between the inputs through the reference's
        graph joined with them: each input is linked to its ``neighbours`` nearest points
        among the reference samples and the other inputs together, so that two inputs are
        linked directly only when they are near each other."""
        k, m = inputs.shape[0], self.points.shape[0]
        to_all = np.concatenate([pairwise_distances(inputs, self.points), pairwise_distances(inputs)], axis=1)
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
        distances = shortest_path(graph, method="D", directed=False, indices=m + np.arange(k))[:, m:]
        return distances  # finite: the reference's graph is connected and every input links to it

    def coordinate_of(self, inputs: np.ndarray) -> np.ndarray:
        """The reference's spectral coordinate extended to new inputs: the average over each
        input's nearest reference points, weighted by Gaussian affinity (Nystrom-style)."""
        to_reference = pairwise_distances(inputs, self.points)
        count = min(self.neighbours, self.points.shape[0])
        nearest = np.argpartition(to_reference, count - 1, axis=1)[:, :count]
        d = np.take_along_axis(to_reference, nearest, axis=1)
        sigma = np.maximum(np.median(d, axis=1, keepdims=True), 1e-300)
        w = np.exp(-((d / sigma) ** 2))
        return np.sum(w * self.coordinate[nearest], axis=1) / np.sum(w, axis=1)


def arc_positions(gaps: np.ndarray, points: np.ndarray) -> np.ndarray:
    """Parameters for a path with consecutive gaps ``gaps`` (``K - 1`` lengths >= 0): the
    normalised arc length ``s`` in [0, 1] mapped through the piecewise-linear map that sends
    ``s = k / (K - 1)`` to the sorted ``points[k]``, so equal gaps give back ``points``.
    Zero or tiny gaps are widened to 1e-3 of the mean gap, so positions stay distinct."""
    points = np.sort(np.asarray(points, dtype=np.float64))
    count = points.size
    if count == 1:
        return points.copy()
    gaps = np.asarray(gaps, dtype=np.float64)
    total = float(np.sum(gaps))
    if not total > 0.0 or not np.isfinite(total):
        return points.copy()
    gaps = np.maximum(gaps, 1e-3 * total / gaps.size)
    s = np.r_[0.0, np.cumsum(gaps)] / np.sum(gaps)
    return np.interp(s * (count - 1), np.arange(count), points)
