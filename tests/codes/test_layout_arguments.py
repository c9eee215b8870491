"""codedcomputing.codes.layout checks its arguments at its checked functions: each class of bad
argument raises ValueError naming the parameter (never IndexError, AxisError, a silent
result); valid edge cases work; ManifoldGCC and ThinPlateCode refuse what their docstrings
refuse (a complex reference)."""

from __future__ import annotations

import re

import numpy as np
import pytest
import scipy.sparse

import codedcomputing as cc
from codedcomputing.codes import layout
from codedcomputing.codes.layout import ChainLayout
from codedcomputing.codes.manifold import ThinPlateCode

RNG = np.random.default_rng(0)
POINTS = RNG.normal(size=(6, 2))
D = layout.pairwise_distances(POINTS)
GRAPH = layout.knn_graph(D, 2)
SAMPLES = RNG.normal(size=(12, 2))


def refuses(call, name: str) -> None:
    """``call()`` raises ValueError whose message names ``name`` (as a whole word)."""
    with pytest.raises(ValueError) as info:
        call()
    assert re.search(rf"(?<![A-Za-z0-9_]){re.escape(name)}(?![A-Za-z0-9_])", str(info.value)), (
        f"the message does not name {name}: {info.value}"
    )


def bad_arrays(shape: tuple) -> dict:
    """The invalid values every real array parameter refuses."""
    nan, inf = np.ones(shape), np.ones(shape)
    nan.flat[0], inf.flat[-1] = np.nan, np.inf
    return {
        "none": None,
        "str": "abc",
        "dict": {"values": 1.0},
        "str-array": np.full(shape, "x"),
        "object-array": np.array([object()] * shape[0], dtype=object),
        "complex": np.ones(shape) + 0.5j,
        "bools": np.ones(shape, dtype=bool),
        "nan": nan,
        "inf": inf,
        "scalar": 0.5,
    }


def bad_distances(n: int) -> dict:
    negative = D[:n, :n].copy()
    negative[0, -1] = negative[-1, 0] = -1.0
    return {
        **bad_arrays((n, n)),
        "1-d": np.zeros(n),
        "non-square": np.zeros((n, n + 1)),
        "3-d": np.zeros((1, n, n)),
        "ragged": [[0.0, 1.0], [1.0]],
        "negative": negative,
    }


BAD_COUNTS = {
    "str": "2",
    "none": None,
    "list": [2],
    "bool": True,
    "float": 2.0,
    "fraction": 2.5,
    "nan": np.nan,
    "complex": 2 + 0j,
    "array": np.array([2]),
    "huge": 2**63,
    "negative": -1,
}


def disconnected() -> scipy.sparse.csr_array:
    left = layout.knn_graph(layout.pairwise_distances(POINTS), 2)
    return scipy.sparse.block_diag([left, left], format="csr")


def bad_graphs() -> dict:
    negative, with_nan = GRAPH.copy(), GRAPH.copy()
    negative.data = -negative.data
    with_nan.data[0] = np.nan
    asymmetric = GRAPH.tolil()
    asymmetric[0, 5] = 7.0
    return {
        "none": None,
        "str": "knn",
        "dense": GRAPH.toarray(),
        "non-square": scipy.sparse.csr_array(np.ones((6, 7))),
        "complex": GRAPH.astype(complex),
        "negative": negative,
        "nan": with_nan,
        "edgeless": scipy.sparse.csr_array((6, 6)),
        "disconnected": disconnected(),
        "asymmetric": scipy.sparse.csr_array(asymmetric),
    }


# -- distances ---------------------------------------------------------------------------


@pytest.mark.parametrize("kind", sorted(bad_arrays((5, 2)).keys() | {"1-d", "3-d"}))
def test_pairwise_distances_refuses_a_bad_a_or_b(kind):
    bad = {**bad_arrays((5, 2)), "1-d": np.zeros(5), "3-d": np.zeros((1, 5, 2))}[kind]
    refuses(lambda: layout.pairwise_distances(bad), "a")
    if bad is not None:  # b=None: a itself
        refuses(lambda: layout.pairwise_distances(POINTS, bad), "b")
    refuses(lambda: layout.pairwise_distances(POINTS, np.zeros((3, 3))), "b")  # other columns


