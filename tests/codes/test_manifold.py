"""ManifoldGCC and the layouts behind it (codedcomputing.codes.layout), against brute force and
known geometry: exhaustive shortest open paths, arc lengths on a circle, a path graph's
Fiedler vector; binding per batch, in executors and from threads."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

import codedcomputing as cc
from codedcomputing.codes import layout
from codedcomputing.codes.layout import ChainLayout, SpectralLayout, ThinPlateLayout
from codedcomputing.testing import check_code


def curve(t: np.ndarray, dim: int = 40, seed: int = 0) -> np.ndarray:
    """Points on a smooth closed-free curve embedded in ``dim`` dimensions."""
    basis = np.random.default_rng(seed).normal(size=(3, dim))
    return np.stack([np.cos(2.5 * t), np.sin(2.5 * t), t], axis=1) @ basis


@pytest.mark.parametrize(
    "make",
    [
        lambda k, n: cc.ManifoldGCC(k, n),
        lambda k, n: cc.ManifoldGCC(k, n, layout=SpectralLayout(spacing="rank")),
        lambda k, n: cc.ManifoldGCC(k, n, layout="pca"),
        lambda k, n: cc.ManifoldGCC(
            k, n, layout=ChainLayout(reference=np.random.default_rng(1).normal(size=(30, 3)))
        ),
        lambda k, n: cc.ManifoldGCC(
            k, n, layout=SpectralLayout(reference=np.random.default_rng(2).normal(size=(30, 3)))
        ),
    ],
    ids=["chain-arc", "spectral-rank", "pca", "chain-reference", "spectral-reference"],
)
def test_every_design_passes_the_conformance_suite(make):
    assert check_code(make)[0] == "check_binding"


@pytest.mark.parametrize(
    "make",
    [
        lambda k, n: cc.ManifoldGCC(k, n, layout="thin-plate"),
        lambda k, n: cc.ManifoldGCC(k, n, systematic=False, lambda_dec=1e-3, layout="thin-plate"),
        lambda k, n: cc.ManifoldGCC(k, n, layout=ThinPlateLayout(embedding="eigenmaps", dimensions=3)),
        lambda k, n: cc.ManifoldGCC(k, n, systematic=False),
        lambda k, n: cc.ManifoldGCC(
            k,
            n,
            layout=ThinPlateLayout(
                embedding="eigenmaps", reference=np.random.default_rng(1).normal(size=(30, 3))
            ),
        ),
        lambda k, n: cc.ManifoldGCC(
            k, n, layout=ThinPlateLayout(reference=np.random.default_rng(1).normal(size=(30, 3)))
        ),
    ],
    ids=[
        "thin-plate",
        "thin-plate-smoothing",
        "eigenmaps-3d",
        "chain-not-systematic",
        "eigenmaps-reference",
        "isomap-reference",
    ],
)
def test_the_thin_plate_design_passes_the_conformance_suite(make):
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
    bound = cc.ManifoldGCC(12, 40, systematic=False).bind(X)
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
    with pytest.raises(ValueError, match=r"^layout must be a layout object"):
        cc.ManifoldGCC(5, 10, layout="tsp")
    with pytest.raises(ValueError, match=r"^layout must be"):
        cc.ManifoldGCC(5, 10, layout=cc.codes.layout.BatchLayout())
    with pytest.raises(ValueError, match="spacing"):
        cc.ManifoldGCC(5, 10, layout=ChainLayout(spacing="even"))
    with pytest.raises(ValueError, match="neighbours"):
        cc.ManifoldGCC(5, 10, layout=ChainLayout(neighbours=0))
    with pytest.raises(ValueError, match="reference"):
        cc.ManifoldGCC(5, 10, layout=ChainLayout(reference=np.full((4, 3), np.nan)))
    with pytest.raises(ValueError, match="reference"):
        cc.ManifoldGCC(5, 10, layout=ChainLayout(reference=np.ones((1, 3))))
    with pytest.raises(ValueError, match="reference"):
        cc.ManifoldGCC(
            5, 10, layout=ChainLayout(reference=np.random.default_rng(0).normal(size=(8, 3)))
        ).bind(np.ones((5, 4)))
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


# -- the thin-plate design, systematic placement, the embeddings and the hull design --------


def test_the_thin_plate_map_matches_scipys_rbf_interpolator():
    from scipy.interpolate import RBFInterpolator

    from codedcomputing.codes.manifold import thin_plate_map

    rng = np.random.default_rng(5)
    for m, smoothing in ((1, 0.0), (2, 0.0), (2, 0.3), (3, 1e-2)):
        knots, targets = rng.uniform(-1, 1, (15, m)), rng.uniform(-1, 1, (7, m))
        values = rng.normal(size=(15, 4))
        oracle = RBFInterpolator(knots, values, kernel="thin_plate_spline", smoothing=smoothing)(targets)
        np.testing.assert_allclose(thin_plate_map(knots, smoothing, targets) @ values, oracle, atol=1e-8)


def test_the_thin_plate_code_reproduces_affine_functions_of_the_sites():
    """Inputs affine in their sites: every worker gets the same affine function at its site,
    at any lambda_enc (affine maps are in the thin-plate penalty's null space)."""
    rng = np.random.default_rng(6)
    X = rng.normal(size=(12, 30))
    for lam in (0.0, 0.5):
        bound = cc.ManifoldGCC(12, 60, lam, layout="thin-plate").bind(X)
        a, b = rng.normal(size=5), rng.normal(size=(2, 5))
        coded = bound.encode(a + bound.sites @ b)
        np.testing.assert_allclose(coded, a + bound.worker_sites @ b, atol=1e-9)
        assert bound.layout.sites.shape == (12, 2) and bound.layout.worker_sites.shape == (60, 2)
        assert bound.layout.seconds > 0 and not hasattr(bound.layout, "order")


def test_the_thin_plate_decoder_falls_back_with_few_results():
    """Two results (fewer than m + 1 = 3): the least-norm affine fit, here the line
    through them; the estimates are finite and between the two values along it."""
    rng = np.random.default_rng(7)
    bound = cc.ManifoldGCC(8, 40, layout="thin-plate").bind(rng.normal(size=(8, 5)))
    alive = [3, 17]
    Y = np.array([[1.0], [3.0]])
    est = bound.decode(Y, alive)
    w = bound.worker_sites[alive]
    direction = (w[1] - w[0]) / np.sum((w[1] - w[0]) ** 2)
    expected = 1.0 + 2.0 * ((bound.sites - w[0]) @ direction)
    np.testing.assert_allclose(est[:, 0], expected, atol=1e-10)
    with pytest.raises(cc.errors.InsufficientResultsError):
        bound.decode(Y[:1], alive[:1])


def test_systematic_codes_recover_every_input_exactly_when_its_worker_returns():
    """systematic=True puts the inputs at workers' points: with every worker back, any f is
    recovered exactly (1-D: alpha among beta; thin-plate: the sites among the worker sites)."""
    rng = np.random.default_rng(8)
    X = curve(rng.uniform(0, 1, 10))
    for design in ("chain", "thin-plate"):
        bound = cc.ManifoldGCC(10, 50, layout=design).bind(X)
        alive = np.arange(50)
        np.testing.assert_allclose(bound.decode(np.tanh(bound.encode(X)), alive), np.tanh(X), atol=1e-9)
    alpha = cc.ManifoldGCC(10, 50).bind(X).layout.alpha
    assert np.all(np.isin(alpha, cc.GCC(10, 50).beta))


def test_snapping_moves_the_points_least():
    rng = np.random.default_rng(9)
    for _ in range(30):
        positions, targets = np.sort(rng.uniform(size=4)), rng.uniform(size=7)
        best = min(
            itertools.combinations(np.sort(targets), 4), key=lambda c: np.abs(np.array(c) - positions).sum()
        )
        got = layout.snap_to(positions, targets)
        assert np.all(np.diff(got) > 0) and np.all(np.isin(got, targets))
        assert np.isclose(np.abs(got - positions).sum(), np.abs(np.array(best) - positions).sum())


def test_mds_recovers_a_planar_configuration_and_eigenmaps_extend_the_fiedler_vector():
    rng = np.random.default_rng(10)
    plane = rng.normal(size=(9, 2))
    lifted = np.c_[plane, np.zeros((9, 5))] @ np.linalg.qr(rng.normal(size=(7, 7)))[0]
    coordinates = layout.mds_embedding(layout.pairwise_distances(lifted), 2)
    np.testing.assert_allclose(
        layout.pairwise_distances(coordinates), layout.pairwise_distances(plane), atol=1e-9
    )
    graph = layout.knn_graph(layout.pairwise_distances(rng.normal(size=(40, 3))), 6)
    first = layout.spectral_embedding(graph, 3)[:, 0]
    np.testing.assert_allclose(first, layout.spectral_coordinate(graph), atol=1e-10)


def test_the_hull_design_fills_the_hull_and_orders_neighbours_together():
    from scipy.spatial import Delaunay

    sites = np.random.default_rng(11).uniform(-1, 1, (10, 2))
    design = layout.hull_design(sites, 60)
    assert design.shape == (60, 2) and np.all(Delaunay(sites).find_simplex(design, tol=1e-9) >= 0)
    np.testing.assert_array_equal(design, layout.hull_design(sites, 60))  # deterministic
    steps = np.linalg.norm(np.diff(design, axis=0), axis=1)
    assert np.median(steps) < 0.5 * np.median(layout.pairwise_distances(design))
    with_sites = layout.hull_design(sites, 60, include=True)
    assert all(np.any(np.all(with_sites == site, axis=1)) for site in sites)
    assert np.unique(with_sites, axis=0).shape[0] == 60


@pytest.mark.parametrize("dimensions", [2, 3])
def test_the_hull_design_is_a_farthest_point_cover(dimensions):
    # Greedy farthest-point selection leaves no point of its pool farther from the design
    # than the design's own closest pair (Gonzalez): a wrong distance update breaks this.
    from scipy.spatial import Delaunay, cKDTree
    from scipy.stats import qmc

    sites = np.random.default_rng(13).uniform(-1, 1, (12, dimensions))
    design = layout.hull_design(sites, 40)
    separation = np.min(layout.pairwise_distances(design) + np.diag(np.full(40, np.inf)))
    probe = qmc.Sobol(dimensions, scramble=True, seed=5).random_base2(14) * 2 - 1
    probe = probe[Delaunay(sites).find_simplex(probe) >= 0]
    covering = cKDTree(design).query(probe)[0].max()
    assert covering <= 1.25 * separation, (covering, separation)


def test_a_permuted_batch_gets_the_permuted_sites():
    rng = np.random.default_rng(12)
    X, perm = rng.normal(size=(9, 6)), rng.permutation(9)
    code = cc.ManifoldGCC(9, 45, layout="thin-plate")
    a, b = code.bind(X), code.bind(X[perm])
    np.testing.assert_allclose(b.sites, a.sites[perm], atol=1e-10)
    np.testing.assert_allclose(np.sort(b.worker_sites, axis=0), np.sort(a.worker_sites, axis=0), atol=1e-10)


def test_thin_plate_options_are_checked():
    with pytest.raises(ValueError, match="embedding"):
        cc.ManifoldGCC(5, 10, layout=ThinPlateLayout(embedding="tsne"))
    with pytest.raises(ValueError, match="dimensions"):
        cc.ManifoldGCC(5, 10, layout=ThinPlateLayout(dimensions=0))
    with pytest.raises(ValueError, match="lambda_dec"):
        cc.ManifoldGCC(5, 10, lambda_dec="gcv", layout="thin-plate")
    with pytest.raises(ValueError, match="systematic"):
        cc.ManifoldGCC(5, 10, systematic="yes")
    from codedcomputing.codes.manifold import ThinPlateCode

    with pytest.raises(ValueError, match="worker_sites"):
        ThinPlateCode(3, 6, sites=np.eye(3, 2), worker_sites=np.zeros((6, 3)))
    with pytest.raises(ValueError, match="sites"):
        ThinPlateCode(3, 6, sites=np.full((3, 2), np.nan), worker_sites=np.zeros((6, 2)))


def test_a_bound_thin_plate_code_is_rebuilt_from_its_params():
    """Identical inputs share a site; get_params gives those sites to the constructor, which
    takes them (Code.get_params: the rebuilt code is equal), and encodes and decodes alike."""
    from codedcomputing.codes.manifold import ThinPlateCode

    rng = np.random.default_rng(11)
    X = rng.normal(size=(7, 4))
    X[[4, 6]] = X[1]
    for lambdas in ((0.0, 0.0), (1e-3, 1e-2)):
        bound = cc.ManifoldGCC(7, 21, *lambdas, layout="thin-plate").bind(X)
        assert np.unique(bound.sites, axis=0).shape[0] == 5  # the repeated inputs share a site
        again = ThinPlateCode(**bound.get_params())
        assert repr(again) == repr(bound)
        np.testing.assert_array_equal(again.sites, bound.sites)
        np.testing.assert_array_equal(again.worker_sites, bound.worker_sites)
        Y = np.tanh(bound.encode(X))
        np.testing.assert_array_equal(again.encode(X), bound.encode(X))
        alive = np.sort(rng.choice(21, 15, replace=False))
        np.testing.assert_array_equal(again.decode(Y[alive], alive), bound.decode(Y[alive], alive))


def test_centripetal_spacing_uses_the_square_roots_of_the_chords():
    rng = np.random.default_rng(9)
    X = curve(np.sort(rng.uniform(0, 1, 9)))[rng.permutation(9)]
    bound = cc.ManifoldGCC(9, 30, systematic=False, layout=ChainLayout(spacing="centripetal")).bind(X)
    ordered = X[bound.layout.order]
    gaps = np.sqrt(np.linalg.norm(np.diff(ordered, axis=0), axis=1))
    expected = layout.arc_positions(gaps, cc.GCC(9, 30).alpha)
    np.testing.assert_allclose(bound.layout.alpha[bound.layout.order], expected, rtol=1e-10, atol=1e-12)
    with pytest.raises(ValueError, match="spacing"):
        cc.ManifoldGCC(9, 30, layout=ChainLayout(spacing="sqrt"))
