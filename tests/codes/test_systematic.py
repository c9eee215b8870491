"""Systematic codes: ``systematic_inputs`` / ``systematic_workers``, ``info["exact"]`` on every
decode, systematic GCC and BACC (points, encode, decode bit for bit), bad input."""

from __future__ import annotations

import numpy as np
import pytest
import torch

import codedcomputing as cc
from codedcomputing.testing import check_code, check_systematic


def test_non_systematic_codes_report_no_systematic_worker():
    for code in (cc.GCC(4, 10), cc.BACC(4, 10), cc.LCC(3, 8), cc.ApproxIFER(3, 20), cc.RobustGCC(3, 12)):
        assert code.systematic_inputs.tolist() == [-1] * code.num_workers
        assert code.systematic_workers.tolist() == [-1] * code.num_inputs
        with pytest.raises(ValueError):
            code.systematic_inputs[0] = 0  # read-only
    unbound = cc.ManifoldGCC(4, 10)  # the layout is the batch's: see the bound code
    assert (unbound.systematic_inputs == -1).all()


def test_uncoded_and_replication_name_each_workers_input():
    assert cc.Uncoded(3).systematic_inputs.tolist() == [0, 1, 2]
    assert cc.Uncoded(3).systematic_workers.tolist() == [0, 1, 2]
    code = cc.Replication(3, replicas=2)
    assert code.systematic_inputs.tolist() == [0, 1, 2, 0, 1, 2]
    assert code.systematic_workers.tolist() == [0, 1, 2]


def test_exact_is_a_mask_of_the_inputs_returned_raw():
    rng = np.random.default_rng(0)
    code = cc.Replication(3, replicas=2, fill=np.nan)
    Y = rng.normal(size=(6, 2))
    details = code.decode_details(Y[[4, 0, 3]], [4, 0, 3])  # input 0 twice: worker 0 first in alive
    assert details.info["exact"].tolist() == [True, True, False]
    np.testing.assert_array_equal(details.estimates[:2], Y[[0, 4]])
    assert np.isnan(details.estimates[2]).all()
    assert details.info["missing"] == [2]
    # approximate decodes: all False, shape (K,)
    gcc = cc.GCC(4, 10)
    exact = gcc.decode_details(rng.normal(size=(10, 2)), range(10)).info["exact"]
    assert exact.dtype == bool and exact.shape == (4,) and not exact.any()
    with pytest.raises(ValueError):
        exact[0] = True


def test_lcc_exact_at_the_threshold_and_not_below():
    code = cc.LCC(3, 8, best_effort=True)
    Y = code.encode(np.random.default_rng(1).normal(size=(3, 2)))
    assert code.decode_details(Y[:3], range(3)).info["exact"].tolist() == [True] * 3
    with pytest.warns(RuntimeWarning):
        assert code.decode_details(Y[:2], range(2)).info["exact"].tolist() == [False] * 3


def test_uncoded_torch_rows_bit_for_bit():
    code = cc.Uncoded(3, fill=0.0)
    Y = torch.randn(2, 4, dtype=torch.float32)
    details = code.decode_details(Y, [2, 0])
    assert torch.equal(details.estimates[[0, 2]], Y[[1, 0]])
    assert details.info["exact"].tolist() == [True, False, True]


# == systematic GCC and BACC =================================================================

SYSTEMATIC = [
    (cls, parity, assignment)
    for cls in (cc.GCC, cc.BACC)
    for parity, assignment in [(p, "natural") for p in cc.codes.base.PARITIES] + [("between", "golden")]
]


@pytest.mark.parametrize(("cls", "parity", "assignment"), SYSTEMATIC)
def test_systematic_codes_pass_the_conformance_suite(cls, parity, assignment):
    ran = check_code(lambda k, n: cls(k, n, systematic=True, parity=parity, assignment=assignment))
    assert "check_systematic" in ran