def test_pairwise_distances_refuses_sizes_beyond_the_limit_before_allocating():
    refuses(lambda: layout.pairwise_distances(np.zeros((layout.MAX_POINTS + 1, 1))), "a")
    many = np.zeros((layout.MAX_POINTS * 2, 1))
    refuses(lambda: layout.pairwise_distances(many, many), "b")
    assert layout.pairwise_distances(np.zeros((0, 2))).shape == (0, 0)


@pytest.mark.parametrize("kind", sorted(bad_arrays((5, 2)).keys() | {"1-d"}))
def test_consecutive_distances_refuses_bad_points(kind):
    bad = {**bad_arrays((5, 2)), "1-d": np.zeros(5)}[kind]
    refuses(lambda: layout.consecutive_distances(bad), "points")


# -- functions of a distance matrix -------------------------------------------------------


@pytest.mark.parametrize("kind", sorted(bad_distances(4)))
def test_functions_of_a_distance_matrix_refuse_bad_distances(kind):
    bad = bad_distances(4)[kind]
    refuses(lambda: layout.knn_graph(bad, 2), "distances")
    refuses(lambda: layout.chain_order(bad), "distances")
    refuses(lambda: layout.mds_embedding(bad, 2), "distances")
    refuses(lambda: layout.path_length(bad, [0, 1]), "distances")
    if kind != "inf":  # join_components: inf is no link (documented)
        refuses(lambda: layout.join_components(GRAPH[:4, :4], bad), "distances")


@pytest.mark.parametrize("kind", sorted(BAD_COUNTS))
def test_counts_are_integers_in_range(kind):
    bad = BAD_COUNTS[kind]
    refuses(lambda: layout.knn_graph(D, bad), "neighbours")
    refuses(lambda: layout.chain_order(D, starts=bad), "starts")
    refuses(lambda: layout.chain_order(D, max_passes=bad), "max_passes")
    refuses(lambda: layout.mds_embedding(D, bad), "dimensions")
    refuses(lambda: layout.hull_design(POINTS, bad), "count")
    refuses(lambda: layout.hull_design(POINTS, 4, candidates=bad), "candidates")
    refuses(lambda: layout.spectral_embedding(GRAPH, bad), "dimensions")
    refuses(lambda: layout.Reference(SAMPLES, bad), "neighbours")
    refuses(lambda: layout.Reference(SAMPLES, 3).embedding(bad), "dimensions")
    refuses(lambda: layout.Reference(SAMPLES, 3).embedding_of(POINTS, bad), "dimensions")


def test_zero_is_refused_where_the_minimum_is_one():
    refuses(lambda: layout.knn_graph(D, 0), "neighbours")  # an empty graph before
    refuses(lambda: layout.chain_order(D, starts=0), "starts")
    refuses(lambda: layout.mds_embedding(D, 0), "dimensions")  # no columns before
    refuses(lambda: layout.hull_design(POINTS, 0), "count")  # ZeroDivisionError before
    refuses(lambda: layout.Reference(SAMPLES, 0), "neighbours")
    refuses(lambda: layout.Reference(SAMPLES, 3).embedding(0), "dimensions")
    assert layout.chain_order(D, max_passes=0).shape == (6,)


@pytest.mark.parametrize("kind", ["str", "none", "float", "list", "int"])
def test_flags_are_bools(kind):
    bad = {"str": "yes", "none": None, "float": 0.5, "list": [True], "int": 1}[kind]
    refuses(lambda: layout.knn_graph(D, 2, join=bad), "join")
    refuses(lambda: layout.hull_design(POINTS, 4, include=bad), "include")


@pytest.mark.parametrize(
    "bad",
    [None, "0,1", [0, 6], [-1, 1], [0.5, 1], [np.nan, 1], [[0, 1]], [True, False], ["0", "1"], [0, 0]],
    ids=["none", "str", "out-of-range", "negative", "fraction", "nan", "2-d", "bools", "strs", "repeated"],
)
def test_path_length_refuses_a_bad_order(bad):
    refuses(lambda: layout.path_length(D, bad), "order")


