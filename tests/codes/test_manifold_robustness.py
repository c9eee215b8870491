"""ManifoldGCC, ThinPlateCode and codedcomputing.codes.layout on batches that break layouts: graphs
that fall apart, duplicates, degenerate and extreme inputs, sizes, and relabelled workers.
References: brute force (exhaustive matchings, an O(K N) dynamic programme, a minimum spanning
tree of the pieces), scipy (cdist, CubicSpline, minimum_spanning_tree) and exact recovery."""

from __future__ import annotations

import itertools
import time
import warnings

import numpy as np
import pytest
from scipy.interpolate import CubicSpline
from scipy.sparse.csgraph import connected_components, minimum_spanning_tree
from scipy.spatial.distance import cdist

import codedcomputing as cc
from codedcomputing.codes import layout
from codedcomputing.codes.layout import LAYOUTS, ChainLayout, PCALayout, SpectralLayout, ThinPlateLayout
from codedcomputing.codes.manifold import MAX_THIN_PLATE_POINTS, ThinPlateCode, thin_plate_map
from layouts import BATCH_KINDS, hard_batch

CODE_OPTIONS = {"assignment", "systematic", "degraded", "decoding", "points"}


def manifold(num_inputs, num_workers, design="chain", **options):
    """``ManifoldGCC(num_inputs, num_workers)`` with ``options``: the code's own
    (:data:`CODE_OPTIONS`) and those of the layout named ``design``."""
    code = {key: options.pop(key) for key in CODE_OPTIONS & options.keys()}
    return cc.ManifoldGCC(num_inputs, num_workers, layout=LAYOUTS[design](**options), **code)


def fuzzed_batch(rng):
    """The fuzzer's batch: 4 standard normal points in R^5 and 12 near-duplicates of (3, ..., 3)."""
    return np.r_[rng.normal(size=(4, 5)), 3.0 + 1e-3 * rng.normal(size=(12, 5))]


def squash(X):
    """A nonlinear f whose outputs stay O(1) at any input scale."""
    return lambda x: np.tanh(np.asarray(x, dtype=np.float64) / (np.max(np.abs(X)) or 1.0))


def assert_valid_line_layout(bound, k):
    order, alpha = bound.layout.order, bound.layout.alpha
    assert sorted(order.tolist()) == list(range(k)), f"order {order} is not a permutation"
    assert np.all(np.isfinite(alpha)) and np.unique(alpha).size == k
    assert np.all(np.diff(alpha[order]) > 0), "input order[i] must sit at the i-th point"
    np.testing.assert_array_equal(bound.alpha, alpha)


# -- the fuzzer's case: a reference graph the batch falls out of -------------------------


@pytest.mark.parametrize("neighbours", [10, 1])
def test_near_duplicates_off_the_reference_are_laid_out_and_recovered(neighbours):
    """The 12 near-duplicates are each other's nearest neighbours, so they link to no
    reference sample (their geodesics through the reference graph alone are infinite): the
    pieces are joined, the layout is a valid line layout that says so (``components > 1``),
    and the estimates are recovered."""
    for seed in range(8):
        rng = np.random.default_rng(seed)
        reference, X = rng.normal(size=(200, 5)), fuzzed_batch(rng)
        code = cc.ManifoldGCC(16, 48, layout=ChainLayout(reference=reference, neighbours=neighbours))
        bound = code.bind(X)
        assert_valid_line_layout(bound, 16)
        assert bound.layout.components > 1  # the pieces were joined, and the layout says so
        f = squash(X)
        np.testing.assert_allclose(bound.decode(f(bound.encode(X)), np.arange(48)), f(X), atol=1e-12)
        distances = layout.Reference(reference, neighbours).geodesic_distances(X)
        assert np.all(np.isfinite(distances))
        np.testing.assert_allclose(distances, distances.T, rtol=1e-12)
        assert np.all(distances >= cdist(X, X) * (1 - 1e-12) - 1e-12)  # never below the straight line
        tp = cc.ManifoldGCC(16, 48, layout=ThinPlateLayout(reference=reference, neighbours=neighbours)).bind(
            X
        )
        np.testing.assert_allclose(tp.decode(f(tp.encode(X)), np.arange(48)), f(X), atol=1e-12)


