"""Fast 1-D Cauchy sums ``s_i = sum_{j: t_j != z_i} c_j / (z_i - t_j)`` for fixed sources ``t``
and targets ``z``: the numerator and denominator of Berrut's interpolant (:mod:`.berrut`).

A one-dimensional fast multipole method with Chebyshev interpolation of the kernel (the
"black-box" FMM of Fong and Darve, 2009, in one dimension). ``[lo, hi]``, the hull of all
points, is halved ``L`` times into ``2^L`` leaf boxes. A target's *near field* is its own leaf
and the two beside it, summed directly (one dense block per leaf). A source box's contribution to a
target box that is not beside it (at the same level, children of the parent's neighbours: at
most three) goes through ``p`` Chebyshev nodes in each box: ``1 / (z - t)`` is interpolated in
``t`` over the source box and in ``z`` over the target box, both analytic there (the pole is
at least 1.5 box widths from either box's centre: error ~ (3 + sqrt 8)^-p per box pair, about
1e-16 relative for ``p = 20``). Upward pass (sources -> leaf equivalent charges -> parents),
interaction lists at every level from 2 down, downward pass (parents' local fields
interpolated at the children's nodes), and leaf fields interpolated at the targets. With
``N`` sources, ``M`` targets and ``d`` columns the cost is ``O((N + M) p d + 2^L p^2 d + near)``.

Boxes are uniform, so at each level every interaction is one of four ``p x p`` matrices (the
kernel is translation invariant and homogeneous of degree -1), applied to sibling pairs as
two ``2p x 2p`` matrices. On numpy the points are kept in sorted order, so that a leaf's
sources, its targets and its near field's sources are slices of the charges and the sums:
every block is a product on a view, without gathers. Per number of columns ``d``, a cost
model (module constants, fitted to measured times) that counts the near field's actual
entries picks ``L``, or the dense ``(M, N)`` matrix where that is predicted cheaper (small
``N M``, narrow ``d``); each is built at its first use. Clustered points (Chebyshev points
crowd the ends of [-1, 1]) cost what they cost.

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
#: The cost model that picks, per number of columns ``d``, the dense product or the tree and
#: its depth, in units of one multiply-add of a wide dense product (BLAS-3, one thread, about
#: 0.05 ns here). The tree's stored entries (near field and leaf transfers: products on slices
#: of the sorted points) cost ``STORED_COST`` each per call plus ``NEAR_COST`` per column; its
#: ``p x p`` products ``TREE_COST`` per multiply-add; a leaf (its numpy calls) ``LEAF_COST``.
#: The dense product costs ``DENSE_ENTRY_COST`` per entry (``DENSE_UNCACHED_COST`` more for a
#: matrix over ``CACHE_BYTES``) plus, per multiply-add, ``DENSE_NARROW_COST`` up to ``NARROW``
#: columns (a narrow product is slower per multiply-add) and 1 beyond. Least squares on CPU
#: times of both BACC directions, K = N / 10, N = 500 to 16,000, d = 1, 11, 51 and 201, depths
#: 2 to 8 and dense: the path chosen costs 4% more than the fastest measured on average (at
#: most 1.7x).
STORED_COST = 14.1
NEAR_COST = 1.27
TREE_COST = 0.96
LEAF_COST = 175_000
DENSE_ENTRY_COST = 0.95
DENSE_UNCACHED_COST = 6.5
DENSE_NARROW_COST = 1.88
NARROW = 16
#: A matrix, or a level's ``(2^L, p, d)`` arrays, beyond this many bytes leaves the cache: the
#: tree's products slowed 2-2.5x at d = 201 (past the model), so deeper trees are not tried.
CACHE_BYTES = 2**21


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

    Applied in ``O((N + M) p d + near d)`` by a 1-D fast multipole method (module docstring),
    or by the dense ``(M, N)`` matrix where that is predicted cheaper for the call's number of
    columns ``d`` (:meth:`levels_for`); each tree, and the matrix, is built at its first use
    (``O((N + M) p + near)``; ``O(N M)``). Both agree with the dense sum to about 1e-14
    relative to ``sum_j |c_j| / |z_i - t_j|``. ``dense=True`` / ``False`` forces a path. No
    checks are performed: finite points, ``N >= 1``.

    Attributes
    ----------
    coincident : (ndarray, ndarray)
        ``(targets, sources)``: the index pairs with ``z_i == t_j``, left out of the sums.
    source_order, target_order : ndarray or None
        The points' sorted order (stable), None where they are sorted already: the order of
        :meth:`sorted_sums`' charges and results.
    levels : int
        The tree's depth ``L`` for one column (0: the dense matrix); :meth:`levels_for` for others.
    """

    def __init__(self, sources, targets, *, dense: bool | None = None, order: int = ORDER):
        self.sources = np.asarray(sources, dtype=np.float64)
        self.targets = np.asarray(targets, dtype=np.float64)
        self.order = order
        lo = min(self.sources.min(initial=np.inf), self.targets.min(initial=np.inf))
        hi = max(self.sources.max(initial=-np.inf), self.targets.max(initial=-np.inf))
        self._lo, self._width = lo, (hi - lo if hi > lo else 1.0)
        self._orders = [np.argsort(x, kind="stable") for x in (self.sources, self.targets)]
        self.source_order, self.target_order = (None if _is_identity(o) else o for o in self._orders)
        self.coincident = _equal_pairs(self.targets, self.sources)
        self._forced = dense
        n, m = self.sources.size, self.targets.size
        top = int(np.clip(np.ceil(np.log2(max(n + m, 2))), 2, 24))
        self._near = {levels: self._near_entries(levels) for levels in range(2, top + 1)}
        self._plans: dict[int, int] = {}
        self._built: dict[int, object] = {}  # depth -> _Tree; 0, -1 -> the dense matrix (sorted, given)

    @property
    def levels(self) -> int:
        return self.levels_for(1)

    # -- planning ------------------------------------------------------------------------

    def _box(self, x: np.ndarray, levels: int) -> np.ndarray:
        boxes = 2**levels
        return np.clip(((x - self._lo) * (boxes / self._width)).astype(np.int64), 0, boxes - 1)

    def _near_entries(self, levels: int) -> int:
        boxes = 2**levels
        sources = np.bincount(self._box(self.sources, levels), minlength=boxes)
        targets = np.bincount(self._box(self.targets, levels), minlength=boxes)
        near = sources.copy()
        near[1:] += sources[:-1]
        near[:-1] += sources[1:]
        return int(near @ targets)

    def levels_for(self, width: int) -> int:
        """The depth that minimises the modelled cost of ``width`` columns (module constants),
        0 where the dense product is cheaper (or forced)."""
        plan = self._plans.get(width)
        if plan is None:
            n, m, p, d = self.sources.size, self.targets.size, self.order, max(width, 1)
            per_column = DENSE_NARROW_COST if d <= NARROW else 1.0
            entry = DENSE_ENTRY_COST + (DENSE_UNCACHED_COST if n * m * 8 > CACHE_BYTES else 0.0)
            plan, best = 0, (np.inf if self._forced is False else n * m * (entry + per_column * d))
            if self._forced is not True:
                for levels, near in self._near.items():
                    boxes, stored = 2**levels, near + (n + m) * p
                    if levels > 2 and boxes * p * d * 8 > CACHE_BYTES:
                        break
                    cost = (
                        stored * (STORED_COST + NEAR_COST * d)
                        + TREE_COST * 12 * p * p * boxes * d
                        + LEAF_COST * boxes
                    )
                    if cost < best:
                        plan, best = levels, cost
            self._plans[width] = plan
        return plan

    def _tree(self, levels: int) -> _Tree:
        tree = self._built.get(levels)
        if tree is None:
            tree = self._built[levels] = _Tree(self, levels)
        return tree

    def _dense(self, given: bool = False) -> np.ndarray:
        """The ``(M, N)`` matrix, in the points' sorted order (numpy's) or in their given order
        (torch's), each built at its first use."""
        key = -1 if given else 0
        matrix = self._built.get(key)
        if matrix is None:
            order = (slice(None), slice(None)) if given else self._orders
            sources, targets = self.sources[order[0]], self.targets[order[1]]
            with np.errstate(divide="ignore"):
                matrix = 1.0 / (targets[:, None] - sources[None, :])
            matrix[np.isinf(matrix)] = 0.0  # coincident pairs are left out
            matrix.flags.writeable = False
            self._built[key] = matrix
        return matrix

    # -- applying ------------------------------------------------------------------------

    def __call__(self, charges):
        """``s`` for ``charges`` of shape ``(N, ...)`` (numpy or torch, any float dtype):
        shape ``(M, ...)``, in ``charges``' type, dtype and device."""
        shape = (self.targets.size, *tuple(charges.shape[1:]))
        flat = charges.reshape(charges.shape[0], -1)
        if _arraylib.is_torch(flat):
            levels = self.levels_for(flat.shape[1])
            if levels == 0:
                return _arraylib.apply_matrix(self._dense(given=True), flat).reshape(shape)
            return self._tree(levels).torch_sums(flat).reshape(shape)
        if self.source_order is not None:
            flat = flat[self.source_order]
        out = self.sorted_sums(flat)
        if self.target_order is not None:
            unsorted = np.empty_like(out)
            unsorted[self.target_order] = out
            out = unsorted
        return out.reshape(shape)

    def sorted_sums(self, charges: np.ndarray, rows: np.ndarray | None = None) -> np.ndarray:
        """The sums for numpy ``charges`` of shape ``(N, d)`` given at the sources in sorted
        order (``sources[source_order]``), at the targets in sorted order: ``(M, d)``. With
        ``rows`` (increasing), ``charges`` holds only those sources' rows, the others zero."""
        levels = self.levels_for(charges.shape[1])
        if levels == 0:  # (apply_matrix: tiny products skip the BLAS thread limiter)
            return _arraylib.apply_matrix(self._dense() if rows is None else self._dense()[:, rows], charges)
        return self._tree(levels).sums(charges, rows)


