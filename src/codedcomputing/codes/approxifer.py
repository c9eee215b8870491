"""ApproxIFER: Berrut coding with a Berlekamp-Welch-style locator of adversarial results, a
baseline."""

from __future__ import annotations

import numpy as np
from numpy.polynomial import chebyshev

from .. import _arraylib
from .._validation import check_adversaries, check_count
from .bacc import BACC

__all__ = ["ApproxIFER"]


class ApproxIFER(BACC):
    r"""ApproxIFER: Berrut coded computing that drops the results of ``e`` adversaries.

    Encoder: Berrut's interpolant, exactly as :class:`~codedcomputing.BACC`: worker n
    receives ``u(beta_n)``. Decoder: locate the ``e`` adversarial results among the ``n``
    returned, drop them, and Berrut-decode the rest as BACC does. The locator fits, for each
    output coordinate ``c`` separately (``y_i`` the c-th value of the i-th returned result,
    ``z_i`` its worker's point), a rational function ``P / Q`` to the results in the
    Berlekamp-Welch way, by least squares::

        min  sum_i |P(z_i) - y_i Q(z_i)|^2   over  deg P = deg Q = K + e - 1,  q_0 = 1,

    so that ``Q`` vanishes (is smallest) where results do not follow the smooth honest ones:

    1. per coordinate, solve the fit above (``2(K + e) - 1`` unknowns: ``P``'s ``K + e``
       coefficients and ``Q``'s ``K + e - 1`` other than ``q_0``; the column is first divided
       by its largest magnitude, so huge finite results (up to the largest float) neither
       overflow nor swamp the solve; a constant column carries no information and does not vote);
    2. flag the ``e`` returned workers where ``|Q(z_i)|`` is smallest;
    3. majority vote over the coordinates: the ``e`` workers flagged by the most coordinates
       are dropped (ties broken by the smaller summed ``|Q(z_i)| / max_j |Q(z_j)|`` over the
       coordinates, then by the smaller worker index);
    4. Berrut-decode the results that remain (in the results' own type, dtype and device).

    ``e`` workers are always dropped when the locator runs, whether or not that many
    adversaries are present (the scheme assumes at most ``e`` of them). It runs when the fit
    is overdetermined, ``n >= 2(K + e)``; with fewer results nobody is dropped and the
    decoder is BACC's. With ``e = 0`` it is exactly BACC. :meth:`decode_details` reports
    ``info = {"flagged": [...], "located": ...}``: the workers dropped (sorted) and whether
    the locator ran (it drops nobody if every coordinate is constant).

    Normalisation: polynomials are written in the Chebyshev basis ``T_j`` on [-1, 1]
    (``numpy.polynomial.chebyshev.chebvander``), and ``Q``'s free scale is fixed by setting
    its ``T_0`` coefficient to 1. The published normalisation sets ``Q``'s constant term to
    1 in the monomial basis; both fix the same free scale of ``(P, Q)``, and the Chebyshev
    system stays well conditioned at the degrees used (``K + e`` in the hundreds), where the
    monomial one does not. Worker points outside [-1, 1] (an explicit ``beta``) are scaled
    into it.

    Cost at the master: one least-squares problem of ``n x (2(K + e) - 1)`` per output
    coordinate, ``O(n (K + e)^2)`` each (the Chebyshev Vandermonde matrix is built once per
    decode), then BACC's ``O(K n)`` per coordinate.

    Promise (tested): constant inputs are recovered exactly through any ``f``, from any one
    or more results (their results are constant columns, and a Berrut interpolant through
    any subset of them reproduces the constant).

    Parameters
    ----------
    num_inputs, num_workers : int
        K >= 1 inputs, N >= 2 workers (``K > N`` warns).
    num_adversaries : int
        ``e >= 0``: how many returned results the decoder locates and drops.
    points, alpha, beta, assignment
        As for :class:`~codedcomputing.GCC`.

    References
    ----------
    M. Soleymani, R. E. Ali, H. Mahdavifar, A. S. Avestimehr. ApproxIFER: a model-agnostic
    approach to resilient and robust prediction serving systems. AAAI Conference on Artificial
    Intelligence, 2022 (arXiv:2109.09868).

    L. R. Welch, E. R. Berlekamp. Error correction for algebraic block codes. US Patent
    4,633,470, 1986.

    Examples
    --------
    >>> import numpy as np, codedcomputing as cc
    >>> from codedcomputing.codes.approxifer import ApproxIFER
    >>> code = ApproxIFER(4, 24, num_adversaries=2)
    >>> X = np.linspace(-1, 1, 4)[:, None] * np.array([[1.0, 0.5, -0.3]])
    >>> Y = np.sin(code.encode(X))
    >>> Y[[3, 17]] *= -1  # two adversaries flip the sign of their results
    >>> details = code.decode_details(Y, np.arange(24))
    >>> details.info["flagged"], details.info["located"]
    ([3, 17], True)
    >>> honest = np.setdiff1d(np.arange(24), [3, 17])  # the estimates are BACC's from the others
    >>> bool(np.allclose(details.estimates, cc.BACC(4, 24).decode(Y[honest], honest)))
    True
    """

    name = "approxifer"
    description = "ApproxIFER: Berrut coding, Berlekamp-Welch-style location and removal of adversaries"
    linear = False  # which results are dropped depends on the results

    def __init__(
        self,
        num_inputs: int,
        num_workers: int,
        num_adversaries: int = 1,
        *,
        points: str = "chebyshev",
        alpha=None,
        beta=None,
        assignment: str = "natural",
    ):
        self.num_adversaries = check_adversaries(num_adversaries, num_workers)
        super().__init__(
            num_inputs, num_workers, points=points, alpha=alpha, beta=beta, assignment=assignment
        )

    @property
    def degree(self) -> int:
        """``K + e - 1``: the degree of ``P`` and ``Q`` in the locator's fit."""
        return self.num_inputs + self.num_adversaries - 1

    def locates(self, num_results: int) -> bool:
        """Whether ``num_results`` returned results are enough for the locator to run:
        ``e >= 1`` and an overdetermined fit, ``num_results >= 2(K + e)``."""
        num_results = check_count(num_results, "num_results", 0)
        return self.num_adversaries >= 1 and num_results >= 2 * (self.degree + 1)

    def _decode(self, Y, alive):
        located = self.locates(alive.size)
        if located:
            dropped = self._locate(_float_columns(Y), alive)
            keep = np.setdiff1d(np.arange(alive.size), dropped)
            Y, flagged, alive = _arraylib.take_rows(Y, keep), alive[dropped], alive[keep]
        else:
            flagged = np.zeros(0, dtype=np.int64)
        estimates = _arraylib.apply_matrix(self._decoder(alive), Y)
        return estimates, {"flagged": sorted(int(w) for w in flagged), "located": located}

    def _locate(self, values: np.ndarray, alive: np.ndarray) -> np.ndarray:
        """Positions (rows of ``values``, the results of ``alive`` as ``(n, d)`` float64) of
        the ``e`` results the vote drops; steps 1-3 of the class docstring."""
        e, m = self.num_adversaries, self.degree + 1
        n = alive.size
        scale = max(1.0, float(np.max(np.abs(self.beta))))
        vander = chebyshev.chebvander(self.beta[alive] / scale, m - 1)  # (n, m): T_0 .. T_{m-1}
        peak = np.max(np.abs(values), axis=0)
        nonzero = np.flatnonzero(peak > 0)
        scaled = values[:, nonzero] / peak[nonzero]  # in [-1, 1]: no overflow below, even near 1e308
        scaled = scaled[:, np.ptp(scaled, axis=0) > 1e-12]  # constant columns tell nothing
        if scaled.shape[1] == 0:
            return np.zeros(0, dtype=np.int64)
        system = np.empty((n, 2 * m - 1))
        system[:, :m] = vander
        q_coefficients = np.zeros((m, scaled.shape[1]))
        q_coefficients[0] = 1.0
        solved = np.ones(scaled.shape[1], dtype=bool)
        for column, y in enumerate(scaled.T):
            # P(z_i) - y_i sum_{j>=1} q_j T_j(z_i) = y_i  (q_0 = 1)
            np.multiply(-y[:, None], vander[:, 1:], out=system[:, m:])
            try:
                solution = np.linalg.lstsq(system, y, rcond=None)[0]
            except np.linalg.LinAlgError:  # the SVD did not converge: this column does not vote
                solved[column] = False
                continue
            q_coefficients[1:, column] = solution[m:]
        if not solved.any():
            return np.zeros(0, dtype=np.int64)
        q_size = np.abs(vander @ q_coefficients[:, solved])  # (n, voting columns): |Q(z_i)|
        votes = np.zeros(n, dtype=np.int64)
        smallest = np.argsort(q_size, axis=0, kind="stable")[:e]  # per column, the e smallest
        np.add.at(votes, smallest.ravel(), 1)
        with np.errstate(invalid="ignore", divide="ignore"):
            relative = np.nan_to_num(q_size / q_size.max(axis=0, keepdims=True), nan=1.0)
        summed = relative.sum(axis=1)
        ranking = np.lexsort((np.arange(n), summed, -votes))
        return np.sort(ranking[:e])


def _float_columns(Y) -> np.ndarray:
    """``Y`` (numpy or torch, real or complex) as ``(n, d)`` float64 columns on the host; a
    complex result gives two columns per entry, its real and imaginary parts."""
    if _arraylib.is_complex(Y):
        return np.hstack([_arraylib.to_float64(Y.real), _arraylib.to_float64(Y.imag)])
    return _arraylib.to_float64(Y)
