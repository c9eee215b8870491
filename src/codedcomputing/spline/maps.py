"""A spline fit as a linear map ``Y -> spline(knots, Y, lam)(points)``, built once and applied
to numpy arrays or torch tensors: what GCC's encoder and decoders are.

:class:`SmoothingMap` is the map as a (sparse) matrix; :class:`BandedFit` applies the same
fit by a banded solve per call; :class:`SplineDecoder` picks between the two by their
predicted costs (:func:`predict_decode_costs`): the map's band, and so its build, grows with
``n`` once ``lam > 0``, while the solve stays linear.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass
from typing import Protocol, runtime_checkable

import numpy as np

from .. import _arraylib
from .reinsch import evaluation_matrix, smoothing_matrix

__all__ = ["MAX_MAP_ENTRIES", "TRUNCATION", "Decoder", "SmoothingMap", "SplineDecoder"]

# Spline weights below TRUNCATION times their row's largest are dropped (a relative change of
# the same order: far below float32 resolution; see spline.smoothing_matrix). A map that
# keeps more than DENSE_FRACTION of its entries is stored dense.
TRUNCATION = 1e-14
DENSE_FRACTION = 0.25
SMALL_MAP = 4096  # maps with at most this many entries are built dense directly


class SmoothingMap:
    """``Y -> spline(knots, Y, lam)(points)`` applied to numpy arrays or torch tensors.

    The map is built once, in time linear in ``len(knots) + len(points)``: the weights decay
    exponentially away from each point, so it is sparse for many knots and dense for few.
    With many more points than knots (an encoder) it is applied in two stages, the knot
    values and second derivatives first (``2n`` rows), then the four-term evaluation at
    each point, which is cheaper than one map with a row of weights per point. It is applied
    in the caller's type, dtype and device. No checks are performed.
    """

    def __init__(self, knots: np.ndarray, lam: float, points: np.ndarray):
        self.knots, self.lam, self.points = knots, lam, points
        # Work on knots rescaled to [-1, 1] (lam scales by the cube of the factor, as the
        # penalty does), so that the map does not depend on the points' units.
        center, half_width = (knots.max() + knots.min()) / 2, (knots.max() - knots.min()) / 2
        knots, points = (knots - center) / half_width, (points - center) / half_width
        if lam > 0:
            with np.errstate(over="ignore", under="ignore"):
                lam = lam / half_width**3
        if not np.isfinite(lam * knots.size):
            raise ValueError("lambda is too large for points this close together")
        n = knots.size
        self.two_stage = points.size >= 2 * n and points.size * n > SMALL_MAP
        self.evaluation = None
        if self.two_stage:
            self.evaluation = evaluation_matrix(knots, points)
            values = smoothing_matrix(knots, lam, knots, tol=TRUNCATION)
            curvatures = smoothing_matrix(knots, lam, knots, tol=TRUNCATION, derivative=2)
            import scipy.sparse

            self.matrix = _compact(scipy.sparse.vstack([values, curvatures], format="csr"))
        elif points.size * n <= SMALL_MAP:
            self.matrix = smoothing_matrix(knots, lam, points)
            # Flush what truncation would drop: tiny weights become slow float32 subnormals.
            self.matrix[np.abs(self.matrix) < TRUNCATION * np.abs(self.matrix).max(axis=1, keepdims=True)] = 0
        else:
            self.matrix = _compact(smoothing_matrix(knots, lam, points, tol=TRUNCATION))

        _arraylib.read_only(self.matrix)
        if self.evaluation is not None:
            _arraylib.read_only(self.evaluation)

    @property
    def dense(self) -> bool:
        """Whether the map is applied as one dense matrix (small maps)."""
        return self.evaluation is None and isinstance(self.matrix, np.ndarray)

    @property
    def linear_map(self):
        """The whole map as one ``(len(points), len(knots))`` matrix (dense or sparse)."""
        return self.matrix if self.evaluation is None else self.evaluation @ self.matrix

    def __call__(self, y):
        if y.dtype.itemsize < 4:  # half precision: knot curvatures (~1/h^2) would overflow
            wide = self(y.float() if _arraylib.is_torch(y) else y.astype(np.float32))
            return wide.to(y.dtype) if _arraylib.is_torch(y) else wide.astype(y.dtype)
        coefficients = _arraylib.apply_matrix(self.matrix, y)
        if self.evaluation is None:
            return coefficients
        return _arraylib.apply_matrix(self.evaluation, coefficients)


def _compact(matrix):
    """Dense if it keeps more than DENSE_FRACTION of its entries, else sparse."""
    if matrix.nnz > DENSE_FRACTION * matrix.shape[0] * matrix.shape[1]:
        return matrix.toarray()
    return matrix


# ---------------------------------------------------------------------------------------------
# A decoder that picks, per set of knots, the cheaper of two exact ways to apply the same map
# ---------------------------------------------------------------------------------------------

# Maps predicted to store more entries than this are never built: a cached decoder holds its
# map (64 alive sets are cached), and the banded solve needs only O(n) memory. 2^22 entries
# are 32 MB dense.
MAX_MAP_ENTRIES = 2**22

# The cost model, in seconds (measured on 2 cores of an AMD EPYC, numpy/scipy on OpenBLAS,
# float64; benchmarks/perf/bench_decode_cost.py prints predicted against measured). Only ratios
# decide, so a uniformly faster or slower machine chooses the same.
_COST = {
    # building the map: per _dense_map call (a window's Reinsch system set up), per knot of the
    # window (its factorisation), per knot and point (the adjoint solve; lam = 0: "...0"), and
    # per entry of the window's block (truncation, nonzeros, assembly)
    "dense_call": 1.2e-4,
    "dense_call0": 3.4e-5,
    "factor": 2.3e-7,
    "factor0": 4.5e-9,
    "adjoint": 6.0e-8,
    "adjoint0": 7.9e-9,
    "keep": 7.9e-9,
    # a block whose solve works on more than the cache holds costs up to 1 + "spill" times as
    # much per entry (2.2e-7 an entry for a dense 14400 x 1600 map against 9.6e-8 for 1800 x 200)
    "spill": 2.5,
    "cache_bytes": 32e6,
    # applying the map, per entry and column: dense (BLAS) or sparse (stored entries)
    "dense_apply": 5.2e-11,
    "sparse_apply": 2.7e-10,
    "map_call": 1.0e-5,
    # the banded route: factorising (fixed and per knot), then per call a fixed cost, per knot
    # and column the solve, per point and column the evaluation, per entry the conversions
    "banded_factor": 1.0e-4,
    "banded_factor0": 2.7e-5,
    "banded_knot": 1.8e-7,
    "banded_knot0": 1.2e-8,
    "banded_call": 3.0e-5,
    "banded_call0": 1.5e-5,
    "solve": 5.8e-8,
    "solve0": 7.0e-9,
    "evaluate": 5.0e-9,
    "convert": 1.0e-9,
    # the banded route on a device tensor: per call the copies to the host and back (each a
    # sync), per value crossing (Y in, the estimates out) ~8 bytes over PCIe. Estimates, not
    # measured here (no GPU); benchmarks/perf/bench_gpu.py prints the first and warm decodes.
    "device_call": 4.0e-5,
    "device_value": 1.0e-9,
}

# Decay of a smoothing spline's weights per knot: ln(1 / (2 - sqrt 3)) = 1.317 for the
# interpolating spline, 1 / (sqrt 2 b) for a local bandwidth of b knots (Silverman's kernel
# decays like exp(-|x| / (sqrt 2 b))). Rates in series: the knots per e-fold add up, 1 / 1.317
# + sqrt 2 b (fitted within ~10% of measured row widths, weight_reach).
_DECAY_INTERPOLATING = 1.0 / np.log(1.0 / (2.0 - np.sqrt(3.0)))
_DECAY_KERNEL = np.sqrt(2.0)


def knot_bandwidth(t: np.ndarray, l: float, sample: np.ndarray) -> np.ndarray:
    """The smoother's local bandwidth, in knots, at the knots ``t[sample]`` (``t`` sorted,
    ``l = n * lam``): ``b = (l / hbar^3)^(1/4)``, with ``hbar`` the mean knot spacing over
    ``b`` knots each side (where knots cluster, as at Chebyshev ends, the spacing over the
    kernel's own width is what counts), by a few fixed-point steps from the spacing next to
    each knot. No checks are performed."""
    n = t.size
    lo, hi = np.maximum(sample - 1, 0), np.minimum(sample + 1, n - 1)
    with np.errstate(over="ignore", divide="ignore"):
        m = np.clip(2.0 * (l / ((t[hi] - t[lo]) / (hi - lo)) ** 3) ** 0.25, 1.0, n)
        beta = m / 2
        for _ in range(6):  # the log of m moves by a factor <= 3/4 a step, halved by the averaging
            mi = np.round(m).astype(np.int64)
            lo, hi = np.maximum(sample - mi, 0), np.minimum(sample + mi, n - 1)
            beta = (l / ((t[hi] - t[lo]) / (hi - lo)) ** 3) ** 0.25
            m = np.sqrt(m * np.clip(2.0 * beta, 1.0, n))
    return beta


def weight_reach(t: np.ndarray, l: float, z: np.ndarray, tol: float = TRUNCATION) -> tuple:
    """Predicted first and last knot (indices into sorted ``t``) at which the weights of the
    fit at each point of ``z`` are still above ``tol`` times their largest: the decay rates
    per knot integrated outwards until they reach ``ln(1 / tol)``. Within ~10% of the true
    row widths once the band is wide, up to 1.7x above them where it is a few knots wide
    (measured on Chebyshev, uniform and random knots, n = 200..8000). ``O(len(z) log n)``
    after ``O(min(n, 256))``. No checks are performed."""
    n = t.size
    interval = np.clip(np.searchsorted(t, z, side="right") - 1, 0, n - 2)
    budget = np.log(1.0 / tol)
    if l == 0.0:
        width = int(np.ceil(budget * _DECAY_INTERPOLATING))
        return np.maximum(interval - width + 1, 0), np.minimum(interval + width, n - 1)
    step = max(1, n // 256)  # the bandwidth varies slowly: sample the knots
    sample = np.unique(np.concatenate([np.arange(0, n, step), [n - 1]]))
    rate = 1.0 / (_DECAY_INTERPOLATING + _DECAY_KERNEL * knot_bandwidth(t, l, sample))
    # cumulative decay at the sampled knots (each sample stands for the knots up to the next)
    decay = np.concatenate([[0.0], np.cumsum(rate[:-1] * np.diff(sample))])
    here = np.interp(interval + 0.5, sample, decay)
    first = np.interp(here - budget, decay, sample, left=0.0)
    last = np.interp(here + budget, decay, sample, right=n - 1.0)
    return np.floor(first).astype(np.int64), np.ceil(last).astype(np.int64)


def _entry_seconds(adjoint: float, knots: int, points: int) -> float:
    """Seconds per entry of a dense ``points x knots`` block of the map: its adjoint solve
    (slower once its right-hand sides, 16 bytes per knot and point, outgrow the cache) and
    the truncation."""
    spilled = 16.0 * knots * points
    return adjoint * (1.0 + _COST["spill"] * spilled / (spilled + _COST["cache_bytes"])) + _COST["keep"]


def _local_map_cost(t: np.ndarray, l: float, z: np.ndarray) -> tuple[float, int]:
    """Predicted seconds and stored entries of ``smoothing_matrix(t, l / n, z, tol=TRUNCATION)``
    for sorted ``t``: it replays the tiling of ``reinsch._local_map`` (windows widened by
    doubling halos, carried from tile to tile, and the dense fallback) on predicted row
    widths. No checks are performed."""
    from .reinsch import _HALO, _tile_width

    n, num_points = t.size, z.size
    c = _COST
    zero = "0" if l == 0 else ""
    call, factor, adjoint = (c[name + zero] for name in ("dense_call", "factor", "adjoint"))
    first, last = weight_reach(t, l, z)
    entries = int(np.sum(last - first + 1))

    def block(window: int, members: int) -> float:
        return call + factor * window + _entry_seconds(adjoint, window, members) * window * members

    dense = block(n, num_points)
    tile_width = _tile_width(n, num_points)
    if n <= tile_width + 2 * _HALO + 2:
        return dense, entries
    interval = np.clip(np.searchsorted(t, z, side="right") - 1, 0, n - 2)
    tile_of_point = interval // tile_width
    order = np.argsort(tile_of_point, kind="stable")
    tiles, starts, counts = np.unique(tile_of_point[order], return_index=True, return_counts=True)
    left_reach = np.minimum.reduceat(first[order], starts)
    right_reach = np.maximum.reduceat(last[order], starts)
    seconds, halo = 0.0, _HALO
    for tile, members, left, right in zip(tiles, counts, left_reach, right_reach, strict=True):
        lo_knot, hi_knot = tile * tile_width, min(tile * tile_width + tile_width, n - 1)
        while True:
            lo, hi = max(0, lo_knot - halo), min(n, hi_knot + 1 + halo)
            seconds += block(hi - lo, int(members))
            margin = max(2, halo // 4)  # as in _local_map: a quarter of the halo must be clear
            cut = (lo > 0 and left < lo + margin) or (hi < n and right > hi - 1 - margin)
            if not cut:
                break
            halo *= 2
            if 2 * halo >= n:
                return seconds + dense, entries
    return seconds, entries


@dataclass(frozen=True)
class DecodeCosts:
    """Predicted seconds of the two exact ways to apply ``Y -> fit(knots, Y, lam)(points)``
    (see :func:`predict_decode_costs`), for ``Y`` of ``width`` columns.

    ``map_build``, ``map_column``, ``map_entries``: building the :class:`SmoothingMap`,
    applying it per column, and the entries it stores. ``banded_factor``, ``banded_column``:
    factorising the Reinsch system once, then per column a banded solve, the evaluation at
    the points and the conversions to float64 and back. ``call``: per call, either way.
    ``values``: the rows a banded call on a device copies to the host and back (knots and
    points).
    """

    map_build: float
    map_column: float
    map_entries: int
    banded_factor: float
    banded_column: float
    map_call: float = _COST["map_call"]
    banded_call: float = _COST["banded_call"]
    values: int = 0

    def map_seconds(self, width: int, built: bool = False) -> float:
        return (0.0 if built else self.map_build) + self.map_call + self.map_column * width

    def banded_seconds(self, width: int, factored: bool = False, device: bool = False) -> float:
        seconds = (0.0 if factored else self.banded_factor) + self.banded_call + self.banded_column * width
        if device:  # Y on a device: the copies to the host and back
            seconds += _COST["device_call"] + _COST["device_value"] * self.values * width
        return seconds


def predict_decode_costs(knots: np.ndarray, lam: float, points: np.ndarray) -> DecodeCosts:
    """Predicted costs of :class:`SmoothingMap` against a banded solve, from the knots, ``lam``
    and the number of points alone, in ``O(min(n, 256) + len(points) log n)``.

    The map's rows are as wide as the weights take to decay to ``TRUNCATION``
    (:func:`weight_reach`: from the local bandwidth in knots, ``(n lam / h^3)^(1/4)``, as in
    :mod:`~codedcomputing.spline.lambdas`); building it costs an adjoint solve per point on
    windows that wide (replaying ``smoothing_matrix``'s tiling), applying it one multiply-add
    per stored entry. The banded solve costs ``O(n)`` per column plus ``O(len(points))`` for
    the evaluation, whatever the bandwidth. No checks are performed.
    """
    t = knots if np.all(knots[1:] > knots[:-1]) else np.sort(knots)
    z = np.asarray(points, dtype=np.float64).ravel()
    n, num_points = t.size, z.size
    l = n * lam
    c = _COST
    if num_points == 0:
        build, entries, dense = 0.0, 0, True
    elif num_points >= 2 * n and num_points * n > SMALL_MAP:  # two stages: fit at the knots, evaluate
        build, entries = _local_map_cost(t, l, t)
        build, entries = 2 * build, 2 * entries + 4 * num_points
        dense = False
    elif num_points * n <= SMALL_MAP:
        zero = "0" if l == 0 else ""
        build = c["dense_call" + zero] + _entry_seconds(c["adjoint" + zero], n, num_points) * n * num_points
        entries, dense = n * num_points, True
    else:
        build, entries = _local_map_cost(t, l, z)
        dense = entries > DENSE_FRACTION * n * num_points
        if dense:
            entries = n * num_points
    column = (c["dense_apply"] if dense else c["sparse_apply"]) * entries
    zero = "0" if l == 0 or n <= 2 else ""
    factor = c["banded_factor" + zero] + c["banded_knot" + zero] * n
    banded_column = c["solve" + zero] * n + c["evaluate"] * num_points + c["convert"] * (n + num_points)
    call = c["banded_call" + zero]
    return DecodeCosts(
        float(build), column, entries, factor, banded_column, banded_call=call, values=n + num_points
    )


class BandedFit:
    """``Y -> fit(knots, Y, lam)(points)`` by a banded solve per call.

    The Reinsch system of the knots is factorised once (``O(n)``); each call solves it
    (``O(n d)``, whatever the bandwidth of the smoother) and evaluates the spline at the
    points (``O(len(points) d)``), with the arithmetic of :func:`~codedcomputing.spline.fit`:
    in float64 on the host, the result returned in ``Y``'s type, dtype and device. Complex
    ``Y`` is solved as its real and imaginary parts. No checks are performed.
    """

    def __init__(self, knots: np.ndarray, lam: float, points: np.ndarray):
        from .reinsch import _Smoother, _Stencil

        order = np.argsort(knots, kind="stable")
        t = knots[order]
        self.order = None if np.array_equal(order, np.arange(t.size)) else order
        self.smoother = _Smoother(t, t.size * float(lam))
        if t.size > 2 and self.smoother.l > 0:
            self.smoother.factorise(transposed=True)  # what solves use: paid once, here
        self.stencil = _Stencil.build(t, np.asarray(points, dtype=np.float64).ravel())

    def __call__(self, y):
        if _arraylib.is_complex(y):
            return _arraylib.complex_like(self(y.real), self(y.imag), y)
        shape = (self.stencil.index.size, *tuple(y.shape[1:]))
        flat = _arraylib.to_float64(y)
        if flat.shape[1] == 0:
            return _arraylib.from_float64(np.zeros(shape), y)
        if self.order is not None:
            flat = flat[self.order]
        return _arraylib.from_float64(self.stencil.apply(*self.smoother.solve(flat)).reshape(shape), y)


ROUTES = ("auto", "map", "banded")


@runtime_checkable
class Decoder(Protocol):
    """The interface of GCC's decoders (:class:`SplineDecoder`,
    :class:`~codedcomputing.spline.adaptive.AdaptiveInterpolant`,
    :class:`~codedcomputing.spline.gaps.GapAwareInterpolant`): one object per set of knots
    (the returned workers' points), whose ``decode(y)`` takes the results ``y`` (row ``i``
    from ``knots[i]``; a numpy array or a torch tensor, any trailing shape) and returns
    ``(estimates, info)``: the estimates at the decoder's points, in ``y``'s type, dtype and
    device, and a new dict of what this call chose, always with ``"lambda_dec"`` (the
    smoothing parameter it used, 0 for the interpolants) and, for the blends, ``"theta"``
    (and ``"gaps"``). A decoder is built once and called many times, from several threads."""

    def decode(self, y) -> tuple[object, dict]: ...


class SplineDecoder:
    """``Y -> fit(knots, Y, lam)(points)`` by whichever of two exact routes is predicted cheaper,
    decided per call: a drop-in for :class:`SmoothingMap` as GCC's decoder.

    - the explicit map (:class:`SmoothingMap`): cheap to apply, and reused by every call, but
      its build grows with the smoother's band, which with ``lam > 0`` widens with ``n``
      (``(n lam / h^3)^(1/4)`` knots, more where knots cluster);
    - a banded solve (:class:`BandedFit`): ``O(n)`` to factorise, ``O(n d)`` per call.

    The costs are predicted from the knots, ``lam`` and the number of points
    (:func:`predict_decode_costs`, :attr:`costs`). A call of width ``d`` (columns of ``Y``)
    takes the map when building what is missing of it and applying it is predicted no dearer
    than the banded route; otherwise it solves, and counts what the map would have saved on
    that call towards its build. So a decoder reused often enough (GCC caches one per alive
    set) builds its map at the first call whose own saving covers what the earlier savings
    left of the build, and uses it from then on: at most about twice the cost of the better
    route in hindsight (the ski-rental rule). Maps predicted to hold more
    than :data:`MAX_MAP_ENTRIES` entries are never built.

    ``route="map"`` or ``"banded"`` forces one. Torch tensors that require grad always take
    the map (the banded route computes on the host, outside autograd). For tensors on a device
    (CUDA) the banded route's copies to the host and back count in its cost, and a built map
    is always taken (copied to the device once, applied there): a decoder reused on a device
    ends with its map there, and no host round trip. Thread-safe: the
    parts are built once, under locks; the map's build does not block banded calls.
    """

    def __init__(self, knots: np.ndarray, lam: float, points: np.ndarray, *, route: str = "auto"):
        if route not in ROUTES:
            raise ValueError(f"route must be one of {ROUTES}, got {route!r}")
        if not np.isfinite(lam * knots.size):
            raise ValueError("lambda is too large for this many knots (n * lambda overflows)")
        self.knots, self.lam, self.points, self.route = knots, lam, points, route
        self.costs = predict_decode_costs(knots, lam, points)
        self._map = self._banded = None
        self._regret = 0.0  # seconds the map would have saved so far
        self._init_locks()

    def _init_locks(self) -> None:
        self._lock, self._map_lock, self._banded_lock = threading.Lock(), threading.Lock(), threading.Lock()

    def __getstate__(self):
        state = self.__dict__.copy()
        for name in ("_lock", "_map_lock", "_banded_lock"):
            del state[name]
        return state

    def __setstate__(self, state):
        self.__dict__.update(state)
        self._init_locks()

    @property
    def map_allowed(self) -> bool:
        return self._map is not None or self.costs.map_entries <= MAX_MAP_ENTRIES

    def plan(self, width: int, device: bool = False) -> str:
        """The route a call with ``width`` columns would take now: ``"map"`` or ``"banded"``;
        ``device``: for results on a device (CUDA)."""
        return self._plan(int(width), record=False, device=device)

    def _plan(self, width: int, record: bool, device: bool = False) -> str:
        if self.route != "auto":
            return self.route
        costs = self.costs
        with self._lock:
            if device and self._map is not None:  # built: applied on the device, no round trip
                return "map"
            banded = costs.banded_seconds(width, factored=self._banded is not None, device=device)
            if not self.map_allowed:
                return "banded"
            built = self._map is not None
            # ski rental: what the map would have saved on the calls so far pays towards its build
            remaining = 0.0 if built else max(0.0, costs.map_build - self._regret)
            if remaining + costs.map_seconds(width, built=True) <= banded:
                return "map"
            if record:
                saving = costs.banded_seconds(width, factored=True, device=device) - costs.map_seconds(
                    width, built=True
                )
                self._regret += max(0.0, saving)
            return "banded"

    @property
    def smoothing_map(self) -> SmoothingMap:
        """The explicit map, built on first use."""
        if self._map is None:
            with self._map_lock:
                if self._map is None:
                    self._map = SmoothingMap(self.knots, self.lam, self.points)
        return self._map

    @property
    def banded(self) -> BandedFit:
        """The banded route, factorised on first use."""
        if self._banded is None:
            with self._banded_lock:
                if self._banded is None:
                    self._banded = BandedFit(self.knots, self.lam, self.points)
        return self._banded

    @property
    def linear_map(self):
        """The whole map as one ``(len(points), len(knots))`` matrix (builds the explicit map)."""
        return self.smoothing_map.linear_map

    @property
    def matrix(self):
        """The explicit map's stored matrix (builds it), as :attr:`SmoothingMap.matrix`."""
        return self.smoothing_map.matrix

    def decode(self, y) -> tuple[object, dict]:
        """``(estimates, info)``: the estimates at the points (:meth:`__call__`) and
        ``{"lambda_dec": lam}``, the decoder interface (:class:`Decoder`)."""
        return self(y), {"lambda_dec": self.lam}

    def __call__(self, y):
        """The estimates at the points, in ``y``'s type, dtype and device (a linear map of ``y``)."""
        device = False
        if _arraylib.is_torch(y):
            if _arraylib.requires_grad(y):
                return self.smoothing_map(y)
            device = not _arraylib.on_host(y)
        width = int(np.prod(tuple(y.shape[1:]), dtype=np.int64))
        if self._plan(width, record=True, device=device) == "map":
            return self.smoothing_map(y)
        return self.banded(y)