class _Tree:
    """A :class:`CauchySum`'s tree of depth ``levels``: its leaves' blocks and its interactions."""

    def __init__(self, owner: CauchySum, levels: int):
        p, boxes = owner.order, 2**levels
        self.order, self.levels, self.shape = p, levels, (owner.targets.size, owner.sources.size)
        leaf_width = owner._width / boxes
        source_box, target_box = owner._box(owner.sources, levels), owner._box(owner.targets, levels)
        # sources -> leaf charges at the Chebyshev nodes; leaf fields -> targets
        centres = owner._lo + (np.arange(boxes) + 0.5) * leaf_width
        to_node = _lagrange_basis((owner.sources - centres[source_box]) / (leaf_width / 2), p)
        from_node = _lagrange_basis((owner.targets - centres[target_box]) / (leaf_width / 2), p)
        # Points in sorted order (boxes are intervals): a leaf's sources, its targets and its
        # near field's sources (its own and its two neighbours') are slices of the sorted
        # charges and results, so that numpy applies every block to a view, without gathers
        order = owner._orders
        source_starts, target_starts = (
            np.searchsorted(box[o], np.arange(boxes + 1))
            for box, o in zip((source_box, target_box), order, strict=True)
        )
        sources, targets = owner.sources[order[0]], owner.targets[order[1]]
        self.leaves = []
        for b in range(boxes):
            own = slice(source_starts[b], source_starts[b + 1])
            rows = slice(target_starts[b], target_starts[b + 1])
            near = slice(source_starts[max(b - 1, 0)], source_starts[min(b + 2, boxes)])
            with np.errstate(divide="ignore"):
                kernel = 1.0 / (targets[rows, None] - sources[None, near])
            kernel[np.isinf(kernel)] = 0.0  # coincident pairs are left out
            leaf = (own, to_node[order[0][own]].T.copy(), rows, from_node[order[1][rows]], near, kernel)
            for array in leaf[1::2]:
                array.flags.writeable = False
            self.leaves.append(leaf)
        self._orders, self._blocks = order, None  # torch's blocks: built at its first call
        self._given = (owner.sources, owner.targets, to_node, from_node)
        # child c's nodes in its parent's coordinates: interpolation from parent to child
        nodes = _chebyshev_nodes(p)
        to_child = [_lagrange_basis((nodes + side) / 2, p) for side in (-1.0, 1.0)]
        self.down = np.concatenate(to_child, axis=0)  # (2p, p): parent field -> children's
        self.up = self.down.T.copy()  # (p, 2p): children's charges -> parent's

        # Interactions between sibling pairs (a left and a right child, 2p nodes) whose parents
        # are neighbours: the boxes 2 and 3 away (those 1 away are near). With a box of width
        # w, 1 / (z - t) = 1 / (w ((x - y) / 2 - offset)) for nodes x, y in [-1, 1].
        def unit(offset):
            return 1.0 / ((nodes[:, None] - nodes[None, :]) / 2 - offset)

        zero = np.zeros((p, p))
        from_left = np.block([[unit(-2), zero], [unit(-3), unit(-2)]])  # pair j-1 -> pair j
        from_right = np.block([[unit(2), unit(3)], [zero, unit(2)]])  # pair j+1 -> pair j
        self.interactions = {
            level: (from_left * (2**level / owner._width), from_right * (2**level / owner._width))
            for level in range(2, levels + 1)
        }
        for matrix in (self.down, self.up, *(m for pair in self.interactions.values() for m in pair)):
            matrix.flags.writeable = False

    def sums(self, charges: np.ndarray, rows: np.ndarray | None = None) -> np.ndarray:
        """numpy, in the points' sorted order: ``(N, d)`` charges -> ``(M, d)`` sums; or
        ``(len(rows), d)`` charges at the sources ``rows`` (increasing), the others zero: the
        blocks' columns are then gathered (a leaf's sources are a slice of ``rows``)."""
        p, levels, d = self.order, self.levels, charges.shape[1]
        dtype = np.result_type(charges.dtype, np.float64)
        if d == 0:
            return np.zeros((self.shape[0], 0), dtype=dtype)
        if rows is not None:  # each leaf's (and near field's) sources among the given rows
            bounds = [(leaf[0].start, leaf[0].stop, leaf[4].start, leaf[4].stop) for leaf in self.leaves]
            at = np.searchsorted(rows, np.array(bounds).reshape(-1)).reshape(-1, 4).tolist()
        with _arraylib.one_blas_thread:
            # upward pass, box-major: (boxes, p, d) per level
            moments = np.empty((2**levels, p, d), dtype=dtype)
            for b, (own, to_node, *_) in enumerate(self.leaves):
                if rows is None:
                    np.matmul(to_node, charges[own], out=moments[b])
                else:
                    first, last = at[b][0], at[b][1]
                    np.matmul(to_node[:, rows[first:last] - own.start], charges[first:last], out=moments[b])
            upward = [moments]
            for _ in range(levels, 2, -1):
                pairs = upward[-1].reshape(-1, 2 * p, d)  # a left and a right child each
                upward.append(np.matmul(self.up, pairs))
            # interactions and downward pass, from level 2 to the leaves, on sibling pairs
            field = None
            for level in range(2, levels + 1):
                pairs = upward[levels - level].reshape(-1, 2 * p, d)
                here = np.zeros_like(pairs) if field is None else np.matmul(self.down, field)
                from_left, from_right = self.interactions[level]
                here[1:] += np.matmul(from_left, pairs[:-1])
                here[:-1] += np.matmul(from_right, pairs[1:])
                field = here.reshape(-1, p, d)
            out = np.empty((self.shape[0], d), dtype=dtype)
            for b, (_, _, targets, from_node, near, kernel) in enumerate(self.leaves):
                if rows is None:
                    np.matmul(kernel, charges[near], out=out[targets])
                else:
                    first, last = at[b][2], at[b][3]
                    np.matmul(kernel[:, rows[first:last] - near.start], charges[first:last], out=out[targets])
                out[targets] += from_node @ field[b]
        return out

    def _torch_blocks(self) -> tuple:
        """The leaves' blocks for torch (any device): in the points' given order, stacked by
        padded shape, so that each step is a few large batched products (a GPU's way)."""
        if self._blocks is None:
            boxes, p = 2**self.levels, self.order
            (m, n), (source_order, target_order) = self.shape, self._orders
            sources, targets, to_node, from_node = self._given
            own, rows, near = ([leaf[i] for leaf in self.leaves] for i in (0, 2, 4))
            targets_in = [target_order[r] for r in rows]
            leaf_nodes = [np.arange(p) * boxes + b for b in range(boxes)]  # row node * boxes + box

            def kernel(rows, cols):
                with np.errstate(divide="ignore", invalid="ignore"):
                    return 1.0 / (targets[rows][:, :, None] - sources[cols][:, None, :])

            self._blocks = (
                _Blocks(
                    (p * boxes, n),
                    leaf_nodes,
                    [source_order[s] for s in own],
                    lambda rows, cols: to_node[cols[:, None, :], (rows // boxes)[:, :, None]],
                ),
                _Blocks(
                    (m, p * boxes),
                    targets_in,
                    leaf_nodes,
                    lambda rows, cols: from_node[rows[:, :, None], (cols // boxes)[:, None, :]],
                ),
                _Blocks((m, n), targets_in, [source_order[s] for s in near], kernel),  # inf -> 0
            )
        return self._blocks

    def torch_sums(self, flat):
        """torch, in the points' given order: ``(N, d)`` charges -> ``(M, d)`` sums."""
        p, levels = self.order, self.levels
        d = flat.shape[1]
        to_moments, from_fields, near = self._torch_blocks()
        product = _arraylib.apply_matrix
        extended = _Blocks.extend(flat)
        charges = [None] * (levels + 1)  # per level: (p, boxes, d)
        charges[levels] = to_moments.product(extended)[:-1].reshape(p, 2**levels, d)
        for level in range(levels, 2, -1):
            boxes = 2**level
            children = charges[level].reshape(p, boxes // 2, 2, d)
            pairs = _cat([children[:, :, 0], children[:, :, 1]], flat)  # (2p, boxes/2, d)
            charges[level - 1] = product(self.up, pairs)
        field = None
        for level in range(2, levels + 1):
            boxes = 2**level
            pairs = charges[level].reshape(p, boxes // 2, 2, d)
            pairs = _cat([pairs[:, :, 0], pairs[:, :, 1]], flat)  # (2p, boxes/2, d)
            from_left, from_right = self.interactions[level]
            here = _zeros(flat, (2 * p, boxes // 2, d))
            here[:, 1:] = here[:, 1:] + product(from_left, pairs[:, :-1])
            here[:, :-1] = here[:, :-1] + product(from_right, pairs[:, 1:])
            if field is not None:
                here = here + product(self.down, field)
            # (2p, boxes/2, d) -> (p, boxes, d), children in order
            field = _stack_children(here.reshape(2, p, boxes // 2, d), flat)
        out = from_fields.product(_Blocks.extend(field.reshape(p * 2**levels, d)))
        return near.product(extended, out)[:-1]


def _equal_pairs(targets: np.ndarray, sources: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``(i, j)`` index arrays of the pairs with ``targets[i] == sources[j]``."""
    order = np.argsort(sources, kind="stable")
    ordered = sources[order]
    first = np.searchsorted(ordered, targets, side="left")
    counts = np.searchsorted(ordered, targets, side="right") - first
    rows = np.repeat(np.arange(targets.size), counts)
    offsets = np.arange(rows.size) - np.repeat(np.cumsum(counts) - counts, counts)
    return rows, order[np.repeat(first, counts) + offsets]


def _is_identity(order: np.ndarray) -> bool:
    return bool(np.array_equal(order, np.arange(order.size)))


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
