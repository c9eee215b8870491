"""What ``codedcomputing.spline`` and its modules export (their ``__all__``): what a user calls.
The cost model that picks a spline decoder's route, the argument checks and the fast
multipole engine stay importable from their modules but are not exported."""

from __future__ import annotations

import importlib

import pytest

import codedcomputing as cc

EXPORTS = {
    "codedcomputing.spline": {
        "MAX_LAMBDA", "AdaptiveInterpolant", "BerrutMap", "Decoder", "GapAwareInterpolant",
        "NaturalSpline", "SmoothingMap", "SplineDecoder", "berrut_matrix", "evaluation_matrix", "fit",
        "gcv_lambda", "gcv_score", "lambda_grid", "smoothing_matrix",
    },
    "codedcomputing.spline.adaptive": {
        "AdaptiveInterpolant", "blend_weight", "cubic_loo_residuals", "linear_loo_residuals",
    },
    "codedcomputing.spline.berrut": {"BerrutMap", "berrut_matrix"},
    "codedcomputing.spline.cauchy": {"CauchySum"},
    "codedcomputing.spline.gaps": {"GapAwareInterpolant", "simplex_weights"},
    "codedcomputing.spline.gcv": {"gcv_lambda", "gcv_score", "influence_complement"},
    "codedcomputing.spline.lambdas": {"MAX_LAMBDA", "lambda_grid"},
    "codedcomputing.spline.maps": {
        "MAX_MAP_ENTRIES", "TRUNCATION", "Decoder", "SmoothingMap", "SplineDecoder",
    },
    "codedcomputing.spline.reinsch": {"NaturalSpline", "evaluation_matrix", "fit", "smoothing_matrix"},
}  # fmt: skip


@pytest.mark.parametrize("module", sorted(EXPORTS))
def test_each_spline_module_exports_what_users_call(module):
    loaded = importlib.import_module(module)
    assert set(loaded.__all__) == EXPORTS[module]
    assert all(hasattr(loaded, name) for name in loaded.__all__)


def test_the_cost_model_stays_importable_from_its_module_only():
    from codedcomputing.spline.maps import BandedFit, DecodeCosts, predict_decode_costs  # noqa: F401

    for name in ("BandedFit", "DecodeCosts", "predict_decode_costs", "CauchySum", "check_knots"):
        assert not hasattr(cc.spline, name), name
