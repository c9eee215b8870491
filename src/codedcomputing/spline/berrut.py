"""Berrut's rational interpolant: as a matrix (:func:`berrut_matrix`, ``O(n m)``: one of the
gap-aware decoder's extrapolants), and as a fast linear map (:class:`BerrutMap`, ``O(n + m)``:
BACC's encoder and decoder at large sizes)."""

from __future__ import annotations

import numpy as np

from .. import _arraylib
from .cauchy import CauchySum

__all__ = ["BerrutMap", "berrut_matrix"]

#: From this many columns (values and the denominator) on, a subset of the nodes is passed to
#: the Cauchy sums as it is (they gather their blocks' columns) rather than written into zeros
#: at every node: the data outweigh the blocks. BACC's decode, paired, this against the zeros:
#: 0.85-0.87x at width 200 and N = 8,000 and 16,000, 0.98-1.05x at width 100, 1.06-1.15x at
#: width 50 (``benchmarks/perf/bench_master_bacc.py``).
SUBSET_WIDTH = 150


def berrut_matrix(nodes: np.ndarray, points: np.ndarray) -> np.ndarray:
    """``(len(points), len(nodes))`` matrix of Berrut's rational interpolant.

    ``r(z) = sum_j w_j(z) y_j / sum_j w_j(z)`` with ``w_j(z) = (-1)^rho(j) / (z - nodes_j)``,
    ``rho(j)`` the rank of node j in sorted order; ``r(nodes_j) = y_j`` exactly. This is the
    Floater-Hormann interpolant with ``d = 0`` (scipy's ``FloaterHormannInterpolator``, the
    tests' oracle), written out so that building it costs only the matrix itself: scipy's
    would interpolate an ``n x n`` identity. No checks are performed.
    """
    n = nodes.size
    if n == 1:
        return np.ones((points.size, 1))
    order = np.argsort(nodes, kind="stable")
    diff = points[:, None] - nodes[order][None, :]
    on_node = diff == 0.0
    with np.errstate(divide="ignore", invalid="ignore"):
        weights = np.where(np.arange(n) % 2 == 0, 1.0, -1.0) / diff
        weights /= weights.sum(axis=1, keepdims=True)
    hit = on_node.any(axis=1)
    weights[hit] = on_node[hit]  # a point on a node takes that node's value
    matrix = np.empty((points.size, n))
    matrix[:, order] = weights
    return matrix


