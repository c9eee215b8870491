"""Decoding in input space: a missing output estimated from the returned (coded input,
result) pairs nearest its input, not from the code's line."""

from __future__ import annotations

import numpy as np

from .. import _arraylib
from .._validation import check_number, check_real_array

__all__ = ["AMPLITUDE", "LENGTH", "RIDGE", "kernel_estimates", "kernel_map"]

#: The RBF term's weight used by :class:`~codedcomputing.ManifoldGCC` (``degraded=
#: "input-space"``) and the benchmark's defaults: chosen on the calibration split of
#: ``benchmarks/studies/bench_degraded.py --calibrate`` (even-indexed MNIST test images, seed 1; at
#: K = 50 amplitude 0.3-10 and length 0.5-1 were within 0.04 of each other), never on the
#: reported figures.
AMPLITUDE = 1.0
#: The RBF term's length (in units of the returned inputs' spread) used with
#: :data:`AMPLITUDE`, chosen with it.
LENGTH = 0.5
#: The relative ridge :class:`~codedcomputing.ManifoldGCC` uses: 100 times the function's
#: default, so that results differing by rounding (a permuted batch's) give estimates that
#: differ by rounding too (1e-8 let near-duplicate inputs magnify 1e-16 to 3e-9).
RIDGE = 1e-6


def kernel_estimates(coded_inputs, results, alive, targets, *, amplitude=1.0, length=0.5, ridge=1e-8):
    r"""Estimates of ``f`` at ``targets`` from the results the workers returned, by a
    Gaussian-process posterior mean on the coded inputs the master sent::

        estimate(x) = ybar + k(x, Z_F) (K_FF + rho I)^-1 (Y_F - ybar)
        k(z, z')   = 1 + <z - c, z' - c> / s^2 + amplitude * exp(-||z - z'||^2 / (2 length^2 s^2))

    with ``Z_F`` the coded inputs of the returned workers ``F`` (flattened), ``Y_F`` their
    results, ``ybar`` the results' mean, ``c`` the returned inputs' mean, ``s^2`` the mean
    squared distance between them (so ``length`` is dimensionless), ``K_FF = k(Z_F, Z_F)``
    and ``rho = ridge * trace(K_FF) / |F|``. With ``amplitude = 0`` and ``ridge = 0`` it is
    an affine interpolant of the returned pairs, so a target that is an affine combination
    of returned coded inputs gets that combination of their results, exact for an affine
    ``f`` (the inversion a linear encoder allows: a missing input from a parity and its
    returned neighbours); the RBF term trades that exactness for a local correction where
    ``f`` is curved. It needs no particular code, only the coded inputs the master sent
    (``code.encode(X)``): for example, the inputs whose systematic worker straggled.

    Promise (tested): with ``amplitude = ridge = 0``, affine ``f`` and targets that are
    affine combinations of returned coded inputs (a non-singular kernel matrix), the
    estimates equal ``f(targets)`` to rounding.

    Measured (``benchmarks/studies/bench_degraded.py``, LeNet-5 on MNIST, K = 50, 5% of the
    queries' systematic workers missing, 200 paired trials; ``amplitude`` and ``length``
    chosen on a calibration split): on a systematic GCC with one parity between
    neighbouring inputs in ManifoldGCC's order, argmax agreement with ``f`` on the decoded
    queries 0.91 at N = 1.5 K (GCC's own decoder on ManifoldGCC: 0.77) and 0.77 at 1.25 K
    (0.67).

    Parameters
    ----------
    coded_inputs : array_like, shape (N, ...)
        Every worker's coded input, in worker order.
    results : array_like, shape (F, ...)
        The returned results, row ``i`` from worker ``alive[i]``.
    alive : array_like of int, shape (F,)
        The returned workers (distinct, at least one).
    targets : array_like, shape (T, ...)
        The inputs whose outputs are wanted, shaped like the coded inputs' rows.
    amplitude : float, default 1
        The RBF term's weight, >= 0 (0: the affine term only).
    length : float, default 0.5
        The RBF term's length scale in units of ``s``, > 0.
    ridge : float, default 1e-8
        The relative ridge ``rho``, >= 0 (singular systems are solved in least squares).

    Returns
    -------
    numpy.ndarray, shape (T, ...) of float64, the results' trailing shape.

    Examples
    --------
    >>> import numpy as np
    >>> from codedcomputing.codes.input_space import kernel_estimates
    >>> Z = np.array([[0.0, 0.0], [1.0, 0.0], [0.0, 1.0]])
    >>> f = lambda z: z @ np.array([[2.0], [3.0]]) + 1.0  # affine
    >>> est = kernel_estimates(Z, f(Z), [0, 1, 2], [[0.5, 0.5]], amplitude=0.0)
    >>> bool(np.allclose(est, f(np.array([[0.5, 0.5]]))))
    True
    """
    matrix = kernel_map(coded_inputs, alive, targets, amplitude=amplitude, length=length, ridge=ridge)
    count, wanted = matrix.shape
    returned = check_real_array(results, "results")
    if returned.ndim < 1 or returned.shape[0] != wanted:
        raise ValueError(f"results must have one row per alive worker ({wanted}), got shape {returned.shape}")
    if not np.all(np.isfinite(returned)):
        raise ValueError("results contains NaN or inf")
    estimates = matrix @ returned.reshape(wanted, -1)
    return estimates.reshape((count, *returned.shape[1:]))