def test_systematic_gcc_variants_pass_the_conformance_suite():
    check_code(lambda k, n: cc.GCC(k, n, 1e-4, "gcv", systematic=True), sizes=((3, 7),))
    check_code(lambda k, n: cc.GCC(k, n, decoding="spline", points="equispaced", systematic=True))


class _EncodesThroughTheSpline(cc.GCC):
    """Sends systematic workers the encoder's value at their point."""

    def _copy_systematic(self, encoded, X):
        return encoded


class _DecodesThroughTheSpline(cc.GCC):
    """Reports the systematic inputs exact but keeps the decoder's estimates."""

    def _keep_systematic(self, estimates, Y, alive):
        return estimates, np.isin(np.arange(self.num_inputs), self.systematic_inputs[alive])


@pytest.mark.parametrize(
    ("cls", "message"), [(_EncodesThroughTheSpline, "raw input"), (_DecodesThroughTheSpline, "bit for bit")]
)
def test_check_systematic_catches_a_code_that_is_exact_only_to_rounding(cls, message):
    code = cls(6, 20, 1e-3, 1e-3, systematic=True)  # smoothing: the splines miss the points
    with pytest.raises(AssertionError, match=message):
        check_systematic(code, np.random.default_rng(0))


def test_workers_0_to_k_minus_1_sit_at_the_inputs_points():
    code = cc.GCC(10, 15, systematic=True)
    assert code.systematic_workers.tolist() == list(range(10))
    assert code.systematic_inputs.tolist() == list(range(10)) + [-1] * 5
    np.testing.assert_array_equal(code.beta[:10], code.alpha)
    X = np.random.default_rng(3).normal(size=(10, 4)).astype(np.float32)
    coded = code.encode(X)
    assert coded.dtype == np.float32 and np.array_equal(coded[:10], X)


def _between(sorted_alpha, counts):
    """Parity points placed by hand: ``counts[i]`` equally spaced inside gap i."""
    return np.concatenate(
        [
            a + (b - a) * np.arange(1, c + 1) / (c + 1)
            for a, b, c in zip(sorted_alpha[:-1], sorted_alpha[1:], counts, strict=True)
        ]
    )


def test_parity_between_fills_the_gaps_evenly():
    alpha = np.array([-0.5, 0.0, 0.2, 0.9])
    # N - K = 3 = K - 1: one per gap, at the midpoints
    code = cc.GCC(4, 7, systematic=True, alpha=alpha)
    np.testing.assert_allclose(code.beta[4:], [-0.25, 0.1, 0.55], rtol=0, atol=1e-15)
    # N - K = 7 > K - 1: two per gap, the extra one in the middle gap
    code = cc.BACC(4, 11, systematic=True, alpha=alpha)
    np.testing.assert_allclose(code.beta[4:], _between(alpha, [2, 3, 2]), rtol=0, atol=1e-15)
    # N - K = 1 < K - 1
    assert cc.GCC(4, 5, systematic=True, alpha=alpha).beta[4] == pytest.approx(0.1)


def test_parity_ends_and_nearest():
    code = cc.GCC(4, 8, systematic=True, parity="ends")
    parity = np.sort(code.beta[4:])
    assert parity[0] == -1.0 and parity[-1] == 1.0
    np.testing.assert_allclose(parity[1:-1], np.sort(_between(np.sort(code.alpha), [1, 0, 1])))
    code = cc.GCC(4, 8, systematic=True, parity="nearest")
    family = cc.points.chebyshev_second(8)
    # the four family points nearest the inputs are replaced by them; the other four stay
    assert np.isin(code.beta[4:], family).all() and not np.isin(code.beta[:4], family).any()
    assert {-1.0, 1.0} <= set(code.beta[4:].tolist())


def test_golden_assignment_permutes_only_the_parity_workers():
    natural, golden = (cc.GCC(5, 20, systematic=True, assignment=a) for a in ("natural", "golden"))
    np.testing.assert_array_equal(golden.beta[:5], natural.beta[:5])
    assert not np.array_equal(golden.beta[5:], natural.beta[5:])
    np.testing.assert_array_equal(np.sort(golden.beta[5:]), natural.beta[5:])


