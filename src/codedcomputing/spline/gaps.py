"""Gap-aware decoding: the adaptive interpolant, with the points that fall in gaps of the
design re-estimated from the returned results around the gaps.

The knots ``t_1 < ... < t_n`` are the returned workers' points, a subset of a design of
``num_design`` points; ``ranks`` give each knot's position in the sorted design. A bracket
``[t_i, t_{i+1}]`` is a *gap* when it misses at least ``max(MIN_MISSING, floor(RELATIVE *
median span))`` design points (a span is ``ranks[i+1] - ranks[i]``: in a pattern of random
stragglers only the brackets well above the typical one count; a block of neighbouring
stragglers makes one). Points ``z`` that lie in a gap missing ``m`` design points, and
points beyond an end of the knots where design points are missing, are estimated anew;
every other point keeps :class:`~codedcomputing.spline.adaptive.AdaptiveInterpolant`'s
estimate.

**Inside a gap** the estimate is ``w_L L(z) + w_C C(z) + w_M mean(y)``: the piecewise-linear
and the natural cubic interpolant through all knots and the mean of all results, with
weights on the simplex fitted per call by *leave-block-out*: up to :data:`POSITIONS`
blocks of returned results spanning ``m + 1`` design steps, overlapping no gap and spread
evenly over the knots, are dropped one at a time and predicted from the knots around them
(the chord of the block's two neighbours, a natural cubic through :data:`WINDOW` knots each
side, and the mean of the other results); the weights minimise the summed squared error of
the blend on those blocks (all output coordinates together; results wider than
:data:`~codedcomputing.spline.adaptive.SKETCH_COLUMNS` are first summarised by the CountSketch
that theta's sums use, which keeps the squared errors in expectation at a fraction of the
cost). One set of weights per gap size per call. When no block of that span fits, the gap
takes ``L``. The single-point leave-one-out that picks the adaptive blend's ``theta`` is
blind to gaps: a cubic that is right between neighbouring knots can swing across ten
missing ones, and far from its knots the average output is a better guess than either
interpolant.

**Beyond an end** where ``miss`` design points are missing, the estimate is a blend, with
weights on the simplex, of four extrapolants: the end value held, the end chord's line, the
natural cubic's line through the :data:`WINDOW` outermost knots, and Berrut's interpolant
through all knots; fitted the same way on the knots within ``miss`` design steps of either
end, predicted from the others.

Every candidate is a linear map of the results fixed by the knots. What a call needs of them
is built once per set of knots (GCC caches a decoder per alive set), in a few array
operations over all blocks together, without scipy.sparse: a natural cubic through a
block's neighbours predicts the block's knots from the two knots around it and the cubic's
second derivatives there, and those are two columns of the inverse of the window's
tridiagonal Reinsch matrix: every window of every gap size on the diagonal of one
tridiagonal matrix, one ``LDL^T`` solve for all. A call costs the adaptive interpolant's
decode plus ``O((POSITIONS (m + WINDOW) + |z in gaps|) d')`` for the gaps (``d'`` the width,
at most :data:`~codedcomputing.spline.adaptive.SKETCH_COLUMNS` once sketched; the values
are theta's own), one pass over the results for their mean, and the edge maps (``O(n d)``
per point beyond an end, through Berrut). Measured (``benchmarks/perf/bench_master_gcc.py``, a
new alive set at every decode, ``docs/master-cost.rst``): 1.2-3.0 times the natural spline's
decode from N = 50 to 16,000 at widths 1-1,000. The weights are computed in float64 on the host; for torch
tensors that require grad, autograd treats them as constants. A tensor on a device (CUDA)
stays there: the residuals (of the results rescaled by their largest magnitude, sketched in
float64 when wide), their scales and Gram matrices are computed on the device, and one read
brings the few numbers the fits need to the host (theta's 3, 10 a fitted gap size, ``1 +
c^2`` an end with ``c`` candidates); the blend is applied on the device.

Measured (``benchmarks/studies/bench_contiguous.py``, 200 paired trials): with a block of
neighbouring points missing, the adaptive interpolant lost to BACC from a block of 15 of 50
on (LeNet-5 0.66, ViT 0.44, MLP 0.72), and this decoder held above it up to 40% of N.
"""

from __future__ import annotations

import functools
import itertools

import numpy as np

from .. import _arraylib
from .._arraylib import read_only
from .adaptive import (
    SKETCH_COLUMNS,
    AdaptiveInterpolant,
    _device_rescaled,
    _device_sketch,
    _sketch,
    theta_from_terms,
)
from .berrut import berrut_matrix
from .reinsch import _lapack

__all__ = ["GapAwareInterpolant", "simplex_weights"]

# A gap misses at least max(MIN_MISSING, floor(RELATIVE * median span)) design points.
MIN_MISSING = 2
RELATIVE = 2.0
# Leave-block-out: at most POSITIONS blocks per gap size, local cubics through WINDOW knots a side.
POSITIONS = 8
WINDOW = 12
# Leave-block-out predicts at most this many knots of each dropped block (evenly spread).
MAX_BLOCK_TARGETS = 64
# Edge validation keeps at most this many of the outermost knots of each end.
MAX_EDGE_TARGETS = 64
# Berrut's extrapolant is dense: dropped from the edge candidates beyond this many entries.
MAX_BERRUT_ENTRIES = 2**22
# 0, 1, 2, ...: sliced rather than built (np.arange costs a fresh decoder more than a view)
_RANGE = np.arange(4096)
_RANGE.flags.writeable = False


_INF = float("inf")


def _largest(values: np.ndarray) -> float:
    """``np.max(np.abs(values), initial=0.0)``, without its wrapper."""
    return np.maximum.reduce(np.abs(values), axis=None, initial=0.0)