def kernel_map(coded_inputs, alive, targets, *, amplitude=1.0, length=0.5, ridge=1e-8) -> np.ndarray:
    """The ``(T, F)`` matrix ``M`` (``F`` returned workers) with ``kernel_estimates(coded_inputs,
    Y, alive, targets, ...) = M @ Y`` for any results ``Y`` (rows flattened): the estimates
    are linear in the results, and ``M`` depends on the coded inputs only. Apply it with the results' own
    array library (``codedcomputing._arraylib.apply_matrix``) to keep their type, dtype,
    device and autograd. Its rows sum to 1 (constants are reproduced). Parameters and
    checks as for :func:`kernel_estimates`.

    Examples
    --------
    >>> import numpy as np
    >>> from codedcomputing.codes.input_space import kernel_map
    >>> M = kernel_map(np.eye(3), [0, 1, 2], [[0.2, 0.3, 0.5]], amplitude=0.0)
    >>> bool(np.allclose(M, [[0.2, 0.3, 0.5]]))
    True
    """
    coded = check_real_array(coded_inputs, "coded_inputs")
    if coded.ndim < 1 or coded.shape[0] < 1:
        raise ValueError(f"coded_inputs must have one row per worker, got shape {coded.shape}")
    alive = _arraylib.check_alive(alive, coded.shape[0])
    if alive.size == 0:
        raise ValueError("alive must name at least one returned worker")
    wanted = check_real_array(targets, "targets")
    if wanted.ndim < 1 or wanted.shape[1:] != coded.shape[1:]:
        raise ValueError(
            f"targets' rows must be shaped like coded_inputs' rows {coded.shape[1:]}, "
            f"got shape {wanted.shape}"
        )
    for name, array in (("coded_inputs", coded), ("targets", wanted)):
        if not np.all(np.isfinite(array)):
            raise ValueError(f"{name} contains NaN or inf")
    amplitude = check_number(amplitude, "amplitude", low=0.0)
    length = check_number(length, "length", low=0.0, low_open=True)
    ridge = check_number(ridge, "ridge", low=0.0)
    inputs = coded[alive].reshape(alive.size, -1)
    return _posterior_map(inputs, wanted.reshape(wanted.shape[0], -1), amplitude, length, ridge)


def _posterior_map(inputs, points, amplitude, length, ridge) -> np.ndarray:
    """The matrix of :func:`kernel_map` on flattened float64 rows: ``ybar + k (K + rho I)^-1
    (Y - ybar)`` is ``(1 1^T / F + k (K + rho I)^-1 (I - 1 1^T / F)) Y``. No checks are
    performed."""
    count = len(inputs)
    centre = inputs.mean(axis=0)
    inputs, points = inputs - centre, points - centre
    peak = float(np.max(np.abs(inputs), initial=0.0))
    if peak > 0:  # the kernel is scale-free: rescaled, inputs at 1e160 or 1e-160 neither overflow nor vanish
        inputs, points = inputs / peak, points / peak
    squares = np.sum(inputs**2, axis=1)
    between = np.maximum(squares[:, None] + squares[None, :] - 2 * inputs @ inputs.T, 0.0)
    scale = float(between.mean())
    scale = scale if scale > 0 else 1.0  # one returned input, or all equal: no spread to measure
    to_points = np.maximum(np.sum(points**2, axis=1)[:, None] + squares[None, :] - 2 * points @ inputs.T, 0.0)

    def kernel(dots, distances):
        return 1.0 + dots / scale + amplitude * np.exp(-distances / (2 * length**2 * scale))

    gram = kernel(inputs @ inputs.T, between)
    gram[np.diag_indices_from(gram)] += ridge * np.trace(gram) / count
    centring = np.eye(count) - 1.0 / count  # Y - ybar = centring @ Y
    if ridge > 0:
        weights = np.linalg.solve(gram, centring)
    else:  # at ridge 0 the kernel matrix may be singular (more pairs than the affine term's
        # rank d + 1 with amplitude 0, repeated inputs) without solve noticing: least squares
        weights = np.linalg.lstsq(gram, centring, rcond=None)[0]
    return 1.0 / count + kernel(points @ inputs.T, to_points) @ weights
