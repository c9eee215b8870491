"""The fast Berrut interpolant: Cauchy sums by a 1-D fast multipole method (spline/cauchy.py),
:class:`BerrutMap`, and BACC through them.

References: the Cauchy sums summed directly in float64, :func:`berrut_matrix`, and scipy's
``FloaterHormannInterpolator`` with ``d = 0`` (Berrut's interpolant).
"""

from __future__ import annotations

import functools
import pickle
from fractions import Fraction

import numpy as np
import pytest
import torch
from scipy.interpolate import FloaterHormannInterpolator

import codedcomputing as cc
from codedcomputing.codes import bacc as bacc_module
from codedcomputing.points import make_points
from codedcomputing.spline import berrut as berrut_module
from codedcomputing.spline import cauchy
from codedcomputing.spline.berrut import BerrutMap, berrut_matrix
from codedcomputing.spline.cauchy import CauchySum
from codedcomputing.testing import check_code


def _layouts(rng):
    """``(name, sources, targets)``: BACC's two directions, equispaced, clustered random
    points, and targets that sit on sources."""
    alpha, beta = make_points("chebyshev", 150, kind="data"), make_points("chebyshev", 1500, kind="workers")
    clustered = np.concatenate(
        [rng.normal(-0.5, 1e-3, 400), rng.uniform(-1, 1, 400), rng.normal(2, 0.1, 200)]
    )
    equispaced = np.linspace(-1, 1, 700)
    return [
        ("decoder", beta, alpha),
        ("encoder", alpha, beta),
        ("equispaced", equispaced, np.linspace(-1.1, 1.1, 301)),
        ("clustered", clustered, rng.uniform(-1, 2.5, 300)),
        ("on nodes", equispaced, np.concatenate([equispaced[::7], rng.uniform(-1, 1, 50)])),
    ]


@pytest.mark.parametrize("layout", range(5))
def test_cauchy_sums_match_the_direct_sums(layout):
    rng = np.random.default_rng(layout)
    name, sources, targets = _layouts(rng)[layout]
    charges = rng.normal(size=(sources.size, 3))
    with np.errstate(divide="ignore"):
        kernel = 1.0 / (targets[:, None] - sources[None, :])
    on_node = ~np.isfinite(kernel)
    kernel[on_node] = 0.0
    direct, scale = kernel @ charges, np.abs(kernel) @ np.abs(charges)
    for dense in (False, True):
        sums = CauchySum(sources, targets, dense=dense)
        assert (sums.levels == 0) == dense
        error = np.abs(sums(charges) - direct) / scale
        assert error.max() < 1e-13, (name, dense, error.max())
        pairs = set(zip(*(a.tolist() for a in sums.coincident), strict=True))
        assert pairs == set(zip(*np.nonzero(on_node), strict=True))