class BerrutMap:
    """Berrut's interpolant from values at ``nodes`` (all of them, or a subset) to ``points``,
    applied in ``O((n + m) p d)`` for ``n`` nodes, ``m`` points and ``d`` columns.

    ``r(z) = y_0 + sum_j w_j(z) (y_j - y_0) / sum_j w_j(z)``, ``w_j(z) = (-1)^rho(j) / (z -
    t_j)``, over the chosen nodes ``t_j`` (``rho``: rank among them in sorted order), ``y_0``
    the first value given: the same interpolant as :func:`berrut_matrix` (subtracting ``y_0``
    changes nothing in exact arithmetic), with constants reproduced bit for bit. Numerator
    and denominator are Cauchy sums (:class:`~codedcomputing.spline.cauchy.CauchySum`, a 1-D
    fast multipole method, or the dense matrix for small ``n m``, picked per number of columns),
    taken over all ``n`` nodes with zero weight on the ones not chosen, so one map serves every
    subset; with every node chosen the denominators are summed once and kept. A point on a
    chosen node takes that node's value exactly. Built in ``O((n + m) p)`` at its first use.

    ``values`` are numpy arrays (summed in float64, returned in their dtype) or torch tensors:
    float32 or float64 ones on the CPU that need no grad as numpy (on a view: no torch thread
    pool on the master), others summed in their dtype (float32 for half precision) on their
    device, autograd following.
    No checks are performed.
    """

    def __init__(self, nodes, points, *, dense: bool | None = None):
        self.nodes = np.asarray(nodes, dtype=np.float64)
        self.points = np.asarray(points, dtype=np.float64)
        self.sums = CauchySum(self.nodes, self.points, dense=dense)
        self._position = _ranks(self.nodes)  # rank among all nodes: a charge's row in the sums
        self._point_position = _ranks(self.points)  # a point's row in the tree's results
        self._alternating = np.where(np.arange(self.nodes.size) % 2 == 0, 1.0, -1.0)
        self._alternating.flags.writeable = False
        self._every = None  # the denominators with every node chosen (an encoder's), in the sums' rows

    def signs(self, chosen: np.ndarray) -> np.ndarray:
        """``(len(chosen),)``: ``(-1)^rho`` of each chosen node, ``rho`` its rank among them."""
        taken = np.zeros(self.nodes.size, dtype=bool)
        taken[self._position[chosen]] = True
        rank = np.cumsum(taken)[self._position[chosen]] - 1
        return np.where(rank % 2 == 0, 1.0, -1.0)

    def __call__(self, values, chosen=None):
        """``r(points)``, shape ``(m, ...)``, from ``values[i]`` at ``nodes[chosen[i]]``
        (``chosen``: distinct indices, default all nodes in order)."""
        n = self.nodes.size
        every = chosen is None
        chosen = np.arange(n) if every else np.asarray(chosen, dtype=np.int64)
        shape = (self.points.size, *tuple(values.shape[1:]))
        flat = values.reshape(values.shape[0], -1)
        torch_values = _arraylib.is_torch(flat)
        given = flat.dtype
        if torch_values and _on_host_without_grad(flat):  # numpy on a view: no torch thread pool
            host = flat.detach().resolve_conj().resolve_neg().numpy()
            return _arraylib.convert_like(self(host, None if every else chosen), flat).reshape(shape)
        if not torch_values:
            flat = flat.astype(np.complex128 if np.iscomplexobj(flat) else np.float64, copy=False)
            return self._on_host(flat, chosen, every).astype(given, copy=False).reshape(shape)
        import torch

        if flat.dtype.itemsize < 4:
            flat = flat.float()
        d = flat.shape[1]
        reference = flat[:1]
        weights = torch.as_tensor(self.signs(chosen), dtype=flat.dtype, device=flat.device)[:, None]
        rows = torch.cat([weights * (flat - reference), weights], dim=1)
        charges = torch.zeros((n, d + 1), dtype=flat.dtype, device=flat.device)
        charges = charges.index_put((torch.as_tensor(chosen, device=flat.device),), rows)
        sums = self.sums(charges)
        row_of = np.full(n, -1, dtype=np.int64)
        row_of[chosen] = np.arange(chosen.size)
        targets, sources = self.sums.coincident
        hit = row_of[sources] >= 0
        numerators, denominators = sums[:, :d], sums[:, d:]
        if hit.any():  # no 0 / 0 there (nor in its gradient): those points are set below
            on_node = np.zeros((self.points.size, 1), dtype=bool)
            on_node[targets[hit]] = True
            on_node = torch.as_tensor(on_node, device=flat.device)
            denominators = torch.where(on_node, torch.ones_like(denominators), denominators)
        estimates = reference + numerators / denominators
        if hit.any():  # a point on a chosen node takes its value
            estimates = _arraylib.set_rows(
                estimates, targets[hit], _arraylib.take_rows(flat, row_of[sources[hit]])
            )
        return estimates.to(given).reshape(shape)

    def _on_host(self, flat: np.ndarray, chosen: np.ndarray, every: bool) -> np.ndarray:
        """``r(points)`` for float64 or complex128 numpy ``flat`` (``(len(chosen), d)``): the
        charges are written in the nodes' sorted order and the sums read in the points' (the
        Cauchy sums' own order: they gather nothing), or, wide and in that order already, passed
        as they are (``SUBSET_WIDTH``); with every node chosen (an encoder) the denominators are
        the same at every call, summed once."""
        n, d = self.nodes.size, flat.shape[1]
        rows = self._position[chosen]
        reference = flat[:1]
        if every:  # signs alternate along the sorted nodes
            weighted = flat - reference
            weighted *= self._alternating[self._position][:, None]
            charges = np.zeros((n, d), dtype=flat.dtype)
            charges[rows] = weighted
            sums = self.sums.sorted_sums(charges)
        else:
            ascending = bool(np.all(rows[1:] > rows[:-1]))  # chosen in sorted order: signs alternate
            signs = self._alternating[: chosen.size] if ascending else self.signs(chosen)
            weighted = np.empty((chosen.size, d + 1), dtype=flat.dtype)
            np.subtract(flat, reference, out=weighted[:, :d])
            weighted[:, :d] *= signs[:, None]
            weighted[:, d] = signs
            if d + 1 >= SUBSET_WIDTH and ascending:  # no zero rows written
                sums = self.sums.sorted_sums(weighted, rows)
            else:
                charges = np.zeros((n, d + 1), dtype=flat.dtype)
                charges[rows] = weighted
                sums = self.sums.sorted_sums(charges)
        denominators = self._every_denominators() if every else sums[:, d:]
        # a point on a chosen node takes its value: no 0 / 0 there
        targets, sources = self.sums.coincident
        if sources.size:
            row_of = np.full(n, -1, dtype=np.int64)
            row_of[chosen] = np.arange(chosen.size)
            hit = row_of[sources] >= 0
            on_node, value_rows = self._point_position[targets[hit]], row_of[sources[hit]]
            denominators = denominators.copy()
            denominators[on_node] = 1.0
        estimates = np.divide(sums[:, :d], denominators)
        estimates += reference
        if sources.size:
            estimates[on_node] = flat[value_rows]
        if self.sums.target_order is not None:  # back to the points' order
            ordered = np.empty_like(estimates)
            ordered[self.sums.target_order] = estimates
            estimates = ordered
        return estimates

    def _every_denominators(self) -> np.ndarray:
        if self._every is None:  # the charges in sorted order: signs alternate
            self._every = self.sums.sorted_sums(self._alternating[:, None])
            self._every.flags.writeable = False
        return self._every


def _ranks(x: np.ndarray) -> np.ndarray:
    """Each entry's rank in ``x`` sorted (stable): its row in the Cauchy sums' sorted order."""
    ranks = np.empty(x.size, dtype=np.int64)
    ranks[np.argsort(x, kind="stable")] = np.arange(x.size)
    return ranks


def _on_host_without_grad(x) -> bool:
    import torch

    return _arraylib.on_host(x) and not x.requires_grad and x.dtype in (torch.float32, torch.float64)
