"""Fast 1-D Cauchy sums ``s_i = sum_{j: t_j != z_i} c_j / (z_i - t_j)`` for fixed sources ``t``
and targets ``z``: the numerator and denominator of Berrut's interpolant (:mod:`.berrut`).

A one-dimensional fast multipole method with Chebyshev interpolation of the kernel (the
"black-box" FMM of Fong and Darve, 2009, in one dimension). ``[lo, hi]``, the hull of all
points, is halved ``L`` times into ``2^L`` leaf boxes. A target's *near field* is its own leaf
and the two beside it, summed directly (a sparse matrix). A source box's contribution to a
target box that is not beside it (at the same level, children of the parent's neighbours: at
most three) goes through ``p`` Chebyshev nodes in each box: ``1 / (z - t)`` is interpolated in
``t`` over the source box and in ``z`` over the target box, both analytic there (the pole is
at least 1.5 box widths from either box's centre: error ~ (3 + sqrt 8)^-p per box pair, about
1e-16 relative for ``p = 20``). Upward pass (sources -> leaf equivalent charges -> parents),
interaction lists at every level from 2 down, downward pass (parents' local fields
interpolated at the children's nodes), and leaf fields interpolated at the targets. With
``N`` sources, ``M`` targets and ``d`` columns the cost is ``O((N + M) p d + 2^L p^2 d + near)``.

Boxes are uniform, so at each level every interaction is one of four ``p x p`` matrices (the
kernel is translation invariant and homogeneous of degree -1). ``L`` minimises a cost model
that counts the near field's actual entries, so clustered points (Chebyshev points crowd the
ends of [-1, 1]) cost what they cost, never more than the dense sum; when the dense sum is
predicted cheaper (small ``N M``), the map is the dense ``(M, N)`` matrix itself.

A target equal to a source (bit for bit) leaves that source out of its sum:
:attr:`CauchySum.coincident` lists those pairs, for callers that give such targets that
source's value (a Berrut interpolant through its nodes).
"""

from __future__ import annotations

import numpy as np

from .. import _arraylib

__all__ = ["CauchySum"]

#: Chebyshev nodes per box: the far field's relative error is about 5.8^-ORDER per box pair
#: (measured against the dense sums: 16 gives up to 3e-13, 18 about 1e-15).
ORDER = 18
#: Relative cost of one multiply-add in the near field and the leaf transfers (small padded
#: blocks, gathered) against one in a dense product, and the fixed cost of one level of the
#: tree in multiply-adds per column (numpy calls): the tree's depth and the dense/fast choice
#: minimise the modelled cost.
SPARSE_COST = 2.0
LEVEL_COST = 20_000
#: The fixed cost of a leaf (its small blocks' calls), in the same units. With these, the
#: depth chosen is the fastest measured for K = N / 10, N = 2,000 to 16,000, width 10.
LEAF_COST = 4_000


def _chebyshev_nodes(order: int) -> np.ndarray:
    return np.cos((2 * np.arange(order) + 1) * np.pi / (2 * order))


def _lagrange_basis(x: np.ndarray, order: int) -> np.ndarray:
    """``(len(x), order)``: the Lagrange basis on Chebyshev nodes (first kind, ``[-1, 1]``) at
    ``x``, by the barycentric formula; a point on a node gets that node's unit vector."""
    nodes = _chebyshev_nodes(order)
    weights = (-1.0) ** np.arange(order) * np.sin((2 * np.arange(order) + 1) * np.pi / (2 * order))
    diff = x[:, None] - nodes[None, :]
    on_node = diff == 0.0
    with np.errstate(divide="ignore", invalid="ignore"):
        basis = weights / diff
        basis /= basis.sum(axis=1, keepdims=True)
    hit = on_node.any(axis=1)
    basis[hit] = on_node[hit]
    return basis


