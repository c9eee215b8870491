"""Berrut approximated coded computing (BACC), a baseline."""

from __future__ import annotations

import math

import numpy as np

from .. import _arraylib
from ..spline.berrut import BerrutMap, berrut_matrix
from .base import Code

__all__ = ["BACC"]

#: From this many ``K * N`` on, BACC decodes through one :class:`BerrutMap` for every alive set
#: (built at the first decode; ``O(K + N)`` a call where its sums take the fast multipole path,
#: which their cost model picks by the output's width: from about ``K N = 4e5`` at widths 10 to
#: 200); below it, through a dense matrix per alive set, cached.
FAST_DECODE_SIZE = 2**14
#: From this many ``K * N`` on, BACC encodes through a :class:`BerrutMap` where its cost model
#: picks the tree for the call's width (:meth:`~codedcomputing.spline.CauchySum.levels_for`),
#: else through the dense ``(N, K)`` matrix; below it always through that matrix.
FAST_ENCODE_SIZE = 2**14


class BACC(Code):
    r"""Berrut approximated coded computing.

    Encoder: worker n receives ``u(beta_n)`` with
    ``u(z) = sum_k w_k(z) x_k / sum_k w_k(z)``, ``w_k(z) = (-1)^k / (z - alpha_k)``.
    Decoder: the same Berrut interpolant through the returned ``(beta_j, y_j)``, signs
    ``(-1)^rho(j)`` with ``rho(j)`` the rank of j among the *returned* workers in sorted
    order, evaluated at ``alpha_k``. No parameters to tune.

    Promise (tested): constant inputs are recovered exactly through any ``f``, from any one
    or more results (a Berrut interpolant reproduces constants).

    Cost: at large sizes (``K N`` from about 4e5 at widths 10 to 200; the Cauchy sums' cost model
    decides per width) an encode or a decode (any alive set) costs ``O((K + N) d)``, through
    a 1-D fast multipole method for the interpolant's Cauchy sums
    (:class:`~codedcomputing.spline.berrut.BerrutMap`), which agrees with the dense matrices to
    about 1e-14 relative; below, dense matrices (``O(K N d)``, cheaper there).
    :attr:`encoder_matrix` and :meth:`decoder_matrix` build the dense matrices (``O(K N)``)
    for callers that want them.

    Parameters
    ----------
    num_inputs, num_workers : int
        K >= 1 inputs, N >= 2 workers (``K > N`` warns).
    points, alpha, beta, assignment, systematic, parity
        As for :class:`~codedcomputing.GCC`. Systematic: worker k (k < K) computes ``f(x_k)``
        raw, and a decode returns it bit for bit when it arrived (a Berrut interpolant
        passes through its nodes anyway).

    References
    ----------
    T. Jahani-Nezhad, M. A. Maddah-Ali. Berrut approximated coded computing: straggler
    resistance beyond polynomial computing. IEEE Transactions on Pattern Analysis and Machine
    Intelligence, 2023.

    J.-P. Berrut. Rational functions for guaranteed and experimentally well-conditioned global
    interpolation. Computers & Mathematics with Applications 15, 1988.

    Examples
    --------
    >>> import numpy as np, codedcomputing as cc
    >>> code = cc.BACC(4, 12)
    >>> X = np.ones((4, 2))
    >>> est = code.decode(np.sin(code.encode(X))[[0, 5, 7]], [0, 5, 7])  # constants: exact
    >>> bool(np.allclose(est, np.sin(1.0)))
    True
    """

    name = "bacc"
    description = "Berrut approximated coded computing: rational interpolation, no tuning"

    def __init__(
        self,
        num_inputs: int,
        num_workers: int,
        *,
        points: str = "chebyshev",
        alpha=None,
        beta=None,
        assignment: str = "natural",
        systematic: bool = False,
        parity: str = "between",
    ):
        super().__init__(
            num_inputs,
            num_workers,
            points=points,
            alpha=alpha,
            beta=beta,
            assignment=assignment,
            systematic=systematic,
            parity=parity,
        )
        self.assignment = assignment
        self.systematic, self.parity = bool(systematic), parity
        size = self.num_inputs * self.num_workers
        self._fast_decode, self._fast_encode = size >= FAST_DECODE_SIZE, size >= FAST_ENCODE_SIZE
        self._maps: dict[str, BerrutMap] = {}
        self._encoder_matrix = None
        if not self._fast_encode:
            self._encoder_matrix = _arraylib.read_only(berrut_matrix(self.alpha, self.beta))

    @property
    def encoder_matrix(self) -> np.ndarray:
        """The dense ``(N, K)`` encoding matrix (read-only; built at the first use for codes
        that encode by the fast map, ``O(K N)``)."""
        if self._encoder_matrix is None:
            self._encoder_matrix = _arraylib.read_only(berrut_matrix(self.alpha, self.beta))
        return self._encoder_matrix

    def decoder_matrix(self, alive) -> np.ndarray:
        """The dense ``(K, len(alive))`` decoding matrix for returned workers ``alive`` (sorted),
        read-only and cached per alive set; ``O(K N)`` to build."""
        alive = np.sort(_arraylib.check_alive(alive, self.num_workers))
        self._require(alive, self.min_results)
        return self._decoder(alive)

    def promised_case(self, rng):
        """Equal inputs through a nonlinear ``f``, from a random alive set; for a systematic
        code, half the time, any inputs through any ``f`` from every systematic worker and
        random parity workers."""
        if self.systematic and rng.integers(2):
            return self._systematic_case(rng)
        X = np.repeat(rng.normal(size=(1, 3)), self.num_inputs, axis=0)
        alive = np.sort(rng.choice(self.num_workers, rng.integers(1, self.num_workers + 1), replace=False))
        return X, np.sin, alive

    def _build_decoder(self, alive_sorted: np.ndarray) -> np.ndarray:
        return _arraylib.read_only(berrut_matrix(self.beta[alive_sorted], self.alpha))

    def _map(self, direction: str) -> BerrutMap:
        """The fast encoder (``alpha -> beta``) or decoder (``beta -> alpha``), built once."""
        built = self._maps.get(direction)
        if built is None:
            nodes, points = (self.alpha, self.beta) if direction == "encoder" else (self.beta, self.alpha)
            built = self._maps[direction] = BerrutMap(nodes, points)
        return built

    def __getstate__(self):
        state = super().__getstate__()
        state["_maps"] = {}  # rebuilt on demand, not worth shipping
        return state

    def _encode(self, X):
        if self._fast_encode and self._map("encoder").sums.levels_for(math.prod(X.shape[1:])) > 0:
            return self._copy_systematic(self._map("encoder")(X), X)
        return self._copy_systematic(_arraylib.apply_matrix(self.encoder_matrix, X), X)

    def _decode(self, Y, alive):
        if self._fast_decode:
            return self._map("decoder")(Y, alive), {}
        return _arraylib.apply_matrix(self._decoder(alive), Y), {}

    def _decode_rows(self, Y, alive, rows):
        """``(values, exact)``: rows ``rows`` of :meth:`_decode`'s estimates alone (checked
        ``Y`` and ``alive`` as there; :meth:`~codedcomputing.codes.base.Code.decode_rows`): a
        serving frontend decodes the few queries still waiting in a group, and for a new alive
        set the ``(len(rows), len(alive))`` Berrut rows cost a fraction of the whole
        ``(K, len(alive))`` decoder. Codes that decode by the fast map decode every row."""
        if type(self)._decode is not BACC._decode:  # a subclass decodes otherwise (ApproxIFER locates)
            return super()._decode_rows(Y, alive, rows)
        exact = np.zeros(len(rows), dtype=bool)  # Berrut's estimates are approximations
        if self._fast_decode:
            return self._decode(Y, alive)[0][rows], exact
        return _arraylib.apply_matrix(berrut_matrix(self.beta[alive], self.alpha[rows]), Y), exact