def _range(count: int) -> np.ndarray:
    """``np.arange(count)``, read-only (a view of a shared one when short enough)."""
    return _RANGE[:count] if count <= _RANGE.size else np.arange(count)


def simplex_weights(residuals: list[np.ndarray]) -> np.ndarray:
    """Weights ``w >= 0``, ``sum w = 1``, minimising ``||sum_c w_c r_c||^2`` over candidate
    residual arrays ``r_c`` of one shape (exact: every face of the simplex is tried; meant
    for a handful of candidates). Residuals are rescaled first, so huge values do not
    overflow. Ties (within rounding) go to the face with fewer candidates, then to the first
    candidates: all-zero residuals give the first."""
    count = len(residuals)
    scale = max(float(np.max(np.abs(r), initial=0.0)) for r in residuals)
    if not 0.0 < scale < np.inf:
        return np.eye(count)[0]
    scaled = np.stack([np.ravel(r) / scale for r in residuals])
    return _simplex_minimiser(scaled @ scaled.T)


def _simplex_minimiser(gram: np.ndarray) -> np.ndarray:
    """:func:`simplex_weights` from the Gram matrix ``G`` of the (rescaled) residuals: the
    minimiser of ``w^T G w`` on the simplex, face by face (vertices and edges in closed form,
    larger faces from their KKT system by least squares, which also takes singular ``G``)."""
    count = gram.shape[0]
    g = gram.tolist()
    if count == 3:  # the gaps' three candidates: the same faces, unrolled
        return np.array(_three_minimiser(g))
    best, best_w = np.inf, [1.0] + [0.0] * (count - 1)

    def better(value: float) -> bool:  # ties (within rounding) keep the earlier, smaller face
        return value < best - 1e-12 * (1.0 + best if best < np.inf else 0.0)

    for i in range(count):
        if better(g[i][i]):
            best, best_w = g[i][i], [float(k == i) for k in range(count)]
    for i, j in itertools.combinations(range(count), 2):
        edge = _edge_minimum(g[i][i], g[i][j], g[j][j])
        if edge is not None and better(edge[0]):
            best, best_w = edge[0], [0.0] * count
            best_w[i], best_w[j] = edge[1], 1.0 - edge[1]
    for size in range(3, count + 1):
        for face in map(list, itertools.combinations(range(count), size)):
            w_face = _three_face(g, face) if size == 3 else None
            if w_face == []:  # the triangle's minimiser lies outside it
                continue
            if w_face is not None:  # a well-conditioned triangle: the closed form
                w = [0.0] * count
                for k, c in zip(face, w_face, strict=True):
                    w[k] = c
                value = sum(w[i] * w[j] * g[i][j] for i in face for j in face)
                if better(value):
                    best, best_w = value, w
                continue
            kkt = np.zeros((size + 1, size + 1))
            kkt[:size, :size] = gram[np.ix_(face, face)]
            kkt[:size, size] = kkt[size, :size] = 1.0
            w_face = np.linalg.lstsq(kkt, np.r_[np.zeros(size), 1.0], rcond=None)[0][:size]
            if np.any(w_face < -1e-12) or not abs(w_face.sum() - 1.0) < 1e-9:
                continue
            w = np.zeros(count)
            w[face] = np.clip(w_face, 0.0, None)
            w /= w.sum()
            value = float(w @ gram @ w)
            if better(value):
                best, best_w = value, w.tolist()
    return np.array(best_w)


def _edge_minimum(a: float, b: float, c: float) -> tuple[float, float] | None:
    """``(value, w)``: the minimum of ``w^2 a + 2 w (1 - w) b + (1 - w)^2 c`` over an edge of
    the simplex where it lies inside it (``w`` in [0, 1]); None when the edge is flat (a vertex
    is as low) or its minimiser lies outside."""
    curvature = a - 2.0 * b + c
    if not curvature > 1e-14 * (abs(a) + abs(c)):
        return None
    w_i = (c - b) / curvature
    if not -1e-12 <= w_i <= 1.0 + 1e-12:
        return None
    w_i = min(max(w_i, 0.0), 1.0)
    w_j = 1.0 - w_i
    return w_i * w_i * a + 2.0 * w_i * w_j * b + w_j * w_j * c, w_i