def test_path_length_and_chain_order_take_valid_edge_cases():
    assert layout.path_length(D, []) == 0.0
    assert layout.path_length(D, np.array([3], dtype=np.int32)) == 0.0
    assert layout.path_length(D, (0, 1)) == D[0, 1]
    assert layout.path_length(D, [0.0, 1.0]) == D[0, 1]  # whole-number floats, as alive takes them
    assert layout.path_length(D, np.array([], dtype=str)) == 0.0  # empty, of any dtype
    assert layout.knn_graph(D, 50).shape == (6, 6)  # more neighbours than points: clamped
    assert layout.chain_order(np.zeros((0, 0))).size == 0


def test_the_chain_says_how_to_get_finite_distances():
    infinite = np.where(np.eye(3) > 0, 0.0, np.inf)
    with pytest.raises(ValueError, match="join_components"):
        layout.chain_order(infinite)


# -- graphs ------------------------------------------------------------------------------


@pytest.mark.parametrize("kind", sorted(bad_graphs()))
def test_the_spectral_functions_refuse_bad_graphs(kind):
    bad = bad_graphs()[kind]
    refuses(lambda: layout.spectral_coordinate(bad), "graph")
    refuses(lambda: layout.spectral_embedding(bad, 1), "graph")


def test_the_spectral_embedding_takes_at_most_n_minus_2_dimensions():
    assert layout.spectral_embedding(GRAPH, 4).shape == (6, 4)
    refuses(lambda: layout.spectral_embedding(GRAPH, 5), "dimensions")
    assert layout.spectral_coordinate(scipy.sparse.csr_array((1, 1))).shape == (1,)  # one node
    graph = scipy.sparse.coo_array(GRAPH)
    np.testing.assert_array_equal(layout.spectral_coordinate(graph), layout.spectral_coordinate(GRAPH))


@pytest.mark.parametrize("kind", ["none", "str", "dense", "non-square", "complex", "negative", "nan"])
def test_join_components_refuses_a_bad_graph(kind):
    bad = bad_graphs()[kind]
    refuses(lambda: layout.join_components(bad, D), "graph")


def test_join_components_checks_the_shapes_and_rows():
    refuses(lambda: layout.join_components(scipy.sparse.csr_array((7, 7)), D), "graph")  # other size
    refuses(lambda: layout.join_components(GRAPH, D, rows=[0, 9]), "rows")
    refuses(lambda: layout.join_components(GRAPH, D, rows=[0, 0]), "rows")
    refuses(lambda: layout.join_components(GRAPH, D[:2], rows=[0, 1, 2]), "distances")
    graph = disconnected()
    far = np.where(np.eye(12) > 0, 0.0, np.inf)  # documented: no finite link out
    refuses(lambda: layout.join_components(graph, far), "distances")
    joined, components = layout.join_components(graph, layout.pairwise_distances(np.r_[POINTS, POINTS + 9]))
    assert components == 2 and joined.shape == (12, 12)


# -- embeddings, designs, snapping, spacing ----------------------------------------------


@pytest.mark.parametrize("kind", sorted(bad_arrays((5, 2)).keys() | {"1-d", "empty"}))
def test_first_principal_axis_refuses_bad_data(kind):
    bad = {**bad_arrays((5, 2)), "1-d": np.zeros(5), "empty": np.zeros((0, 3))}[kind]
    refuses(lambda: layout.first_principal_axis(bad), "centred")


def test_first_principal_axis_of_zeros_is_a_unit_vector():
    for shape in ((3, 2), (2, 3), (1, 1)):
        assert np.linalg.norm(layout.first_principal_axis(np.zeros(shape))) == 1.0


@pytest.mark.parametrize("kind", sorted(bad_arrays((5, 2)).keys() | {"1-d", "empty"}))
def test_hull_design_refuses_bad_sites(kind):
    bad = {**bad_arrays((5, 2)), "1-d": np.zeros(5), "empty": np.zeros((0, 2))}[kind]
    refuses(lambda: layout.hull_design(bad, 4), "sites")


