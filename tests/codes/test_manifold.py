"""ManifoldGCC and the layouts behind it (codedcomputing.layout), against brute force and
known geometry: exhaustive shortest open paths, arc lengths on a circle, a path graph's
Fiedler vector; binding per batch, in executors and from threads."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

import codedcomputing as cc
from codedcomputing import layout
from codedcomputing.testing import check_code


def curve(t: np.ndarray, dim: int = 40, seed: int = 0) -> np.ndarray:
    """Points on a smooth closed-free curve embedded in ``dim`` dimensions."""
    basis = np.random.default_rng(seed).normal(size=(3, dim))
    return np.stack([np.cos(2.5 * t), np.sin(2.5 * t), t], axis=1) @ basis


@pytest.mark.parametrize(
    "make",
    [
        lambda k, n: cc.ManifoldGCC(k, n),
        lambda k, n: cc.ManifoldGCC(k, n, design="spectral", spacing="rank"),
        lambda k, n: cc.ManifoldGCC(k, n, design="pca"),
        lambda k, n: cc.ManifoldGCC(k, n, reference=np.random.default_rng(1).normal(size=(30, 3))),
        lambda k, n: cc.ManifoldGCC(
            k, n, design="spectral", reference=np.random.default_rng(2).normal(size=(30, 3))
        ),
    ],
    ids=["chain-arc", "spectral-rank", "pca", "chain-reference", "spectral-reference"],
)
def test_every_design_passes_the_conformance_suite(make):
    assert check_code(make)[0] == "check_binding"


def test_the_chain_is_near_the_shortest_open_path():
    rng = np.random.default_rng(0)
    for _ in range(25):
        distances = layout.pairwise_distances(rng.normal(size=(7, 3)))
        best = min(layout.path_length(distances, np.array(p)) for p in itertools.permutations(range(7)))
        order = layout.chain_order(distances)
        assert sorted(order) == list(range(7))
        assert layout.path_length(distances, order) <= 1.1 * best + 1e-12


def test_a_shuffled_curve_is_ordered_along_it_and_spaced_by_arc_length():
    rng = np.random.default_rng(1)
    t = np.sort(rng.uniform(0, 1, 12))
    perm = rng.permutation(12)
    X = curve(t)[perm]
    bound = cc.ManifoldGCC(12, 40).bind(X)
    along = t[perm][bound.layout.order]
    assert np.all(np.diff(along) > 0) or np.all(np.diff(along) < 0)
    # alpha follows the chord lengths, warped through GCC's own data points
    ordered = X[bound.layout.order]
    gaps = np.linalg.norm(np.diff(ordered, axis=0), axis=1)
    expected = layout.arc_positions(gaps, cc.GCC(12, 40).alpha)
    np.testing.assert_allclose(bound.layout.alpha[bound.layout.order], expected, rtol=1e-10, atol=1e-12)
    # equal gaps give GCC's points back
    np.testing.assert_allclose(layout.arc_positions(np.ones(11), cc.GCC(12, 40).alpha), cc.GCC(12, 40).alpha)


def test_on_a_curve_the_manifold_code_beats_standard_gcc():
    """f = identity on shuffled points of a curve: the ordered code's error is far below
    standard GCC's on the same straggler sets."""
    rng = np.random.default_rng(2)
    standard, manifold = cc.GCC(10, 40), cc.ManifoldGCC(10, 40)
    errors = []
    for _ in range(20):
        X = curve(rng.uniform(0, 1, 10))
        alive = cc.stragglers.random(40, 12, rng)
        bound = manifold.bind(X)
        errors.append(
            (
                cc.metrics.mse(standard.decode(np.tanh(standard.encode(X))[alive], alive), np.tanh(X)),
                cc.metrics.mse(bound.decode(np.tanh(bound.encode(X))[alive], alive), np.tanh(X)),
            )
        )
    standard_mse, manifold_mse = np.mean(errors, axis=0)
    assert manifold_mse < 0.5 * standard_mse