def test_a_connected_graph_reports_one_component():
    rng = np.random.default_rng(1)
    reference = rng.normal(size=(200, 3))
    assert layout.Reference(reference, 10).components == 1
    code = cc.ManifoldGCC(8, 24, layout=ChainLayout(reference=reference))
    assert code.bind(rng.normal(size=(8, 3))).layout.components == 1


def test_components_count_the_pieces_of_the_batch_graph_a_layout_used():
    """With 3 neighbours the fuzzer's batch falls into 2 pieces (scipy counts them): the
    spectral order and eigenmaps, which use the batch's own graph, report them; the chain
    without a reference uses no graph and reports 1."""
    X = fuzzed_batch(np.random.default_rng(1))
    graph = layout.knn_graph(layout.pairwise_distances(np.unique(X, axis=0)), 3, join=False)
    pieces = connected_components(graph, directed=False)[0]
    assert pieces == 2
    for options in ({"design": "spectral"}, {"design": "thin-plate", "embedding": "eigenmaps"}):
        assert manifold(16, 48, neighbours=3, **options).bind(X).layout.components == pieces
    assert cc.ManifoldGCC(16, 48, layout=ChainLayout(neighbours=3)).bind(X).layout.components == 1


def test_joined_links_are_a_minimum_spanning_tree_of_the_pieces():
    """Brute force: the pieces' pairwise shortest links, then scipy's minimum spanning tree
    over the pieces: the links join_components adds weigh the same in total, and there are
    (pieces - 1) of them."""
    rng = np.random.default_rng(2)
    for _ in range(20):
        pieces = int(rng.integers(2, 7))
        centres = 30.0 * rng.normal(size=(pieces, 3))
        points = np.concatenate([c + rng.normal(size=(int(rng.integers(2, 8)), 3)) for c in centres])
        distances = cdist(points, points)
        graph = layout.knn_graph(distances, 1, join=False)
        count, labels = connected_components(graph, directed=False)
        joined, reported = layout.join_components(graph, distances)
        assert reported == count and connected_components(joined, directed=False)[0] == 1
        between = np.full((count, count), np.inf)
        for a, b in itertools.combinations(range(count), 2):
            between[a, b] = distances[np.ix_(labels == a, labels == b)].min()
        tree = minimum_spanning_tree(np.where(np.isfinite(between), between, 0)).sum()
        added = (joined - graph).tocoo()  # the new links, each stored twice
        lengths = added.data[added.data != 0]
        assert lengths.size == 2 * (count - 1)
        assert np.isclose(lengths.sum() / 2, tree, rtol=1e-12)


def test_a_reference_that_falls_apart_is_joined_and_counted():
    rng = np.random.default_rng(3)
    reference = np.r_[rng.normal(size=(20, 2)), 100.0 + rng.normal(size=(20, 2))]
    prepared = layout.Reference(reference, 8)
    assert prepared.components == 2 and connected_components(prepared.graph, directed=False)[0] == 1
    code = cc.ManifoldGCC(6, 18, layout=SpectralLayout(reference=reference, neighbours=8))
    X = np.r_[rng.normal(size=(3, 2)), 100.0 + rng.normal(size=(3, 2))]
    bound = code.bind(X)
    assert_valid_line_layout(bound, 6)
    assert bound.layout.components == 2
    # the spectral order keeps each piece together
    assert set(bound.layout.order[:3].tolist()) in ({0, 1, 2}, {3, 4, 5})


