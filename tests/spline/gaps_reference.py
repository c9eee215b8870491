"""A frozen copy of ``codedcomputing.spline.gaps`` as it was before its decoder was rebuilt for
serving rates (row-by-row maps, scipy.sparse, a least-squares solve per simplex face): the
oracle that ``test_gaps_fast.py`` holds the rebuilt decoder to. Not collected by pytest.

The original docstring follows.

Gap-aware decoding: the adaptive interpolant, with the points that fall in gaps of the
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
the blend on those blocks (all output coordinates together). One set of weights per gap
size per call. When no block of that span fits, the gap takes ``L``. The single-point
leave-one-out that picks the adaptive blend's ``theta`` is blind to gaps: a cubic that is
right between neighbouring knots can swing across ten missing ones, and far from its knots
the average output is a better guess than either interpolant.

**Beyond an end** where ``miss`` design points are missing, the estimate is a blend, with
weights on the simplex, of four extrapolants: the end value held, the end chord's line, the
natural cubic's line through the :data:`WINDOW` outermost knots, and Berrut's interpolant
through all knots; fitted the same way on the knots within ``miss`` design steps of either
end, predicted from the others.

Every candidate is a linear map of the results fixed by the knots, so the maps are built
once per set of knots (GCC caches a decoder per alive set) and a call costs the adaptive
interpolant's decode plus ``O((POSITIONS m WINDOW + |z in gaps|) d)`` for the gaps, one
pass over the results for their mean, and the edge maps (``O(n d)`` per point beyond an
end, through Berrut). The weights are computed in float64 on the host; for torch tensors
that require grad, autograd treats them as constants.

Measured (``benchmarks/studies/bench_contiguous.py``, 200 paired trials): with a block of
neighbouring points missing, the adaptive interpolant lost to BACC from a block of 15 of 50
on (LeNet-5 0.66, ViT 0.44, MLP 0.72), and this decoder held above it up to 40% of N.
"""

from __future__ import annotations

import itertools

import numpy as np
from scipy.sparse import csr_array

from codedcomputing import _arraylib
from codedcomputing.spline.adaptive import AdaptiveInterpolant
from codedcomputing.spline.berrut import berrut_matrix
from codedcomputing.spline.reinsch import smoothing_matrix

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
    scaled = [np.ravel(r) / scale for r in residuals]
    gram = np.array([[float(np.vdot(a, b)) for b in scaled] for a in scaled])
    best, best_w = np.inf, np.eye(count)[0]
    for size in range(1, count + 1):
        for face in map(list, itertools.combinations(range(count), size)):
            # the minimiser of w^T G w on the face's affine hull (sum w = 1), from the KKT
            # system, by least squares: G_ff is singular when candidates agree or are exact
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
            if value < best - 1e-12 * (1.0 + best if best < np.inf else 0.0):  # ties: fewer candidates
                best, best_w = value, w
    return best_w


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
    window = np.arange(min(WINDOW, n)) if low else np.arange(max(0, n - WINDOW), n)
    cubic = np.zeros((z.size, n))
    if window.size >= 3:
        cubic[:, window] = smoothing_matrix(t[window], 0.0, z)  # linear beyond the window
    else:
        cubic = line.copy()
    maps = [hold, line, cubic]
    if berrut:
        maps.append(berrut_matrix(t, z))
    return maps


class _Group:
    """Points re-estimated together: their indices, the candidate maps at them (``None``
    for the linear, the cubic and the mean, which every call computes anyway) and the
    validation residual maps of the candidates (rows: the dropped knots), or fixed weights."""

    def __init__(self, label, points, *, maps=None, validation=None, means=None, fixed=None):
        self.label, self.points = label, points
        self.maps, self.validation, self.fixed = maps, validation, fixed
        # per validation map, None or the mean of the other results, added to its rows:
        # (block indicator B, block of each row, c) -> c * (sum of all - (B y)[block])
        self.means = means if means is not None else [None] * len(validation or ())