def test_cauchy_sums_pick_a_tree_whose_stored_entries_grow_linearly():
    """The cost is in the stored blocks (near field, leaf transfers) and the tree: both grow
    like N for K = N / 10, up to a log factor from the crowding of Chebyshev points at the
    ends (8x the points: about 10x the entries, against 64x for the dense sums)."""

    def stored(n):
        workers, data = (
            make_points("chebyshev", n, kind="workers"),
            make_points("chebyshev", n // 10, kind="data"),
        )
        sums = CauchySum(workers, data, dense=False)
        blocks = sum(leaf[i].size for leaf in sums._tree(sums.levels).leaves for i in (1, 3, 5))
        return sums.levels, blocks + 2**sums.levels * sums.order**2

    (small_levels, small), (big_levels, big) = stored(2000), stored(16000)
    assert 2 <= small_levels < big_levels
    assert big / small < 12


@pytest.mark.parametrize("dense", [False, True])
def test_berrut_map_is_berrut_interpolation(dense):
    rng = np.random.default_rng(5)
    nodes, points = make_points("chebyshev", 900, kind="workers"), make_points("chebyshev", 90, kind="data")
    berrut = BerrutMap(nodes, points, dense=dense)
    for size in (1, 2, 17, 600, 900):
        chosen = rng.permutation(rng.choice(nodes.size, size, replace=False))
        values = rng.normal(size=(size, 2, 3))
        reference = np.tensordot(berrut_matrix(nodes[chosen], points), values, axes=1)
        out = berrut(values, chosen)
        assert out.shape == (points.size, 2, 3)
        np.testing.assert_allclose(out, reference, rtol=0, atol=1e-13 * np.abs(values).max())
        if size >= 2:
            order = np.argsort(nodes[chosen])
            scipy_values = FloaterHormannInterpolator(
                nodes[chosen][order], values[order].reshape(size, -1), d=0
            )
            np.testing.assert_allclose(
                out.reshape(points.size, -1), scipy_values(points), rtol=0, atol=1e-12 * np.abs(values).max()
            )


@pytest.mark.parametrize("dense", [False, True])
def test_berrut_map_keeps_its_promises_bit_for_bit(dense):
    rng = np.random.default_rng(6)
    nodes = make_points("chebyshev", 800, kind="workers")
    points = np.concatenate([nodes[::9], rng.uniform(-1, 1, 40)])  # some on nodes
    berrut = BerrutMap(nodes, points, dense=dense)
    chosen = np.sort(rng.choice(nodes.size, 500, replace=False))
    constant = np.full((chosen.size, 3), 0.1)
    assert np.array_equal(berrut(constant, chosen), np.full((points.size, 3), 0.1))
    values = rng.normal(size=(chosen.size, 4))
    out = berrut(values, chosen)
    where = {node: row for row, node in enumerate(chosen.tolist())}
    for i, node in enumerate(range(0, nodes.size, 9)):
        if node in where:  # a point on a chosen node takes its value
            assert np.array_equal(out[i], values[where[node]])
    assert np.all(np.isfinite(out))  # points on nodes not chosen: interpolated
    single = berrut(values[:1], chosen[:1])
    assert np.array_equal(single, np.repeat(values[:1], points.size, axis=0))


@pytest.mark.parametrize("dense", [False, True])
def test_berrut_map_on_torch_keeps_dtype_and_autograd(dense):
    rng = np.random.default_rng(7)
    nodes = make_points("chebyshev", 600, kind="workers")
    chosen = np.sort(rng.choice(nodes.size, 450, replace=False))
    points = np.concatenate([make_points("chebyshev", 60, kind="data"), nodes[chosen[::50]]])  # some on nodes
    berrut = BerrutMap(nodes, points, dense=dense)
    values = rng.normal(size=(chosen.size, 3))
    matrix = berrut_matrix(nodes[chosen], points)
    y = torch.tensor(values, requires_grad=True)
    out = berrut(y, chosen)
    assert isinstance(out, torch.Tensor) and out.dtype == torch.float64
    np.testing.assert_allclose(out.detach().numpy(), matrix @ values, rtol=0, atol=1e-12)
    weights = rng.normal(size=out.shape)
    (out * torch.tensor(weights)).sum().backward()
    assert torch.isfinite(y.grad).all()
    np.testing.assert_allclose(y.grad.numpy(), matrix.T @ weights, rtol=0, atol=1e-11)
    for dtype in (torch.float32, torch.bfloat16):
        low = berrut(torch.tensor(values, dtype=dtype), chosen)
        assert low.dtype == dtype
        np.testing.assert_allclose(low.float().numpy(), matrix @ values, rtol=0, atol=0.05)
    assert berrut(values.astype(np.float32), chosen).dtype == np.float32


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
def test_berrut_map_stays_on_the_gpu():
    nodes, points = make_points("chebyshev", 3000, kind="workers"), make_points("chebyshev", 300, kind="data")
    berrut = BerrutMap(nodes, points, dense=False)
    values = torch.randn(3000, 8, dtype=torch.float64, device="cuda")
    out = berrut(values)
    assert out.device == values.device
    reference = berrut_matrix(nodes, points) @ values.cpu().numpy()
    np.testing.assert_allclose(out.cpu().numpy(), reference, rtol=0, atol=1e-12)


def test_bacc_conformance_through_the_fast_multipole_path(monkeypatch):
    """The conformance suite (numpy and torch, promises, bad input) with BACC's maps forced onto
    the fast multipole path at every size."""
    monkeypatch.setattr(bacc_module, "FAST_DECODE_SIZE", 0)
    monkeypatch.setattr(bacc_module, "FAST_ENCODE_SIZE", 0)
    monkeypatch.setattr(bacc_module, "BerrutMap", functools.partial(BerrutMap, dense=False))
    check_code(lambda k, n: cc.BACC(k, n))
    check_code(lambda k, n: cc.BACC(k, n, systematic=True))


def test_bacc_at_a_fast_size_matches_its_dense_matrices():
    k, n = 200, 4000
    code = cc.BACC(k, n)
    rng = np.random.default_rng(8)
    X = rng.normal(size=(k, 5))
    coded = code.encode(X)
    assert code._map("encoder").sums.levels_for(5) >= 2  # the fast path was taken
    np.testing.assert_allclose(coded, code.encoder_matrix @ X, rtol=0, atol=1e-12)
    alive = rng.permutation(rng.choice(n, n - n // 5, replace=False))
    Y = np.tanh(coded[alive])
    estimates = code.decode(Y, alive)
    assert code._map("decoder").sums.levels_for(5 + 1) >= 2  # and a denominator
    order = np.argsort(alive)
    np.testing.assert_allclose(estimates, code.decoder_matrix(alive) @ Y[order], rtol=0, atol=1e-12)
    constant = code.decode(np.full((alive.size, 2), 3.25), alive)
    assert np.array_equal(constant, np.full((k, 2), 3.25))
    twin = pickle.loads(pickle.dumps(code))
    assert twin._maps == {}
    np.testing.assert_array_equal(twin.decode(Y, alive), estimates)


def test_systematic_bacc_at_a_fast_size_returns_its_workers_results():
    k, n = 100, 6000
    code = cc.BACC(k, n, systematic=True)
    rng = np.random.default_rng(9)
    X = rng.normal(size=(k, 3))
    coded = code.encode(X)
    assert np.array_equal(coded[code.systematic_workers], X)
    alive = np.sort(rng.choice(n, n // 2, replace=False))
    Y = np.sin(coded[alive])
    details = code.decode_details(Y, alive)
    returned = np.isin(code.systematic_workers, alive)
    assert np.array_equal(details.info["exact"], returned)
    np.testing.assert_array_equal(details.estimates[returned], np.sin(X[returned]))


def test_berrut_map_on_cpu_tensors_without_grad_matches_numpy():
    rng = np.random.default_rng(10)
    nodes, points = make_points("chebyshev", 500, kind="workers"), make_points("chebyshev", 50, kind="data")
    berrut = BerrutMap(nodes, points, dense=False)
    chosen = np.sort(rng.choice(nodes.size, 400, replace=False))
    values = rng.normal(size=(chosen.size, 2, 3))
    for dtype, np_dtype in ((torch.float64, np.float64), (torch.float32, np.float32)):
        out = berrut(torch.tensor(values, dtype=dtype), chosen)
        assert isinstance(out, torch.Tensor) and out.dtype == dtype and out.shape == (50, 2, 3)
        np.testing.assert_array_equal(out.numpy(), berrut(values.astype(np_dtype), chosen))


def _exact_cauchy_sums(sources, targets, charges):
    """``sum_{t_j != z_i} c_j / (z_i - t_j)`` in exact rational arithmetic (the float64 inputs
    are rationals), rounded once at the end."""
    exact_sources = [Fraction(x) for x in sources.tolist()]
    out = np.empty((targets.size, charges.shape[1]))
    for column in range(charges.shape[1]):
        exact_charges = [Fraction(x) for x in charges[:, column].tolist()]
        for i, z in enumerate(targets.tolist()):
            point = Fraction(z)
            terms = (c / (point - t) for c, t in zip(exact_charges, exact_sources, strict=True) if t != point)
            out[i, column] = float(sum(terms, Fraction(0)))
    return out


def test_fast_sums_and_berrut_map_match_exact_rational_arithmetic():
    """An independent reference: the sums and Berrut's interpolant evaluated exactly. The tree
    (forced) stays within the documented 1e-13 of ``sum_j |c_j| / |z_i - t_j|``."""
    rng = np.random.default_rng(12)
    sources = np.concatenate([rng.uniform(-1, 1, 200), rng.normal(0.3, 1e-3, 60)])  # some clustered
    targets = np.concatenate([rng.uniform(-1.1, 1.1, 24), sources[::37]])  # some on sources
    charges = rng.normal(size=(sources.size, 2))
    exact = _exact_cauchy_sums(sources, targets, charges)
    with np.errstate(divide="ignore"):
        scale = np.abs(1.0 / (targets[:, None] - sources[None, :]))
    scale[~np.isfinite(scale)] = 0.0
    scale = scale @ np.abs(charges)
    for dense in (False, True):
        sums = CauchySum(sources, targets, dense=dense)
        assert (sums.levels_for(2) >= 2) == (not dense)
        assert np.max(np.abs(sums(charges) - exact) / scale) < 1e-13
    # Berrut through a chosen subset: numerator and denominator exactly, one rounding each
    chosen = np.sort(rng.choice(sources.size, 150, replace=False))
    nodes = sources[chosen]
    signs = np.where(np.argsort(np.argsort(nodes, kind="stable")) % 2 == 0, 1.0, -1.0)
    values = rng.normal(size=(chosen.size, 1))
    points = np.concatenate([rng.uniform(-1, 1, 20)])
    num = _exact_cauchy_sums(nodes, points, signs[:, None] * values)
    den = _exact_cauchy_sums(nodes, points, signs[:, None])
    for dense in (False, True):
        out = BerrutMap(sources, points, dense=dense)(values, chosen)
        np.testing.assert_allclose(out, num / den, rtol=0, atol=1e-12 * np.abs(values).max())


def test_cauchy_sums_pick_their_path_by_width_and_agree_across_paths():
    """The cost model: the dense product for a small map, the tree for BACC's large decoder,
    shallower (or as deep) for wide outputs, each level's arrays within CACHE_BYTES; a wide call
    and the same columns one at a time (possibly other paths) agree to rounding."""
    small = CauchySum(np.linspace(-1, 1, 60), np.linspace(-0.9, 0.9, 7))
    assert small.levels_for(1) == 0 and small.levels_for(200) == 0
    workers, data = make_points("chebyshev", 8000, kind="workers"), make_points("chebyshev", 800, kind="data")
    sums = CauchySum(workers, data)
    narrow, wide = sums.levels_for(11), sums.levels_for(201)
    assert narrow >= 2 and 2 <= wide <= narrow
    assert 2**wide * sums.order * 201 * 8 <= cauchy.CACHE_BYTES
    rng = np.random.default_rng(13)
    charges = rng.normal(size=(workers.size, 40))
    together = sums(charges)
    scale = np.abs(1.0 / (data[:, None] - workers[None, :])) @ np.abs(charges[:, [0, 17]])
    for i, column in enumerate((0, 17)):
        alone = sums(charges[:, column : column + 1])[:, 0]
        assert np.max(np.abs(alone - together[:, column]) / scale[:, i]) < 2e-13


def test_berrut_map_on_a_wide_subset_passes_it_as_it_is():
    """From SUBSET_WIDTH columns, sorted chosen nodes go to the sums without zeros at the
    others (the blocks' columns gathered instead): the same interpolant, on the tree and dense."""
    rng = np.random.default_rng(14)
    nodes, points = make_points("chebyshev", 1500, kind="workers"), make_points("chebyshev", 150, kind="data")
    width = berrut_module.SUBSET_WIDTH
    for dense in (False, True):
        berrut = BerrutMap(nodes, points, dense=dense)
        for chosen in (np.sort(rng.choice(nodes.size, 1200, replace=False)), rng.permutation(1500)[:900]):
            values = rng.normal(size=(chosen.size, width))
            reference = berrut_matrix(nodes[chosen], points) @ values
            np.testing.assert_allclose(berrut(values, chosen), reference, rtol=0, atol=1e-12)