def test_the_chain_refuses_infinite_distances_and_is_a_permutation_under_ties():
    distances = np.array([[0.0, 1.0, np.inf], [1.0, 0.0, np.inf], [np.inf, np.inf, 0.0]])
    with pytest.raises(ValueError, match="distances"):
        layout.chain_order(distances)
    for n in (1, 2, 3, 7):
        np.testing.assert_array_equal(layout.chain_order(np.zeros((n, n))), np.arange(n))  # all equal
    duplicated = layout.pairwise_distances(np.repeat(np.random.default_rng(4).normal(size=(4, 3)), 3, axis=0))
    assert sorted(layout.chain_order(duplicated).tolist()) == list(range(12))


# -- the invariants over many seeded batches --------------------------------------------

LINE_DESIGNS = {
    "chain": {},
    "spectral": {"design": "spectral"},
    "pca": {"design": "pca"},
    "none": {"design": "none"},
    "centripetal": {"spacing": "centripetal"},
    "rank": {"spacing": "rank"},
    "one-neighbour": {"neighbours": 1},
    "spectral-one-neighbour": {"design": "spectral", "neighbours": 1},
    "natural": {"assignment": "natural"},
}
SITE_DESIGNS = {
    "thin-plate": {"design": "thin-plate"},
    "eigenmaps": {"design": "thin-plate", "embedding": "eigenmaps"},
    "eigenmaps-one-neighbour": {"design": "thin-plate", "embedding": "eigenmaps", "neighbours": 1},
}


def check_bound(code, X, rng):
    """The invariants of one bound batch: a valid layout, every input exact with no
    straggler (systematic, K <= N), the bound code's own promise, finite estimates from a
    random alive set."""
    k, n = code.num_inputs, code.num_workers
    bound = code.bind(X)
    if hasattr(bound.layout, "order"):
        assert_valid_line_layout(bound, k)
    f = squash(X)
    Y = f(bound.encode(X))
    assert np.all(np.isfinite(Y))
    if code.systematic and k <= n:
        np.testing.assert_allclose(bound.decode(Y, np.arange(n)), f(X), rtol=0, atol=1e-9)
    case = bound.promised_case(rng)
    if case is not None:
        Xp, fp, alive = case
        truth = fp(np.asarray(Xp, dtype=np.float64))
        est = bound.decode(fp(bound.encode(Xp))[alive], alive)
        np.testing.assert_allclose(est, truth, rtol=0, atol=1e-8 * max(1.0, np.max(np.abs(truth))))
    alive = np.sort(rng.choice(n, int(rng.integers(bound.min_results, n + 1)), replace=False))
    assert np.all(np.isfinite(bound.decode(Y[alive], alive)))


@pytest.mark.parametrize("kind", BATCH_KINDS)
@pytest.mark.parametrize("options", LINE_DESIGNS.values(), ids=LINE_DESIGNS.keys())
def test_line_layouts_keep_their_invariants_on_hard_batches(kind, options):
    rng = np.random.default_rng([BATCH_KINDS.index(kind), len(options)])
    for k, n, d in ((1, 4, 3), (2, 5, 1), (3, 3, 2), (8, 20, 4), (16, 48, 5)):
        code = manifold(k, n, **options)
        check_bound(code, hard_batch(kind, rng, k, d), rng)
        if kind not in ("huge", "tiny"):  # a reference, clustered like the batch or not
            reference = np.r_[rng.normal(size=(30, d)), hard_batch(kind, rng, 10, d)]
            check_bound(
                manifold(k, n, reference=reference, **options),
                hard_batch(kind, rng, k, d),
                rng,
            )


@pytest.mark.parametrize("kind", BATCH_KINDS)
@pytest.mark.parametrize("options", SITE_DESIGNS.values(), ids=SITE_DESIGNS.keys())
def test_thin_plate_layouts_keep_their_invariants_on_hard_batches(kind, options):
    rng = np.random.default_rng([BATCH_KINDS.index(kind), len(options), 1])
    for k, n, d in ((1, 4, 3), (2, 5, 1), (3, 5, 1), (8, 20, 4), (16, 40, 5)):
        check_bound(manifold(k, n, **options), hard_batch(kind, rng, k, d), rng)
        if kind not in ("huge", "tiny"):
            reference = np.r_[rng.normal(size=(30, d)), hard_batch(kind, rng, 10, d)]
            check_bound(
                manifold(k, n, reference=reference, **options),
                hard_batch(kind, rng, k, d),
                rng,
            )