class GapAwareInterpolant:
    """``y -> (estimates at points, info)``: :class:`AdaptiveInterpolant` with the points in
    gaps of the design, and beyond its ends, re-estimated (module docstring).

    ``knots`` in any order (row i of ``y`` belongs to ``knots[i]``), ``ranks[i]`` the
    position of ``knots[i]`` among the ``num_design`` sorted design points. Works on numpy
    arrays and torch tensors in their own type, dtype and device. Everything is built in the
    constructor; calls only read it, so one decoder serves many threads. No checks are
    performed.
    """

    def __init__(self, knots: np.ndarray, ranks: np.ndarray, points: np.ndarray, num_design: int):
        self.base = AdaptiveInterpolant(knots, points)
        self.points, self.num_design = points, int(num_design)
        order = np.argsort(knots, kind="stable")
        self._columns = np.argsort(order)  # a sorted-order map's columns -> the knots' order
        self._order = order
        t, rank = knots[order], np.asarray(ranks)[order]
        self.groups: list[_Group] = []
        if t.size >= 4:
            self._interior_groups(t, rank)
            self._edge_groups(t, rank)
        # the validation maps read only these rows of the results (besides their sum)
        used = [csr_array(v).indices for g in self.groups for v in g.validation or ()]
        used += [mean[0].indices for g in self.groups for mean in g.means if mean is not None]
        self._rows = np.unique(np.concatenate(used)) if used else np.zeros(0, dtype=np.intp)
        for group in self.groups:
            if group.validation:
                group.validation = [csr_array(v)[:, self._rows] for v in group.validation]
                group.means = [
                    None if mean is None else (mean[0][:, self._rows], *mean[1:]) for mean in group.means
                ]

    # ------------------------------------------------------------------ building
    def _to_given(self, sorted_map: np.ndarray) -> np.ndarray:
        """Columns of a map over the sorted knots, reordered to the knots' given order."""
        return sorted_map[:, self._columns]

    def _interior_groups(self, t: np.ndarray, rank: np.ndarray) -> None:
        n, z = t.size, self.points
        spans = np.diff(rank)
        threshold = max(MIN_MISSING, int(np.floor(RELATIVE * np.median(spans))))
        is_gap = spans - 1 >= threshold
        inside = (z >= t[0]) & (z <= t[-1])
        bracket = np.clip(np.searchsorted(t, z, side="right") - 1, 0, n - 2)
        missing = spans[bracket] - 1
        gaps_before = np.r_[0, np.cumsum(is_gap)]  # gaps among brackets 0..i-1
        for m in np.unique(missing[inside & (missing >= threshold)]):
            pts = np.flatnonzero(inside & (missing == m))
            span = int(m) + 1
            start = np.arange(n - 2)
            end = np.searchsorted(rank, rank[start] + span, side="left")  # first knot span steps on
            ok = (end <= n - 1) & (end - start >= 2)
            ok &= gaps_before[np.minimum(end, n - 1)] - gaps_before[start] == 0
            starts = np.flatnonzero(ok)
            if starts.size == 0:  # nothing of this span to validate on: the chord
                self.groups.append(_Group(("gap", int(m)), pts, fixed=np.array([1.0, 0.0, 0.0])))
                continue
            pick = starts[np.unique(np.linspace(0, starts.size - 1, POSITIONS).round().astype(int))]
            # rows: the dropped knots predicted (at most MAX_BLOCK_TARGETS a block, evenly spread)
            chord, cubic, targets, sums, row_block, coefficients = [], [], [], [], [], []
            for index, s in enumerate(pick):
                e = int(end[s])
                removed = np.arange(s + 1, e)
                target = _spread(removed, MAX_BLOCK_TARGETS)
                kept = np.r_[max(0, s - WINDOW) : s + 1, e : min(n, e + 1 + WINDOW)]
                right = (t[target] - t[s]) / (t[e] - t[s])  # the chord's weight of knot e
                chord.append((np.array([s, e]), np.stack([1.0 - right, right], axis=1)))
                cubic.append((kept, smoothing_matrix(t[kept], 0.0, t[target])))
                targets.append(target)
                # the mean of the other results: (total - the block's sum) / (n - block size);
                # the sum from the targets when they are a sample of the block (large blocks)
                sums.append((target, removed.size / target.size))
                row_block.append(np.full(target.size, index))
                coefficients.append(np.full(target.size, 1.0 / (n - removed.size)))
            target = np.concatenate(targets)
            validation = [self._residual_map(blocks, target) for blocks in (chord, cubic)]
            validation.append(self._residual_map([], target))  # the mean's: -y_target, plus below
            block_sums = (self._indicator(sums), np.concatenate(row_block), np.concatenate(coefficients))
            self.groups.append(
                _Group(("gap", int(m)), pts, validation=validation, means=[None, None, block_sums])
            )

    def _residual_map(self, blocks: list, target: np.ndarray) -> csr_array:
        """The sparse ``(len(target), n)`` map of ``prediction - y[target]``, the prediction's
        rows given block by block as ``(columns, dense rows)`` over the sorted knots; columns
        in the knots' given order."""
        n = self._columns.size
        rows, cols, vals = [np.arange(target.size)], [target], [-np.ones(target.size)]
        offset = 0
        for columns, dense in blocks:
            r = np.repeat(np.arange(offset, offset + dense.shape[0]), columns.size)
            rows.append(r), cols.append(np.tile(columns, dense.shape[0])), vals.append(dense.ravel())
            offset += dense.shape[0]
        rows, cols, vals = np.concatenate(rows), np.concatenate(cols), np.concatenate(vals)
        return csr_array((vals, (rows, self._order[cols])), shape=(target.size, n))

    def _indicator(self, blocks: list[tuple[np.ndarray, float]]) -> csr_array:
        """``(len(blocks), n)``: row b is ``scale`` times the sum of the results of ``index``
        for ``blocks[b] = (index, scale)`` (sorted-knot indices)."""
        rows = np.concatenate([np.full(b.size, i) for i, (b, _) in enumerate(blocks)])
        cols = self._order[np.concatenate([b for b, _ in blocks])]
        vals = np.concatenate([np.full(b.size, scale) for b, scale in blocks])
        return csr_array((vals, (rows, cols)), shape=(len(blocks), self._columns.size))

    def _edge_groups(self, t: np.ndarray, rank: np.ndarray) -> None:
        n, z = t.size, self.points
        for low in (True, False):
            pts = np.flatnonzero(z < t[0]) if low else np.flatnonzero(z > t[-1])
            miss = int(rank[0]) if low else self.num_design - 1 - int(rank[-1])
            if pts.size == 0 or miss < 1:
                continue
            berrut = max(pts.size, 2 * MAX_EDGE_TARGETS) * n <= MAX_BERRUT_ENTRIES
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
                    maps=[self._to_given(m) for m in _extrapolants(t, z[pts], low, berrut)],
                    validation=[self._to_given(np.concatenate(c)) for c in zip(*validation, strict=True)],
                )
            )

    # ------------------------------------------------------------------ calling
    def __call__(self, y):
        weights = self.weights(y)
        info = {
            "theta": weights[0],
            "gaps": [(g.label, tuple(map(float, w))) for g, w in zip(self.groups, weights[1], strict=True)],
        }
        return self.apply(y, weights), info

    def weights(self, y) -> tuple[float, list[np.ndarray]]:
        """``(theta, [weights of each group])`` for results ``y``: what a call fits, computed
        in float64 on the host. :meth:`apply` with them is linear in ``y``."""
        theta = self.base.weight(y)
        if not self.groups:
            return theta, []
        flat_y = y.reshape(y.shape[0], -1)
        if self._rows.size:
            host = _arraylib.to_float64(_arraylib.take_rows(flat_y, self._rows))
            total = _arraylib.to_float64(flat_y.sum(0)[None])[0]
        fitted = []
        for group in self.groups:
            if group.fixed is not None:
                fitted.append(group.fixed)
                continue
            residuals = []
            for v, mean in zip(group.validation, group.means, strict=True):
                r = np.asarray(v @ host)
                if mean is not None:
                    indicator, block, coefficient = mean
                    r += coefficient[:, None] * (total - np.asarray(indicator @ host)[block])
                residuals.append(r)
            fitted.append(simplex_weights(residuals))
        return theta, fitted

    def apply(self, y, weights: tuple[float, list[np.ndarray]]):
        """The estimates for results ``y`` at given :meth:`weights` (a linear map of ``y``)."""
        theta, fitted = weights
        linear = _arraylib.apply_matrix(self.base.linear, y)
        if theta == 0.0 and not self.groups:
            return linear
        cubic = self.base.cubic(y)
        estimates = linear if theta == 0.0 else linear + theta * (cubic - linear)
        if not self.groups:
            return estimates
        shape = estimates.shape
        flat_y = y.reshape(y.shape[0], -1)
        estimates = estimates.reshape(shape[0], -1)
        flat_linear, flat_cubic = linear.reshape(shape[0], -1), cubic.reshape(shape[0], -1)
        mean = flat_y.mean(0)
        for group, w in zip(self.groups, fitted, strict=True):
            if group.maps is None:  # inside a gap: the linear, the cubic and the mean
                value = (
                    float(w[0]) * _arraylib.take_rows(flat_linear, group.points)
                    + float(w[1]) * _arraylib.take_rows(flat_cubic, group.points)
                    + float(w[2]) * mean
                )
            else:
                value = sum(
                    float(c) * _arraylib.apply_matrix(m, flat_y)
                    for c, m in zip(w, group.maps, strict=True)
                    if c > 0.0
                )
            estimates = _arraylib.set_rows(estimates, group.points, value)
        return estimates.reshape(shape)
