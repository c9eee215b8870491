"""Writing a new code: piecewise-linear interpolation, checked by the conformance suite.

A code subclasses ``cc.Code`` and implements ``_encode(X)`` and ``_decode(Y, alive) ->
(estimates, info)``; the base class checks the arguments, drops NaN results as erasures and
sets the points (here GCC's: inputs at Chebyshev points of the first kind, workers at those
of the second kind). This one joins the inputs by straight lines, evaluates the line at the
workers' points, and decodes by joining the returned results the same way, extending the end
segments beyond them, so affine inputs come back exactly through affine f from any two
results: its ``promised_case``, which the suite checks. Both maps are applied with
``codedcomputing.utils.apply_matrix``, which keeps the input's type (numpy or torch), dtype and
device, as the suite requires. ``codedcomputing.testing.check_code``
runs every check the shipped codes pass; then the new code is compared with GCC and BACC.
The claim checked: the suite passes (it raises AssertionError naming the failed check).

    .venv/bin/python examples/custom_code.py [--quick]
"""

from __future__ import annotations

import argparse

import numpy as np

import codedcomputing as cc
from codedcomputing.testing import check_code
from codedcomputing.utils import apply_matrix


def interpolation_matrix(knots: np.ndarray, points: np.ndarray) -> np.ndarray:
    """``M`` with ``M @ values`` the piecewise-linear interpolant of ``(knots, values)`` at
    ``points``, extended linearly beyond the end knots (``knots`` sorted)."""
    matrix = np.zeros((points.size, knots.size))
    if knots.size == 1:
        matrix[:] = 1.0
        return matrix
    left = np.clip(np.searchsorted(knots, points) - 1, 0, knots.size - 2)
    weight = (points - knots[left]) / (knots[left + 1] - knots[left])
    rows = np.arange(points.size)
    matrix[rows, left], matrix[rows, left + 1] = 1.0 - weight, weight
    return matrix


class PiecewiseLinear(cc.Code):
    """Encoder and decoder: the piecewise-linear interpolant, extended linearly at the ends."""

    name = "piecewise-linear"
    description = "piecewise-linear interpolation through the inputs and through the results"

    def __init__(self, num_inputs: int, num_workers: int, *, points: str = "chebyshev"):
        super().__init__(num_inputs, num_workers, points=points)
        self.encoder = interpolation_matrix(self.alpha, self.beta)

    @property
    def min_results(self) -> int:
        return 2

    def _encode(self, X):
        return apply_matrix(self.encoder, X)  # in X's type (numpy or torch), dtype and device

    def _decode(self, Y, alive):
        order = np.argsort(self.beta[alive])  # results come in any order; the knots must be sorted
        decoder = np.empty((self.num_inputs, alive.size))
        decoder[:, order] = interpolation_matrix(self.beta[alive][order], self.alpha)
        return apply_matrix(decoder, Y), {}

    def promised_case(self, rng):
        X = rng.normal(size=(1, 3)) + self.alpha[:, None] * rng.normal(size=(1, 3))  # affine in alpha
        alive = np.sort(rng.choice(self.num_workers, rng.integers(2, self.num_workers + 1), replace=False))
        return X, lambda x: 2.0 * x - 1.0, alive


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="20 straggler patterns instead of 200")
    args = parser.parse_args()
    ran = check_code(lambda k, n: PiecewiseLinear(k, n))  # raises AssertionError on a failure
    K, N, S = 10, 50, 10
    rng = np.random.default_rng(0)
    W = rng.normal(size=(64, 10)) / 8
    X = rng.normal(size=(K, 64))
    patterns = [cc.stragglers.random(N, S, rng) for _ in range(20 if args.quick else 200)]
    for code in (PiecewiseLinear(K, N), cc.GCC(K, N), cc.BACC(K, N)):
        results = np.tanh(code.encode(X) @ W)
        errors = [cc.metrics.mse(code.decode(results[alive], alive), np.tanh(X @ W)) for alive in patterns]
        print(f"{code.name:>17}: mean MSE {np.mean(errors):.3g} (K={K}, N={N}, S={S} random stragglers)")
    print(f"ok: {PiecewiseLinear.name} passed all {len(ran)} checks of check_code ({', '.join(ran)})")


if __name__ == "__main__":
    main()