def _three_minimiser(g: list) -> list:
    """:func:`_simplex_minimiser` of three candidates (``g`` the Gram matrix as lists): its
    faces in its order and arithmetic (the triangle's :func:`_three_face` written out), without
    the loops' bookkeeping: a decode fits one per gap size, and the loops cost more than the
    arithmetic."""
    (g00, g01, g02), (g10, g11, g12), (g20, g21, g22) = g
    best, best_w = _INF, [1.0, 0.0, 0.0]
    if g00 < best:
        best = g00
    if g11 < best - 1e-12 * (1.0 + best if best < _INF else 0.0):
        best, best_w = g11, [0.0, 1.0, 0.0]
    if g22 < best - 1e-12 * (1.0 + best if best < _INF else 0.0):
        best, best_w = g22, [0.0, 0.0, 1.0]
    for i, j, a, b, c in ((0, 1, g00, g01, g11), (0, 2, g00, g02, g22), (1, 2, g11, g12, g22)):
        edge = _edge_minimum(a, b, c)
        if edge is not None and edge[0] < best - 1e-12 * (1.0 + best if best < _INF else 0.0):
            best, best_w = edge[0], [0.0, 0.0, 0.0]
            best_w[i], best_w[j] = edge[1], 1.0 - edge[1]
    # the triangle: G^-1 1 / (1^T G^-1 1) by cofactors, as _three_face gives it
    c00, c01, c02 = g11 * g22 - g12 * g21, g02 * g21 - g01 * g22, g01 * g12 - g02 * g11
    c10, c11, c12 = g12 * g20 - g10 * g22, g00 * g22 - g02 * g20, g02 * g10 - g00 * g12
    c20, c21, c22 = g10 * g21 - g11 * g20, g01 * g20 - g00 * g21, g00 * g11 - g01 * g10
    determinant = g00 * c00 + g01 * c10 + g02 * c20
    w0, w1, w2 = c00 + c01 + c02, c10 + c11 + c12, c20 + c21 + c22
    total = w0 + w1 + w2
    if not (abs(determinant) > 1e-10 * abs(g00 * g11 * g22) and abs(total) > 0.0):
        return _three_by_least_squares(g, best, best_w)  # too close to singular for the closed form
    w0, w1, w2 = w0 / total, w1 / total, w2 / total
    if min(w0, w1, w2) < -1e-12:  # the triangle's minimiser lies outside it
        return best_w
    w0, w1, w2 = max(w0, 0.0), max(w1, 0.0), max(w2, 0.0)
    total = w0 + w1 + w2
    w0, w1, w2 = w0 / total, w1 / total, w2 / total
    value = w0 * w0 * g00 + w0 * w1 * g01 + w0 * w2 * g02 + w1 * w0 * g10 + w1 * w1 * g11
    value = value + w1 * w2 * g12 + w2 * w0 * g20 + w2 * w1 * g21 + w2 * w2 * g22
    if value < best - 1e-12 * (1.0 + best if best < _INF else 0.0):
        return [w0, w1, w2]
    return best_w


def _three_by_least_squares(g: list, best: float, best_w: list) -> list:
    """The triangle's face of :func:`_three_minimiser` by least squares on its KKT system
    (singular or nearly singular ``G``), against the best of its vertices and edges."""
    gram = np.array(g)
    kkt = np.ones((4, 4))
    kkt[:3, :3], kkt[3, 3] = gram, 0.0
    w_face = np.linalg.lstsq(kkt, np.r_[np.zeros(3), 1.0], rcond=None)[0][:3]
    if np.any(w_face < -1e-12) or not abs(w_face.sum() - 1.0) < 1e-9:
        return best_w
    w_face = np.clip(w_face, 0.0, None)
    w_face /= w_face.sum()
    value = float(w_face @ gram @ w_face)
    if value < best - 1e-12 * (1.0 + best if best < _INF else 0.0):
        return w_face.tolist()
    return best_w


def _three_face(g: list, face: list) -> list | None:
    """The minimiser of ``w^T G w`` with ``sum w = 1`` on a face of three candidates,
    ``G^-1 1 / (1^T G^-1 1)`` by cofactors, clipped and renormalised as the least-squares face
    would be; ``[]`` when it leaves the simplex (the face is skipped), None when ``G`` is too
    close to singular for the closed form (the caller solves by least squares)."""
    (a, b, c), (d, e, f), (p, q, r) = ([g[i][j] for j in face] for i in face)
    cofactors = (
        (e * r - f * q, c * q - b * r, b * f - c * e),
        (f * p - d * r, a * r - c * p, c * d - a * f),
        (d * q - e * p, b * p - a * q, a * e - b * d),
    )
    determinant = a * cofactors[0][0] + b * cofactors[1][0] + c * cofactors[2][0]
    if not abs(determinant) > 1e-10 * abs(a * e * r):
        return None
    w = [sum(row) for row in cofactors]
    total = sum(w)
    if not abs(total) > 0.0:
        return None
    w = [x / total for x in w]
    if min(w) < -1e-12:
        return []
    w = [max(x, 0.0) for x in w]
    total = sum(w)
    return [x / total for x in w]


def _scaled_gram(residuals):
    """``[scale, G]`` (flattened) of a ``(candidates, entries)`` torch tensor: ``scale`` its
    largest magnitude, ``G`` the Gram matrix of the residuals divided by it."""
    import torch

    scale = residuals.abs().amax() if residuals.numel() else residuals.new_zeros(())
    usable = (scale > 0.0) & torch.isfinite(scale)
    scaled = residuals / torch.where(usable, scale, torch.ones_like(scale))
    return torch.cat([scale[None], (scaled @ scaled.T).reshape(-1)])


def _weights_from_terms(terms: list[float], count: int) -> np.ndarray:
    """:func:`simplex_weights` from ``[scale, G]`` read back from a device (the first
    candidate when the residuals vanish or are not finite)."""
    if not 0.0 < terms[0] < np.inf:
        return np.eye(count)[0]
    return _simplex_minimiser(np.array(terms[1:]).reshape(count, count))


def _median(values: np.ndarray) -> float:
    """``np.median`` of a 1-D array, by one sort (numpy's takes several times longer on a few)."""
    ordered = values.copy()
    ordered.sort()
    middle = ordered.size // 2
    if ordered.size % 2:
        return float(ordered[middle])
    return (float(ordered[middle - 1]) + float(ordered[middle])) / 2.0


@functools.lru_cache(maxsize=4096)
def _even_picks(count: int) -> np.ndarray:
    """``np.unique(np.linspace(0, count - 1, POSITIONS).round().astype(int))``: all of
    ``0..count-1`` up to POSITIONS of them (the rounded steps are at most 1 apart), else
    POSITIONS distinct ones (linspace's own products, its last entry exact). Read-only, kept
    per count (it depends on nothing else)."""
    if count <= POSITIONS:
        return _range(count)
    picks = np.round(np.arange(POSITIONS) * ((count - 1) / (POSITIONS - 1))).astype(np.intp)
    picks[-1] = count - 1
    return read_only(picks)


def _spread(index: np.ndarray, count: int) -> np.ndarray:
    """At most ``count`` entries of ``index``, evenly spread (all of them if there are fewer)."""
    if index.size <= count:
        return index
    return index[np.unique(np.linspace(0, index.size - 1, count).round().astype(int))]


