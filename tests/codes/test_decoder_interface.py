"""One decoder interface: every decoder GCC builds answers ``decode(Y) -> (estimates, info)``
with what ``decode_details`` reports; ``decoding`` is resolved once, when the code is built;
``decode_details`` hands every code's ``_decode`` the results sorted by worker."""

from __future__ import annotations

import numpy as np
import pytest
import scipy.sparse

import codedcomputing as cc
from codedcomputing import _arraylib
from codedcomputing.spline import AdaptiveInterpolant, Decoder, GapAwareInterpolant, SplineDecoder


@pytest.mark.parametrize(
    ("kwargs", "kind", "keys"),
    [
        ({}, GapAwareInterpolant, {"lambda_dec", "theta", "gaps"}),
        ({"decoding": "adaptive"}, AdaptiveInterpolant, {"lambda_dec", "theta"}),
        ({"decoding": "spline"}, SplineDecoder, {"lambda_dec"}),
        ({"lambda_dec": 1e-3}, SplineDecoder, {"lambda_dec"}),
    ],
)
def test_each_decoder_reports_what_decode_details_reports(kwargs, kind, keys):
    rng = np.random.default_rng(3)
    code = cc.GCC(10, 40, **kwargs)
    alive = np.sort(rng.choice(40, 25, replace=False))
    Y = np.tanh(code.encode(rng.normal(size=(10, 4))))[alive]
    decoder = code.decoder(alive)
    assert type(decoder) is kind and isinstance(decoder, Decoder)
    estimates, info = decoder.decode(Y)
    assert set(info) == keys and info["lambda_dec"] == code.lambda_dec
    details = code.decode_details(Y, alive)
    np.testing.assert_array_equal(details.estimates, estimates)
    assert {key: details.info[key] for key in keys} == info
    assert decoder.decode(Y)[1] is not info  # a new dict per call


def test_the_spline_decoders_call_is_its_decode_without_the_info():
    rng = np.random.default_rng(4)
    knots, points = np.sort(rng.uniform(-1, 1, 30)), np.linspace(-1, 1, 7)
    y = rng.normal(size=(30, 3))
    decoder = SplineDecoder(knots, 1e-4, points)
    estimates, info = decoder.decode(y)
    np.testing.assert_array_equal(estimates, decoder(y))
    assert info == {"lambda_dec": 1e-4}


def test_the_blends_call_is_their_decode():
    rng = np.random.default_rng(5)
    knots, points = np.sort(rng.uniform(-1, 1, 30)), np.linspace(-1, 1, 7)
    y = rng.normal(size=(30, 3))
    gap_aware = GapAwareInterpolant(knots, np.arange(30), points, 30)
    for decoder in (AdaptiveInterpolant(knots, points), gap_aware):
        (called, called_info), (decoded, info) = decoder(y), decoder.decode(y)
        np.testing.assert_array_equal(called, decoded)
        assert called_info == info and 0.0 <= info["theta"] <= 1.0


@pytest.mark.parametrize(
    ("kwargs", "resolved"),
    [
        ({}, "gap-aware"),
        ({"decoding": "auto"}, "gap-aware"),
        ({"lambda_dec": 1e-3}, "spline"),
        ({"lambda_dec": "gcv"}, "spline"),
        ({"decoding": "adaptive"}, "adaptive"),
        ({"decoding": "spline"}, "spline"),
    ],
)
def test_decoding_is_resolved_once_and_shown(kwargs, resolved):
    code = cc.GCC(4, 12, **kwargs)
    assert code.decoding == resolved
    assert code.get_params()["decoding"] == resolved
    assert f"decoding={resolved!r}" in repr(code)
    clone = cc.GCC(**code.get_params())
    assert repr(clone) == repr(code) and clone.decoding == resolved


@pytest.mark.parametrize("decoding", ["gap-aware", "adaptive"])
@pytest.mark.parametrize("lambda_dec", [1e-3, "gcv"])
def test_a_blend_that_is_told_to_smooth_names_both_parameters(decoding, lambda_dec):
    with pytest.raises(ValueError, match=r"decoding=.*lambda_dec=") as err:
        cc.GCC(4, 12, lambda_dec=lambda_dec, decoding=decoding)
    assert "decoding='spline'" in str(err.value)  # what to write instead


def test_an_unknown_decoding_or_lambda_is_refused_by_name():
    with pytest.raises(ValueError, match="decoding"):
        cc.GCC(4, 12, decoding="cubic")
    with pytest.raises(ValueError, match="lambda_dec"):
        cc.GCC(4, 12, lambda_dec="loo")
    with pytest.raises(ValueError, match="lambda_dec"):
        cc.GCC(4, 12, lambda_dec=-1.0)


class _Recording(cc.BACC):
    """BACC that records what its hook receives."""

    name = "bacc"

    def _decode(self, Y, alive):
        self.seen = (np.array(Y), alive.copy())
        return super()._decode(Y, alive)


def test_decode_details_hands_the_hook_the_results_sorted_by_worker():
    code = _Recording(3, 8)
    alive = np.array([6, 1, 4, 0])
    Y = np.arange(4.0)[:, None] * np.ones((1, 2))  # row i holds i: the worker alive[i]'s result
    details = code.decode_details(Y, alive)
    rows, workers = code.seen
    assert workers.tolist() == [0, 1, 4, 6] and details.alive.tolist() == [0, 1, 4, 6]
    assert rows[:, 0].tolist() == [3.0, 1.0, 2.0, 0.0]  # each row moved with its worker
    np.testing.assert_array_equal(details.estimates, code.decode(Y[[3, 1, 2, 0]], [0, 1, 4, 6]))


def test_replication_keeps_the_first_copy_in_the_order_given():
    code = cc.Replication(2, replicas=3)  # workers 0..5 compute inputs 0, 1, 0, 1, 0, 1
    Y = np.array([[40.0], [10.0], [21.0], [41.0]])  # workers 4, 1, 2 (input 0 again), 5
    estimates = code.decode(Y, [4, 1, 2, 5])
    assert estimates.ravel().tolist() == [40.0, 10.0]  # worker 4 came before worker 2


def test_read_only_marks_dense_and_sparse_maps():
    dense = _arraylib.read_only(np.ones((2, 2)))
    sparse = _arraylib.read_only(scipy.sparse.csr_array(np.eye(3)))
    with pytest.raises(ValueError):
        dense[0, 0] = 2.0
    with pytest.raises(ValueError):
        sparse.data[0] = 2.0
