"""Berrut's rational interpolant as a matrix: BACC's encoder and decoder, and one of the
gap-aware decoder's extrapolants."""

from __future__ import annotations

import numpy as np

__all__ = ["berrut_matrix"]


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