def test_explicit_points_find_the_systematic_workers():
    beta = np.array([0.9, -0.3, 0.1, -1.0, 0.5])
    code = cc.GCC(2, 5, systematic=True, alpha=[0.1, -1.0], beta=beta)
    assert code.systematic_inputs.tolist() == [-1, -1, 0, 1, -1]
    assert code.systematic_workers.tolist() == [2, 3]
    # beta alone: the inputs go to the beta points nearest the family's data points
    code = cc.BACC(2, 5, systematic=True, beta=beta)
    assert set(code.alpha.tolist()) <= set(beta.tolist()) and (code.systematic_workers >= 0).all()


def test_systematic_decode_returns_the_workers_results_and_decodes_the_rest():
    """A missing input is decoded as the non-systematic decoder would from the same results
    (the same code with the same points, systematic=False), and the returned ones are copied."""
    rng = np.random.default_rng(5)
    for cls in (cc.GCC, cc.BACC):
        code = cls(6, 12, systematic=True)
        plain = cls(6, 12, alpha=code.alpha, beta=code.beta)
        X = rng.normal(size=(6, 4))
        Y = np.sin(code.encode(X))
        alive = np.setdiff1d(np.arange(12), [2, 7])
        details = code.decode_details(Y[alive], alive)
        assert details.info["exact"].tolist() == [True, True, False, True, True, True]
        np.testing.assert_array_equal(
            np.delete(details.estimates, 2, axis=0), np.sin(np.delete(X, 2, axis=0))
        )
        np.testing.assert_allclose(details.estimates[2], plain.decode(Y[alive], alive)[2], rtol=1e-12)


def test_manifold_bound_code_names_its_snapped_workers():
    rng = np.random.default_rng(6)
    X = rng.normal(size=(8, 5))
    bound = cc.ManifoldGCC(8, 12).bind(X)
    workers = bound.systematic_workers
    assert (workers >= 0).all() and np.unique(workers).size == 8
    np.testing.assert_array_equal(bound.beta[workers], bound.alpha)
    np.testing.assert_array_equal(bound.encode(X)[workers], X)
    assert (cc.ManifoldGCC(8, 12, systematic=False).bind(X).systematic_workers == -1).all()
    with pytest.warns(cc.errors.MoreInputsThanWorkersWarning):
        assert (cc.ManifoldGCC(8, 6).bind(X).systematic_workers == -1).all()  # K > N: not snapped


def test_manifold_thin_plate_bound_code_names_the_workers_at_the_inputs_sites():
    rng = np.random.default_rng(7)
    X = rng.normal(size=(8, 5))
    X[5] = X[2]  # identical inputs share a site: the first of them is the worker's
    bound = cc.ManifoldGCC(8, 20, layout="thin-plate").bind(X)
    workers = bound.systematic_workers
    assert bound.systematic and (np.delete(workers, 5) >= 0).all() and workers[5] == -1
    np.testing.assert_array_equal(bound.worker_sites[workers[workers >= 0]], bound.sites[workers >= 0])
    np.testing.assert_array_equal(bound.encode(X)[workers[:5]], X[:5])
    rebuilt = type(bound)(**bound.get_params())
    np.testing.assert_array_equal(rebuilt.systematic_inputs, bound.systematic_inputs)
    plain = cc.ManifoldGCC(8, 20, layout="thin-plate", systematic=False).bind(X)
    assert not plain.systematic and (plain.systematic_workers == -1).all()


# == bad input ================================================================================