def _extrapolants(t: np.ndarray, z: np.ndarray, low: bool, berrut: bool) -> list[np.ndarray]:
    """``(len(z), len(t))`` maps of the candidates beyond one end of sorted knots ``t`` (at
    least 2): the end value held, the end chord's line, the natural cubic's line through the
    :data:`WINDOW` outermost knots, and (``berrut``) Berrut's interpolant through all."""
    n = t.size
    e0, e1 = (0, 1) if low else (n - 1, n - 2)
    hold = np.zeros((z.size, n))
    hold[:, e0] = 1.0
    slope = (z - t[e0]) / (t[e1] - t[e0])
    line = np.zeros((z.size, n))
    line[:, e0], line[:, e1] = 1.0 - slope, slope
    window = slice(0, min(WINDOW, n)) if low else slice(max(0, n - WINDOW), n)
    cubic = np.zeros((z.size, n))
    if n >= 3:
        cubic[:, window] = _end_line(t[window], z, low)
    else:
        cubic = line.copy()
    maps = [hold, line, cubic]
    if berrut:
        maps.append(berrut_matrix(t, z))
    return maps


def _end_line(t: np.ndarray, z: np.ndarray, low: bool) -> np.ndarray:
    """``(len(z), len(t))``: the natural cubic interpolant through sorted knots ``t`` (at
    least 3) at points ``z`` beyond its low (``low``) or high end, where it is the line
    ``y_0 + S'(t_0) (z - t_0)`` (what :func:`~codedcomputing.spline.reinsch.smoothing_matrix`
    gives there at lambda 0), in closed form: ``S'(t_0) = (y_1 - y_0) / h_0 - h_0 g_1 / 6``
    with the curvature ``g_1 = (Q R^-1 e_1)^T y`` one small tridiagonal solve (Reinsch's
    ``Q``, ``R``). The high end by reflection."""
    if not low:
        return _end_line(-t[::-1], -z, True)[:, ::-1]
    h = t[1:] - t[:-1]
    inverse_h = 1.0 / h
    diagonal, off = (h[:-1] + h[1:]) / 3.0, h[1:-1] / 6.0
    rhs = np.zeros(diagonal.size)
    rhs[0] = 1.0
    if diagonal.size == 1:
        u = rhs / diagonal
    else:
        lapack = _lapack()
        pivots, subdiagonal = lapack.dpttrf(diagonal, off)[:2]
        u = lapack.dpttrs(pivots, subdiagonal, rhs)[0]
    row = np.zeros(t.size)  # -h_0 / 6 Q u, then the chord's slope
    row[:-2] = u * inverse_h[:-1]
    row[1:-1] -= u * (inverse_h[:-1] + inverse_h[1:])
    row[2:] += u * inverse_h[1:]
    row *= -h[0] / 6.0
    row[0] -= inverse_h[0]
    row[1] += inverse_h[0]
    line = (z - t[0])[:, None] * row
    line[:, 0] += 1.0
    return line