def test_hull_design_takes_any_integer_count():
    # np.uint16 counts overflowed in the pool-size arithmetic before (OverflowError)
    expected = layout.hull_design(POINTS, 6, include=True, candidates=13)
    for count in (np.uint16(6), np.int8(6), np.int64(6)):
        got = layout.hull_design(POINTS, count, include=np.True_, candidates=np.uint8(13))
        np.testing.assert_array_equal(got, expected)
    refuses(lambda: layout.hull_design(POINTS, layout.MAX_POINTS + 1), "count")


@pytest.mark.parametrize("kind", sorted(bad_arrays((3,)).keys() | {"2-d"}))
def test_snap_to_refuses_bad_positions_and_targets(kind):
    bad = {**bad_arrays((3,)), "2-d": np.zeros((3, 1))}[kind]
    targets = np.linspace(-1, 1, 7)
    refuses(lambda: layout.snap_to(bad, targets), "positions")
    refuses(lambda: layout.snap_to(np.array([-0.5, 0.5]), bad), "targets")


def test_snap_to_wants_sorted_positions_and_no_fewer_targets():
    refuses(lambda: layout.snap_to(np.array([0.5, -0.5]), np.linspace(-1, 1, 7)), "positions")
    refuses(lambda: layout.snap_to(np.linspace(-1, 1, 4), np.linspace(-1, 1, 3)), "targets")
    assert layout.snap_to(np.zeros(0), np.linspace(-1, 1, 3)).shape == (0,)
    np.testing.assert_array_equal(layout.snap_to([0.1], [1.0, 0.0, -1.0]), [0.0])  # targets: any order


@pytest.mark.parametrize(
    "kind", sorted(bad_arrays((4,)).keys() | {"2-d", "too-long", "too-short", "negative"})
)
def test_arc_positions_refuses_bad_gaps_and_points(kind):
    points = cc.GCC(5, 10).alpha
    extra = {"2-d": np.ones((4, 1)), "too-long": np.ones(5), "too-short": np.ones(3), "negative": -np.ones(4)}
    bad = {**bad_arrays((4,)), **extra}[kind]
    refuses(lambda: layout.arc_positions(bad, points), "gaps")
    if kind not in ("too-long", "too-short", "negative"):
        refuses(
            lambda: layout.arc_positions(np.ones(len(bad) - 1) if kind == "2-d" else np.ones(3), bad),
            "points",
        )


def test_arc_positions_checks_the_gaps_count_even_for_one_point():
    refuses(lambda: layout.arc_positions(np.ones(1), np.array([0.3])), "gaps")
    np.testing.assert_array_equal(layout.arc_positions(np.zeros(0), np.array([0.3])), [0.3])
    refuses(lambda: layout.arc_positions(np.zeros(0), np.zeros(0)), "points")


# -- Reference ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    "kind", sorted(bad_arrays((5, 2)).keys() | {"one-sample", "empty", "ragged", "0-d", "huge"})
)
def test_reference_refuses_bad_samples(kind):
    extra = {
        "one-sample": np.zeros((1, 2)),
        "empty": np.zeros((0, 2)),
        "ragged": [[0.0, 1.0], [1.0]],
        "0-d": np.array(1.5),
        "huge": 1.5e308 * np.r_[np.ones((3, 2)), -np.ones((3, 2))],  # distances overflow
    }
    bad = {**bad_arrays((5, 2)), **extra}[kind]
    refuses(lambda: layout.Reference(bad, 3), "samples")


def test_reference_samples_of_any_shape_are_flattened():
    assert layout.Reference(RNG.normal(size=5), 2).points.shape == (5, 1)
    assert layout.Reference(RNG.normal(size=(5, 2, 3)), 2).points.shape == (5, 6)
    refuses(lambda: layout.Reference(np.zeros((layout.MAX_POINTS + 1, 1)), 3), "samples")