def test_geodesics_follow_the_reference():
    """Points on a circle's arc, with a dense reference on it: geodesic distances approach
    the arc length, never fall below the straight line, and are symmetric."""
    angle = np.linspace(0, np.pi, 400)
    reference = np.stack([np.cos(angle), np.sin(angle)], axis=1)
    inputs = reference[[0, 100, 200, 399]] + 1e-6
    distances = layout.Reference(reference, 4).geodesic_distances(inputs)
    arc = np.abs(angle[[0, 100, 200, 399]][:, None] - angle[[0, 100, 200, 399]][None, :])
    np.testing.assert_allclose(distances, arc, rtol=0.02, atol=1e-4)
    assert np.all(distances >= layout.pairwise_distances(inputs) - 1e-9)
    np.testing.assert_allclose(distances, distances.T, rtol=1e-12)


def test_the_spectral_coordinate_orders_a_path():
    x = np.linspace(0, 1, 60)[:, None]
    coordinate = layout.spectral_coordinate(layout.knn_graph(layout.pairwise_distances(x), 3))
    assert np.all(np.diff(coordinate) > 0) or np.all(np.diff(coordinate) < 0)
    reference = layout.Reference(x, 3)
    new = reference.coordinate_of(np.array([[0.1], [0.5], [0.9]]))
    assert np.all(np.diff(new) > 0) or np.all(np.diff(new) < 0)


def test_disconnected_neighbourhoods_are_joined():
    x = np.r_[np.linspace(0, 1, 10), np.linspace(10, 11, 10)][:, None]
    graph = layout.knn_graph(layout.pairwise_distances(x), 2)
    from scipy.sparse.csgraph import connected_components

    assert connected_components(graph, directed=False)[0] == 1


def test_executor_run_and_map_bind_each_batch():
    rng = np.random.default_rng(3)
    code = cc.ManifoldGCC(6, 18)
    batches = [curve(rng.uniform(0, 1, 6), dim=5, seed=i) for i in range(4)]
    with cc.ThreadCluster(3) as cluster:
        executor = cc.CodedExecutor(code, np.tanh, cluster)
        results = list(executor.map(batches))
        single = executor.run(batches[0])
    for X, result in zip(batches, results, strict=True):
        bound = code.bind(X)
        expected = bound.decode(np.tanh(bound.encode(X))[result.alive], result.alive)
        np.testing.assert_allclose(result.estimates, expected, rtol=1e-10, atol=1e-12)
        assert np.max(np.abs(result.estimates - np.tanh(X))) < 0.1  # every worker returned
    np.testing.assert_allclose(single.estimates, results[0].estimates, rtol=1e-10, atol=1e-12)


def test_bad_options_and_inputs_name_the_parameter():
    with pytest.raises(ValueError, match="design"):
        cc.ManifoldGCC(5, 10, design="tsp")
    with pytest.raises(ValueError, match="spacing"):
        cc.ManifoldGCC(5, 10, spacing="even")
    with pytest.raises(ValueError, match="neighbours"):
        cc.ManifoldGCC(5, 10, neighbours=0)
    with pytest.raises(ValueError, match="reference"):
        cc.ManifoldGCC(5, 10, reference=np.full((4, 3), np.nan))
    with pytest.raises(ValueError, match="reference"):
        cc.ManifoldGCC(5, 10, reference=np.ones((1, 3)))
    with pytest.raises(ValueError, match="reference"):
        cc.ManifoldGCC(5, 10, reference=np.random.default_rng(0).normal(size=(8, 3))).bind(np.ones((5, 4)))
    with pytest.raises(ValueError, match="X"):
        cc.ManifoldGCC(5, 10).bind(np.ones((4, 3)))
    with pytest.raises(ValueError, match="lambda_dec"):
        cc.ManifoldGCC(5, 10, lambda_dec=-1.0)
    with pytest.raises(ValueError, match="bind"):
        cc.ManifoldGCC(5, 10).decode(np.ones((10, 2)), range(10))


def test_duplicate_inputs_get_distinct_points():
    X = np.repeat(np.random.default_rng(4).normal(size=(3, 4)), 2, axis=0)
    alpha = cc.ManifoldGCC(6, 12).bind(X).layout.alpha
    assert np.unique(alpha).size == 6