def _block_targets(s: np.ndarray, length: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """For blocks of ``length`` knots dropped after knots ``s``: ``(count, block, target)``,
    how many each block predicts, and the block and sorted-knot index of every predicted
    knot, block after block: all of a block's knots, or :data:`MAX_BLOCK_TARGETS` evenly
    spread as :func:`_spread` picks them."""
    count = np.minimum(length, MAX_BLOCK_TARGETS)
    block = _range(length.size).repeat(count)
    target = _range(block.size) - (count.cumsum() - count - s - 1).repeat(count)
    if length.max() > MAX_BLOCK_TARGETS:  # linspace(0, L - 1, MAX_BLOCK_TARGETS).round(): k (L-1) / (MAX-1)
        first = (s + 1)[block]
        step = (length[block] - 1) / (MAX_BLOCK_TARGETS - 1)
        spread = np.round((target - first) * step).astype(np.intp) + first
        target = np.where(length[block] > MAX_BLOCK_TARGETS, spread, target)
    return count, block, target


def _window_curvatures(t: np.ndarray, s: np.ndarray, e: np.ndarray) -> tuple[np.ndarray, ...]:
    """The natural cubic through each block's window (the :data:`WINDOW` knots up to ``s`` and
    from ``e`` on, the knots between them dropped), as its second derivatives at ``s`` and
    ``e``: ``(knots, weights, first)``, the windows' sorted-knot indices one after another,
    ``(len(knots), 2)`` weights such that window b's rows of ``weights[:, 0]`` applied to
    ``y[knots]`` give the curvature at ``s_b`` (``[:, 1]``: at ``e_b``), and where each window
    starts.

    The curvatures at a window's interior knots are ``R^-1 Q^T y`` (Reinsch matrices of the
    window, ``R`` tridiagonal); the two needed are ``(Q R^-1 e_i)^T y``, two columns of
    ``R^-1``. Every window's ``R`` goes on the diagonal of one tridiagonal matrix (two identity
    rows closing each window: at its ends the natural cubic's curvature is 0), so one
    ``LDL^T`` factorisation and solve serve all blocks."""
    # (numpy's function wrappers cost more than the arithmetic on these few hundred entries:
    # methods, operators and slices throughout)
    n, blocks = t.size, s.size
    lo, hi = np.maximum(s - WINDOW, 0), np.minimum(e + 1 + WINDOW, n)
    left = s - lo + 1
    size = left + hi - e
    first = size.cumsum() - size
    block = _range(blocks).repeat(size)
    rows = block.size
    position = _range(rows) - first[block]  # within its window
    after = position >= left[block]
    knots = lo[block] + position
    knots[after] += (e - lo - left)[block][after]
    h = np.empty(rows)
    knot_t = t[knots]
    h[:-1] = knot_t[1:] - knot_t[:-1]
    h[first[1:] - 1] = h[-1] = 1.0  # across windows: never read, kept finite
    # unknown q is the curvature at the knot after q (window position + 1): real up to size - 3
    fake = position >= size[block] - 2
    diagonal = np.empty(rows)
    diagonal[:-1] = (h[:-1] + h[1:]) / 3.0
    diagonal[fake] = 1.0
    off = h[1:] / 6.0
    off[fake[:-1] | fake[1:]] = 0.0
    rhs = np.zeros((rows, 2))
    at_s = left - 1  # window position of s: unknown at_s - 1; e's is at_s
    has_s, has_e = at_s >= 1, at_s + 1 <= size - 2
    rhs[(first + at_s - 1)[has_s], 0] = 1.0
    rhs[(first + at_s)[has_e], 1] = 1.0
    lapack = _lapack()
    pivots, subdiagonal = lapack.dpttrf(diagonal, off)[:2]
    x = lapack.dpttrs(pivots, subdiagonal, rhs)[0]  # 0 at each window's two closing rows
    inverse_h = 1.0 / h
    weights = x * inverse_h[:, None]  # Q's column q: 1/h_q at knot q, -1/h_q - 1/h_{q+1} at
    weights[1:] -= x[:-1] * (inverse_h[:-1] + inverse_h[1:])[:, None]  # q + 1, 1/h_{q+1} at q + 2
    weights[2:] += x[:-2] * inverse_h[1:-1, None]
    return knots, weights, first


class _Group:
    """Points re-estimated together: their label, their indices, and how their weights come:
    ``fixed`` weights, the ``block``-th group of the leave-block-out plan (inside a gap), or
    (beyond an end) the candidate ``maps`` at the points and the dense ``validation`` maps of
    the candidates' residuals (rows: the dropped knots)."""

    def __init__(self, label, points, *, maps=None, validation=None, fixed=None, block=None):
        self.label, self.points = label, points
        self.maps, self.validation, self.fixed, self.block = maps, validation, fixed, block


class GapAwareInterpolant:
    """``y -> (estimates at points, info)`` (:meth:`decode`, also its call):
    :class:`AdaptiveInterpolant` with the points in
    gaps of the design, and beyond its ends, re-estimated (module docstring).

    ``knots`` in any order (row i of ``y`` belongs to ``knots[i]``), ``ranks[i]`` the
    position of ``knots[i]`` among the ``num_design`` sorted design points. Works on numpy
    arrays and torch tensors in their own type, dtype and device. Everything is built in the
    constructor; calls only read it, so one decoder serves many threads. ``all_points``
    (default ``points``), a set that ``points`` are some of, sizes what depends on the number
    of points (theta's sample, Berrut's budget), so that the estimates at ``points`` are the
    ones a decoder for all of them gives. No checks are performed.
    """

    def __init__(
        self, knots: np.ndarray, ranks: np.ndarray, points: np.ndarray, num_design: int, *, all_points=None
    ):
        self._all_points = points if all_points is None else all_points
        self.base = AdaptiveInterpolant(knots, points, num_points=self._all_points.size)
        self.points, self.num_design = points, int(num_design)
        order = self.base.order  # None: sorted already
        self._order = np.arange(knots.size) if order is None else order
        self._columns = self._order if order is None else order.argsort()  # sorted -> given
        t = self.base.sorted_knots
        rank = np.asarray(ranks) if order is None else np.asarray(ranks)[order]
        self.groups: list[_Group] = []
        self._plan = None
        self._device_plans: dict = {}  # the plan's tensors on each device (:meth:`_device_plan`)
        self._rows = np.zeros(0, dtype=np.intp)  # the rows of the results the gap weights read
        self._sorted_rows = self._rows  # the same, as positions among the sorted knots
        if t.size >= 4:
            self._interior_groups(t, rank)
            self._edge_groups(t, rank)
        if any(g.validation for g in self.groups):  # the edges' dense maps read every row
            if self._plan is not None:  # the plan's positions, from its rows to all rows
                for key in ("target", "s", "e", "window"):
                    self._plan[key] = self._rows[self._plan[key]]
            self._rows, self._sorted_rows = np.arange(t.size), self._columns

    # ------------------------------------------------------------------ building
    def _to_given(self, sorted_map: np.ndarray) -> np.ndarray:
        """Columns of a map over the sorted knots, reordered to the knots' given order."""
        return sorted_map[:, self._columns]

    def _interior_groups(self, t: np.ndarray, rank: np.ndarray) -> None:
        n = t.size
        spans = rank[1:] - rank[:-1]
        threshold = max(MIN_MISSING, int(RELATIVE * _median(spans) // 1.0))
        missing = spans[self.base.brackets] - 1  # each point's bracket's (the same as the base's inside)
        candidate = self.base.inside & (missing >= threshold)
        if not candidate.any():
            return
        gap = spans > threshold  # misses at least threshold
        gaps_before = np.zeros(n, dtype=np.intp)  # gaps among brackets 0..i-1
        gap.cumsum(out=gaps_before[1:])
        start, start_rank, start_gaps = _range(n - 2), rank[:-2] + 1, gaps_before[:-2]
        picked_s, picked_e = [], []
        for m in sorted(set(missing[candidate].tolist())):
            pts = (candidate & (missing == m)).nonzero()[0]
            end = rank.searchsorted(start_rank + m, side="left")  # the first knot m + 1 steps on
            ok = end - start >= 2
            ok &= end <= n - 1
            ok &= gaps_before[np.minimum(end, n - 1)] == start_gaps
            starts = ok.nonzero()[0]
            if starts.size == 0:  # nothing of this span to validate on: the chord
                self.groups.append(_Group(("gap", m), pts, fixed=np.array([1.0, 0.0, 0.0])))
                continue
            pick = starts[_even_picks(starts.size)]
            self.groups.append(_Group(("gap", m), pts, block=len(picked_s)))
            picked_s.append(pick)
            picked_e.append(end[pick])
        if picked_s:
            self._plan = self._block_plan(t, picked_s, picked_e)

    def _block_plan(self, t: np.ndarray, picked_s: list, picked_e: list) -> dict:
        """Every dropped block of every gap size at once: rows are the predicted knots, block
        after block, group after group. Indices are positions in the rows of the results
        that the plan reads (:attr:`_rows` unless the edges need all)."""
        n = t.size
        if len(picked_s) == 1:
            s, e = picked_s[0], picked_e[0]
            group_first = np.zeros(1, dtype=np.intp)
        else:
            s, e = np.concatenate(picked_s), np.concatenate(picked_e)
            group_first = np.cumsum([0] + [p.size for p in picked_s[:-1]])  # in blocks, for now
        length = e - s - 1  # knots dropped
        count, block, target = _block_targets(s, length)
        block_first = count.cumsum() - count
        group_first = block_first[group_first]  # in rows
        window, curvature, window_first = _window_curvatures(t, s, e)
        # the chord of s and e, and the cubic's terms in the curvatures at them (Reinsch's stencil)
        t_s, t_e = t[s][block], t[e][block]
        h = t_e - t_s
        t_target = t[target]
        a, b = (t_e - t_target) / h, (t_target - t_s) / h
        h2 = h * h / 6.0
        read = np.zeros(n, dtype=bool)
        read[window] = read[target] = True
        self._sorted_rows = read.nonzero()[0]
        self._rows = self._order[self._sorted_rows]
        position = read.cumsum() - 1
        return {
            "target": position[target],
            "s": position[s][block],
            "e": position[e][block],
            "a": a[:, None],
            "b": b[:, None],
            "c": ((a * a - 1.0) * a * h2)[:, None],
            "d": ((b * b - 1.0) * b * h2)[:, None],
            "block": block,
            "window": position[window],
            "curvature": curvature[:, :, None],
            "window_first": window_first,
            "block_first": block_first,
            # the mean of the other results: (total - the block's sum) / (n - block size); the
            # sum from the targets when they are a sample of the block (large blocks)
            "block_scale": (length / count)[:, None],
            "mean_coefficient": (1.0 / (n - length))[block][:, None],
            "group_first": group_first,
        }

    def _edge_groups(self, t: np.ndarray, rank: np.ndarray) -> None:
        n, z = t.size, self.points
        for low in (True, False):
            miss = int(rank[0]) if low else self.num_design - 1 - int(rank[-1])
            if miss < 1:  # no design point missing beyond this end
                continue
            pts = (z < t[0]).nonzero()[0] if low else (z > t[-1]).nonzero()[0]
            if pts.size == 0:
                continue
            beyond = self._all_points < t[0] if low else self._all_points > t[-1]  # Berrut's budget: all
            berrut = max(int(np.count_nonzero(beyond)), 2 * MAX_EDGE_TARGETS) * n <= MAX_BERRUT_ENTRIES
            validation = []
            for side in (True, False):  # both ends' outermost knots, predicted from the rest
                steps = rank - rank[0] if side else rank[-1] - rank[::-1]
                q = int(np.searchsorted(steps, miss))
                removed = np.arange(q) if side else np.arange(n - q, n)
                rest = np.arange(q, n) if side else np.arange(n - q)
                if removed.size == 0 or rest.size < 3 or removed.size > n // 4:
                    continue
                removed = _spread(removed, MAX_EDGE_TARGETS)
                rows = []
                for candidate in _extrapolants(t[rest], t[removed], side, berrut):
                    full = np.zeros((removed.size, n))
                    full[:, rest] = candidate
                    full[np.arange(removed.size), removed] -= 1.0
                    rows.append(full)
                validation.append(rows)
            if not validation:  # nothing to validate on: the adaptive interpolant's held end
                continue
            self.groups.append(
                _Group(
                    ("edge", "low" if low else "high"),
                    pts,
                    maps=[read_only(self._to_given(m)) for m in _extrapolants(t, z[pts], low, berrut)],
                    validation=[
                        read_only(self._to_given(np.concatenate(c))) for c in zip(*validation, strict=True)
                    ],
                )
            )

    # ------------------------------------------------------------------ calling
    def decode(self, y) -> tuple[object, dict]:
        """``(estimates, info)`` (the decoder interface,
        :class:`~codedcomputing.spline.maps.Decoder`): ``info`` holds ``"lambda_dec"`` (0),
        the adaptive blend's ``"theta"`` and ``"gaps"``, a ``(label, weights)`` pair per group
        of re-estimated points (``("gap", m)`` or ``("edge", "low" | "high")``)."""
        if _arraylib.on_host(y):
            theta, shared = self.base.weight_and_curvatures(y)
            weights = theta, self._group_weights(y, None if shared is None else shared[0])
        else:
            weights, shared = self._device_weights(y), None
            theta = weights[0]
        info = {
            "lambda_dec": 0.0,
            "theta": theta,
            "gaps": [(g.label, tuple(map(float, w))) for g, w in zip(self.groups, weights[1], strict=True)],
        }
        return self._apply(y, weights, shared), info

    __call__ = decode

    def weights(self, y) -> tuple[float, list[np.ndarray]]:
        """``(theta, [weights of each group])`` for results ``y``: what a call fits, computed
        in float64 on the host (for a tensor on a device: on the device, and only the few
        numbers the simplex fits need cross). :meth:`apply` with them is linear in ``y``."""
        if not _arraylib.on_host(y):
            return self._device_weights(y)
        return self.base.weight(y), self._group_weights(y)

    def _device_weights(self, y) -> tuple[float, list[np.ndarray]]:
        """:meth:`weights` for a tensor on a device: theta's terms
        (:meth:`~codedcomputing.spline.adaptive.AdaptiveInterpolant.theta_terms`) and each
        fitted group's ``[scale, Gram matrix]`` of its rescaled residuals are computed there and
        read back together, one small transfer (3 numbers, 10 a gap size, 10 or 17 an end)."""
        import torch

        terms = [self.base.theta_terms(y)] if self.base.cubic_loo is not None else []
        fitted = [g for g in self.groups if g.fixed is None]
        if fitted:
            flat = y.detach().reshape(y.shape[0], -1)
            rows, total = _arraylib.take_rows(flat, self._rows), flat.sum(0, keepdim=True)
            if flat.shape[1] > SKETCH_COLUMNS:
                rows, total = _device_sketch(rows), _device_sketch(total)
            else:
                rows, total = rows.to(torch.float64), total.to(torch.float64)
            rows, scale = _device_rescaled(rows)  # the weights are scale-free; curvatures (~ y / h^2)
            usable = (scale > 0.0) & torch.isfinite(scale)  # of huge results would overflow
            total = total[0] / torch.where(usable, scale, torch.ones_like(scale))
            if self._plan is not None:
                terms.append(self._device_block_terms(rows, total).reshape(-1))
            for group in fitted:
                if group.block is None:
                    residuals = [_arraylib.apply_matrix(v, rows) for v in group.validation]
                    terms.append(_scaled_gram(torch.stack([r.reshape(-1) for r in residuals])))
        numbers = torch.cat(terms).tolist() if terms else []  # the one read of the call
        theta = 1.0 if self.base.cubic_loo is None else theta_from_terms(numbers[:3])
        position = 3 if self.base.cubic_loo is not None else 0
        block_weights = []
        if self._plan is not None:
            for _ in range(self._plan["group_first"].size):
                block_weights.append(_weights_from_terms(numbers[position : position + 10], 3))
                position += 10
        out = []
        for group in self.groups:
            if group.fixed is not None:
                out.append(group.fixed)
            elif group.block is not None:
                out.append(block_weights[group.block])
            else:
                count = len(group.validation)
                out.append(_weights_from_terms(numbers[position : position + 1 + count * count], count))
                position += 1 + count * count
        return theta, out

    def _device_block_terms(self, rows, total):
        """``(groups, 10)``: each gap size's ``[scale, Gram matrix]`` of the leave-block-out
        residuals (:meth:`_block_weights`) of rescaled results ``rows`` on their device."""
        import torch

        plan = self._device_plan(rows.device)
        observed = rows[plan["target"]]
        chord = plan["a"] * rows[plan["s"]] + plan["b"] * rows[plan["e"]]
        terms = plan["curvature"] * rows[plan["window"], None]  # (W, 2, d)
        curvatures = torch.zeros((plan["blocks"], 2, rows.shape[1]), dtype=rows.dtype, device=rows.device)
        curvatures.index_add_(0, plan["window_block"], terms)
        block = plan["block"]
        cubic = chord + plan["c"] * curvatures[block, 0] + plan["d"] * curvatures[block, 1]
        block_sums = torch.zeros((plan["blocks"], rows.shape[1]), dtype=rows.dtype, device=rows.device)
        block_sums.index_add_(0, block, observed)
        mean = plan["mean_coefficient"] * (total - plan["block_scale"] * block_sums[block])
        residuals = torch.stack([chord, cubic, mean]) - observed  # (3, rows, d)
        groups, group = plan["groups"], plan["group"]
        largest = torch.zeros(groups, dtype=rows.dtype, device=rows.device)
        largest.scatter_reduce_(0, group, residuals.abs().amax(dim=(0, 2)), "amax")
        usable = (largest > 0.0) & torch.isfinite(largest)
        scaled = residuals / torch.where(usable, largest, torch.ones_like(largest))[group][None, :, None]
        products = torch.einsum("ird,jrd->rij", scaled, scaled).reshape(-1, 9)
        grams = torch.zeros((groups, 9), dtype=rows.dtype, device=rows.device).index_add_(0, group, products)
        return torch.cat([largest[:, None], grams], dim=1)

    def _device_plan(self, device) -> dict:
        """The leave-block-out plan's indices and coefficients as tensors on ``device`` (made
        once per device; two threads making them at once make the same)."""
        import torch

        plan = self._device_plans.get(device)
        if plan is None:
            host = self._plan
            rows = host["block"].size
            window_sizes = np.diff(np.r_[host["window_first"], host["window"].size])
            group_sizes = np.diff(np.r_[host["group_first"], rows])
            blocks = host["block_first"].size
            index = {
                "target": host["target"],
                "s": host["s"],
                "e": host["e"],
                "window": host["window"],
                "block": host["block"],
                "window_block": np.repeat(np.arange(blocks), window_sizes),
                "group": np.repeat(np.arange(group_sizes.size), group_sizes),
            }
            plan = {k: torch.as_tensor(v, dtype=torch.int64, device=device) for k, v in index.items()}
            for key in ("a", "b", "c", "d", "curvature", "mean_coefficient"):
                plan[key] = torch.as_tensor(host[key], dtype=torch.float64, device=device)
            plan["block_scale"] = torch.as_tensor(host["block_scale"][host["block"]], device=device)
            plan["blocks"], plan["groups"] = blocks, group_sizes.size
            self._device_plans[device] = plan
        return plan

    def _group_weights(self, y, sorted_values=None) -> list[np.ndarray]:
        """The groups' weights; ``sorted_values``: the results at the sorted knots as theta's
        fit read them (float64, sketched if wide), to read rather than gather again."""
        if not self.groups:
            return []
        flat_y = y.reshape(y.shape[0], -1)
        host = total = None
        if self._rows.size and sorted_values is not None:
            host, total = sorted_values[self._sorted_rows], sorted_values.sum(0)
        elif self._rows.size:
            rows, total = _arraylib.take_rows(flat_y, self._rows), flat_y.sum(0)[None]
            if flat_y.shape[1] > SKETCH_COLUMNS:  # the residuals are linear in y: sketched as theta's are
                host = _sketch(_arraylib.convert_like(rows, self.points))
                total = _sketch(_arraylib.convert_like(total, self.points))[0]
            else:
                host, total = _arraylib.to_float64(rows), _arraylib.to_float64(total)[0]
        if host is not None:
            scale = float(_largest(host))
            if 0.0 < scale < np.inf and not 1e-100 < scale < 1e100:  # the weights are scale-free;
                host, total = host / scale, total / scale  # curvatures (~ y / h^2) would overflow
        block_weights = self._block_weights(host, total) if self._plan is not None else None
        fitted = []
        for group in self.groups:
            if group.fixed is not None:
                fitted.append(group.fixed)
            elif group.block is not None:
                fitted.append(block_weights[group.block])
            else:
                fitted.append(simplex_weights([np.asarray(v @ host) for v in group.validation]))
        return fitted

    def _block_weights(self, host: np.ndarray, total: np.ndarray) -> list[np.ndarray]:
        """The weights of every gap size from the leave-block-out residuals of the line, the
        cubic and the mean (all blocks at once, then one small simplex problem per size)."""
        plan = self._plan
        observed = host[plan["target"]]
        y_s, y_e = host[plan["s"]], host[plan["e"]]
        chord = plan["a"] * y_s + plan["b"] * y_e
        # (B, 2, d): each block's cubic's curvatures at s and at e
        curvatures = np.add.reduceat(plan["curvature"] * host[plan["window"], None], plan["window_first"])
        block = plan["block"]
        cubic = chord + plan["c"] * curvatures[block, 0] + plan["d"] * curvatures[block, 1]
        block_sums = np.add.reduceat(observed, plan["block_first"], axis=0)
        mean = plan["mean_coefficient"] * (total - plan["block_scale"][block] * block_sums[block])
        residuals = np.empty((3, *observed.shape))  # (3, rows, d)
        np.subtract(chord, observed, out=residuals[0])
        np.subtract(cubic, observed, out=residuals[1])
        np.subtract(mean, observed, out=residuals[2])
        first = plan["group_first"]
        with np.errstate(over="ignore", invalid="ignore"):  # huge results: rescaled below
            if first.size == 1:  # one gap size (the common case): one product
                flat = residuals.reshape(3, -1)
                scale = [float(_largest(flat))]
                grams = np.einsum("ik,jk->ij", flat, flat)[:, :, None]  # no BLAS threads for a small product
            else:
                scale = np.maximum.reduceat(np.abs(residuals).max(axis=(0, 2), initial=0.0), first)
                products = np.einsum("ird,jrd->ijr", residuals, residuals)
                grams = np.add.reduceat(products, first, axis=2)  # (3, 3, groups)
        out = []
        for g in range(first.size):
            if not 0.0 < scale[g] < np.inf:
                out.append(np.eye(3)[0])
            elif scale[g] > 1e150 or scale[g] < 1e-150:  # the products over- or underflow: rescale first
                rows = slice(first[g], first[g + 1] if g + 1 < first.size else None)
                out.append(simplex_weights(list(residuals[:, rows])))
            else:
                out.append(_simplex_minimiser(grams[:, :, g] / (scale[g] * scale[g])))
        return out

    def apply(self, y, weights: tuple[float, list[np.ndarray]]):
        """The estimates for results ``y`` at given :meth:`weights` (a linear map of ``y``)."""
        return self._apply(y, weights)

    def _apply(self, y, weights: tuple[float, list[np.ndarray]], shared=None):
        theta, fitted = weights
        linear = self.base.linear_values(y)
        uses_cubic = theta != 0.0 or any(
            g.maps is None and w[1] != 0.0 for g, w in zip(self.groups, fitted, strict=True)
        )
        if not uses_cubic and not self.groups:
            return linear
        cubic = self.base.cubic_values(y, shared) if uses_cubic else linear
        estimates = linear if theta == 0.0 else linear + theta * (cubic - linear)
        if not self.groups:
            return estimates
        shape = estimates.shape
        flat_y = y.reshape(y.shape[0], -1)
        estimates = estimates.reshape(shape[0], -1)
        flat_linear, flat_cubic = linear.reshape(shape[0], -1), cubic.reshape(shape[0], -1)
        mean = None  # the results' mean, when a gap's blend takes it
        for group, w in zip(self.groups, fitted, strict=True):
            if group.maps is None:  # inside a gap: the linear, the cubic and the mean
                value = float(w[0]) * _arraylib.take_rows(flat_linear, group.points)
                if w[1] != 0.0:  # (a term of weight 0 adds nothing but a pass over the rows)
                    value = value + float(w[1]) * _arraylib.take_rows(flat_cubic, group.points)
                if w[2] != 0.0:
                    mean = flat_y.mean(0) if mean is None else mean
                    value = value + float(w[2]) * mean
            else:
                value = sum(
                    float(c) * _arraylib.apply_matrix(m, flat_y)
                    for c, m in zip(w, group.maps, strict=True)
                    if c > 0.0
                )
            estimates = _arraylib.set_rows(estimates, group.points, value)
        return estimates.reshape(shape)