@pytest.mark.parametrize(
    "kind", sorted(bad_arrays((4, 2)).keys() | {"other-width", "1-d", "3-d", "no-rows", "huge"})
)
@pytest.mark.parametrize("method", ["geodesics", "geodesic_distances", "coordinate_of", "embedding_of"])
def test_reference_methods_refuse_bad_inputs(kind, method):
    reference = layout.Reference(SAMPLES, 3)
    extra = {
        "other-width": np.zeros((4, 3)),
        "1-d": np.zeros(4),
        "3-d": np.zeros((1, 4, 2)),
        "no-rows": np.zeros((0, 2)),
        "huge": np.full((2, 2), 1e305),
    }
    bad = {**bad_arrays((4, 2)), **extra}[kind]
    args = (bad, 2) if method == "embedding_of" else (bad,)
    refuses(lambda: getattr(reference, method)(*args), "inputs")


def test_reference_embeddings_take_at_most_m_minus_2_dimensions():
    reference = layout.Reference(SAMPLES, 3)
    assert reference.embedding(10).shape == (12, 10)
    assert reference.embedding_of(POINTS, np.int64(10)).shape == (6, 10)
    refuses(lambda: reference.embedding(11), "dimensions")
    refuses(lambda: reference.embedding([2]), "dimensions")  # unhashable: TypeError before
    far = reference.geodesic_distances(POINTS - 500.0)  # far from the samples: still finite
    assert np.all(np.isfinite(far)) and far.shape == (6, 6)


# -- ManifoldGCC and ThinPlateCode ---------------------------------------------------------


def test_manifold_gcc_refuses_a_complex_reference():
    refuses(lambda: cc.ManifoldGCC(4, 12, layout=ChainLayout(reference=SAMPLES + 0.5j)), "reference")
    torch = pytest.importorskip("torch")
    refuses(
        lambda: cc.ManifoldGCC(4, 12, layout=ChainLayout(reference=torch.ones(5, 2, dtype=torch.complex64))),
        "reference",
    )


def test_thin_plate_code_takes_repeated_sites_as_a_bound_code_shares_them():
    sites = RNG.normal(size=(4, 2))[[0, 1, 2, 0]]
    code = ThinPlateCode(4, 12, sites=sites, worker_sites=RNG.normal(size=(12, 2)))
    X = 1.0 + sites @ RNG.normal(size=(2, 3))  # affine in the sites: equal at the repeated one
    alive = [0, 3, 5, 8, 11]
    np.testing.assert_allclose(code.decode(code.encode(X)[alive], alive), X, atol=1e-9)
    X = RNG.normal(size=(5, 3))
    X[4] = X[1]  # identical inputs share a site
    bound = cc.ManifoldGCC(5, 15, layout="thin-plate").bind(X)
    np.testing.assert_array_equal(bound.sites[4], bound.sites[1])
    est = bound.decode(np.tanh(bound.encode(X)), np.arange(15))
    np.testing.assert_allclose(est, np.tanh(X), atol=1e-7)  # systematic: exact with every worker


def test_a_ragged_reference_is_refused_naming_it():
    # numpy's own error for a ragged nested list names no parameter (found by the API fuzzer)
    with pytest.raises(ValueError, match=r"^reference must be an array of samples of one shape"):
        cc.ManifoldGCC(5, 7, layout=ChainLayout(reference=[[0.5], [0.5, 0.5], [0.5], [0.5, 0.5], [0.5]]))


@pytest.mark.parametrize("num_workers", [7, 8])
def test_a_systematic_thin_plate_batch_of_equal_inputs_sits_on_a_worker(num_workers):
    # all inputs equal: one site, at 0; a worker is placed there so the promise of a systematic
    # code (each input's site a worker's site, its answer f(x_k) bit for bit) still holds
    X = np.repeat(np.array([[1.434, 0.236, 0.8608]]), 3, axis=0)
    bound = cc.ManifoldGCC(3, num_workers, systematic=True, layout="thin-plate").bind(X)
    assert bound.systematic
    worker = bound.systematic_workers[0]
    assert worker >= 0 and np.all(bound.worker_sites[worker] == bound.sites[0])
    Y = np.sin(bound.encode(X))
    alive = np.delete(np.arange(num_workers), [w for w in range(num_workers) if w != worker][:2])
    np.testing.assert_array_equal(bound.decode(Y[alive], alive)[0], np.sin(X[0]))