ORDERED = {name: options for name, options in LINE_DESIGNS.items() if name != "none"} | SITE_DESIGNS


@pytest.mark.parametrize("options", ORDERED.values(), ids=ORDERED.keys())
def test_estimates_come_back_in_the_batch_row_order(options):
    """A permuted batch gets the permuted estimates, with stragglers, whatever the batch:
    the layout is computed for the distinct inputs in lexicographic order, so neither the
    spectral sign rule nor the chain's tie between a path and its reverse depends on the row
    order (which could otherwise mirror the layout). (``design="none"`` keeps the drawn order:
    not here.)"""
    rng = np.random.default_rng(5)
    for kind in BATCH_KINDS:
        for _ in range(1 if options.get("design") == "thin-plate" else 2):  # thin-plate binds cost more
            X = hard_batch(kind, rng, 12, 4)
            X = X[np.unique(X, axis=0, return_index=True)[1]]  # distinct rows: ties among
            k, n = len(X), 3 * len(X)  # identical ones are the one thing left to row order
            code = manifold(k, n, **options)
            perm, alive = rng.permutation(k), np.sort(rng.choice(n, max(2, n - n // 4), replace=False))
            a, b = code.bind(X), code.bind(X[perm])
            f = squash(X)
            est_a = a.decode(f(a.encode(X))[alive], alive)
            est_b = b.decode(f(b.encode(X[perm]))[alive], alive)
            np.testing.assert_allclose(est_b, est_a[perm], rtol=1e-9, atol=1e-9)


def test_inputs_on_a_line_through_an_affine_f_are_exact():
    """No straggler: every systematic design is exact for any f; the thin-plate design
    puts inputs on a line on a 1-D layout affine along it, so an affine f is exact from any
    two or more results."""
    rng = np.random.default_rng(6)
    weights, shift = rng.normal(size=(6, 2)), rng.normal(size=2)

    def f(x):
        return x @ weights + shift

    for _ in range(4):
        X = hard_batch("line", rng, 10, 6)
        for options in [*LINE_DESIGNS.values(), *SITE_DESIGNS.values()]:
            bound = manifold(10, 30, **options).bind(X)
            np.testing.assert_allclose(bound.decode(f(bound.encode(X)), np.arange(30)), f(X), atol=1e-10)
        bound = cc.ManifoldGCC(10, 30, layout="thin-plate").bind(X)
        assert bound.sites.shape == (10, 1)
        alive = np.sort(rng.choice(30, int(rng.integers(2, 31)), replace=False))
        np.testing.assert_allclose(bound.decode(f(bound.encode(X))[alive], alive), f(X), atol=1e-9)


def test_distinct_inputs_never_share_a_thin_plate_site():
    """Eigenmaps of a graph that fell apart, or a reference extension with one neighbour,
    put different inputs on one point: they are spread 1e-3 apart (identical inputs keep
    one site)."""
    rng = np.random.default_rng(7)
    reference = rng.normal(size=(40, 3))
    for options in ({"neighbours": 1}, {"neighbours": 1, "reference": reference}, {}):
        code = manifold(12, 36, design="thin-plate", embedding="eigenmaps", **options)
        for kind in ("tight-duplicates", "exact-duplicates", "clusters"):
            X = hard_batch(kind, rng, 12, 3)
            sites = code.bind(X).sites
            same_input = cdist(X, X) == 0
            apart = cdist(sites, sites)
            assert np.all(apart[~same_input] >= 1e-4), np.min(apart[~same_input])
            assert np.all(apart[same_input] == 0)


# -- relabelled workers: the decode sorts by the points ---------------------------------


@pytest.mark.parametrize("decoding", ["auto", "spline", "adaptive"])
def test_relabelling_the_workers_does_not_change_the_estimates(decoding):
    """The same code with its worker points given in another order (golden, natural, an
    explicit unsorted beta) encodes the same coded inputs for the relabelled workers and
    decodes the same estimates from their results."""
    rng = np.random.default_rng(8)
    for trial in range(12):
        k, n = int(rng.integers(2, 12)), int(rng.integers(12, 40))
        X = hard_batch(BATCH_KINDS[trial % len(BATCH_KINDS)], rng, k, 3)
        f = squash(X)
        natural = cc.ManifoldGCC(k, n, assignment="natural", decoding=decoding)
        perm = rng.permutation(n)  # the twin's worker i sits where natural's worker perm[i] sits
        for twin_code in (
            cc.ManifoldGCC(k, n, beta=natural.beta[perm], decoding=decoding),
            cc.ManifoldGCC(k, n, decoding=decoding),  # golden
        ):
            where = np.array([np.flatnonzero(natural.beta == b)[0] for b in twin_code.beta])
            a, b = natural.bind(X), twin_code.bind(X)
            np.testing.assert_array_equal(a.alpha, b.alpha)
            Ya, Yb = f(a.encode(X)), f(b.encode(X))
            np.testing.assert_allclose(Yb, Ya[where], rtol=1e-12, atol=1e-14)
            alive_b = np.sort(rng.choice(n, int(rng.integers(2, n + 1)), replace=False))
            np.testing.assert_allclose(
                b.decode(Yb[alive_b], alive_b),
                a.decode(Ya[where[alive_b]], where[alive_b]),
                rtol=1e-10,
                atol=1e-12,
            )


def test_the_golden_assignment_decodes_like_scipys_natural_spline():
    """An independent reference for the unsorted-knot path: with decoding="spline" and
    lambda 0 the decoder is the natural cubic spline through the returned (beta, y),
    whatever order the workers' points are in (scipy's CubicSpline needs them sorted)."""
    rng = np.random.default_rng(9)
    # golden: beta unsorted in worker order
    code = cc.ManifoldGCC(10, 40, decoding="spline", degraded="spline")
    assert np.any(np.diff(code.beta) > 0) and np.any(np.diff(code.beta) < 0)
    for kind in ("normal", "near-duplicates", "clusters"):
        X = hard_batch(kind, rng, 10, 3)
        bound = code.bind(X)
        Y = np.sin(bound.encode(X))
        ends = [int(np.argmin(code.beta)), int(np.argmax(code.beta))]  # no extrapolation
        alive = np.union1d(rng.choice(40, 20, replace=False), ends)
        by_point = np.argsort(code.beta[alive])
        spline = CubicSpline(code.beta[alive][by_point], Y[alive][by_point], bc_type="natural")
        np.testing.assert_allclose(bound.decode(Y[alive], alive), spline(bound.alpha), atol=1e-10)


def test_relabelling_thin_plate_workers_does_not_change_the_estimates():
    rng = np.random.default_rng(10)
    for kind in ("normal", "near-duplicates", "clusters", "line"):
        X = hard_batch(kind, rng, 10, 4)
        bound = cc.ManifoldGCC(10, 30, layout="thin-plate").bind(X)
        perm = rng.permutation(30)
        twin = ThinPlateCode(
            10, 30, sites=bound.sites, worker_sites=bound.worker_sites[perm], systematic=bound.systematic
        )
        label = np.argsort(perm)  # worker w is the twin's worker label[w]
        Y = np.tanh(bound.encode(X))
        np.testing.assert_allclose(twin.encode(X), bound.encode(X)[perm], rtol=1e-12, atol=1e-12)
        for _ in range(5):
            alive = rng.choice(30, int(rng.integers(2, 31)), replace=False)
            got, expected = twin.decode(Y[alive], label[alive]), bound.decode(Y[alive], alive)
            np.testing.assert_allclose(got, expected, rtol=1e-12, atol=1e-14)


# -- scale, offset, overflow ------------------------------------------------------------


def test_distances_keep_their_digits_under_a_common_offset_and_at_extreme_scales():
    rng = np.random.default_rng(11)
    X, R = rng.normal(size=(30, 8)), rng.normal(size=(20, 8))
    for offset, scale in ((0.0, 1.0), (1e7, 1.0), (0.0, 1e160), (0.0, 1e-160), (1e7, 1e150)):
        a, b = offset + scale * X, offset + scale * R
        # from the differences (scipy; scaled back where its squares would overflow)
        truth_ab = cdist(a, b) if scale == 1.0 else scale * cdist(X, R)
        truth_aa = cdist(a, a) if scale == 1.0 else scale * cdist(X, X)
        rtol = 1e-8 if offset and scale == 1.0 else 1e-12
        np.testing.assert_allclose(layout.pairwise_distances(a, b), truth_ab, rtol=rtol)
        np.testing.assert_allclose(layout.pairwise_distances(a), truth_aa, rtol=rtol, atol=0)
    twins = np.repeat(X[:3], 2, axis=0) + 5.0
    near = layout.pairwise_distances(twins)
    assert near[0, 1] == near[2, 3] == near[4, 5] == 0.0  # duplicates exactly 0 apart


def test_layouts_do_not_depend_on_a_common_offset_or_the_scale():
    """The layout of ``a + s X`` is that of ``X`` for an offset of 1e7 and scales of 1e160 and
    1e-160 (where unnormalised distances would lose the batch's own spread or overflow), for
    the chain, spectral, PCA and thin-plate designs."""
    rng = np.random.default_rng(12)
    for options in [{}, {"design": "spectral"}, {"design": "pca"}, {"design": "thin-plate"}]:
        code = manifold(12, 36, **options)
        for _ in range(4):
            X = rng.normal(size=(12, 6))
            base = code.bind(X)
            for offset, scale in ((1e7, 1.0), (0.0, 1e160), (0.0, 1e-160)):
                moved = code.bind(offset + scale * X)
                if hasattr(base.layout, "order"):
                    np.testing.assert_array_equal(moved.layout.order, base.layout.order)
                    np.testing.assert_allclose(moved.alpha, base.alpha, atol=1e-8)
                else:
                    np.testing.assert_allclose(moved.sites, base.sites, atol=1e-8)


def test_inputs_whose_distances_overflow_are_refused_naming_X():
    X = 1e306 * np.random.default_rng(13).normal(size=(6, 50))
    for design in ("chain", "thin-plate", "pca"):
        with pytest.raises(ValueError, match="X"):
            cc.ManifoldGCC(6, 18, layout=design).bind(X)


def test_arc_positions_and_mds_are_scale_free_and_refuse_bad_gaps():
    points = cc.GCC(5, 10).alpha
    gaps = np.array([1.0, 2.0, 0.5, 3.0])
    np.testing.assert_allclose(
        layout.arc_positions(1e300 * gaps, points), layout.arc_positions(gaps, points), rtol=1e-14
    )
    for bad in ([1.0, np.inf, 1.0, 1.0], [1.0, -1.0, 1.0, 1.0], [1.0, np.nan, 1.0, 1.0]):
        with pytest.raises(ValueError, match="gaps"):
            layout.arc_positions(np.array(bad), points)
    np.testing.assert_array_equal(layout.arc_positions(np.zeros(4), points), np.sort(points))
    D = cdist(*(2 * [np.random.default_rng(14).normal(size=(7, 3))]))
    np.testing.assert_allclose(
        layout.mds_embedding(1e200 * D, 2), 1e200 * layout.mds_embedding(D, 2), rtol=1e-9
    )
    with pytest.raises(ValueError, match="distances"):
        layout.mds_embedding(np.where(D > 1, np.inf, D), 2)


# -- sizes ------------------------------------------------------------------------------


def test_sizes_beyond_the_documented_limits_are_refused_before_allocating():
    start = time.perf_counter()
    with pytest.raises(ValueError, match="num_workers"):
        cc.ManifoldGCC(16, 200_000, layout="thin-plate")  # refused at once, allocating nothing
    with pytest.raises(ValueError, match="num_workers"):
        cc.ManifoldGCC(16, MAX_THIN_PLATE_POINTS + 1, layout="thin-plate")
    with pytest.raises(ValueError, match="num_inputs"):
        ThinPlateCode(MAX_THIN_PLATE_POINTS + 1, 10, sites=np.zeros((1, 1)), worker_sites=np.zeros((10, 1)))
    with pytest.raises(ValueError, match="num_workers"):
        ThinPlateCode(3, 10**6, sites=np.zeros((3, 1)), worker_sites=np.zeros((1, 1)))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for design in ("chain", "spectral"):
            with pytest.raises(ValueError, match="num_inputs"):
                cc.ManifoldGCC(layout.MAX_POINTS + 1, layout.MAX_POINTS + 1, layout=design)
        with pytest.raises(ValueError, match="num_inputs"):
            cc.ManifoldGCC(200_000, 200_000, layout=PCALayout(reference=np.zeros((3, 2))))
    with pytest.raises(ValueError, match="reference"):
        cc.ManifoldGCC(5, 10, layout=ChainLayout(reference=np.zeros((layout.MAX_POINTS + 1, 1))))
    with pytest.raises(ValueError, match="count"):
        layout.hull_design(np.random.default_rng(0).normal(size=(5, 2)), layout.MAX_POINTS + 1)
    assert time.perf_counter() - start < 5.0  # refused, not attempted


def test_pca_without_a_reference_takes_large_batches():
    """No K x K matrix for design="pca" (the gaps come from consecutive differences)."""
    k = layout.MAX_POINTS + 2_000
    X = np.random.default_rng(15).normal(size=(k, 3))
    bound = cc.ManifoldGCC(k, k + 10, layout="pca").bind(X)
    assert_valid_line_layout(bound, k)


def test_thin_plate_decoders_solve_only_for_the_inputs_rows():
    """The decoder map is ``B S^-1`` on the knots' columns: solving for its K rows gives the
    map solving for all n columns gives (and scipy's RBFInterpolator, at the inputs)."""
    from scipy.interpolate import RBFInterpolator

    rng = np.random.default_rng(16)
    knots, targets = rng.uniform(-1, 1, (60, 2)), rng.uniform(-1, 1, (7, 2))
    values = rng.normal(size=(60, 3))
    for smoothing in (0.0, 0.1):
        rows = thin_plate_map(knots, smoothing, targets)  # 7 < 60 targets: by rows
        columns = thin_plate_map(knots, smoothing, np.r_[targets, rng.uniform(-1, 1, (60, 2))])[:7]
        np.testing.assert_allclose(rows, columns, atol=1e-9)
        oracle = RBFInterpolator(knots, values, kernel="thin_plate_spline", smoothing=smoothing)(targets)
        np.testing.assert_allclose(rows @ values, oracle, atol=1e-8)


def test_thin_plate_maps_interpolate_and_reproduce_affine_functions_on_clustered_knots():
    """Knots a few millionths apart: the system is ill-conditioned (cond ~1e12), yet the map
    is exact at the knots and reproduces affine functions."""
    rng = np.random.default_rng(17)
    for spread in (1e-3, 1e-6, 1e-8):
        knots = np.r_[rng.uniform(-1, 1, (4, 2)), 0.5 + spread * rng.normal(size=(12, 2))]
        targets = np.r_[knots[[2, 7, 11]], rng.uniform(-1, 1, (5, 2))]
        M = thin_plate_map(knots, 0.0, targets)
        np.testing.assert_array_equal(M[:3], np.eye(16)[[2, 7, 11]])
        a, b = rng.normal(size=3), rng.normal(size=(2, 3))
        np.testing.assert_allclose(M @ (a + knots @ b), a + targets @ b, atol=1e-9)


# -- the pieces of layout.py ------------------------------------------------------------


def snap_reference(positions, targets):
    """The plain O(K N) dynamic programme (an independent reference): cost[i, j] is the
    least displacement with positions 0..i placed and position i at target j."""
    targets = np.sort(targets)
    k, n = positions.size, targets.size
    cost = np.full((k, n), np.inf)
    cost[0] = np.abs(positions[0] - targets)
    for i in range(1, k):
        cost[i, 1:] = np.minimum.accumulate(cost[i - 1])[:-1] + np.abs(positions[i] - targets[1:])
    return float(cost[-1].min())


def test_snapping_is_optimal_with_windows_of_targets():
    rng = np.random.default_rng(18)
    for _ in range(300):  # brute force over every placement
        k = int(rng.integers(1, 6))
        n = int(rng.integers(k, 10))
        positions, targets = np.sort(rng.uniform(-1.2, 1.2, k)), rng.uniform(-1, 1, n)
        got = layout.snap_to(positions, targets)
        best = min(np.abs(np.array(c) - positions).sum() for c in itertools.combinations(np.sort(targets), k))
        assert np.all(np.diff(got) > 0) and np.all(np.isin(got, targets))
        assert np.isclose(np.abs(got - positions).sum(), best, rtol=1e-12, atol=1e-15)
    for k, n in ((30, 31), (40, 400), (100, 3000)):  # the O(K N) programme
        positions = np.sort(rng.uniform(-1, 1, k) ** 3)
        targets = cc.GCC(2, n).beta
        got = layout.snap_to(positions, targets)
        assert np.isclose(np.abs(got - positions).sum(), snap_reference(positions, targets), rtol=1e-12)
    start = time.perf_counter()  # a window of at most K + 2 targets each: no K x N table
    assert layout.snap_to(np.sort(rng.uniform(-1, 1, 500)), cc.GCC(2, 200_000).beta).size == 500
    assert time.perf_counter() - start < 10.0


def test_the_hull_design_survives_thin_hulls_and_duplicate_sites():
    from scipy.spatial import Delaunay

    rng = np.random.default_rng(19)
    t = rng.uniform(-1, 1, 8)
    thin = np.c_[t, t + 1e-5 * rng.normal(size=8)]  # a diagonal sliver: Sobol points miss it
    design = layout.hull_design(thin, 40)
    assert design.shape == (40, 2) and np.unique(design, axis=0).shape[0] == 40
    assert np.all(Delaunay(thin).find_simplex(design, tol=1e-12) >= 0)
    sites = np.repeat(rng.uniform(-1, 1, (4, 2)), 2, axis=0)
    with_sites = layout.hull_design(sites, 20, include=True)
    assert np.unique(with_sites, axis=0).shape[0] == 20
    assert all(np.any(np.all(with_sites == site, axis=1)) for site in sites)
    line = layout.hull_design(np.repeat(np.array([[0.0], [1.0], [0.3]]), 2, axis=0), 9, include=True)
    assert np.unique(line).size == 9 and np.all(np.isin([0.0, 0.3, 1.0], line))
    equal = layout.hull_design(np.zeros((3, 1)), 5, include=True)
    np.testing.assert_array_equal(equal, np.zeros((5, 1)))


def test_a_complex_batch_is_refused_naming_x():
    """bind laid out complex inputs by their real parts, with a ComplexWarning: refused now."""
    code = cc.ManifoldGCC(4, 12)
    with pytest.raises(ValueError, match="X must be real"):
        code.bind(np.ones((4, 3)) * (1 + 1j))
