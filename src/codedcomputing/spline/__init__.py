"""Everything numerical about natural cubic smoothing splines.

- :mod:`~codedcomputing.spline.reinsch`: the Reinsch solver in linear time, :func:`fit`,
  :func:`smoothing_matrix` (the fit as a matrix, dense or sparse and truncated) and
  :func:`evaluation_matrix`;
- :mod:`~codedcomputing.spline.maps`: :class:`SmoothingMap`, a fit as a linear map applied
  to numpy arrays or torch tensors (GCC's encoder and decoders), and :class:`SplineDecoder`,
  which applies the same fit by the map or by a banded solve, whichever is predicted cheaper
  (:func:`predict_decode_costs`);
- :mod:`~codedcomputing.spline.lambdas`: the smoothing parameter's limits
  (:data:`MAX_LAMBDA`, :func:`check_lambda`) and its dimensionless grid
  (:func:`lambda_grid`);
- :mod:`~codedcomputing.spline.gcv`: generalised cross-validation (:func:`gcv_score`,
  :func:`gcv_lambda`), with the influence matrix's diagonal in ``O(n)``
  (:func:`influence_complement`);
- :mod:`~codedcomputing.spline.adaptive` and :mod:`~codedcomputing.spline.gaps`: GCC's
  data-adaptive decoders: :class:`~.adaptive.AdaptiveInterpolant` blends the
  piecewise-linear and the natural cubic interpolant by leave-one-out, and
  :class:`~.gaps.GapAwareInterpolant` (GCC's default) re-estimates the points that fall in
  gaps of the returned design;
- :mod:`~codedcomputing.spline.berrut` and :mod:`~codedcomputing.spline.cauchy`: Berrut's
  rational interpolant (BACC's encoder and decoder) as a matrix (:func:`berrut_matrix`) or
  as a map in linear time (:class:`BerrutMap`), through fast 1-D Cauchy sums
  (:class:`CauchySum`, a fast multipole method).

The smoothing parameter follows the *mean* convention throughout:
``(1/n) sum_i ||u(t_i) - y_i||^2 + lam * int ||u''||^2`` (scipy's
``make_smoothing_spline`` takes ``n * lam``).
"""

from .berrut import BerrutMap, berrut_matrix
from .cauchy import CauchySum
from .gcv import gcv_lambda, gcv_score, influence_complement
from .lambdas import MAX_LAMBDA, check_grid, check_lambda, lambda_grid
from .maps import BandedFit, DecodeCosts, SmoothingMap, SplineDecoder, predict_decode_costs
from .reinsch import NaturalSpline, check_knots, evaluation_matrix, fit, smoothing_matrix

__all__ = [
    "MAX_LAMBDA",
    "BandedFit",
    "BerrutMap",
    "CauchySum",
    "DecodeCosts",
    "NaturalSpline",
    "SmoothingMap",
    "SplineDecoder",
    "berrut_matrix",
    "check_grid",
    "check_knots",
    "check_lambda",
    "evaluation_matrix",
    "fit",
    "gcv_lambda",
    "gcv_score",
    "influence_complement",
    "lambda_grid",
    "predict_decode_costs",
    "smoothing_matrix",
]