class CauchySum:
    """The linear map ``c -> s``, ``s_i = sum_{j: t_j != z_i} c_j / (z_i - t_j)``, for fixed
    sources ``t`` (``(N,)``) and targets ``z`` (``(M,)``), applied to ``(N, ...)`` arrays.

    Built once in ``O((N + M) p + near)`` and applied in ``O((N + M) p d + near d)`` by a 1-D
    fast multipole method (module docstring), or by the dense ``(M, N)`` matrix where that is
    predicted cheaper; both agree with the dense sum to about 1e-14 relative to
    ``sum_j |c_j| / |z_i - t_j|``. ``dense=True`` / ``False`` forces a path. No checks are
    performed: finite points, ``N >= 1``.

    Attributes
    ----------
    coincident : (ndarray, ndarray)
        ``(targets, sources)``: the index pairs with ``z_i == t_j``, left out of the sums.
    levels : int
        The tree's depth ``L`` (0 for the dense map).
    """

    def __init__(self, sources, targets, *, dense: bool | None = None, order: int = ORDER):
        self.sources = np.asarray(sources, dtype=np.float64)
        self.targets = np.asarray(targets, dtype=np.float64)
        self.order = order
        n, m = self.sources.size, self.targets.size
        lo = min(self.sources.min(initial=np.inf), self.targets.min(initial=np.inf))
        hi = max(self.sources.max(initial=-np.inf), self.targets.max(initial=-np.inf))
        self._lo, self._width = lo, (hi - lo if hi > lo else 1.0)
        levels, fast_cost = self._plan()
        if dense is None:
            dense = levels < 2 or fast_cost >= n * m
        if dense:
            self.levels = 0
            self._build_dense()
        else:
            self.levels = levels
            self._build_tree(levels)

    # -- planning ------------------------------------------------------------------------

    def _leaf_counts(self, levels: int) -> tuple[np.ndarray, np.ndarray]:
        boxes = 2**levels
        return (
            np.bincount(self._box(self.sources, levels), minlength=boxes),
            np.bincount(self._box(self.targets, levels), minlength=boxes),
        )

    def _box(self, x: np.ndarray, levels: int) -> np.ndarray:
        boxes = 2**levels
        return np.clip(((x - self._lo) * (boxes / self._width)).astype(np.int64), 0, boxes - 1)

    def _near_entries(self, levels: int) -> int:
        sources, targets = self._leaf_counts(levels)
        near = sources.copy()
        near[1:] += sources[:-1]
        near[:-1] += sources[1:]
        return int(near @ targets)

    def _plan(self) -> tuple[int, float]:
        """``(L, cost)``: the depth that minimises the modelled multiply-adds per column."""
        n, m, p = self.sources.size, self.targets.size, self.order
        best = (0, np.inf)
        top = int(np.clip(np.ceil(np.log2(max(n + m, 2))), 2, 24))
        for levels in range(2, top + 1):
            boxes = 2**levels
            cost = (
                SPARSE_COST * (self._near_entries(levels) + (n + m) * p)
                + (12 * p * p + LEAF_COST) * boxes
                + LEVEL_COST * levels
            )
            if cost < best[1]:
                best = (levels, cost)
        return best

    # -- building ------------------------------------------------------------------------

    def _build_dense(self) -> None:
        with np.errstate(divide="ignore"):
            matrix = 1.0 / (self.targets[:, None] - self.sources[None, :])
        rows, cols = np.nonzero(~np.isfinite(matrix))
        matrix[rows, cols] = 0.0
        self.coincident = (rows, cols)
        matrix.flags.writeable = False
        self._dense = matrix

    def _build_tree(self, levels: int) -> None:
        p, boxes = self.order, 2**levels
        n, m = self.sources.size, self.targets.size
        leaf_width = self._width / boxes
        source_box, target_box = self._box(self.sources, levels), self._box(self.targets, levels)
        by_box = np.argsort(source_box, kind="stable")
        starts = np.searchsorted(source_box[by_box], np.arange(boxes + 1))
        in_box = [by_box[starts[b] : starts[b + 1]] for b in range(boxes)]
        targets_by_box = np.argsort(target_box, kind="stable")
        target_starts = np.searchsorted(target_box[targets_by_box], np.arange(boxes + 1))
        targets_in = [targets_by_box[target_starts[b] : target_starts[b + 1]] for b in range(boxes)]
        # near field: each leaf's targets against the sources of the leaf and the two beside it
        near_sources = [by_box[starts[max(b - 1, 0)] : starts[min(b + 2, boxes)]] for b in range(boxes)]

        def kernel(rows, cols):
            with np.errstate(divide="ignore", invalid="ignore"):
                return 1.0 / (self.targets[rows][:, :, None] - self.sources[cols][:, None, :])

        self._near = _Blocks((m, n), targets_in, near_sources, kernel)  # coincident pairs: inf -> 0
        self.coincident = _equal_pairs(self.targets, self.sources)
        # sources -> leaf charges at the Chebyshev nodes; leaf fields -> targets. Row (and
        # column) ``node * boxes + box``, so the products come out as (p, boxes, d).
        centres = self._lo + (np.arange(boxes) + 0.5) * leaf_width
        to_node = _lagrange_basis((self.sources - centres[source_box]) / (leaf_width / 2), p)
        from_node = _lagrange_basis((self.targets - centres[target_box]) / (leaf_width / 2), p)
        leaf_nodes = [np.arange(p) * boxes + b for b in range(boxes)]
        self._charges = _Blocks(
            (p * boxes, n),
            leaf_nodes,
            in_box,
            lambda rows, cols: to_node[cols[:, None, :], (rows // boxes)[:, :, None]],
        )
        self._fields = _Blocks(
            (m, p * boxes),
            targets_in,
            leaf_nodes,
            lambda rows, cols: from_node[rows[:, :, None], (cols // boxes)[:, None, :]],
        )
        # child c's nodes in its parent's coordinates: interpolation from parent to child
        nodes = _chebyshev_nodes(p)
        to_child = [_lagrange_basis((nodes + side) / 2, p) for side in (-1.0, 1.0)]
        self._down = np.concatenate(to_child, axis=0)  # (2p, p): parent field -> children's
        self._up = self._down.T.copy()  # (p, 2p): children's charges -> parent's
        # interactions with the box `offset` boxes away, for unit boxes: 1 / (z - t)
        self._offsets = (-3, -2, 2, 3)
        unit = np.concatenate(
            [1.0 / ((nodes[:, None] - nodes[None, :]) / 2 - offset) for offset in self._offsets], axis=1
        )  # (p, 4p), for boxes of width 1; a box of width w: / w
        self._interactions = {level: unit * (2**level / self._width) for level in range(2, levels + 1)}
        for matrix in (self._down, self._up, *self._interactions.values()):
            matrix.flags.writeable = False

    # -- applying ------------------------------------------------------------------------

    def __call__(self, charges):
        """``s`` for ``charges`` of shape ``(N, ...)`` (numpy or torch, any float dtype):
        shape ``(M, ...)``, in ``charges``' type, dtype and device."""
        if self.levels == 0:
            return _arraylib.apply_matrix(self._dense, charges)
        shape = (self.targets.size, *tuple(charges.shape[1:]))
        flat = charges.reshape(charges.shape[0], -1)
        if _arraylib.is_torch(flat):
            out = self._fmm(flat, _arraylib.apply_matrix)
        else:
            with _arraylib.one_blas_thread:
                out = self._fmm(flat, _numpy_product)
        return out.reshape(shape)

    def _fmm(self, flat, product):
        p, levels = self.order, self.levels
        d = flat.shape[1]
        extended = _Blocks.extend(flat)
        charges = [None] * (levels + 1)  # per level: (p, boxes, d)
        charges[levels] = self._charges.product(extended)[:-1].reshape(p, 2**levels, d)
        for level in range(levels, 2, -1):
            boxes = 2**level
            children = charges[level].reshape(p, boxes // 2, 2, d)
            pairs = _cat([children[:, :, 0], children[:, :, 1]], flat)  # (2p, boxes/2, d)
            charges[level - 1] = product(self._up, pairs)
        field = None
        for level in range(2, levels + 1):
            boxes = 2**level
            shifted = _zeros(flat, (4, p, boxes, d))
            source = charges[level]
            for i, offset in enumerate(self._offsets):
                lo, hi = max(0, -offset), min(boxes, boxes - offset)  # targets with a box `offset` away
                if abs(offset) == 3:  # only from the far child of a neighbour of the parent
                    lo += (lo % 2) != (offset < 0)
                    shifted[i, :, lo:hi:2] = source[:, lo + offset : hi + offset : 2]
                else:
                    shifted[i, :, lo:hi] = source[:, lo + offset : hi + offset]
            here = product(self._interactions[level], shifted.reshape(4 * p, boxes, d))
            if field is not None:
                down = product(self._down, field).reshape(2, p, boxes // 2, d)
                here = here + _stack_children(down, flat)
            field = here
        out = self._fields.product(_Blocks.extend(field.reshape(p * 2**levels, d)))
        return self._near.product(extended, out)[:-1]


def _equal_pairs(targets: np.ndarray, sources: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``(i, j)`` index arrays of the pairs with ``targets[i] == sources[j]``."""
    order = np.argsort(sources, kind="stable")
    ordered = sources[order]
    first = np.searchsorted(ordered, targets, side="left")
    counts = np.searchsorted(ordered, targets, side="right") - first
    rows = np.repeat(np.arange(targets.size), counts)
    offsets = np.arange(rows.size) - np.repeat(np.cumsum(counts) - counts, counts)
    return rows, order[np.repeat(first, counts) + offsets]


def _padded(size: int) -> int:
    """``size`` rounded up to a quarter octave (1, 2, 3, 4, 5, 6, 7, 8, 10, 12, 14, 16, 20, ...)."""
    step = 1 << max(0, int(size - 1).bit_length() - 3)
    return -(-size // step) * step


class _Blocks:
    """A sparse ``(rows, cols)`` matrix held as dense blocks: group g maps the entries
    ``cols_g`` of the input to the entries ``rows_g`` of the output (every output entry in at
    most one group). Groups are padded to a quarter octave in each dimension where their sizes
    differ, and stacked by padded shape, so a product is one batched matrix product per shape
    (BLAS) rather than a sparse product (several times slower per multiply-add here, measured
    at widths 11 and 201). ``values(rows, cols)``
    returns the ``(count, r, c)`` blocks of a stack; padding is zeroed after it, and entries
    it returns as inf or NaN are zeroed too."""

    def __init__(self, shape, rows_of, cols_of, values):
        self.shape = shape
        stacks: dict[tuple[int, int], list[int]] = {}
        used = [g for g in range(len(rows_of)) if rows_of[g].size and cols_of[g].size]
        same_rows = len({rows_of[g].size for g in used}) == 1
        same_cols = len({cols_of[g].size for g in used}) == 1
        for group in used:
            key = (
                rows_of[group].size if same_rows else _padded(rows_of[group].size),
                cols_of[group].size if same_cols else _padded(cols_of[group].size),
            )
            stacks.setdefault(key, []).append(group)
        self.stacks = []
        for (height, width), groups in sorted(stacks.items()):
            rows = np.full((len(groups), height), shape[0], dtype=np.int64)
            cols = np.full((len(groups), width), shape[1], dtype=np.int64)
            for i, group in enumerate(groups):
                rows[i, : rows_of[group].size] = rows_of[group]
                cols[i, : cols_of[group].size] = cols_of[group]
            padding = (rows == shape[0])[:, :, None] | (cols == shape[1])[:, None, :]
            block = values(np.minimum(rows, shape[0] - 1), np.minimum(cols, shape[1] - 1))
            block = np.where(padding | ~np.isfinite(block), 0.0, block)
            for array in (rows, cols, block):
                array.flags.writeable = False
            self.stacks.append((rows, cols, block))

    @staticmethod
    def extend(x):
        """``x`` (2-D) with a row of zeros appended: what padded columns read."""
        if _arraylib.is_torch(x):
            import torch

            return torch.cat([x, x.new_zeros((1, x.shape[1]))])
        return np.concatenate([x, np.zeros((1, x.shape[1]), dtype=x.dtype)])

    def product(self, extended, out=None):
        """``matrix @ x`` for ``extended = extend(x)``, with one more row (scratch for the
        padding) at the end, added to ``out`` (such a result) when given. numpy, or torch on
        any device (autograd follows)."""
        d = extended.shape[1]
        if _arraylib.is_torch(extended):
            import torch

            if out is None:
                out = extended.new_zeros((self.shape[0] + 1, d))
            for rows, cols, block in self.stacks:
                rows_t = _arraylib.device_copies.get(rows, torch.int64, extended.device)
                cols_t = _arraylib.device_copies.get(cols, torch.int64, extended.device)
                block_t = _arraylib.device_copies.get(block, extended.dtype, extended.device)
                values = torch.matmul(block_t, extended[cols_t])
                out = out.index_put((rows_t,), values, accumulate=True)
            return out
        if out is None:
            out = np.zeros((self.shape[0] + 1, d), dtype=extended.dtype)
        for rows, cols, block in self.stacks:
            out[rows] += np.matmul(block, extended[cols])
        return out


def _numpy_product(matrix, x):
    """``matrix @ x`` over ``x``'s leading axis (numpy; the caller holds one BLAS thread)."""
    out = matrix @ x.reshape(x.shape[0], -1)
    return np.asarray(out).reshape(matrix.shape[0], *x.shape[1:])


def _zeros(like, shape):
    if _arraylib.is_torch(like):
        import torch

        return torch.zeros(shape, dtype=like.dtype, device=like.device)
    return np.zeros(shape, dtype=like.dtype)


def _cat(parts, like):
    if _arraylib.is_torch(like):
        import torch

        return torch.cat(parts, dim=0)
    return np.concatenate(parts, axis=0)


def _stack_children(down, like):
    """``(2, p, B/2, d)`` fields of left and right children -> ``(p, B, d)``, children in order."""
    p, half, d = down.shape[1], down.shape[2], down.shape[3]
    if _arraylib.is_torch(like):
        return down.permute(1, 2, 0, 3).reshape(p, 2 * half, d)
    return down.transpose(1, 2, 0, 3).reshape(p, 2 * half, d)
