"""Everything numerical about natural cubic smoothing splines, and GCC's and BACC's decoders.

- :mod:`~codedcomputing.spline.reinsch`: the Reinsch solver in linear time, :func:`fit`,
  :func:`smoothing_matrix` (the fit as a matrix, dense or sparse and truncated) and
  :func:`evaluation_matrix`;
- :mod:`~codedcomputing.spline.maps`: :class:`SmoothingMap`, a fit as a linear map applied
  to numpy arrays or torch tensors (GCC's encoder), and :class:`SplineDecoder`, which
  applies the same fit by the map or by a banded solve, whichever its cost model predicts
  cheaper;
- :mod:`~codedcomputing.spline.adaptive` and :mod:`~codedcomputing.spline.gaps`: GCC's
  data-adaptive decoders: :class:`AdaptiveInterpolant` blends the piecewise-linear and the
  natural cubic interpolant by leave-one-out, and :class:`GapAwareInterpolant` (GCC's
  default) re-estimates the points that fall in gaps of the returned design;
- :mod:`~codedcomputing.spline.lambdas`: the smoothing parameter's limit
  (:data:`MAX_LAMBDA`) and its dimensionless grid (:func:`lambda_grid`);
- :mod:`~codedcomputing.spline.gcv`: generalised cross-validation (:func:`gcv_score`,
  :func:`gcv_lambda`), with the influence matrix's diagonal in ``O(n)``;
- :mod:`~codedcomputing.spline.berrut` and :mod:`~codedcomputing.spline.cauchy`: Berrut's
  rational interpolant (BACC's encoder and decoder) as a matrix (:func:`berrut_matrix`) or
  as a map in linear time (:class:`BerrutMap`), through fast 1-D Cauchy sums (a fast
  multipole method).

GCC's three decoders share one interface, :class:`Decoder`: built once per set of returned
workers, ``decoder.decode(Y)`` returns ``(estimates, info)``, ``info`` a dict with the
``"lambda_dec"`` used and, for the blends, their fitted weights (``"theta"``, ``"gaps"``).

The smoothing parameter follows the *mean* convention throughout:
``(1/n) sum_i ||u(t_i) - y_i||^2 + lam * int ||u''||^2`` (scipy's
``make_smoothing_spline`` takes ``n * lam``).
"""

from .adaptive import AdaptiveInterpolant
from .berrut import BerrutMap, berrut_matrix
from .gaps import GapAwareInterpolant
from .gcv import gcv_lambda, gcv_score
from .lambdas import MAX_LAMBDA, lambda_grid
from .lambdas import check_grid as check_grid
from .lambdas import check_lambda as check_lambda
from .maps import Decoder, SmoothingMap, SplineDecoder
from .reinsch import NaturalSpline, evaluation_matrix, fit, smoothing_matrix

# check_grid and check_lambda (the argument checks of the codes and the tuner) are importable
# here but not exported: they are the library's own (import them from .lambdas).
__all__ = [
    "MAX_LAMBDA",
    "AdaptiveInterpolant",
    "BerrutMap",
    "Decoder",
    "GapAwareInterpolant",
    "NaturalSpline",
    "SmoothingMap",
    "SplineDecoder",
    "berrut_matrix",
    "evaluation_matrix",
    "fit",
    "gcv_lambda",
    "gcv_score",
    "lambda_grid",
    "smoothing_matrix",
]