@pytest.mark.parametrize("cls", [cc.GCC, cc.BACC])
def test_bad_systematic_input_names_the_parameter(cls):
    with pytest.raises(ValueError, match="num_inputs <= num_workers"):
        cls(6, 5, systematic=True)
    with pytest.raises(ValueError, match="beta must hold"):
        cls(2, 4, systematic=True, alpha=[0.1, 0.2], beta=[0.1, 0.3, 0.5, 0.7])
    for flag in (1, "yes", None, np.array([True])):
        with pytest.raises(ValueError, match="systematic must be True or False"):
            cls(2, 4, systematic=flag)
    for parity in ("middle", None, 1):
        with pytest.raises(ValueError, match="parity must be one of"):
            cls(2, 4, systematic=True, parity=parity)
    with pytest.raises(ValueError, match="alpha"):
        cls(2, 4, systematic=True, alpha=[0.1, 0.1])


def test_bad_thin_plate_systematic_input_names_the_parameter():
    from codedcomputing.codes.manifold import ThinPlateCode

    sites, workers = np.array([[0.0, 0.0], [1.0, 0.5]]), np.array([[0.0, 0.0], [1.0, 0.0], [0.5, 0.5]])
    with pytest.raises(ValueError, match="worker_sites must hold every input's site"):
        ThinPlateCode(2, 3, sites=sites, worker_sites=workers, systematic=True)
    with pytest.raises(ValueError, match="systematic must be True or False"):
        ThinPlateCode(2, 3, sites=sites, worker_sites=workers, systematic="yes")
    code = ThinPlateCode(2, 3, sites=sites[:1].repeat(2, axis=0), worker_sites=workers, systematic=True)
    assert code.systematic_inputs.tolist() == [0, -1, -1] and code.systematic_workers.tolist() == [0, -1]


def test_half_precision_and_autograd_keep_the_systematic_rows():
    code = cc.GCC(5, 8, systematic=True)
    X = torch.randn(5, 3, dtype=torch.bfloat16)
    coded = code.encode(X)
    assert coded.dtype == torch.bfloat16 and torch.equal(coded[:5], X)
    Y = torch.tanh(coded.float()).to(torch.bfloat16)
    estimates = code.decode(Y[[0, 2, 5, 7]], [0, 2, 5, 7])
    assert estimates.dtype == torch.bfloat16 and torch.equal(estimates[[0, 2]], Y[[0, 2]])
    X = torch.randn(5, 3, dtype=torch.float64, requires_grad=True)
    code.decode(torch.tanh(code.encode(X))[[1, 3, 6]], [1, 3, 6]).sum().backward()
    # input 1 returned raw: its estimate is tanh(x_1), so its gradient is 1 - tanh^2 (plus
    # what it contributes to the decoded inputs through the encoder)
    assert X.grad is not None and torch.isfinite(X.grad).all() and (X.grad[1] != 0).all()


@pytest.mark.parametrize(("k", "n"), [(1, 2), (2, 3), (2, 5)])
def test_systematic_gcv_with_every_input_returned_from_under_three_results(k, n):
    """GCV picks lambda from three results on; with fewer, and every systematic worker among
    them, each input is its worker's row (a 1-input, 2-worker code raised IndexError here: the
    decode asked a cached decoder that holds no input for all K rows; found by the API fuzzer)."""
    code = cc.GCC(k, n, lambda_dec="gcv", systematic=True)
    X = np.random.default_rng(k + n).normal(size=(k, 3))
    Y = np.tanh(code.encode(X))
    parity = np.setdiff1d(np.arange(n), code.systematic_workers)
    alive = np.r_[code.systematic_workers, parity[: code.min_results - k]][::-1]  # in any order
    assert alive.size < 3
    decoded = code.decode_details(Y[alive], alive)
    np.testing.assert_array_equal(decoded.estimates, np.tanh(X))
    assert decoded.info["exact"].all() and decoded.info["lambda_dec"] == 0.0
    bound = cc.ManifoldGCC(k, n, lambda_dec="gcv").bind(X)
    alive = np.r_[bound.systematic_workers, np.setdiff1d(np.arange(n), bound.systematic_workers)[: 2 - k]]
    np.testing.assert_array_equal(bound.decode(np.tanh(bound.encode(X))[alive], alive), np.tanh(X))
