"""Fuzz spec and classifier for the public API (a test helper, like ``references.py``).

Bad input to the public API must raise ``ValueError`` or ``TypeError`` (or a documented error:
:class:`~codedcomputing.errors.InsufficientResultsError`,
:class:`~codedcomputing.errors.MissingResultsError`) whose message names the parameter that
was bad; never another exception type, and never silent acceptance.

- :data:`TARGETS` maps a callable's name (``"GCC"``, ``"GCC.decode"``,
  ``"stragglers.random"``, ...) to a :class:`Target`: its parameters (:class:`Param`, each with
  a generator of valid values and a pool of invalid ones), how to call it and the invariants
  a valid call's result must satisfy.
- :func:`make_case` draws a :class:`Case`: valid values for every parameter (in order, so
  that later parameters can depend on earlier ones: ``len(alive) == len(Y)``, ``alpha`` has
  ``num_inputs`` entries, ...), then, with probability ``p_perturb``, ONE parameter replaced
  by one of its invalid values.
- :func:`classify` runs a case in a daemon thread with a time limit and returns
  ``(outcome, detail)``; :data:`OUTCOMES` lists the outcomes.

All randomness comes from a :class:`Draw` wrapping a :class:`random.Random`: seeded in
``tests/drivers/fuzz_api.py``, driven by hypothesis (``st.randoms()``) in ``test_api_fuzz.py``.
Sizes are small (K <= 6, N <= 16, trailing dimensions <= 4) so that a valid call takes
milliseconds.

Decisions where the right behaviour is debatable (README.md is followed where it speaks):

- Counts (``num_inputs``, ``num_workers``, ``num_stragglers``, ``degree``, ``replicas``,
  ``num_threads``, ``trials``, ``num``, ``wait_for``, ...): Python ints and numpy integer
  scalars are valid; ``bool``, integer-valued floats (``3.0``), ``float``, ``complex``, ``str``,
  ``None``, lists, 1-element arrays, NaN, inf, values below the minimum and huge values
  (``2**63``, ``10**400``: no one has that many workers, and numpy cannot size arrays by them)
  are invalid. ``num_workers = 1`` is valid for the straggler patterns (README: a seed or a
  Generator, any ``N``).
- Real parameters (lambdas, ``p``, ``tol``, delays' scales, ``compute_s``, ``deadline``, ...):
  ints and numpy float/int scalars are valid; ``bool``, ``complex`` (even with zero imaginary
  part), ``str`` (even ``"0.5"``), ``None`` (unless it is the documented default), lists,
  arrays, NaN, +-inf (except ``deadline=inf``, which means no deadline, like ``None``) and
  ``10**400`` (not representable as a float) are invalid.
- ``rng`` / ``seed``: an int ``>= 0`` (numpy integers too, any size: ``2**63`` is a fine seed),
  a non-empty list of them (numpy's ``SeedSequence`` entropy, as the experiments use:
  ``[seed, n, trial]``) or a ``numpy.random.Generator``. ``None`` is invalid: README says each
  pattern takes "a seed or a Generator", and the module asks for an explicit one
  (reproducibility); ``"abc"``, ``-1``, ``1.5``, ``2.0``, bools, lists holding anything but
  ints ``>= 0``, empty lists and a legacy ``RandomState`` are invalid.
- Arrays ``X``, ``Y``, ``est``, ``truth``, ``values``: numpy arrays of any real dtype (ints
  are converted, README), torch tensors (CPU), and nested lists of numbers are valid. Object
  arrays (even of numbers), arrays of strings, ragged lists, wrong leading dimensions,
  scalars and empty arrays are invalid. NaN/inf in the master's inputs ``X`` is invalid; in a
  worker result ``Y`` it is an erasure (README), so valid ``Y`` sometimes holds a NaN row when
  enough finite rows remain. ``metrics.*`` with empty arrays is invalid (brief).
- ``alive``: lists, tuples, numpy integer arrays and torch integer tensors of distinct
  in-range indices, in any order (README). Integer-valued float arrays are not fuzzed (the
  library accepts them on purpose, for ``np.array([])``). Bool masks, sets, strings,
  fractions, duplicates, out-of-range, 2-D, NaN and huge entries are invalid. Too few results
  (``InsufficientResultsError``) is a documented outcome, not bad input: valid draws always
  give enough, and no invalid value is "too few".
- Points ``alpha``/``beta``/``knots``: distinct finite reals. Complex arrays (even with zero
  imaginary part), numeric strings, bools, duplicates, wrong lengths and 2-D arrays are
  invalid. An empty ``points`` for ``smoothing_matrix`` is valid (an empty evaluation set).
- Flags (``best_effort``, ``shuffle``): ``bool`` and ``numpy.bool_`` are valid; ``str``,
  ``None``, lists, dicts and floats are invalid (ints 0/1 are not fuzzed). A flag that the
  call would not consult (``best_effort`` with enough results, ``fill`` with every input
  covered) is still invalid when it has the wrong type: it must be rejected, not ignored.
- ``smoothing_matrix``'s ``derivative``: 0 or 2 as int (numpy ints too); ``2.0``, ``False``
  and ``True`` are invalid.
- ``gather``'s ``wait_for``: an int in ``1..N`` or a predicate; ``None`` is invalid there
  (it is documented only for the executor). ``CodedExecutor.run``/``map``'s ``wait_for``:
  ``None`` or an int in ``min_results..N``; a predicate is invalid (its docstring). For
  uncoded and replication, valid draws use ``None`` or ``N``.
- ``gather``'s ``inputs`` are opaque to the cluster (``f`` decides what it accepts), so only
  non-arrays, scalars and empty arrays are invalid there.
- ``CodedExecutor.map``'s ``batches``: a message naming ``batches`` or ``batch`` counts as
  naming it (a message naming only ``X`` does not).
- ``GCC(..., lambda_dec="gcv").decoder(alive)``: each decode picks its own lambda, so a
  ``ValueError`` naming ``lambda_dec`` (no fixed map) is as acceptable as a map; ``decode``
  and the executor must work with such a code, from any two or more results.
- The executor and ``tune`` may raise the documented errors on valid input (faults or a
  deadline leave too few results): that counts as ``"ok"`` for them. On a perturbed case, a
  documented error that does not name the parameter counts as ``"accepted-invalid"`` (the
  value was taken and the call went on to run short of results).

The extensions (ManifoldGCC, ThinPlateCode, ``layout``; RobustGCC, ``robust_lambda``,
``block_medians``, ApproxIFER, the attacks, ``faults.Adversarial`` and ``faults.corrupt``;
``gradient_coding``) follow the conventions above, plus these decisions:

- Scope: every name in the ``__all__`` of ``codes/manifold.py``, ``codes/layout.py``,
  ``codes/robust.py``, ``adversaries.py``, ``runtime/faults.py`` and ``gradient_coding``
  that is a callable (a class: its constructor and public methods, inherited ones included:
  ``encode``, ``decode``, ``decode_details``, ``complete``, ``decoder``/``decoder_matrix``).
  ``thin_plate_map`` is in no ``__all__`` and says "No checks are performed": not fuzzed.
  ``codes/layout.py`` exports only the layout objects ManifoldGCC takes; its checked math
  functions (not exported) are fuzzed all the same: their arguments are checked like
  ``spline.fit``'s. ``RobustGCC.decoder`` refuses by design (its decode depends on the
  results): not fuzzed.
- Promises: a valid code's own ``promised_case`` is run 2-4 times by the constructor's check
  (and by ``bind``'s, on the bound code) with ``testing.check_promise``'s tolerance,
  ``1e-8 max(1, |f(X)|)``: "to rounding" is the promise's own word, so a ``promised_case``
  that picks an ill-conditioned set of results fails it. ``type(code)(**code.get_params())``
  must rebuild an equal code (``Code.get_params``).
- ManifoldGCC: ``layout`` omitted, a name or a layout object (options drawn as for the layout
  classes' own targets); another object or name is invalid. Layout options: ``neighbours``
  >= K is valid (k is clamped; the docstring's example has the default 10 with K = 8);
  ``dimensions`` is any count >= 1 (at most K - 1 are used). A
  ``reference`` far from the batch is valid (batches are drawn near the origin, half the
  references 30-1000 away; few ``neighbours`` are drawn often, so that a far batch's graph
  links only to itself): the layout must still be one. Batches with a repeated input (one
  in ten) are valid. ``lambda_dec="gcv"`` with the thin-plate layout, and
  ``decoding="adaptive"``/``"gap-aware"`` with ``lambda_dec > 0``, are invalid (either
  name counts). ``bind(X)`` with rows unlike the reference's samples is invalid (``X``).
  ``ManifoldGCC.decode`` (unbound) refusing with a ``ValueError`` that says to ``bind`` is
  its documented answer (``"ok"``); invalid ``Y``/``alive`` must still be named.
- ``bind``'s result: a GCC whose ``layout.order`` is a permutation of 0..K-1, with
  ``alpha`` (= ``layout.alpha``) increasing along it, on workers' points when systematic
  and K <= N, the row-order layout keeping the batch's order; or for the thin-plate one a
  ThinPlateCode with sites ``(K, m)``, ``1 <= m <= min(dimensions, K - 1)``, in
  ``[-1, 1]^m``, each a worker site when systematic and 1 < K <= N. Systematic exactness:
  systematic, K <= N, both lambdas 0 and every worker returned, ``decode(sin(encode(X)))``
  equals ``sin(X)`` in ``X``'s row order to 1e-7 (for the thin-plate design only where its
  spline interpolates: sites distinct and in general position).
- ThinPlateCode: ``sites`` may repeat (its docstring: ``bind`` puts identical inputs on one
  site, and ``get_params`` must rebuild that code), and repeated ones are drawn;
  ``worker_sites`` may repeat (not fuzzed); nested lists are valid.
- RobustGCC and ApproxIFER: ``num_adversaries`` q >= N is invalid (no honest result left
  to decode from), as is a negative one. RobustGCC: ``bound`` None or a finite number > 0;
  ``lambda_dec`` and ``scale`` None or finite >= 0 (``"gcv"`` is GCC's, invalid here);
  ``iterations`` >= 1 (1-10 drawn; the cap of 100 is not fuzzed). Its promise must hold
  for every option: with and without a bound, every loss, start, schedule and assignment.
  ``clip`` takes ``(Y)`` or, later, ``(Y, alive)``: the spec follows the signature it
  finds and checks what both docstrings say: float64 ``(n, d)``; ``np.clip`` to the bound;
  without one at most ``2q`` values per column moved, each within its column's range,
  none when q = 0. Nested lists and zero rows are valid results.
- ``robust_lambda``: q <= ``num_points`` is valid (q = n: every point corrupted, the
  schedule's end), q > n invalid; the value must be the docstring's schedule to 1e-12.
- ``block_medians``: ``knots`` sorted and distinct (its docstring: unsorted or repeated
  knots are invalid); ``values`` ``(n, ...)`` and finite (1-D is one column); ``size`` >= 1 (> n: one
  block); ``points`` finite, 1-D, maybe empty. Affine values are reproduced exactly
  wherever there are two blocks or more (one block is a constant).
- Attacks: ``num_adversaries`` any count (more than returned: all of them, the docstring);
  ``bound`` required by random, concentrated and greedy, optional for sign-flip and
  garbage but checked when given; ``at`` in [-1, 1]. ``corrupt``: ``code`` any Code, alive
  any distinct subset (empty and one result included), ``Y`` finite (NaN/inf invalid: its
  docstring); a list ``Y`` comes back as a numpy array. The check: a Corruption of ``Y``'s
  kind, shape and float dtype; ``min(q, len(alive))`` sorted corrupted workers; the others'
  results untouched; what each attack's docstring says it reports; a seed repeats.
- ``make_attack``: its ``name`` must be named ("attack must be one of ..." does not).
  ``faults.corrupt``: ``kind`` "nan" or "garbage" only (its docstring; "raise", "hang"
  invalid), ``seed`` an int >= 0 (its signature), ``result`` an array or a tensor.
- Gradient codes: n >= 1, s < n, (s + 1) | n for FR. n = 10**6 must be refused quickly,
  naming ``num_workers`` (B alone would be 8 TB: a MemoryError is unexpected-type, a slow
  refusal a hang). CyclicRepetition's valid draws include n = 300 and 400 with s <= 2
  and default options (15%): a valid construction must finish within the time limit; its
  documented refusal (every draw above ``max_condition``) is ``"ok"``. ``seed``,
  ``code_seed`` (and ``from_torch``'s ``seed``): ints >= 0 only, no lists (their
  signatures), checked even where unused (``code_seed`` of a scheme without CR).
  ``partitions``/``group``: ``worker`` an int in 0..n-1. ``decoding_weights`` must give
  ``a^T B_alive = 1^T`` (FR: 1 for each group's first arrival; CR: 0 past the first
  n - s); ``decode(B_alive G, alive)`` must give ``sum_j g_j``. NaN messages are not fuzzed.
- ``Problem``: callables, a finite 1-D ``initial`` (2-D, 0-d, NaN invalid), a count.
  ``from_torch``: a torch module with finite parameters whose input width matches
  ``inputs`` (another width is invalid: either name counts); finite ``inputs``; integer
  ``labels`` in [0, C) (C the module's outputs) as many as ``inputs`` (either name counts);
  ``num_partitions`` <= the examples (either name counts). Its check evaluates the loss and
  every partition's gradient at ``initial``. NaN parameters are an invalid ``module`` (a
  message naming its ``parameters`` counts; one naming ``initial``, no argument of
  ``from_torch``, does not).
- ``simulate``/``train_on_cluster``: least-squares problems or ``from_torch`` ones of
  1-6 partitions, 0-3 steps; ``train_on_cluster`` on one shared ThreadCluster (12
  threads, no faults) or a SimulatedCluster, with delays under a millisecond. The history
  must have ``steps + 1`` Steps numbered 0.., finite increasing wall times, finite losses,
  PGC's ages ``(n, s + 1)``, and the exact schemes (DGD, GC-FR, GC-CR) must follow gradient
  descent on the full gradient (losses to 1e-5 relative) and take no degraded step. Where
  the trainers take ``faults`` and ``step_timeout_s`` (later versions; fuzzed where the
  signature has them): faults None, ``{worker: kind}`` of its ``FAULT_KINDS`` or a fault
  model (no "hang" on threads: it holds its thread until the deadline); deadlines None,
  inf or > 0 (a few seconds at most on threads). With either, a TooManyStragglersError is
  a documented answer (``"ok"``), and with possible "garbage" faults the exact schemes
  need not follow gradient descent (undetected by design).
- ``WorkerState`` is the trainers' plumbing, not exported (its arguments are the
  trainers' own, checked there): not fuzzed.
- ``layout``: arrays are float64 numpy arrays (their signatures say ndarray; lists and
  tensors are neither drawn nor fuzzed). ``distances``: square, finite, >= 0 (asymmetry
  not fuzzed); ``neighbours`` >= 1 (>= n valid: clamped); ``graph``: a scipy sparse array
  or matrix, connected, with positive finite weights (disconnected, edgeless, negative or
  NaN invalid; dense arrays not fuzzed); ``dimensions`` 1..n-2 for the spectral embeddings
  (their docstring), any >= 1 for MDS; ``starts`` >= 1, ``max_passes`` >= 0 (with the
  default passes, no reversal may shorten the returned path); ``order``: distinct in-range
  indices; ``hull_design``'s ``count``, ``candidates`` >= 1 and ``include`` a flag;
  ``snap_to``'s ``positions`` sorted (unsorted invalid) and no more than ``targets``;
  ``arc_positions``' ``gaps`` K - 1 lengths >= 0 (zeros valid; a wrong length invalid even
  at K = 1, where they are unused); ``Reference`` samples: two or more; its methods' inputs
  ``(K, d)`` of the reference's width, near it or far from it (geodesics stay finite:
  its docstring). Functions a later ``layout`` adds are fuzzed where they exist
  (``consecutive_distances``, ``join_components``, ``Reference.geodesics``, ``knn_graph``'s
  ``join``); ``check_size``, itself a check, only for its documented refusal. All of this
  rests on one decision, :data:`LAYOUT_CHECKS_ARGUMENTS`: were ``layout`` declared an
  unchecked math layer ("no checks are performed"), setting it False keeps the valid
  calls' invariants and drops the invalid values.
"""

from __future__ import annotations

import contextlib
import ctypes
import dataclasses
import inspect
import itertools
import math
import random
import re
import threading
import time
import traceback
import warnings
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, ClassVar

import numpy as np
import scipy.sparse
import scipy.sparse.csgraph

import codedcomputing as cc
from codedcomputing.errors import InsufficientResultsError, MissingResultsError
from codedcomputing.spline.gaps import GapAwareInterpolant

try:  # torch tensors are valid X / Y; without torch they are simply not drawn
    import torch
except ImportError:  # pragma: no cover - the dev environment has torch
    torch = None

__all__ = [
    "EXTENSION_NAMES",
    "OMIT",
    "OUTCOMES",
    "TARGETS",
    "TARGET_NAMES",
    "Case",
    "Detail",
    "Draw",
    "Param",
    "Target",
    "classify",
    "make_case",
    "one_blas_thread",
    "short",
]

# The outcome classes of :func:`classify`.
OUTCOMES = (
    "ok",  # no perturbation; returned; the result passed the target's invariants
    "named",  # perturbed; ValueError/TypeError/documented error naming the perturbed parameter
    "accepted-invalid",  # perturbed; returned normally (or raised a documented "too few results"
    # error that does not name the parameter: the value was taken, then results ran short)
    "unnamed",  # perturbed; ValueError/TypeError whose message does not name the parameter
    "unexpected-type",  # perturbed; any other exception type (MemoryError, IndexError, ...)
    "valid-raised",  # no perturbation, yet it raised
    "bad-result",  # no perturbation; returned, but the result broke the target's invariants
    "hang",  # the per-case time limit passed
)
TIME_LIMIT_S = 5.0


@contextlib.contextmanager
def one_blas_thread():
    """Run the cases with one BLAS thread, so that a case's time is its own work: beside
    other busy processes a BLAS's threads wait on each other (CyclicRepetition(100, 1), a
    hundred SVDs, took 25 s with the default threads beside four busy processes on 2 cores,
    0.17 s with one), and a valid call would read as a hang."""
    try:
        from threadpoolctl import threadpool_limits
    except ImportError:  # pragma: no cover - a dependency of the package
        yield
        return
    with threadpool_limits(limits=1, user_api="blas"):
        yield


class _Omit:
    def __repr__(self) -> str:
        return "<default>"


OMIT = _Omit()  # a parameter drawn as OMIT is left out of the call (its default is used)


# -- drawing ---------------------------------------------------------------------------------


class Draw:
    """Every random choice of the spec, from one :class:`random.Random` (seeded, or hypothesis')."""

    def __init__(self, rnd: random.Random):
        self.rnd = rnd

    def int(self, lo: int, hi: int) -> int:
        """Uniform on ``lo..hi`` (inclusive)."""
        return self.rnd.randint(lo, hi)

    def pick(self, options):
        options = list(options)
        return options[self.rnd.randrange(len(options))]

    def coin(self, p: float = 0.5) -> bool:
        return self.rnd.random() < p

    def uniform(self, lo: float, hi: float) -> float:
        return self.rnd.uniform(lo, hi)

    def sample(self, n: int, k: int) -> list[int]:
        """``k`` distinct integers of ``range(n)`` in random order."""
        return self.rnd.sample(range(n), k)

    def normal(self, shape) -> np.ndarray:
        return np.random.default_rng(self.rnd.getrandbits(32)).normal(size=shape)


@dataclass(frozen=True)
class Param:
    """One parameter: ``valid(draw, ctx)`` draws a valid value given the values drawn before it
    (``ctx``); ``invalid(draw, ctx)`` lists ``(label, value)`` or ``(label, value, {other:
    value})`` entries (the last form also changes other parameters, e.g. ``est`` and
    ``truth`` both empty), with ``ctx`` holding every parameter's valid value.

    ``names``: the names a message may use for it (default: ``name``). ``hidden``: context,
    such as the code a method is called on; drawn, never passed by name, never perturbed.
    """

    name: str
    valid: Callable[[Draw, dict], Any]
    invalid: Callable[[Draw, dict], list] | None = None
    names: tuple[str, ...] = ()
    hidden: bool = False

    @property
    def accepted_names(self) -> tuple[str, ...]:
        return self.names or (self.name,)


@dataclass(frozen=True)
class Target:
    """A public callable: ``resolve(kwargs)`` gives the callable, which is then called with the
    non-hidden, non-omitted parameters as keywords; ``consume`` materialises a lazy result
    (``executor.map``) inside the time limit; ``check(result, kwargs)`` returns ``None`` or
    what is wrong with a valid call's result; ``cleanup(result)`` frees it (thread pools).
    ``documented_ok``: error types a valid call may raise by design; ``valid_error(case,
    error)``: whether an error on a valid case is an acceptable answer all the same."""

    name: str
    params: tuple[Param, ...]
    resolve: Callable[[dict], Callable]
    check: Callable[[Any, dict], str | None] = lambda result, kwargs: None
    consume: Callable[[Any], Any] | None = None
    cleanup: Callable[[Any], None] | None = None
    documented_ok: tuple[type[BaseException], ...] = ()
    valid_error: Callable[[Case, BaseException], bool] | None = None

    def param(self, name: str) -> Param:
        return next(p for p in self.params if p.name == name)


@dataclass
class Case:
    """One call: the target's name, every parameter's value (hidden ones start with ``_``),
    the perturbed parameter (``None``: a valid call), the label of its invalid value and the
    other parameters changed along with it (``coupled``: ``est`` and ``truth`` both empty)."""

    name: str
    kwargs: dict
    perturbed: str | None = None
    label: str | None = None
    coupled: tuple[str, ...] = ()

    def public_kwargs(self) -> dict:
        return {k: v for k, v in self.kwargs.items() if not k.startswith("_") and v is not OMIT}

    def __repr__(self) -> str:
        return self.describe()

    def describe(self, limit: int = 80) -> str:
        """The call, each value shown in at most ``limit`` characters (arrays by shape)."""
        args = ", ".join(f"{k}={short(v, limit)}" for k, v in self.public_kwargs().items())
        context = ", ".join(f"{k[1:]}={short(v, limit)}" for k, v in self.kwargs.items() if k.startswith("_"))
        text = f"{self.name}({args})"
        if context:
            text += f" on {context}"
        if self.perturbed is not None:
            text += f"  [perturbed {self.perturbed}: {self.label}]"
        return text


def short(value, limit: int = 80) -> str:
    """A compact repr: arrays and tensors by shape and dtype when large, floats to 4 digits,
    functions by name, long ints by size."""
    text = _short(value, 0)
    return text if len(text) <= limit else text[: limit - 3] + "..."


_DESCRIBED: dict[int, tuple[object, str]] = {}


def _described(obj, text: str):
    """``obj``, shown as ``text`` by :func:`short` (problems and torch modules have no repr to
    read a case by); the object is held, so that its id is not reused while it is described."""
    if len(_DESCRIBED) > 4096:
        _DESCRIBED.clear()
    _DESCRIBED[id(obj)] = (obj, text)
    return obj


def _short(value, depth: int) -> str:
    described = _DESCRIBED.get(id(value))
    if described is not None and described[0] is value:
        return described[1]
    if torch is not None and isinstance(value, torch.Tensor):
        dtype = str(value.dtype).removeprefix("torch.")
        if value.numel() <= 6:
            return f"tensor({_short(value.tolist(), depth + 1)}, {dtype})"
        return f"tensor{tuple(value.shape)}:{dtype}"
    if isinstance(value, np.ndarray):
        if value.size <= 6 and value.dtype != object:
            return f"array({_short(value.tolist(), depth + 1)}, {value.dtype})"
        return f"array{value.shape}:{value.dtype}"
    if isinstance(value, bool) or value is None:
        return repr(value)
    if isinstance(value, int) and abs(value) > 10**30:
        return f"<int of {len(str(abs(value)))} digits>"
    if isinstance(value, np.generic) and not isinstance(value, np.bool_):
        return f"np.{type(value).__name__}({_short(value.item(), depth + 1)})"
    if isinstance(value, float):
        return f"{value:.4g}" if math.isfinite(value) else f"float('{value}')"
    if isinstance(value, (list, tuple)):
        if depth > 2:
            return "[...]" if isinstance(value, list) else "(...)"
        items = [_short(v, depth + 1) for v in value[:6]]
        if len(value) > 6:
            items.append(f"... ({len(value)} items)")
        inner = ", ".join(items)
        return f"[{inner}]" if isinstance(value, list) else f"({inner}{',' if len(value) == 1 else ''})"
    if callable(value) and hasattr(value, "__name__") and not isinstance(value, type):
        return value.__name__
    return " ".join(repr(value).split())  # on one line (a sparse matrix's repr spans two)


def _shape(x) -> tuple:
    if torch is not None and isinstance(x, torch.Tensor):
        return tuple(x.shape)
    if (
        isinstance(x, (list, tuple))
        and x
        and torch is not None
        and all(isinstance(t, torch.Tensor) for t in x)
    ):
        return (len(x), *tuple(x[0].shape))
    return np.shape(np.asarray(x))


def _is_tensor(x) -> bool:
    return torch is not None and isinstance(x, torch.Tensor)


def _finite(x) -> bool:
    if _is_tensor(x):
        return bool(torch.isfinite(x).all())
    return bool(np.all(np.isfinite(np.asarray(x, dtype=np.complex128))))


# -- valid values ----------------------------------------------------------------------------


def int_like(d: Draw, value: int):
    """``value`` as a Python int or a numpy integer scalar (all valid counts)."""
    kind = d.pick(("int", "int", "int", "int64", "int32", "uint16"))
    if kind == "int64":
        return np.int64(value)
    if kind == "int32":
        return np.int32(value)
    if kind == "uint16" and 0 <= value < 2**16:
        return np.uint16(value)
    return int(value)


def real_like(d: Draw, value: float):
    """``value`` as a float, a numpy float scalar, or an int when it is integral."""
    kind = d.pick(("float", "float", "float64", "float32", "int"))
    if kind == "float64":
        return np.float64(value)
    if kind == "float32" and math.isfinite(value) and float(np.float32(value)) == float(value):
        return np.float32(value)
    if kind == "int" and float(value).is_integer():
        return int(value)
    return float(value)


def trailing_shape(d: Draw) -> tuple:
    return d.pick(((), (d.int(1, 4),), (d.int(1, 4),), (d.int(1, 3), d.int(1, 4))))


def array_like(
    d: Draw, arr: np.ndarray, *, torch_ok: bool = True, list_ok: bool = True, half_ok: bool = True
):
    """A float array as one of the valid array types: numpy float64/32(/16), int64 (when it
    has no NaN), a nested list, or a torch float tensor."""
    kinds = ["float64", "float64", "float32"]
    if half_ok:
        kinds.append("float16")
    if np.all(np.isfinite(arr)):
        kinds.append("int64")
    if list_ok:
        kinds.append("list")
    if torch_ok and torch is not None:
        kinds += ["torch32", "torch64"]
    kind = d.pick(kinds)
    if kind == "float32":
        return arr.astype(np.float32)
    if kind == "float16":
        return arr.astype(np.float16)
    if kind == "int64":
        return np.round(3 * arr).astype(np.int64)
    if kind == "list":
        return arr.tolist()
    if kind == "torch32":
        return torch.tensor(arr, dtype=torch.float32)
    if kind == "torch64":
        return torch.tensor(arr, dtype=torch.float64)
    return arr


def alive_like(d: Draw, alive: list[int]):
    """Worker indices as a list, tuple, numpy int64/int32 array or torch int64 tensor."""
    kinds = ["list", "list", "tuple", "int64", "int32", "np-scalars"]
    if torch is not None:
        kinds.append("torch")
    kind = d.pick(kinds)
    if kind == "tuple":
        return tuple(alive)
    if kind == "int64":
        return np.array(alive, dtype=np.int64)
    if kind == "int32":
        return np.array(alive, dtype=np.int32)
    if kind == "np-scalars":
        return [np.int64(a) for a in alive]
    if kind == "torch":
        return torch.tensor(alive, dtype=torch.int64)
    return list(alive)


def distinct_points(d: Draw, n: int) -> np.ndarray:
    """``n`` distinct, well-separated finite reals, sorted or shuffled, on [-1, 1] or a wider span."""
    base = np.linspace(-1.0, 1.0, n) if n > 1 else np.zeros(1)
    if n > 1:
        base = base + (d.normal(n) * 0.15) * (2.0 / (n - 1)) * 0.5
    if d.coin(0.3):
        base = base * d.uniform(0.5, 4.0) + d.uniform(-2.0, 2.0)
    if d.coin(0.4):
        base = base[d.sample(n, n)]
    return base


def points_like(d: Draw, pts: np.ndarray):
    return d.pick((pts, pts, pts.tolist(), pts.astype(np.float32).astype(np.float64)))


def rng_valid(d: Draw, ctx: dict):
    kind = d.pick(("int", "int", "np-int", "big", "generator", "generator"))
    if kind == "np-int":
        return np.int64(d.int(0, 10**6))
    if kind == "big":
        return 2**63 + d.int(0, 9)  # a fine seed: seeds are not sizes
    if kind == "generator":
        return np.random.default_rng(d.int(0, 10**6))
    return d.int(0, 2**32)


def omit_or(d: Draw, p_omit: float, make: Callable[[], Any]):
    return OMIT if d.coin(p_omit) else make()


# -- invalid pools ---------------------------------------------------------------------------


def _typical_int(ctx: dict, name: str, fallback: int) -> int:
    value = ctx.get(name)
    if isinstance(value, (int, np.integer)) and not isinstance(value, bool):
        return int(value)
    return fallback


def bad_count(
    minimum: int,
    *,
    extra: Callable[[Draw, dict], list] | None = None,
    name: str = "",
    none_ok: bool = False,
):
    """Invalid integer counts (minimum ``minimum``); ``extra(draw, ctx)`` adds context-dependent
    ones; ``none_ok``: ``None`` is a valid value (left out of the pool)."""

    def pool(d: Draw, ctx: dict) -> list:
        v = max(_typical_int(ctx, name, max(minimum, 2)), minimum, 1)
        out = [
            ("str", str(v)),
            ("none", None),
            ("list", [v]),
            ("dict", {"n": v}),
            ("complex", complex(v, 0)),
            ("bool-true", True),
            ("bool-false", False),
            ("float-integral", float(v)),
            ("np-float-integral", np.float64(v)),
            ("float", v + 0.5),
            ("nan", math.nan),
            ("inf", math.inf),
            ("negative", -1),
            ("array-1", np.array([v])),
            ("huge-2**63", 2**63),
            ("huge-10**400", 10**400),
        ]
        if minimum >= 1:
            out.append(("zero", 0))
        if minimum >= 2:
            out.append(("below-minimum", minimum - 1))
        if extra is not None:
            out += extra(d, ctx)
        if none_ok:
            out = [entry for entry in out if entry[1] is not None]
        return out

    return pool


def bad_real(
    *,
    lo: float = 0.0,
    lo_open: bool = False,
    hi: float = math.inf,
    hi_open: bool = True,
    typical: float = 0.5,
    none_ok: bool = False,
    inf_ok: bool = False,
    extra: Callable[[Draw, dict], list] | None = None,
):
    """Invalid reals for a parameter in ``[lo, hi]`` (ends open or closed as flagged)."""

    def pool(d: Draw, ctx: dict) -> list:
        out = [
            ("str", str(typical)),
            ("list", [typical]),
            ("dict", {"value": typical}),
            ("complex", complex(typical, 1.0)),
            ("complex-real", complex(typical, 0.0)),
            ("bool-true", True),
            ("bool-false", False),
            ("nan", math.nan),
            ("np-nan", np.float64("nan")),
            ("-inf", -math.inf),
            ("array-1", np.array([typical])),
            ("huge-10**400", 10**400),
        ]
        if not none_ok:
            out.append(("none", None))
        if not inf_ok and hi == math.inf:
            out.append(("inf", math.inf))
        if math.isfinite(lo):
            out.append(("below-range", lo - 1.0))
            if lo_open:
                out.append(("at-lower-bound", lo))
        if math.isfinite(hi):
            out.append(("above-range", hi + 0.5))
            out.append(("inf", math.inf))
            if hi_open:
                out.append(("at-upper-bound", hi))
        if extra is not None:
            out += extra(d, ctx)
        return out

    return pool


def bad_rng(d: Draw, ctx: dict) -> list:
    return [
        ("str", "abc"),
        ("negative", -1),
        ("float", 1.5),
        ("float-integral", 2.0),
        ("none", None),
        ("bool-true", True),
        ("bool-false", False),
        ("list-negative", [1, -2]),
        ("list-bool", [True]),
        ("list-empty", []),
        ("dict", {"seed": 1}),
        ("complex", 1 + 0j),
        ("nan", math.nan),
        ("random-state", np.random.RandomState(0)),
    ]


def bad_flag(d: Draw, ctx: dict) -> list:
    return [
        ("str", "yes"),
        ("str-false", "False"),
        ("none", None),
        ("list", [True]),
        ("dict", {"flag": True}),
        ("float", 0.5),
    ]


def _ragged(rows: int) -> list:
    if rows >= 2:
        return [[0.5] * (1 + i % 2) for i in range(rows)]
    return [[0.5, [1.0, 2.0]]]


def bad_batch(rows_of: Callable[[dict], int], name: str, *, nan_ok: bool = False, empty: bool = True):
    """Invalid ``(rows, ...)`` arrays for parameter ``name`` (its valid value in ``ctx`` gives
    the trailing shape)."""

    def pool(d: Draw, ctx: dict) -> list:
        rows = rows_of(ctx)
        tr = tuple(_shape(ctx[name])[1:])
        out = [
            ("none", None),
            ("str", "abc"),
            ("dict", {"rows": [1.0]}),
            ("python-scalar", 1.5),
            ("0-d-array", np.array(1.5)),
            ("too-many-rows", d.normal((rows + 1, *tr))),
            ("ragged-list", _ragged(rows)),
            ("str-array", np.full((rows, *tr), "x")),
            ("numeric-str-array", np.full((rows, *tr), "1.0")),
            ("list-of-str", ["a"] * rows),
            ("object-array", np.array([object() for _ in range(rows)], dtype=object)),
            ("object-numbers", d.normal((rows, *tr)).astype(object)),
            ("set", {1.0, 2.0}),
        ]
        if rows >= 2:
            out.append(("too-few-rows", d.normal((rows - 1, *tr))))
        if empty:
            out += [("empty", np.zeros(0)), ("empty-rows", np.zeros((0, *tr)))]
        if not nan_ok:
            with_nan = d.normal((rows, *tr))
            with_nan.flat[d.int(0, with_nan.size - 1)] = math.nan
            with_inf = d.normal((rows, *tr))
            with_inf.flat[d.int(0, with_inf.size - 1)] = -math.inf
            out += [("nan", with_nan), ("inf", with_inf)]
        if torch is not None:
            out.append(("tensor-too-many-rows", torch.zeros((rows + 1, *tr))))
            out.append(
                ("tensor-list-ragged", [torch.zeros(2), torch.zeros(3)] + [torch.zeros(2)] * (rows - 2))
            )
        return out

    return pool


def bad_alive(num_workers_of: Callable[[dict], int], *, name: str = "alive"):
    """Invalid worker-index sequences (same length as the valid one where possible, so that
    ``Y`` still matches)."""

    def pool(d: Draw, ctx: dict) -> list:
        n = num_workers_of(ctx)
        # An empty alive set (valid for complete) would stay valid under most transforms
        # (an empty complex array is still empty): transform a one-worker set instead.
        good = _alive_list(ctx[name]) or [0]
        size = len(good)
        out = [
            ("none", None),
            ("str", "0,1"),
            ("dict", dict.fromkeys(good, 1)),
            ("set", set(good)),
            ("2-d", np.array(good)[None, :]),
            ("str-list", [str(a) for a in good]),
            ("complex", np.array(good) + 0j),
            ("bool-mask", np.isin(np.arange(n), good)),
            ("object-array", np.array(good, dtype=object)),
        ]
        if size >= 1:
            out += [
                ("out-of-range", [*good[:-1], n]),
                ("negative", [-1, *good[1:]]),
                ("fraction", [good[0] + 0.5, *good[1:]]),
                ("nan", [math.nan, *good[1:]]),
                ("huge-2**63", [*good[:-1], 2**63]),
                ("huge-10**400", [*good[:-1], 10**400]),
                ("scalar", good[0]),
                ("bools", [True] * size),
            ]
        if size >= 2:
            out += [("duplicate", [good[0], good[0], *good[2:]]), ("ragged", [good[:1], good[1:]])]
        return out

    return pool


def bad_points(n_of: Callable[[dict], int], *, lengths: bool = True):
    """Invalid point arrays (``alpha``, ``beta``, ``knots``) of ``n_of(ctx)`` distinct reals.
    ``lengths``: include a wrong length (only where the length is fixed by another parameter;
    for ``knots`` the values follow the knots, so another length is no error of ``knots``)."""

    def pool(d: Draw, ctx: dict) -> list:
        n = n_of(ctx)
        pts = np.linspace(-1.0, 1.0, n) if n > 1 else np.zeros(1)
        out = [
            ("nan", np.where(np.arange(n) == 0, math.nan, pts)),
            ("inf", np.where(np.arange(n) == n - 1, math.inf, pts)),
            ("complex", pts + 0.5j),
            ("complex-real", pts.astype(np.complex128)),
            ("str-array", np.array(["a"] * n)),
            ("numeric-str-list", [str(p) for p in pts]),
            ("none-entries", [None] * n),
            ("ragged", [[p] for p in pts[:-1]] + [[pts[-1], 0.0]]),
            ("2-d", pts[:, None]),
            ("dict", {"points": pts.tolist()}),
            ("str", "chebyshev"),
            ("scalar", 0.5),
            ("empty", np.zeros(0)),
            ("object-array", np.array(pts.tolist(), dtype=object)),
            ("bool-array", np.arange(n) % 2 == 0),
        ]
        if lengths:
            out.append(("too-long", np.append(pts, 3.0)))
        if lengths and n >= 2:
            out.append(("too-short", pts[:-1]))
        if n >= 2:
            out.append(("duplicate", np.concatenate([[pts[0]], pts[:-1]])))
        return out

    return pool


def bad_grid(d: Draw, ctx: dict) -> list:
    return [
        ("empty", []),
        ("negative", [-1e-3, 1e-3]),
        ("nan", [math.nan, 1e-3]),
        ("inf", [1e-3, math.inf]),
        ("str", "abc"),
        ("str-list", ["a", "b"]),
        ("2-d", [[1e-3, 1e-2]]),
        ("too-large", [1e-3, 1e200]),
        ("complex", [1e-3 + 1j]),
        ("dict", {"lam": 1e-3}),
        ("scalar", 1e-3),
        ("ragged", [[1e-3], [1e-2, 1e-1]]),
        ("object-array", np.array([object()], dtype=object)),
    ]


def bad_choice(options: tuple[str, ...]):
    def pool(d: Draw, ctx: dict) -> list:
        first = options[0]
        unknown = first[:4] if first[:4] not in options else f"{first}-unknown"
        return [
            ("unknown", unknown),
            ("capitalised", first.capitalize()),
            ("empty-str", ""),
            ("none", None),
            ("int", 3),
            ("list", [first]),
        ]

    return pool


# -- codes -----------------------------------------------------------------------------------


def _n_inputs(ctx: dict) -> int:
    return int(ctx["num_inputs"])


def _num_workers_valid(d: Draw, ctx: dict):
    # K <= N: a code spreads K inputs over at least K workers
    return int_like(d, d.int(max(2, min(_typical_int(ctx, "num_inputs", 2), 16)), 16))


def _lambda_valid(d: Draw, ctx: dict):
    return omit_or(d, 0.4, lambda: real_like(d, d.pick((0.0, 0.0, d.uniform(0, 1e-2), 1.0, 1e-6))))


def _lambda_dec_valid(d: Draw, ctx: dict):
    if d.coin(0.15):
        return "gcv"
    return _lambda_valid(d, ctx)


def _points_valid(d: Draw, ctx: dict):
    return omit_or(d, 0.5, lambda: d.pick(("chebyshev", "equispaced")))


def _explicit_points(count_of: Callable[[dict], int]):
    def gen(d: Draw, ctx: dict):
        if d.coin(0.65):
            return OMIT
        if d.coin(0.2):
            return None
        return points_like(d, distinct_points(d, count_of(ctx)))

    return gen


_bad_lambda = bad_real(typical=0.1, extra=lambda d, ctx: [("too-large", 1e300), ("str-gcv", "gcv")])
_bad_lambda_dec = bad_real(typical=0.1, extra=lambda d, ctx: [("too-large", 1e300), ("str-GCV", "GCV")])


def _lcc_degree_valid(d: Draw, ctx: dict):
    return omit_or(d, 0.3, lambda: int_like(d, d.int(1, 3)))


def _lcc_threshold(ctx: dict) -> int:
    degree = 1 if ctx.get("degree", OMIT) is OMIT else int(ctx["degree"])
    return (int(ctx["num_inputs"]) - 1) * degree + 1


def _lcc_num_workers_valid(d: Draw, ctx: dict):
    return int_like(d, d.int(max(2, _lcc_threshold(ctx)), 16))


def _lcc_bad_workers(d: Draw, ctx: dict) -> list:
    threshold = _lcc_threshold(ctx)
    return [("below-threshold", threshold - 1)] if threshold - 1 >= 2 else []


def _lcc_bad_degree(d: Draw, ctx: dict) -> list:
    k, n = int(ctx["num_inputs"]), int(ctx["num_workers"])
    if k < 2:
        return []
    return [("threshold-above-num_workers", n // (k - 1) + 1)]


def _lcc_inputs_valid(d: Draw, ctx: dict):
    return int_like(d, d.int(1, 5))


def _check_code(code, kw: dict) -> str | None:
    k = int(kw["num_inputs"])
    if code.num_inputs != k:
        return f"num_inputs is {code.num_inputs}, expected {k}"
    expected_n = kw.get("num_workers")
    if expected_n is None:  # uncoded / replication
        replicas = kw.get("replicas", OMIT)
        expected_n = k * (2 if replicas is OMIT else int(replicas)) if "replicas" in kw else k
    if code.num_workers != int(expected_n):
        return f"num_workers is {code.num_workers}, expected {int(expected_n)}"
    alpha, beta = np.asarray(code.alpha), np.asarray(code.beta)
    if alpha.shape != (k,) or beta.shape != (code.num_workers,):
        return f"alpha/beta shapes {alpha.shape}, {beta.shape}"
    if alpha.dtype != np.float64 or not (np.all(np.isfinite(alpha)) and np.all(np.isfinite(beta))):
        return "alpha/beta are not finite float64"
    return None


CODE_PARAMS = {
    "gcc": (
        Param("num_inputs", lambda d, ctx: int_like(d, d.int(1, 6)), bad_count(1, name="num_inputs")),
        # N < K is allowed (it warns: MoreInputsThanWorkersWarning, tests/codes/test_code_edge_cases.py)
        Param("num_workers", _num_workers_valid, bad_count(2, name="num_workers")),
        Param("lambda_enc", _lambda_valid, _bad_lambda),
        Param("lambda_dec", _lambda_dec_valid, _bad_lambda_dec),
        Param("points", _points_valid, bad_choice(("chebyshev", "equispaced"))),
        Param("alpha", _explicit_points(_n_inputs), bad_points(_n_inputs)),
        Param(
            "beta",
            _explicit_points(lambda ctx: int(ctx["num_workers"])),
            bad_points(lambda ctx: int(ctx["num_workers"])),
        ),
    ),
    "bacc": (
        Param("num_inputs", lambda d, ctx: int_like(d, d.int(1, 6)), bad_count(1, name="num_inputs")),
        # N < K is allowed (it warns: MoreInputsThanWorkersWarning, tests/codes/test_code_edge_cases.py)
        Param("num_workers", _num_workers_valid, bad_count(2, name="num_workers")),
        Param("points", _points_valid, bad_choice(("chebyshev", "equispaced"))),
        Param("alpha", _explicit_points(_n_inputs), bad_points(_n_inputs)),
        Param(
            "beta",
            _explicit_points(lambda ctx: int(ctx["num_workers"])),
            bad_points(lambda ctx: int(ctx["num_workers"])),
        ),
    ),
    "lcc": (
        Param("num_inputs", _lcc_inputs_valid, bad_count(1, name="num_inputs")),
        Param("degree", _lcc_degree_valid, bad_count(1, name="degree", extra=_lcc_bad_degree)),
        Param(
            "num_workers", _lcc_num_workers_valid, bad_count(2, name="num_workers", extra=_lcc_bad_workers)
        ),
        Param("best_effort", lambda d, ctx: _best_effort_valid(d, ctx), lambda d, ctx: bad_flag(d, ctx)),
        Param("points", _points_valid, bad_choice(("chebyshev", "equispaced"))),
        Param("alpha", _explicit_points(_n_inputs), bad_points(_n_inputs)),
        Param(
            "beta",
            _explicit_points(lambda ctx: int(ctx["num_workers"])),
            bad_points(lambda ctx: int(ctx["num_workers"])),
        ),
    ),
    "uncoded": (
        Param("num_inputs", lambda d, ctx: int_like(d, d.int(1, 6)), bad_count(1, name="num_inputs")),
        Param("fill", lambda d, ctx: _fill_valid(d, ctx), lambda d, ctx: _bad_fill(d, ctx)),
    ),
    "replication": (
        Param("num_inputs", lambda d, ctx: int_like(d, d.int(1, 6)), bad_count(1, name="num_inputs")),
        Param(
            "replicas",
            lambda d, ctx: omit_or(d, 0.3, lambda: int_like(d, d.int(1, 3))),
            bad_count(1, name="replicas"),
        ),
        Param("fill", lambda d, ctx: _fill_valid(d, ctx), lambda d, ctx: _bad_fill(d, ctx)),
    ),
}
CODE_CLASSES = {
    "gcc": cc.GCC,
    "bacc": cc.BACC,
    "lcc": cc.LCC,
    "uncoded": cc.Uncoded,
    "replication": cc.Replication,
}
CLASS_NAMES = {"gcc": "GCC", "bacc": "BACC", "lcc": "LCC", "uncoded": "Uncoded", "replication": "Replication"}


class CodeSpec:
    """A valid code, drawn by the constructor's own parameter spec and built on first use."""

    def __init__(self, kind: str, kwargs: dict):
        self.kind, self.kwargs = kind, kwargs
        self._obj = None

    @property
    def obj(self):
        if self._obj is None:
            cls = CODE_CLASSES.get(self.kind) or EXTENSION_CODE_CLASSES[self.kind]
            self._obj = cls(**self.kwargs)
        return self._obj

    def __repr__(self) -> str:
        args = ", ".join(f"{k}={short(v, 30)}" for k, v in self.kwargs.items())
        name = CLASS_NAMES.get(self.kind) or EXTENSION_CLASS_NAMES[self.kind]
        return f"{name}({args})"


def draw_code(d: Draw, kind: str, *, max_workers: int = 16) -> CodeSpec:
    ctx: dict = {}
    for p in CODE_PARAMS[kind]:
        ctx[p.name] = p.valid(d, ctx)
    kwargs = {k: v for k, v in ctx.items() if v is not OMIT}
    return CodeSpec(kind, kwargs)


def _code_param(kinds: tuple[str, ...]) -> Param:
    return Param("_code", lambda d, ctx: draw_code(d, d.pick(kinds)), hidden=True)


def _code(ctx: dict):
    return ctx["_code"].obj


# -- code methods ----------------------------------------------------------------------------


def _x_valid(d: Draw, ctx: dict):
    code = _code(ctx)
    return array_like(d, d.normal((code.num_inputs, *trailing_shape(d))))


def _check_encode(out, kw: dict) -> str | None:
    code = _code(kw)
    shape = (code.num_workers, *_shape(kw["X"])[1:])
    if _is_tensor(kw["X"]) != _is_tensor(out):
        return f"returned {type(out).__name__} for a {type(kw['X']).__name__} X"
    if tuple(_shape(out)) != shape:
        return f"returned shape {_shape(out)}, expected {shape}"
    if not _finite(out):
        return "returned NaN or inf for finite X"
    return None


def _decode_needed(ctx: dict) -> int:
    return _code(ctx).min_results  # 1 for LCC built with best_effort


def _fill_given(ctx: dict) -> bool:
    return ctx["_code"].kwargs.get("fill") is not None


def _alive_for_decode(d: Draw, ctx: dict):
    code = _code(ctx)
    n, k = code.num_workers, code.num_inputs
    if ctx["_code"].kind in ("uncoded", "replication") and not _fill_given(ctx):
        replicas = n // k  # worker w computes input w % k: pick one copy of each, then extras
        chosen = {kk + k * d.int(0, replicas - 1) for kk in range(k)}
        extras = [w for w in range(n) if w not in chosen]
        chosen |= set(d.rnd.sample(extras, d.int(0, len(extras))))
        alive = list(chosen)
        d.rnd.shuffle(alive)
    else:
        alive = d.sample(n, d.int(_decode_needed(ctx), n))
    return alive_like(d, alive)


def _alive_list(value) -> list[int]:
    if _is_tensor(value):
        value = value.tolist()
    return [int(a) for a in value]


def _y_valid(d: Draw, ctx: dict):
    alive = _alive_list(ctx["alive"])
    y = d.normal((len(alive), *trailing_shape(d)))
    spare = ctx["_code"].kind in ("gcc", "bacc", "lcc") and len(alive) > _decode_needed(ctx)
    if spare and d.coin(0.25):  # a worker's NaN is an erasure (README), so this is valid
        y[d.int(0, len(alive) - 1)] = math.nan
    return array_like(d, y)


def _check_decode(out, kw: dict) -> str | None:
    code = _code(kw)
    shape = (code.num_inputs, *_shape(kw["Y"])[1:])
    if _is_tensor(kw["Y"]) != _is_tensor(out):
        return f"returned {type(out).__name__} for a {type(kw['Y']).__name__} Y"
    if tuple(_shape(out)) != shape:
        return f"returned shape {_shape(out)}, expected {shape}"
    fill = kw["_code"].kwargs.get("fill")
    if not _finite(out) and (fill is None or math.isfinite(float(fill))):
        return "returned NaN or inf"
    return None


def _fill_valid(d: Draw, ctx: dict):
    return d.pick((OMIT, OMIT, None, math.nan, 0.0, -1, np.float32(2.0), math.inf))


def _bad_fill(d: Draw, ctx: dict) -> list:
    return [
        ("str", "nan"),
        ("str-number", "0"),
        ("list", [0.0]),
        ("dict", {"fill": 0.0}),
        ("complex", 1 + 1j),
        ("bool-true", True),
        ("huge-10**400", 10**400),
        ("array-1", np.array([0.0])),
    ]


def _best_effort_valid(d: Draw, ctx: dict):
    return d.pick((OMIT, OMIT, False, True, np.bool_(True)))


def _decode_params(kind: str) -> tuple[Param, ...]:
    return (
        _code_param((kind,)),
        Param("alive", _alive_for_decode, bad_alive(lambda ctx: _code(ctx).num_workers)),
        Param("Y", _y_valid, bad_batch(lambda ctx: len(_alive_list(ctx["alive"])), "Y", nan_ok=True)),
    )


def _alive_any(minimum_of: Callable[[dict], int]):
    def gen(d: Draw, ctx: dict):
        n = _code(ctx).num_workers
        return alive_like(d, d.sample(n, d.int(minimum_of(ctx), n)))

    return gen


def _check_bool(out, kw: dict) -> str | None:
    return None if isinstance(out, (bool, np.bool_)) else f"returned {type(out).__name__}, not a bool"


def _gcv_decoder_refused(case: Case, err: BaseException) -> bool:
    """``GCC(..., lambda_dec="gcv").decoder(alive)``: each decode picks its own lambda, so there
    may be no fixed map to return; a ValueError naming ``lambda_dec`` is an acceptable answer
    (a TypeError from inside the map's construction is not)."""
    code = _code(case.kwargs)
    return (
        getattr(code, "lambda_dec", None) == "gcv"
        and type(err) is ValueError
        and _names(str(err), ("lambda_dec",))
    )


def _check_decoder(out, kw: dict) -> str | None:
    if isinstance(out, GapAwareInterpolant):  # check the adaptive decoder inside it
        out = out.base
    if hasattr(out, "linear") and hasattr(out, "cubic"):  # the adaptive decoder: check its linear part
        out = out.linear
    matrix = out.linear_map if hasattr(out, "linear_map") else out
    shape = (_code(kw).num_inputs, len(_alive_list(kw["alive"])))
    if tuple(matrix.shape) != shape:
        return f"map of shape {matrix.shape}, expected {shape}"
    dense = matrix.toarray() if hasattr(matrix, "toarray") else np.asarray(matrix)
    return None if np.all(np.isfinite(dense)) else "map has NaN or inf"


# -- stragglers ------------------------------------------------------------------------------


def _check_alive_result(out, n: int, size: int | None = None, contiguous: bool = False) -> str | None:
    if not isinstance(out, np.ndarray) or out.ndim != 1 or not np.issubdtype(out.dtype, np.integer):
        return f"returned {short(out)}, not a 1-D integer array"
    if size is not None and out.size != size:
        return f"returned {out.size} workers, expected {size}"
    if out.size and (np.any(np.diff(out) <= 0) or out[0] < 0 or out[-1] >= n):
        return f"returned {short(out)}: not sorted unique indices in range({n})"
    if contiguous:
        missing = np.setdiff1d(np.arange(n), out)
        if missing.size and missing[-1] - missing[0] + 1 != missing.size:
            return f"stragglers {missing.tolist()} are not one block"
    return None


def _stragglers_params(second: Param) -> tuple[Param, ...]:
    return (
        Param("num_workers", lambda d, ctx: int_like(d, d.int(1, 16)), bad_count(1, name="num_workers")),
        second,
        Param("rng", rng_valid, bad_rng),
    )


_num_stragglers = Param(
    "num_stragglers",
    lambda d, ctx: int_like(d, d.int(0, int(ctx["num_workers"]) - 1)),
    bad_count(
        0,
        name="num_stragglers",
        extra=lambda d, ctx: [
            ("equal-num_workers", int(ctx["num_workers"])),
            ("above-num_workers", int(ctx["num_workers"]) + 3),
        ],
    ),
)
_p = Param(
    "p",
    lambda d, ctx: d.pick((0, 0.0, np.float64(0.3), np.float32(0.25), d.uniform(0, 0.95), 0.999)),
    bad_real(hi=1.0, typical=0.5),
)


# -- metrics ---------------------------------------------------------------------------------


def _pair_valid(d: Draw, ctx: dict):
    k = d.int(1, 6)
    return array_like(d, d.normal((k, *trailing_shape(d))), half_ok=False)


def _truth_valid(d: Draw, ctx: dict):
    return array_like(d, d.normal(_shape(ctx["est"])), half_ok=False)


def _rows(name: str):
    return lambda ctx: _shape(ctx[name])[0]


def _bad_pair(name: str, other: str):
    # NaN / inf estimates are not fuzzed: mse and accuracy of NaN rows (decode(fill=nan)) may
    # well be NaN; empty arrays are (both at once, below).
    base = bad_batch(_rows(name), name, empty=False, nan_ok=True)

    def pool(d: Draw, ctx: dict) -> list:
        shape = _shape(ctx[name])
        return [
            *base(d, ctx),
            ("other-trailing-shape", d.normal((shape[0], *shape[1:], 2))),
            ("empty-both", np.zeros(0), {other: np.zeros(0)}),
            ("empty-rows-both", np.zeros((0, 3)), {other: np.zeros((0, 3))}),
        ]

    return pool


def _check_fraction(out, kw: dict) -> str | None:
    if not isinstance(out, float) or not 0.0 <= out <= 1.0:
        return f"returned {out!r}, not a fraction in [0, 1]"
    return None


def _check_mse(out, kw: dict) -> str | None:
    if not isinstance(out, float) or not (math.isfinite(out) and out >= 0):
        return f"returned {out!r}, not a finite float >= 0"
    return None


def _est_classes(d: Draw, ctx: dict):
    k = d.int(1, 6)
    return array_like(d, d.normal((k, d.int(1, 4))), half_ok=False)


def _labels_valid(d: Draw, ctx: dict):
    k, c = _shape(ctx["est"])
    labels = [d.int(0, c - 1) for _ in range(k)]
    kind = d.pick(("list", "int64", "torch") if torch is not None else ("list", "int64"))
    if kind == "int64":
        return np.array(labels, dtype=np.int64)
    if kind == "torch":
        return torch.tensor(labels)
    return labels


def _bad_labels(d: Draw, ctx: dict) -> list:
    k = _shape(ctx["est"])[0]
    return [
        ("too-long", [0] * (k + 1)),
        ("none", None),
        ("str", "abc"),
        ("str-list", ["a"] * k),
        ("fraction", [0.5] * k),
        ("nan", [math.nan] * k),
        ("ragged", _ragged(k)),
        ("dict", {"labels": [0] * k}),
        ("object-array", np.array([object() for _ in range(k)], dtype=object)),
        ("empty-both", [], {"est": np.zeros((0, 3))}),
    ]


def _bad_est_for_labels(d: Draw, ctx: dict) -> list:
    k = _shape(ctx["est"])[0]
    return [
        ("none", None),
        ("str", "abc"),
        ("python-scalar", 1.5),
        ("str-array", np.full((k, 3), "x")),
        ("ragged-list", _ragged(k)),
        ("object-array", np.array([object() for _ in range(k)], dtype=object)),
        ("dict", {"est": 1}),
        ("too-many-rows", d.normal((k + 1, 3))),
        ("empty-both", np.zeros((0, 3)), {"labels": []}),
    ]


# -- spline and tuning -----------------------------------------------------------------------


def _knots_valid(minimum: int):
    def gen(d: Draw, ctx: dict):
        return points_like(d, distinct_points(d, d.int(minimum, 12)))

    return gen


def _n_knots(ctx: dict) -> int:
    return len(np.asarray(ctx["knots"]))


def _bad_knots(minimum: int):
    base = bad_points(_n_knots, lengths=False)

    def pool(d: Draw, ctx: dict) -> list:
        few = np.linspace(-1.0, 1.0, minimum - 1) if minimum > 1 else np.zeros(0)
        return [*base(d, ctx), ("too-few", few)]

    return pool


def _values_valid(d: Draw, ctx: dict):
    return array_like(d, d.normal((_n_knots(ctx), *trailing_shape(d))), torch_ok=False, half_ok=False)


_bad_values = bad_batch(_n_knots, "values")


def _extra_values(d: Draw, ctx: dict) -> list:
    n = _n_knots(ctx)
    return [("complex", d.normal(n) + 1j), ("complex-real", d.normal(n).astype(np.complex128))]


def _bad_values_all(d: Draw, ctx: dict) -> list:
    return [*_bad_values(d, ctx), *_extra_values(d, ctx)]


def _lam_valid(d: Draw, ctx: dict):
    return real_like(d, d.pick((0.0, 0.0, 1e-4, d.uniform(0, 1.0), 10.0, 1e3)))


_bad_lam = bad_real(typical=0.1, extra=lambda d, ctx: [("too-large", 1e308)])


def _check_fit(out, kw: dict) -> str | None:
    shape = tuple(np.shape(np.asarray(kw["values"])))
    if tuple(out.values.shape) != shape:
        return f"values of shape {out.values.shape}, expected {shape}"
    if not (np.all(np.isfinite(out.values)) and np.all(np.isfinite(out.second_derivatives))):
        return "fit has NaN or inf"
    return None


def _eval_points_valid(d: Draw, ctx: dict):
    pts = np.array([d.uniform(-1.5, 1.5) for _ in range(d.int(0, 8))])
    return d.pick((pts, pts.tolist()))


def _bad_eval_points(d: Draw, ctx: dict) -> list:
    return [
        ("nan", [0.1, math.nan]),
        ("inf", [math.inf]),
        ("str", "abc"),
        ("str-list", ["a"]),
        ("none", None),
        ("complex", [0.1 + 1j]),
        ("ragged", [[0.1], [0.2, 0.3]]),
        ("dict", {"z": 0.1}),
        ("object-array", np.array([object()], dtype=object)),
    ]


def _check_smoothing_matrix(out, kw: dict) -> str | None:
    shape = (len(np.asarray(kw["points"]).ravel()), _n_knots(kw))
    if tuple(out.shape) != shape:
        return f"shape {out.shape}, expected {shape}"
    dense = out.toarray() if hasattr(out, "toarray") else np.asarray(out)
    return None if np.all(np.isfinite(dense)) else "matrix has NaN or inf"


def _bad_derivative(d: Draw, ctx: dict) -> list:
    return [
        ("one", 1),
        ("three", 3),
        ("negative", -2),
        ("float-integral", 2.0),
        ("str", "2"),
        ("none", None),
        ("bool-false", False),
        ("bool-true", True),
        ("list", [2]),
    ]


def _grid_valid(d: Draw, ctx: dict):
    if d.coin(0.35):
        return d.pick((OMIT, None))
    grid = sorted({d.pick((0.0, 1e-6, 1e-4, 1e-3, 1e-2, 0.1, 1.0)) for _ in range(d.int(1, 5))} | {1e-3})
    return d.pick((grid, np.array(grid), tuple(grid)))


def _check_gcv_lambda(out, kw: dict) -> str | None:
    if not isinstance(out, float) or not (math.isfinite(out) and out > 0):
        return f"returned {out!r}, not a finite lambda > 0"
    grid = kw.get("grid", OMIT)
    if grid is not OMIT and grid is not None and out not in [float(g) for g in np.ravel(grid)]:
        return f"returned {out!r}, not in the grid"
    return None


def _check_gcv_score(out, kw: dict) -> str | None:
    if not isinstance(out, float) or math.isnan(out) or out < 0:
        return f"returned {out!r}, not a float >= 0"
    return None


def _low_valid(d: Draw, ctx: dict):
    return omit_or(d, 0.5, lambda: real_like(d, d.pick((1e-6, 1e-3, d.uniform(1e-8, 1.0)))))


def _high_valid(d: Draw, ctx: dict):
    low = 1e-6 if ctx["low"] is OMIT else float(ctx["low"])
    return omit_or(d, 0.5, lambda: real_like(d, d.pick((1e4, low, low * d.uniform(1.0, 1e6)))))


def _bad_high(d: Draw, ctx: dict) -> list:
    low = 1e-6 if ctx["low"] is OMIT else float(ctx["low"])
    return [("below-low", low / 2)]


def _check_lambda_grid(out, kw: dict) -> str | None:
    num = 12 if kw.get("num", OMIT) is OMIT else int(kw["num"])
    if not isinstance(out, np.ndarray) or out.shape != (num + 1,):
        return f"returned {short(out)}, expected shape ({num + 1},)"
    if not (np.all(np.isfinite(out)) and out[0] == 0 and np.all(np.diff(out) >= -1e-12 * out.max())):
        return f"returned {short(out)}: not a finite, sorted grid starting at 0"
    return None


class Pattern:
    """A straggler pattern for ``tune``: ``stragglers.random(n, min(s, n - 2), rng)``; with
    ``bad`` set it returns an invalid alive set instead (an invalid ``stragglers``)."""

    def __init__(self, s: int, bad: str | None = None):
        self.s, self.bad = s, bad

    def __call__(self, n, rng):
        if self.bad == "out-of-range":
            return np.arange(n + 1)
        if self.bad == "one-worker":
            return np.array([0])
        if self.bad == "duplicates":
            return np.array([0, 0, 1])
        if self.bad == "strings":
            return ["a", "b"]
        return cc.stragglers.random(n, min(self.s, n - 2), rng)

    def __repr__(self) -> str:
        return f"Pattern({self.s})" if self.bad is None else f"Pattern(bad={self.bad!r})"


def _tune_x_valid(d: Draw, ctx: dict):
    k, tr = d.int(1, 4), (d.int(1, 3),)
    if d.coin(0.2):
        return [d.normal((k, *tr)) for _ in range(2)]  # two calibration batches
    return array_like(d, d.normal((k, *tr)), list_ok=False, half_ok=False)


def _tune_rows(ctx: dict) -> int:
    x = ctx["X"]
    return _shape(x[0] if isinstance(x, list) else x)[0]


def _tune_bad_x(d: Draw, ctx: dict) -> list:
    x = ctx["X"]
    ctx = {**ctx, "X": x[0] if isinstance(x, list) else x}
    out = [e for e in bad_batch(_tune_rows, "X")(d, ctx) if not e[0].endswith("rows")]
    k = _tune_rows(ctx)
    return [*out, ("batches-of-two-shapes", [d.normal((k, 2)), d.normal((k + 1, 2))])]


def _tune_trials_valid(d: Draw, ctx: dict):
    return int_like(d, d.int(2 if isinstance(ctx["X"], list) else 1, 3))


def _tune_grid_valid(d: Draw, ctx: dict):
    if d.coin(0.1):
        return OMIT
    return d.pick(([0.0, 1e-3], [1e-4], np.array([0.0, 1e-2, 1.0])))


def _check_tune(out, kw: dict) -> str | None:
    if not isinstance(out, cc.tuning.TuningResult):
        return f"returned {type(out).__name__}"
    if not (math.isfinite(out.mse) and out.mse >= 0):
        return f"mse {out.mse!r}"
    return None


# -- runtime ---------------------------------------------------------------------------------


def _affine(x):
    return 2.0 * x + 1.0


def _square(x):
    return x * x


FUNCTIONS = (_affine, _square)


def _delay_model(d: Draw):
    kind = d.pick(("shifted", "additive", "pareto", "bimodal", "bursty", "trace"))
    if kind == "shifted":
        return cc.delays.ShiftedExponential(scale=d.uniform(1e-4, 0.05), rate=d.uniform(0.5, 2.0))
    if kind == "additive":
        return cc.delays.AdditiveExponential(mean=d.uniform(1e-4, 0.05))
    if kind == "pareto":
        return cc.delays.Pareto(scale=d.uniform(1e-4, 0.05), alpha=d.uniform(1.1, 3.0))
    if kind == "bimodal":
        return cc.delays.Bimodal(base=d.uniform(1e-4, 0.01), p=d.uniform(0, 0.5))
    if kind == "bursty":
        return cc.delays.BurstyMarkov(base=d.uniform(1e-4, 0.01))
    return cc.delays.Trace(np.abs(d.normal((d.int(1, 3), d.int(1, 5)))) * 0.01, shuffle=d.coin())


def _fault_model(d: Draw):
    if d.coin():
        return cc.faults.Independent({"raise": d.uniform(0, 0.1), "nan": d.uniform(0, 0.1)})
    return cc.faults.Fixed({d.int(0, 15): d.pick(cc.runtime.faults.KINDS)})


_SHARED: dict = {}


def shared_thread_cluster():
    """One ThreadCluster for every threaded case (created once: a pool per case is slow)."""
    if "thread" not in _SHARED:
        _SHARED["thread"] = cc.ThreadCluster(
            num_threads=4,
            delays=cc.delays.ShiftedExponential(scale=2e-4, rate=1.0),
            faults=cc.faults.Independent({"raise": 0.03, "nan": 0.03, "hang": 0.03}),
            seed=0,
        )
    return _SHARED["thread"]


class ClusterSpec:
    """A valid cluster: the shared ThreadCluster, or a SimulatedCluster drawn at random."""

    def __init__(self, d: Draw, kind: str):
        self.kind = kind
        if kind == "thread":
            self.obj = shared_thread_cluster()
            return
        self.args = {
            "delays": d.pick((None, _delay_model(d))),
            "faults": d.pick((None, None, _fault_model(d))),
            "seed": d.int(0, 1000),
            "compute_s": d.pick((0.0, 1e-3)),
        }
        self.obj = cc.SimulatedCluster(**self.args)

    def __repr__(self) -> str:
        return "shared ThreadCluster" if self.kind == "thread" else repr(self.obj)


def _cluster_param(kinds: tuple[str, ...]) -> Param:
    return Param("_cluster", lambda d, ctx: ClusterSpec(d, d.pick(kinds)), hidden=True)


def _delays_valid(d: Draw, ctx: dict):
    return d.pick((OMIT, None, _delay_model(d)))


def _faults_valid(d: Draw, ctx: dict):
    return d.pick((OMIT, None, _fault_model(d)))


def _bad_delays(d: Draw, ctx: dict) -> list:
    return [
        ("str", "exp"),
        ("float", 0.05),
        ("dict", {"scale": 0.1}),
        ("class", cc.delays.ShiftedExponential),
        ("fault-model", cc.faults.Fixed({})),
        ("callable", lambda n, rng: np.zeros(n)),
    ]


def _bad_faults(d: Draw, ctx: dict) -> list:
    return [
        ("dict", {"hang": 0.1}),
        ("str", "raise"),
        ("class", cc.faults.Independent),
        ("delay-model", cc.delays.AdditiveExponential()),
        ("list", [0]),
    ]


def _check_cluster(cls):
    def check(out, kw: dict) -> str | None:
        return None if isinstance(out, cls) else f"returned {type(out).__name__}"

    return check


def _close(obj) -> None:
    close = getattr(obj, "close", None)
    if callable(close):
        close()


def _compute_s_valid(d: Draw, ctx: dict):
    return omit_or(d, 0.4, lambda: real_like(d, d.pick((0.0, 1e-3, 1.0, d.uniform(0, 0.1)))))


def _inputs_valid(d: Draw, ctx: dict):
    n = d.int(1, 16)
    return array_like(d, d.normal((n, d.int(1, 4))), list_ok=False, half_ok=False)


def _n_rows(ctx: dict, name: str = "inputs") -> int:
    return _shape(ctx[name])[0]


class AtLeast:
    """A ``wait_for`` predicate: at least ``k`` workers arrived."""

    def __init__(self, k: int):
        self.k = k

    def __call__(self, alive) -> bool:
        return len(alive) >= self.k

    def __repr__(self) -> str:
        return f"AtLeast({self.k})"


def _gather_wait_for_valid(d: Draw, ctx: dict):
    n = _n_rows(ctx)
    k = d.int(1, n)
    return AtLeast(k) if d.coin(0.2) else int_like(d, k)


def _bad_gather_wait_for(d: Draw, ctx: dict) -> list:
    return [("above-N", _n_rows(ctx) + 1)]


def _deadline_valid(d: Draw, ctx: dict):
    return d.pick((OMIT, None, 10.0, 1.0, np.float64(2.5), 3, math.inf))


_bad_deadline = bad_real(
    lo=0.0, lo_open=True, typical=1.0, none_ok=True, inf_ok=True, extra=lambda d, ctx: [("str-number", "1.0")]
)


def _bad_f(d: Draw, ctx: dict) -> list:
    return [("none", None), ("str", "f"), ("int", 3), ("list", [_affine])]


def _bad_inputs(d: Draw, ctx: dict) -> list:
    n = _n_rows(ctx)
    return [
        ("none", None),
        ("list", [[1.0]] * n),
        ("python-scalar", 1.0),
        ("0-d-array", np.array(1.0)),
        ("empty-rows", np.zeros((0, 2))),
        ("dict", {"inputs": 1}),
    ]


def _check_gathered(out, kw: dict) -> str | None:
    n = _n_rows(kw)
    alive = np.asarray(out.alive)
    if alive.size != np.unique(alive).size or (alive.size and (alive.min() < 0 or alive.max() >= n)):
        return f"alive {alive.tolist()} is not distinct indices in range({n})"
    rows = 0 if out.results is None else _shape(out.results)[0]
    if rows != alive.size:
        return f"{rows} result rows for {alive.size} alive workers"
    if np.shape(out.latency) != (n,):
        return f"latency of shape {np.shape(out.latency)}"
    return None


def _executor_code_valid(d: Draw, ctx: dict):
    return draw_code(d, d.pick(tuple(CODE_CLASSES))).obj


def _executor_cluster_valid(d: Draw, ctx: dict):
    return d.pick((cc.SimulatedCluster(seed=d.int(0, 100)), shared_thread_cluster()))


def _bad_code_arg(d: Draw, ctx: dict) -> list:
    return [
        ("none", None),
        ("str", "gcc"),
        ("class", cc.GCC),
        ("cluster", cc.SimulatedCluster()),
        ("dict", {"num_inputs": 3}),
    ]


def _bad_cluster_arg(d: Draw, ctx: dict) -> list:
    return [
        ("none", None),
        ("str", "thread"),
        ("class", cc.SimulatedCluster),
        ("code", cc.BACC(2, 4)),
        ("delay-model", cc.delays.AdditiveExponential()),
    ]


def _executor(ctx: dict):
    return cc.CodedExecutor(_code(ctx), ctx["_f"], ctx["_cluster"].obj)


def _exec_x_valid(d: Draw, ctx: dict):
    return array_like(d, d.normal((_code(ctx).num_inputs, d.int(1, 4))), list_ok=False, half_ok=False)


def _exec_wait_for_valid(d: Draw, ctx: dict):
    code = _code(ctx)
    if ctx["_code"].kind in ("uncoded", "replication"):
        return d.pick((OMIT, None, int_like(d, code.num_workers)))
    return d.pick((OMIT, None, int_like(d, d.int(code.min_results, code.num_workers))))


def _bad_exec_wait_for(d: Draw, ctx: dict) -> list:
    code = _code(ctx)
    out = [("above-N", code.num_workers + 1), ("predicate", AtLeast(1))]
    if code.min_results >= 2:
        out.append(("below-min_results", code.min_results - 1))
    return out


def _check_result(out, kw: dict, x) -> str | None:
    code = _code(kw)
    shape = (code.num_inputs, *_shape(x)[1:])
    if tuple(_shape(out.estimates)) != shape:
        return f"estimates of shape {_shape(out.estimates)}, expected {shape}"
    if not _finite(out.estimates):
        return "estimates have NaN or inf"
    alive = np.asarray(out.alive)
    if np.any(np.diff(alive) <= 0) or (alive.size and (alive[0] < 0 or alive[-1] >= code.num_workers)):
        return f"alive {alive.tolist()} is not sorted distinct indices"
    return None


def _check_run(out, kw: dict) -> str | None:
    return _check_result(out, kw, kw["X"])


class Batches:
    """An iterable of batches that is not a list (``map`` takes any iterable)."""

    def __init__(self, items: list):
        self.items = items

    def __iter__(self):
        return iter(self.items)

    def __repr__(self) -> str:
        return f"Batches({short(self.items)})"


def _batches_valid(d: Draw, ctx: dict):
    k = _code(ctx).num_inputs
    width = d.int(1, 3)
    items = [array_like(d, d.normal((k, width)), list_ok=False, half_ok=False) for _ in range(d.int(0, 3))]
    if torch is not None and len({_is_tensor(x) for x in items}) > 1:
        items = [x.numpy() if _is_tensor(x) else x for x in items]
    return d.pick((items, tuple(items), Batches(items)))


def _bad_batches(d: Draw, ctx: dict) -> list:
    # A bad batch comes first: after a valid one, a documented "too few results" error of that
    # batch (faults on the shared thread cluster) could come out before the bad one is seen.
    k = _code(ctx).num_inputs
    good = d.normal((k, 2))
    return [
        ("none", None),
        ("int", 3),
        ("str", "abc"),
        ("bad-item-str", ["abc", good]),
        ("bad-item-none", [None, good]),
        ("bad-item-rows", [d.normal((k + 1, 2)), good]),
        ("bad-item-nan", [np.full((k, 2), math.nan)]),
        ("dict", {0: good}),
    ]


def _check_map(out, kw: dict) -> str | None:
    items = list(kw["batches"])
    if not isinstance(out, list) or len(out) != len(items):
        return f"{len(out)} results for {len(items)} batches"
    for result, x in zip(out, items, strict=True):
        problem = _check_result(result, kw, x)
        if problem:
            return problem
    return None


_bad_positive = bad_real(lo=0.0, lo_open=True, typical=0.01)
_bad_nonnegative = bad_real(lo=0.0, typical=0.1)
_bad_probability = bad_real(hi=1.0, hi_open=False, typical=0.1)


def _pos(lo: float, hi: float):
    return lambda d, ctx: omit_or(d, 0.3, lambda: real_like(d, d.uniform(lo, hi)))


def _check_delay_model(out, kw: dict) -> str | None:
    if not isinstance(out, cc.delays.DelayModel):
        return f"returned {type(out).__name__}"
    sample = out.sample(5, np.random.default_rng(0))
    if np.shape(sample) != (5,) or not (np.all(np.isfinite(sample)) and np.all(np.asarray(sample) >= 0)):
        return f"sample(5) gave {short(sample)}"
    return None


def _p_recover_valid(d: Draw, ctx: dict):
    return omit_or(d, 0.3, lambda: real_like(d, d.uniform(0.05, 1.0)))


def _latencies_valid(d: Draw, ctx: dict):
    arr = np.abs(d.normal((d.int(1, 4), d.int(1, 5)))) * 0.01
    return d.pick((arr, arr.tolist()))


def _bad_latencies(d: Draw, ctx: dict) -> list:
    return [
        ("1-d", [0.1, 0.2]),
        ("3-d", np.zeros((1, 2, 2))),
        ("empty", np.zeros((0, 3))),
        ("negative", [[-0.1, 0.2]]),
        ("nan", [[math.nan, 0.2]]),
        ("inf", [[math.inf]]),
        ("str", "abc"),
        ("str-array", [["a", "b"]]),
        ("none", None),
        ("ragged", [[0.1], [0.2, 0.3]]),
        ("complex", [[0.1 + 1j]]),
        ("dict", {"latency": 1}),
        ("scalar", 0.1),
    ]


def _check_fault_model(out, kw: dict) -> str | None:
    if not isinstance(out, cc.faults.FaultModel):
        return f"returned {type(out).__name__}"
    sample = out.sample(16, np.random.default_rng(0))
    if not isinstance(sample, dict) or not set(sample.values()) <= set(cc.runtime.faults.KINDS):
        return f"sample(16) gave {sample!r}"
    return None


def _rates_valid(d: Draw, ctx: dict):
    kinds = d.rnd.sample(cc.runtime.faults.KINDS, d.int(1, 4))
    return {kind: real_like(d, d.uniform(0, 1.0 / len(kinds))) for kind in kinds}


def _bad_rates(d: Draw, ctx: dict) -> list:
    return [
        ("empty", {}),
        ("unknown-kind", {"explode": 0.1}),
        ("above-one", {"raise": 1.5}),
        ("negative", {"raise": -0.1}),
        ("sum-above-one", {"raise": 0.6, "nan": 0.6}),
        ("str-probability", {"raise": "0.1"}),
        ("bool-probability", {"raise": True}),
        ("nan-probability", {"raise": math.nan}),
        ("huge-probability", {"raise": 10**400}),
        ("list", [("raise", 0.1)]),
        ("none", None),
        ("str", "raise"),
    ]


def _fixed_valid(d: Draw, ctx: dict):
    workers = d.sample(16, d.int(0, 4))
    return {int_like(d, w): d.pick(cc.runtime.faults.KINDS) for w in workers}


def _bad_fixed(d: Draw, ctx: dict) -> list:
    return [
        ("unknown-kind", {0: "explode"}),
        ("negative-worker", {-1: "raise"}),
        ("float-worker", {0.0: "raise"}),
        ("str-worker", {"0": "raise"}),
        ("bool-worker", {True: "raise"}),
        ("none-kind", {0: None}),
        ("none", None),
        ("list", [0]),
        ("str", "raise"),
    ]


# == the extensions ==========================================================================
# ManifoldGCC, ThinPlateCode and codedcomputing.codes.layout; RobustGCC, robust_lambda, block_medians,
# ApproxIFER, the attacks and the adversarial fault model; codedcomputing.gradient_coding.


def _quiet(fn, *args, **kwargs):
    """``fn(*args, **kwargs)`` with warnings silenced (a check's own calls: K > N, erasures)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return fn(*args, **kwargs)


def _as_numpy(x) -> np.ndarray:
    """``x`` (array, nested list or tensor) as a float64 numpy array."""
    if _is_tensor(x):
        return x.detach().cpu().double().numpy()
    return np.asarray(x, dtype=np.float64)


def _off_by(got, want) -> tuple[float, float]:
    """``(max |got - want|, the tolerance 1e-8 max(1, max |want|))`` (check_promise's)."""
    got, want = _as_numpy(got), _as_numpy(want)
    if got.shape != want.shape:
        return math.inf, 0.0
    scale = max(1.0, float(np.max(np.abs(want), initial=0.0)))
    return float(np.max(np.abs(got - want), initial=0.0)), 1e-8 * scale


def _promise_problem(code, seed: int = 0, instances: int = 2) -> str | None:
    """What is wrong with ``code``'s own promise (:meth:`Code.promised_case`) on ``instances``
    draws: ``decode(f(encode(X))[alive], alive)`` must equal ``f(X)`` to rounding."""
    rng = np.random.default_rng(seed)
    for index in range(instances):
        case = code.promised_case(rng)
        if case is None:
            return None
        X, f, alive = case
        truth = f(np.asarray(X, dtype=np.float64))
        est = _quiet(code.decode, f(code.encode(X))[alive], alive)
        err, tol = _off_by(est, truth)
        if not err <= tol:
            return (
                f"promised_case #{index} ({len(alive)} of {code.num_workers} results, alive "
                f"{short(np.asarray(alive).tolist(), 60)}) decoded {err:.3g} off f(X) (rounding: {tol:.2g})"
            )
    return None


def _rebuild_problem(code) -> str | None:
    """``type(code)(**code.get_params())`` must build an equal code (Code.get_params)."""
    again = _quiet(type(code), **code.get_params())
    for attr in ("alpha", "beta"):
        if not np.array_equal(getattr(again, attr), getattr(code, attr)):
            return f"type(code)(**code.get_params()) has another {attr}"
    if repr(again) != repr(code):
        return f"type(code)(**code.get_params()) is {again!r}, not {code!r}"
    return None


def _first(*problems) -> str | None:
    """The first of ``problems`` (thunks returning ``None`` or what is wrong) that is not None."""
    for problem in problems:
        found = problem()
        if found:
            return found
    return None


def bad_choice_of(options: tuple, extra: Callable[[Draw, dict], list] | None = None):
    """:func:`bad_choice` plus context-dependent entries."""
    base = bad_choice(options)

    def pool(d: Draw, ctx: dict) -> list:
        return [*base(d, ctx), *(extra(d, ctx) if extra is not None else [])]

    return pool


def _choice_valid(options: tuple, p_omit: float = 0.4):
    return lambda d, ctx: omit_or(d, p_omit, lambda: d.pick(options))


def _flag_valid(d: Draw, ctx: dict):
    return d.pick((OMIT, True, False, np.bool_(True), np.bool_(False)))


def _given(ctx: dict, name: str, default):
    value = ctx.get(name, OMIT)
    return default if value is OMIT else value


def _bad_array_common(shape: tuple, d: Draw) -> list:
    """Invalid values for a real array parameter of ``shape`` (ndim >= 1)."""
    good = d.normal(shape)
    with_nan, with_inf = good.copy(), good.copy()
    if good.size:
        with_nan.flat[d.int(0, good.size - 1)] = math.nan
        with_inf.flat[d.int(0, good.size - 1)] = math.inf
    out = [
        ("none", None),
        ("str", "abc"),
        ("dict", {"values": 1.0}),
        ("str-array", np.full(shape, "x")),
        ("object-array", np.array([object() for _ in range(max(shape[0], 1))], dtype=object)),
        ("complex", good + 0.5j),
    ]
    if good.size:
        out += [("nan", with_nan), ("inf", with_inf)]
    return out


# -- ManifoldGCC and ThinPlateCode -----------------------------------------------------------

MANIFOLD = cc.codes.manifold
LAYOUTS = cc.codes.layout


def _manifold_decoding_valid(d: Draw, ctx: dict):
    lam = ctx.get("lambda_dec", OMIT)
    blends_ok = lam is OMIT or (not isinstance(lam, str) and float(lam) == 0.0)
    options = cc.codes.gcc.DECODINGS if blends_ok else ("auto", "spline")
    return omit_or(d, 0.5, lambda: d.pick(options))


def _design_of(layout) -> str:
    """The design a drawn ``layout`` argument names (omitted: the default chain)."""
    if layout is OMIT:
        return "chain"
    return layout if isinstance(layout, str) else layout.design


def _manifold_lambda_dec_valid(d: Draw, ctx: dict):
    if _design_of(ctx.get("layout", OMIT)) == "thin-plate":
        return _lambda_valid(d, ctx)
    return _lambda_dec_valid(d, ctx)


def _manifold_bad_lambda_dec(d: Draw, ctx: dict) -> list:
    return [*_bad_lambda_dec(d, ctx), ("gcv-with-thin-plate", "gcv", {"layout": "thin-plate"})]


def _manifold_bad_decoding(d: Draw, ctx: dict) -> list:
    return [("blend-with-smoothing", "adaptive", {"lambda_dec": 0.1})]


def _reference_valid(d: Draw, ctx: dict):
    """None, or M >= 2 samples shaped like the inputs; a third of them far from the batch (the
    batches are drawn near the origin): every input's nearest neighbours then are other inputs."""
    if d.coin(0.55):
        return d.pick((OMIT, None))
    tr = trailing_shape(d)
    ref = d.normal((d.int(2, 24), *tr)) * d.uniform(0.5, 2.0)
    if d.coin(0.5):
        ref = ref + d.pick((30.0, -200.0, 1e3))
    return array_like(d, ref, half_ok=False)


def _bad_reference(d: Draw, ctx: dict) -> list:
    ref = ctx["reference"]
    shape = _shape(ref) if ref is not OMIT and ref is not None else (5, 2)
    return [
        *[entry for entry in _bad_array_common(shape, d) if entry[0] != "none"],  # None is the default
        ("one-sample", d.normal((1, *shape[1:]))),
        ("empty", np.zeros((0, *shape[1:]))),
        ("python-scalar", 1.5),
        ("0-d-array", np.array(1.5)),
        ("ragged-list", _ragged(shape[0])),
        ("set", {1.0, 2.0}),
    ]


def _layout_option_params(design: str) -> tuple[Param, ...]:
    """The options of the layout class named ``design`` (its constructor's parameters)."""
    if design == "thin-plate":
        own = (
            Param(
                "dimensions",
                lambda d, ctx: omit_or(d, 0.5, lambda: int_like(d, d.int(1, 4))),
                bad_count(1, name="dimensions"),
            ),
            Param("embedding", _choice_valid(LAYOUTS.EMBEDDINGS), bad_choice(LAYOUTS.EMBEDDINGS)),
        )
    else:
        own = (Param("spacing", _choice_valid(LAYOUTS.SPACINGS), bad_choice(LAYOUTS.SPACINGS)),)
    return (
        *own,
        Param("reference", _reference_valid, _bad_reference),
        Param(
            "neighbours",  # few, often: with few neighbours a far batch links only to itself
            lambda d, ctx: omit_or(d, 0.3, lambda: int_like(d, d.pick((1, 2, 3, d.int(1, 12))))),
            bad_count(1, name="neighbours"),
        ),
    )


def _layout_valid(d: Draw, ctx: dict):
    """ManifoldGCC's ``layout``: omitted, a name, or a layout object with drawn options."""
    if d.coin(0.3):
        return OMIT
    design = d.pick(tuple(LAYOUTS.LAYOUTS))
    if d.coin(0.25):
        return design
    options = {}
    for param in _layout_option_params(design):
        value = param.valid(d, options)
        if value is not OMIT:
            options[param.name] = value
    return LAYOUTS.LAYOUTS[design](**options)


def _bad_layout(d: Draw, ctx: dict) -> list:
    return [
        *bad_choice(tuple(LAYOUTS.LAYOUTS))(d, ctx),
        ("base-class", LAYOUTS.BatchLayout()),
        ("a-class", LAYOUTS.ChainLayout),
    ]


def _manifold_params() -> tuple[Param, ...]:
    n_of = lambda ctx: int(ctx["num_workers"])  # noqa: E731
    return (
        Param("num_inputs", lambda d, ctx: int_like(d, d.int(1, 8)), bad_count(1, name="num_inputs")),
        Param("num_workers", _num_workers_valid, bad_count(2, name="num_workers")),
        Param("layout", _layout_valid, _bad_layout),
        Param("lambda_enc", _lambda_valid, _bad_lambda),
        Param("lambda_dec", _manifold_lambda_dec_valid, _manifold_bad_lambda_dec),
        Param(
            "decoding",
            _manifold_decoding_valid,
            bad_choice_of(cc.codes.gcc.DECODINGS, _manifold_bad_decoding),
        ),
        Param("systematic", _flag_valid, bad_flag),
        Param("points", _points_valid, bad_choice(("chebyshev", "equispaced"))),
        Param("beta", _explicit_points(n_of), bad_points(n_of)),
        Param("assignment", _choice_valid(("golden", "natural")), bad_choice(("golden", "natural"))),
    )


def _check_layout_object(out, kw: dict, cls) -> str | None:
    """A layout object of ``cls`` holding the options given (the reference as float64 rows,
    read-only), rebuilt equal by its get_params, and immutable."""
    if type(out) is not cls:
        return f"returned {type(out).__name__}, not a {cls.__name__}"
    params = out.get_params()
    for name, value in kw.items():
        if value is OMIT:
            continue
        if name == "reference":
            if value is None:
                continue
            rows = np.asarray(value, dtype=np.float64).reshape(len(value), -1)
            if not np.array_equal(out.reference, rows) or out.reference.flags.writeable:
                return "reference is not the samples given as read-only float64 rows"
        elif params[name] != value:
            return f"{name}={params[name]!r}, given {value!r}"
    if type(out)(**params) != out:
        return "type(layout)(**layout.get_params()) is not an equal layout"
    try:
        out.neighbours = 3
    except AttributeError:
        return None
    return "a layout's option could be set after it was built"


def _sites_valid(d: Draw, ctx: dict):
    sites = d.normal((int(ctx["num_inputs"]), d.int(1, 3)))
    if len(sites) >= 2 and d.int(0, 3) == 0:  # a repeated site, as bind gives identical inputs
        sites[-1] = sites[0]
    return d.pick((sites, sites, sites.tolist(), sites.astype(np.float32)))


def _worker_sites_valid(d: Draw, ctx: dict):
    m = np.shape(np.asarray(ctx["sites"]))[1]
    sites = d.normal((int(ctx["num_workers"]), m))
    return d.pick((sites, sites, sites.tolist()))


def _bad_sites(rows_of: Callable[[dict], int], name: str):
    def pool(d: Draw, ctx: dict) -> list:
        rows = rows_of(ctx)
        m = np.shape(np.asarray(ctx[name]))[1]
        good = d.normal((rows, m))
        out = [
            *_bad_array_common((rows, m), d),
            ("1-d", good[:, 0]),
            ("3-d", good[None]),
            ("too-many-rows", d.normal((rows + 1, m))),
            ("no-columns", np.zeros((rows, 0))),
            ("ragged-list", _ragged(rows)),
            ("python-scalar", 0.5),
        ]
        if rows >= 2:
            out.append(("too-few-rows", good[:-1]))
        if name == "worker_sites":
            out.append(("other-columns", d.normal((rows, m + 1))))
        return out

    return pool


def _thin_plate_params() -> tuple[Param, ...]:
    return (
        Param("num_inputs", lambda d, ctx: int_like(d, d.int(1, 6)), bad_count(1, name="num_inputs")),
        Param("num_workers", _num_workers_valid, bad_count(2, name="num_workers")),
        Param("lambda_enc", _lambda_valid, _bad_lambda),
        Param("lambda_dec", _lambda_valid, _bad_lambda),
        Param("sites", _sites_valid, _bad_sites(_n_inputs, "sites")),
        Param(
            "worker_sites",
            _worker_sites_valid,
            _bad_sites(lambda ctx: int(ctx["num_workers"]), "worker_sites"),
        ),
    )


def _general_position(points: np.ndarray) -> bool:
    """Whether ``points`` (``(n, m)``) hold ``m + 1`` affinely independent ones, well apart."""
    points = np.asarray(points, dtype=np.float64)
    n, m = points.shape
    if n < m + 1:
        return False
    singular = np.linalg.svd(np.c_[np.ones(n), points - points.mean(axis=0)], compute_uv=False)
    return bool(singular[-1] > 1e-6 * singular[0])


def _systematic_problem(bound, code, X) -> str | None:
    """A systematic layout at lambdas 0 with every worker returned: every input exact, through a
    nonlinear ``f``, in ``X``'s own row order (ManifoldGCC's docstring, "systematic")."""
    k, n = code.num_inputs, code.num_workers
    lam_dec = code.lambda_dec
    if not (code.systematic and k <= n and code.lambda_enc == 0 and not isinstance(lam_dec, str)):
        return None
    if lam_dec != 0:
        return None
    if code.design == "thin-plate":  # the thin-plate spline interpolates where it is defined
        sites = np.asarray(bound.layout.sites)
        if k > 1 and (not _general_position(sites) or np.unique(sites, axis=0).shape[0] < k):
            return None
    Xf = _as_numpy(X)
    truth = np.sin(Xf)
    est = _quiet(bound.decode, np.sin(bound.encode(Xf)), np.arange(n))
    err = float(np.max(np.abs(_as_numpy(est) - truth), initial=0.0))
    if not err <= 1e-7:
        rows = np.flatnonzero(np.max(np.abs(_as_numpy(est) - truth).reshape(k, -1), axis=1) > 1e-7)
        return f"systematic, lambdas 0, all {n} workers: inputs {rows.tolist()[:8]} off f(x_k) by {err:.3g}"
    return None


def _check_layout(bound, code, X) -> str | None:
    """The bound code of ``code.bind(X)``: its kind, its layout (an order that is a permutation
    of 0..K-1, alpha increasing along it, on workers' points when systematic; or sites in
    [-1, 1]^m, among the worker sites when systematic), its own promise, systematic exactness."""
    k, n = code.num_inputs, code.num_workers
    if (bound.num_inputs, bound.num_workers) != (k, n):
        return f"bound code has (K, N) = ({bound.num_inputs}, {bound.num_workers}), expected ({k}, {n})"
    lay = getattr(bound, "layout", None)
    if code.design == "thin-plate":
        if not isinstance(bound, MANIFOLD.ThinPlateCode) or not isinstance(lay, MANIFOLD.SiteLayout):
            return f"design='thin-plate' bound a {type(bound).__name__} with layout {type(lay).__name__}"
        most = max(1, min(code.layout.dimensions, k - 1))  # "at most K - 1 are used"
        sites, workers = np.asarray(lay.sites), np.asarray(lay.worker_sites)
        m = sites.shape[1] if sites.ndim == 2 else -1
        if sites.shape != (k, m) or workers.shape != (n, m) or not 1 <= m <= most:
            return f"sites {sites.shape}, worker_sites {workers.shape}: not (K, m), (N, m), 1 <= m <= {most}"
        if not (np.all(np.isfinite(sites)) and np.all(np.isfinite(workers))):
            return "sites or worker_sites hold NaN or inf"
        if np.max(np.abs(sites)) > 1 + 1e-9:
            return f"sites reach {np.max(np.abs(sites)):.3g}, outside [-1, 1]^m"
        if code.systematic and 1 < k <= n:
            missing = [i for i, s in enumerate(sites) if not np.any(np.all(workers == s, axis=1))]
            if missing:
                return f"systematic, K <= N: the sites of inputs {missing[:8]} are no worker's site"
    else:
        if not isinstance(bound, cc.GCC) or not isinstance(lay, MANIFOLD.Layout):
            return f"design={code.design!r} bound a {type(bound).__name__} with layout {type(lay).__name__}"
        order = np.asarray(lay.order)
        if (
            order.shape != (k,)
            or not np.issubdtype(order.dtype, np.integer)
            or sorted(order.tolist()) != list(range(k))
        ):
            return f"layout.order {short(order.tolist(), 60)} is not a permutation of 0..{k - 1}"
        alpha = np.asarray(bound.alpha)
        if not np.array_equal(alpha, np.asarray(lay.alpha)):
            return "bound.alpha is not layout.alpha"
        if k > 1 and np.any(np.diff(alpha[order]) <= 0):
            return f"alpha {short(alpha.tolist(), 60)} does not increase along layout.order"
        if code.design == "none" and not np.array_equal(order, np.arange(k)):
            return f"design='none' reordered the batch: {order.tolist()}"
        if code.systematic and k <= n and not np.all(np.isin(alpha, code.beta)):
            return "systematic, K <= N: an alpha_k is no worker's point"
        if not np.array_equal(np.asarray(bound.beta), np.asarray(code.beta)):
            return "the bound code's beta is not the code's"
    return _promise_problem(bound) or _systematic_problem(bound, code, X)


def _reference_trailing(kwargs: dict) -> tuple | None:
    """The width of the samples in a ManifoldGCC's layout's reference (None: none)."""
    layout = kwargs.get("layout", OMIT)
    reference = getattr(layout, "reference", None)
    return None if reference is None else (reference.shape[1],)


def _batch_for(num_inputs: int, trailing: tuple | None, d: Draw | None = None, seed: int = 0):
    """A batch of ``num_inputs`` inputs near the origin, shaped like the reference's samples
    when there is one (``trailing``); from a draw, a tenth of the time with a repeated input."""
    if d is None:
        return np.random.default_rng(seed).normal(
            size=(num_inputs, *((2,) if trailing is None else trailing))
        )
    X = d.normal((num_inputs, *(trailing if trailing is not None else trailing_shape(d))))
    if num_inputs >= 2 and d.coin(0.1):
        X[-1] = X[0]
    return X


def _check_manifold(code, kw: dict) -> str | None:
    if not isinstance(code, cc.ManifoldGCC):
        return f"returned {type(code).__name__}"
    X = _batch_for(code.num_inputs, _reference_trailing(kw))
    return _first(
        lambda: _check_code(code, kw),
        lambda: _rebuild_problem(code),
        lambda: _check_layout(_quiet(code.bind, X), code, X),
    )


def _check_thin_plate(code, kw: dict) -> str | None:
    if not isinstance(code, MANIFOLD.ThinPlateCode):
        return f"returned {type(code).__name__}"
    sites = np.asarray(kw["sites"], dtype=np.float64)
    return _first(
        lambda: _check_code(code, kw),
        lambda: None if np.array_equal(code.sites, sites) else "code.sites are not the sites given",
        lambda: _rebuild_problem(code),
        lambda: _promise_problem(code),
    )


# -- RobustGCC, ApproxIFER -------------------------------------------------------------------

ROBUST = cc.codes.robust


def _adversaries_valid(cap: int):
    def gen(d: Draw, ctx: dict):
        n = int(ctx["num_workers"])
        return omit_or(d, 0.2, lambda: int_like(d, d.int(0, min(n - 1, cap))))

    return gen


def _bad_adversaries(d: Draw, ctx: dict) -> list:
    n = int(ctx["num_workers"])
    return [("equal-num_workers", n), ("above-num_workers", n + 3)]


def _bound_valid(d: Draw, ctx: dict):
    return d.pick((OMIT, None, None, real_like(d, d.pick((1.0, 100.0, d.uniform(0.2, 50.0))))))


def _optional_nonnegative(values: tuple):
    def gen(d: Draw, ctx: dict):
        return d.pick((OMIT, OMIT, None, real_like(d, d.pick((*values, d.uniform(0, 1e-2))))))

    return gen


_bad_bound = bad_real(lo=0.0, lo_open=True, typical=10.0, none_ok=True)


def _robust_params() -> tuple[Param, ...]:
    n_of = lambda ctx: int(ctx["num_workers"])  # noqa: E731
    return (
        Param("num_inputs", lambda d, ctx: int_like(d, d.int(1, 6)), bad_count(1, name="num_inputs")),
        Param("num_workers", _num_workers_valid, bad_count(2, name="num_workers")),
        Param(
            "num_adversaries",
            _adversaries_valid(4),
            bad_count(0, name="num_adversaries", extra=_bad_adversaries),
        ),
        Param("bound", _bound_valid, _bad_bound),
        Param(
            "lambda_dec",
            _optional_nonnegative((0.0, 1e-4, 1.0)),
            bad_real(
                typical=0.1,
                none_ok=True,
                extra=lambda d, ctx: [("too-large", 1e300), ("str-gcv", "gcv")],
            ),
        ),
        Param("schedule", _choice_valid(ROBUST.SCHEDULES), bad_choice(ROBUST.SCHEDULES)),
        Param("scale", _optional_nonnegative((0.0, 1e-8, 1e-4, 1.0)), bad_real(typical=1.0, none_ok=True)),
        Param("loss", _choice_valid(ROBUST.LOSSES, 0.3), bad_choice(ROBUST.LOSSES)),
        Param("start", _choice_valid(ROBUST.STARTS), bad_choice(ROBUST.STARTS)),
        Param(
            "iterations",
            lambda d, ctx: omit_or(d, 0.5, lambda: int_like(d, d.int(1, 10))),
            bad_count(1, name="iterations"),
        ),
        Param("lambda_enc", _lambda_valid, _bad_lambda),
        Param("points", _points_valid, bad_choice(("chebyshev", "equispaced"))),
        Param("alpha", _explicit_points(_n_inputs), bad_points(_n_inputs)),
        Param("beta", _explicit_points(n_of), bad_points(n_of)),
        Param("assignment", _choice_valid(("natural", "golden")), bad_choice(("natural", "golden"))),
    )


def _approxifer_params() -> tuple[Param, ...]:
    n_of = lambda ctx: int(ctx["num_workers"])  # noqa: E731
    return (
        Param("num_inputs", lambda d, ctx: int_like(d, d.int(1, 6)), bad_count(1, name="num_inputs")),
        Param("num_workers", _num_workers_valid, bad_count(2, name="num_workers")),
        Param(
            "num_adversaries",
            _adversaries_valid(3),
            bad_count(0, name="num_adversaries", extra=_bad_adversaries),
        ),
        Param("points", _points_valid, bad_choice(("chebyshev", "equispaced"))),
        Param("alpha", _explicit_points(_n_inputs), bad_points(_n_inputs)),
        Param("beta", _explicit_points(n_of), bad_points(n_of)),
        Param("assignment", _choice_valid(("natural", "golden")), bad_choice(("natural", "golden"))),
    )


def _code_checks(cls: type, instances: int):
    """The result check of ``cls``'s constructor: a ``cls``, its attributes, rebuilt from its
    parameters, and its promise on ``instances`` cases."""

    def check(code, kw: dict) -> str | None:
        if not isinstance(code, cls):
            return f"returned {type(code).__name__}"
        return _first(
            lambda: _check_code(code, kw),
            lambda: _rebuild_problem(code),
            lambda: _promise_problem(code, instances=instances),
        )

    return check


_check_robust = _code_checks(cc.RobustGCC, instances=4)
_check_approxifer = _code_checks(cc.ApproxIFER, instances=3)


def _check_locates(out, kw: dict) -> str | None:
    code = _code(kw)
    e, k = code.num_adversaries, code.num_inputs
    expected = e >= 1 and int(kw["num_results"]) >= 2 * (k + e)
    if not isinstance(out, (bool, np.bool_)) or bool(out) != expected:
        return f"returned {out!r}, expected {expected} (e = {e}, K = {k})"
    return None


# RobustGCC.clip took ``(Y)`` and later ``(Y, alive)`` (the results' workers, so that it clips
# around a trend in their points): the spec follows the signature it finds.
CLIP_TAKES_ALIVE = "alive" in inspect.signature(cc.RobustGCC.clip).parameters


def _clip_alive_valid(d: Draw, ctx: dict):
    n = _code(ctx).num_workers
    return alive_like(d, d.sample(n, d.int(0, n)))


def _clip_y_valid(d: Draw, ctx: dict):
    rows = len(_alive_list(ctx["alive"])) if CLIP_TAKES_ALIVE else d.int(0, 10)
    y = d.normal((rows, *trailing_shape(d))) * d.pick((1.0, 10.0))
    if y.shape[0] and d.coin(0.3):  # an outlier for the clipping to catch
        y[d.int(0, y.shape[0] - 1)] = d.pick((1e6, -1e9))
    return array_like(d, y, half_ok=False)


def _bad_clip_y(d: Draw, ctx: dict) -> list:
    rows = max(_shape(ctx["Y"])[0], 2)
    out = [
        ("none", None),
        ("str", "abc"),
        ("dict", {"rows": [1.0]}),
        ("python-scalar", 2.0),
        ("0-d-array", np.array(2.0)),
        ("ragged-list", _ragged(rows)),
        ("str-array", np.full((rows, 2), "x")),
        ("list-of-str", ["a"] * rows),
        ("object-array", np.array([object() for _ in range(rows)], dtype=object)),
        ("set", {1.0, 2.0}),
    ]
    if CLIP_TAKES_ALIVE:  # rows must match alive; finite (its docstring: decode erases NaN rows)
        rows = len(_alive_list(ctx["alive"]))
        tr = tuple(_shape(ctx["Y"])[1:])
        out.append(("too-many-rows", d.normal((rows + 1, *tr))))
        if rows:
            with_nan = d.normal((rows, *tr))
            with_nan.flat[d.int(0, with_nan.size - 1)] = math.nan
            out.append(("nan", with_nan))
    return out


def _clip_params(robust: Param) -> tuple[Param, ...]:
    y = Param("Y", _clip_y_valid, _bad_clip_y)
    if not CLIP_TAKES_ALIVE:
        return (robust, y)
    return (robust, Param("alive", _clip_alive_valid, bad_alive(lambda ctx: _code(ctx).num_workers)), y)


def _rows_2d(x: np.ndarray) -> np.ndarray:
    """``x`` as ``(rows, d)``, ``d`` the product of its trailing dimensions (``(0, d)`` too)."""
    return x.reshape(x.shape[0], int(np.prod(x.shape[1:], dtype=np.int64)))


def _check_clip(out, kw: dict) -> str | None:
    """Step 1 of RobustGCC's docstring: float64 ``(n, d)`` in the order given; with a bound,
    clipped to ``[-bound, bound]``; without one, each column clipped to a range that at most
    ``q`` values lie beyond on either side (at most ``2q`` moved, each into the column's own
    range), nothing moved when ``q = 0``."""
    code = _code(kw)
    flat = _rows_2d(_as_numpy(kw["Y"]))
    n, q = flat.shape[0], code.num_adversaries
    if not isinstance(out, np.ndarray) or out.dtype != np.float64 or out.shape != flat.shape:
        return f"returned {short(out)}, expected a float64 array of shape {flat.shape}"
    if code.bound is not None:
        expected = np.clip(flat, -code.bound, code.bound)
        return None if np.array_equal(out, expected) else f"not clipped to [-{code.bound:g}, {code.bound:g}]"
    moved = out != flat
    if q == 0 and moved.any():
        return "q = 0, yet results were moved"
    if n and np.any(np.sum(moved, axis=0) > 2 * q):
        return f"a column had {int(np.max(np.sum(moved, axis=0)))} values moved, more than 2q = {2 * q}"
    if n and (np.any(out < flat.min(axis=0)) or np.any(out > flat.max(axis=0))):
        return "a value was moved outside its column's range"
    return None


# -- block_medians and robust_lambda ---------------------------------------------------------


def _check_robust_lambda(out, kw: dict) -> str | None:
    q, n = int(kw["num_adversaries"]), int(kw["num_points"])
    schedule = _given(kw, "schedule", "mse")
    scale = float(_given(kw, "scale", 1.0))
    b = math.log(q) / math.log(n) if q >= 1 else 0.0
    switch, power = (0.4, 4.0 / 3.0) if schedule == "mse" else (0.5, 6.0 / 5.0)
    expected = scale * (n ** (-0.8) if b <= switch else (q / n) ** power)
    if not isinstance(out, float) or not math.isfinite(out) or out < 0:
        return f"returned {out!r}, not a finite float >= 0"
    if abs(out - expected) > 1e-12 * max(expected, 1e-300):
        return f"returned {out!r}, the schedule gives {expected!r}"
    return None


def _sorted_knots_valid(d: Draw, ctx: dict):
    return np.sort(distinct_points(d, d.int(1, 16)))


def _bm_values_valid(d: Draw, ctx: dict):
    return d.normal((len(ctx["knots"]), d.int(1, 3)))


def _bm_size_valid(d: Draw, ctx: dict):
    return int_like(d, d.int(1, len(ctx["knots"]) + 2))


def _bm_points_valid(d: Draw, ctx: dict):
    if d.coin(0.4):
        return d.pick((OMIT, None))
    return np.array([d.uniform(-1.5, 1.5) for _ in range(d.int(0, 8))])


def _bad_bm_knots(d: Draw, ctx: dict) -> list:
    knots = np.asarray(ctx["knots"])
    n = knots.size
    out = [
        *_bad_array_common((n,), d),
        ("2-d", knots[:, None]),
        ("too-long", np.append(knots, knots[-1] + 1.0)),
        ("python-scalar", 0.5),
    ]
    if n >= 2:
        out += [("unsorted", knots[::-1].copy()), ("duplicate", np.r_[knots[:1], knots[:-1]])]
        out.append(("too-short", knots[:-1]))
    return out


def _bad_bm_values(d: Draw, ctx: dict) -> list:
    n = len(ctx["knots"])
    shape = np.shape(ctx["values"])
    return [
        *_bad_array_common(shape, d),
        ("too-many-rows", d.normal((n + 1, shape[1]))),
        ("python-scalar", 0.5),
    ]


def _bad_bm_points(d: Draw, ctx: dict) -> list:
    return [
        ("nan", np.array([0.1, math.nan])),
        ("inf", np.array([math.inf])),
        ("2-d", np.zeros((2, 2))),
        ("str", "abc"),
        ("str-array", np.array(["a"])),
        ("complex", np.array([0.1 + 1j])),
        ("object-array", np.array([object()], dtype=object)),
    ]


def _check_block_medians(out, kw: dict) -> str | None:
    """Shape, finiteness, and the docstring's exactness: values affine in the knots are
    reproduced (a line through the block medians) wherever there are two or more blocks."""
    knots, values, size = np.asarray(kw["knots"]), np.asarray(kw["values"]), int(kw["size"])
    points = _given(kw, "points", None)
    at = knots if points is None else np.asarray(points, dtype=np.float64)
    if not isinstance(out, np.ndarray) or out.shape != (at.size, values.shape[1]):
        return f"returned {short(out)}, expected shape ({at.size}, {values.shape[1]})"
    if not np.all(np.isfinite(out)):
        return "returned NaN or inf"
    if knots.size >= 2 * size:
        slope, level = np.linspace(1.5, -0.5, values.shape[1])[None, :], 0.25
        affine = level + knots[:, None] * slope
        got = ROBUST.block_medians(knots, affine, size, points)
        err, tol = _off_by(got, level + at[:, None] * slope)
        if not err <= tol:
            return f"affine values are not reproduced: off by {err:.3g}"
    return None


def _rm_knots_valid(d: Draw, ctx: dict):
    return distinct_points(d, d.int(1, 12))


def _bad_rm_knots(d: Draw, ctx: dict) -> list:
    knots = np.asarray(ctx["knots"])
    out = [
        *_bad_array_common(knots.shape, d),
        ("2-d", knots[:, None]),
        ("too-long", np.append(knots, 9.0)),
        ("python-scalar", 0.5),
    ]
    if knots.size >= 2:
        out.append(("duplicate", np.r_[knots[:1], knots[:-1]]))
    return out


def _check_repeated_median(out, kw: dict) -> str | None:
    """Shape and finiteness; values affine in the knots come back exactly, also with up to
    ``n / 2 - 1`` of them replaced by anything (its docstring)."""
    knots, values = np.asarray(kw["knots"]), np.asarray(kw["values"])
    if not isinstance(out, np.ndarray) or out.shape != values.shape or not np.all(np.isfinite(out)):
        return f"returned {short(out)}, expected a finite array of shape {values.shape}"
    n, d = values.shape
    affine = 0.25 + knots[:, None] * np.linspace(1.5, -0.5, d)[None, :]
    corrupted = affine.copy()
    rows = np.arange(1, n, 2)[: max((n - 2) // 2, 0)]  # at most n / 2 - 1 of them, spread out
    corrupted[rows] = 1e6
    err, tol = _off_by(ROBUST.repeated_median_line(knots, corrupted), affine)
    if not err <= tol:
        return f"affine values with {rows.size} replaced came back {err:.3g} off"
    return None


# -- attacks and the adversarial fault model ---------------------------------------------------

ADV = cc.adversaries
ATTACK_CLASSES = {
    "Random": ADV.Random,
    "Concentrated": ADV.Concentrated,
    "Greedy": ADV.Greedy,
    "SignFlip": ADV.SignFlip,
    "Garbage": ADV.Garbage,
}


def _attack_bound_valid(bounded: bool):
    def gen(d: Draw, ctx: dict):
        value = real_like(d, d.pick((1.0, 100.0, d.uniform(0.2, 20.0))))
        return value if bounded else d.pick((OMIT, None, value))

    return gen


def _attack_params(cls) -> tuple[Param, ...]:
    params = [
        Param(
            "num_adversaries",
            lambda d, ctx: int_like(d, d.pick((0, 1, 1, 2, 3, 5, 20))),
            bad_count(0, name="num_adversaries"),
        ),
        Param(
            "bound",
            _attack_bound_valid(cls.bounded),
            bad_real(lo=0.0, lo_open=True, typical=10.0, none_ok=not cls.bounded),
        ),
    ]
    if cls is ADV.Concentrated:
        params.append(
            Param(
                "at",
                lambda d, ctx: omit_or(d, 0.5, lambda: real_like(d, d.uniform(-1.0, 1.0))),
                bad_real(lo=-1.0, hi=1.0, hi_open=False, typical=0.0),
            )
        )
    return tuple(params)


def _check_attack(cls):
    def check(out, kw: dict) -> str | None:
        if not isinstance(out, cls):
            return f"returned {type(out).__name__}"
        bound = _given(kw, "bound", None)
        if out.num_adversaries != int(kw["num_adversaries"]):
            return f"num_adversaries is {out.num_adversaries!r}"
        if (out.bound is None) != (bound is None) or (bound is not None and out.bound != float(bound)):
            return f"bound is {out.bound!r}, given {bound!r}"
        return None

    return check


class AttackSpec:
    """A valid attack of class ``name`` (or of a random class), drawn by its constructor's spec."""

    def __init__(self, d: Draw, name: str | None = None):
        self.name = name or d.pick(tuple(ATTACK_CLASSES))
        cls = ATTACK_CLASSES[self.name]
        ctx: dict = {}
        for p in _attack_params(cls):
            ctx[p.name] = p.valid(d, ctx)
        self.kwargs = {k: v for k, v in ctx.items() if v is not OMIT}
        self.obj = cls(**self.kwargs)

    def __repr__(self) -> str:
        return repr(self.obj)


_ATTACKED_KINDS = ("gcc", "bacc", "lcc", "robust", "approxifer", "uncoded")


def _attacked_code_valid(d: Draw, ctx: dict):
    return _quiet(lambda: draw_code(d, d.pick(_ATTACKED_KINDS)).obj)


def _bad_attacked_code(d: Draw, ctx: dict) -> list:
    return [
        ("none", None),
        ("str", "gcc"),
        ("class", cc.GCC),
        ("attack", ADV.SignFlip(1)),
        ("gradient-code", cc.gradient_coding.FractionalRepetition(4, 1)),
        ("dict", {"num_workers": 4}),
    ]


def _attack_alive_valid(d: Draw, ctx: dict):
    n = ctx["code"].num_workers
    return alive_like(d, d.sample(n, min(n, d.pick((0, 1, 1, 2, d.int(0, n), d.int(0, n), n)))))


def _attack_y_valid(d: Draw, ctx: dict):
    rows = len(_alive_list(ctx["alive"]))
    return array_like(d, d.normal((rows, *trailing_shape(d))))


def _attack_y_pool(name: str):
    def pool(d: Draw, ctx: dict) -> list:
        rows = len(_alive_list(ctx["alive"]))
        # an attack corrupts finite results: NaN or inf in Y is refused (its docstring)
        pool = bad_batch(lambda ctx: rows, name, nan_ok=rows == 0)(d, ctx)
        # with no rows, an empty list or array of strings or objects is still no results
        degenerate = ("list-of-str", "object-array", "object-numbers", "str-array", "numeric-str-array")
        return [e for e in pool if "empty" not in e[0] and not (rows == 0 and e[0] in degenerate)]

    return pool


def _eps_of(x) -> float:
    if _is_tensor(x):
        return float(torch.finfo(x.dtype).eps) if x.is_floating_point() else 1e-15
    x = np.asarray(x)
    return float(np.finfo(x.dtype).eps) if x.dtype.kind == "f" else 1e-15


def _check_corruption(attack, kw: dict, out, y_name: str) -> str | None:
    """A Corruption of ``kw[y_name]``: same kind and shape; ``min(q, len(alive))`` corrupted
    workers, sorted, among ``alive``; the others' results untouched; what each attack reports
    (its class docstring); the same result again from the same seed."""
    Y, alive = kw[y_name], _alive_list(kw["alive"])
    q = min(attack.num_adversaries, len(alive))
    if not isinstance(out, ADV.Corruption):
        return f"returned {type(out).__name__}, not a Corruption"
    res = out.results
    if _is_tensor(Y) != _is_tensor(res):
        return f"results are a {type(res).__name__} for a {type(Y).__name__} {y_name}"
    if tuple(_shape(res)) != tuple(_shape(Y)):
        return f"results of shape {_shape(res)}, {y_name} of {_shape(Y)}"
    if isinstance(Y, np.ndarray) and Y.dtype.kind == "f" and res.dtype != Y.dtype:
        return f"results of dtype {res.dtype}, {y_name} of {Y.dtype}"
    workers = np.asarray(out.workers)
    if (
        workers.ndim != 1
        or workers.size != q
        or (workers.size and not np.issubdtype(workers.dtype, np.integer))
        or np.any(np.diff(workers) <= 0)
        or not set(workers.tolist()) <= set(alive)
    ):
        return f"workers {short(workers.tolist())}: not {q} sorted workers of alive"
    rows = [alive.index(w) for w in workers.tolist()]
    honest = [i for i in range(len(alive)) if i not in rows]
    before = _rows_2d(_as_numpy(Y))
    after = _rows_2d(_as_numpy(res))
    if not np.array_equal(before[honest], after[honest]):
        return "an honest worker's result was changed"
    hit = after[rows]
    slack = 4 * _eps_of(res)
    if attack.bounded and np.any(np.abs(hit) > attack.bound * (1 + slack)):
        return f"a corrupted value {np.max(np.abs(hit)):.4g} exceeds bound {attack.bound:g}"
    if attack.name in ("random", "concentrated") and np.any(
        np.abs(hit - attack.bound) > attack.bound * slack
    ):
        return f"corrupted results are not +bound = {attack.bound:g}"
    if attack.name == "concentrated" and q:
        beta = np.asarray(kw["code"].beta)[alive]
        by_point = np.argsort(beta, kind="stable")
        places = np.sort(np.flatnonzero(np.isin(by_point, rows)))
        if places[-1] - places[0] + 1 != q:
            return f"the corrupted workers {workers.tolist()} are not consecutive along beta"
    if attack.name == "sign-flip" and not np.allclose(hit, -before[rows], rtol=slack, atol=0.0):
        return "sign-flipped results are not -y"
    if attack.name == "garbage":
        for row in hit:
            if not (np.any(np.isnan(row)) or np.all(np.abs(row) >= 1e10)):
                return f"a garbage row {short(row.tolist())} is neither huge nor NaN"
    rng = kw["rng"]
    if not isinstance(rng, np.random.Generator):
        again = attack.corrupt(kw["code"], Y, kw["alive"], rng=rng)
        if not np.array_equal(_as_numpy(again.results), _as_numpy(res), equal_nan=True):
            return "the same seed gave another corruption"
    return None


def _corrupt_params(context: Param, y_name: str) -> tuple[Param, ...]:
    return (
        context,
        Param("code", _attacked_code_valid, _bad_attacked_code),
        Param("alive", _attack_alive_valid, bad_alive(lambda ctx: ctx["code"].num_workers)),
        Param(y_name, _attack_y_valid, _attack_y_pool(y_name)),
        Param("rng", rng_valid, bad_rng),
    )


def _check_corrupt(out, kw: dict) -> str | None:
    return _check_corruption(kw["_attack"].obj, kw, out, "Y")


def _check_adversarial_corrupt(out, kw: dict) -> str | None:
    return _check_corruption(kw["_fault"].attack, kw, out, "results")


def _make_attack_bound_valid(d: Draw, ctx: dict):
    return _attack_bound_valid(ADV.ATTACKS[ctx["name"]].bounded)(d, ctx)


def _make_attack_bad_bound(d: Draw, ctx: dict) -> list:
    bounded = ADV.ATTACKS[ctx["name"]].bounded
    return bad_real(lo=0.0, lo_open=True, typical=10.0, none_ok=not bounded)(d, ctx)


def _check_make_attack(out, kw: dict) -> str | None:
    return _check_attack(ADV.ATTACKS[kw["name"]])(out, kw)


def _bad_attack_arg(d: Draw, ctx: dict) -> list:
    return [
        ("none", None),
        ("str", "greedy"),
        ("class", ADV.Greedy),
        ("fault-model", cc.faults.Fixed({})),
        ("dict", {"num_adversaries": 1}),
        ("code", cc.GCC(2, 4)),
    ]


def _check_adversarial(out, kw: dict) -> str | None:
    if not isinstance(out, cc.faults.Adversarial) or not isinstance(out, cc.faults.FaultModel):
        return f"returned {type(out).__name__}"
    if out.attack is not kw["attack"]:
        return "its attack is not the one given"
    sample = out.sample(16, np.random.default_rng(0))
    return None if sample == {} else f"sample(16) gave {sample!r}, expected {{}}"


class AdversarialSpec:
    def __init__(self, d: Draw):
        self.attack_spec = AttackSpec(d)
        self.attack = self.attack_spec.obj
        self.obj = cc.faults.Adversarial(self.attack)

    def __repr__(self) -> str:
        return f"Adversarial({self.attack_spec!r})"


def _fault_result_valid(d: Draw, ctx: dict):
    arr = d.normal((d.int(1, 5), *trailing_shape(d)))
    return array_like(d, arr)


def _bad_fault_result(d: Draw, ctx: dict) -> list:
    return [
        ("none", None),
        ("str", "abc"),
        ("dict", {"result": 1.0}),
        ("str-array", np.full((2, 2), "x")),
        ("object-array", np.array([object(), object()], dtype=object)),
        ("set", {1.0, 2.0}),
    ]


def _bad_fault_seed(d: Draw, ctx: dict) -> list:
    return [
        ("negative", -1),
        ("float", 1.5),
        ("float-integral", 2.0),
        ("str", "abc"),
        ("none", None),
        ("bool-true", True),
        ("nan", math.nan),
        ("list-negative", [-1]),
    ]


def _check_fault_corrupt(out, kw: dict) -> str | None:
    result, kind = kw["result"], kw["kind"]
    if _is_tensor(result) != _is_tensor(out) or not (_is_tensor(out) or isinstance(out, np.ndarray)):
        return f"returned a {type(out).__name__} for a {type(result).__name__}"
    if tuple(_shape(out)) != tuple(_shape(result)):
        return f"returned shape {_shape(out)} for {_shape(result)}"
    if isinstance(result, np.ndarray) and result.dtype.kind == "f" and out.dtype != result.dtype:
        return f"returned dtype {out.dtype} for {result.dtype}"
    if _is_tensor(result) and out.dtype != result.dtype:
        return f"returned dtype {out.dtype} for {result.dtype}"
    values = _as_numpy(out)
    if kind == "nan" and not np.all(np.isnan(values)):
        return "kind 'nan' left a number"
    if kind == "garbage":
        if not np.all(np.isfinite(values)):
            return "garbage is not finite"
        again = _as_numpy(cc.faults.corrupt(result, kind, kw["seed"]))
        if not np.array_equal(again, values):
            return "the same seed gave other garbage"
    return None


# -- codedcomputing.codes.layout ---------------------------------------------------------------

LAYOUT = cc.codes.layout  # the checked math functions: not exported, fuzzed all the same


def _cloud(d: Draw, lo: int = 1, hi: int = 12, dims: int | None = None) -> np.ndarray:
    """``n`` random points in R^p (float64), at a random scale and offset."""
    p = dims if dims is not None else d.int(1, 3)
    points = d.normal((d.int(lo, hi), p)) * d.pick((1.0, 1.0, 0.01, 10.0))
    return points + d.pick((0.0, 0.0, 5.0))


def _distances_of(points: np.ndarray) -> np.ndarray:
    return np.sqrt(np.maximum(np.sum((points[:, None, :] - points[None, :, :]) ** 2, axis=-1), 0.0))


def _distances_valid(lo: int = 1, hi: int = 12):
    def gen(d: Draw, ctx: dict):
        return _distances_of(_cloud(d, lo, hi))

    return gen


def _bad_distances(name: str = "distances"):
    def pool(d: Draw, ctx: dict) -> list:
        D = np.asarray(ctx[name])
        n = D.shape[0]
        negative = D.copy()
        negative[0, -1] = negative[-1, 0] = -1.0
        out = [
            *_bad_array_common(D.shape, d),
            ("1-d", D[0].copy()),
            ("non-square", np.zeros((n, n + 1))),
            ("3-d", D[None]),
            ("python-scalar", 0.5),
            ("ragged-list", _ragged(n)),
        ]
        if n >= 2:
            out.append(("negative", negative))
        return out

    return pool


def _bad_array_of(name: str, *, extra: Callable[[Draw, dict], list] | None = None, ndim: int = 2):
    """Invalid values for an ``ndim``-dimensional real array parameter ``name``."""

    def pool(d: Draw, ctx: dict) -> list:
        value = np.asarray(ctx[name], dtype=np.float64)
        out = [*_bad_array_common(value.shape, d), ("python-scalar", 0.5)]
        out.append(("3-d", value.reshape(1, *value.shape)) if ndim == 2 else ("2-d", value[:, None]))
        if ndim == 2:
            out.append(("1-d", value[:, 0].copy() if value.shape[1] else np.zeros(value.shape[0])))
        if extra is not None:
            out += extra(d, ctx)
        return out

    return pool


def _check_pairwise(out, kw: dict) -> str | None:
    a = np.asarray(kw["a"], dtype=np.float64)
    b = _given(kw, "b", None)
    b = a if b is None else np.asarray(b, dtype=np.float64)
    expected = np.sqrt(np.sum((a[:, None, :] - b[None, :, :]) ** 2, axis=-1))
    if not isinstance(out, np.ndarray) or out.shape != expected.shape:
        return f"returned {short(out)}, expected shape {expected.shape}"
    if not np.all(np.isfinite(out)) or np.any(out < 0):
        return "returned NaN, inf or a negative distance"
    norm = max(float(np.max(np.abs(a), initial=0.0)), float(np.max(np.abs(b), initial=0.0)))
    err = float(np.max(np.abs(out - expected), initial=0.0))
    if err > 1e-6 * (1.0 + norm):
        return f"off the distances by {err:.3g}"
    return None


def _check_knn(out, kw: dict) -> str | None:
    """The symmetric k-nearest-neighbour graph, joined into one component; weights the distances."""
    D = np.asarray(kw["distances"])
    n = D.shape[0]
    k = min(int(kw["neighbours"]), n - 1)
    if not scipy.sparse.issparse(out) or out.shape != (n, n):
        return f"returned {short(out)}, expected a sparse ({n}, {n}) graph"
    dense = out.toarray()
    if not np.all(np.isfinite(dense)) or np.any(dense < 0) or not np.array_equal(dense, dense.T):
        return "weights are not finite, >= 0 and symmetric"
    edges = dense > 0
    if np.any(np.abs(dense[edges] - np.maximum(D[edges], 1e-300)) > 1e-12 * (1 + np.abs(D[edges]))):
        return "edge weights are not the distances"
    joined = _given(kw, "join", True)
    if joined and n and scipy.sparse.csgraph.connected_components(out, directed=False)[0] != 1:
        return "the graph is not connected"
    if n and np.min(np.count_nonzero(edges, axis=1)) < k:
        return f"a node has fewer than {k} neighbours"
    return None


def _centred_valid(d: Draw, ctx: dict):
    points = d.normal((d.int(1, 8), d.int(1, 6)))
    if d.coin(0.05):
        return np.zeros_like(points)
    return points - points.mean(axis=0)


def _check_axis(out, kw: dict) -> str | None:
    centred = np.asarray(kw["centred"], dtype=np.float64)
    if not isinstance(out, np.ndarray) or out.shape != (centred.shape[1],):
        return f"returned {short(out)}, expected shape ({centred.shape[1]},)"
    if not np.all(np.isfinite(out)) or abs(float(np.linalg.norm(out)) - 1.0) > 1e-9:
        return "not a finite unit vector"
    top = float(np.linalg.svd(centred, compute_uv=False)[0])
    got = float(np.linalg.norm(centred @ out))
    if abs(got - top) > 1e-6 * top + 1e-12:
        return f"|centred @ axis| = {got:.6g}, the top singular value is {top:.6g}"
    return None


def _order_valid(d: Draw, ctx: dict):
    n = np.shape(ctx["distances"])[0]
    order = d.sample(n, d.int(0, n))
    return d.pick((order, np.array(order, dtype=np.int64), np.array(order, dtype=np.intp)))


def _bad_order(d: Draw, ctx: dict) -> list:
    n = np.shape(ctx["distances"])[0]
    good = list(_alive_list(ctx["order"])) or [0]
    return [
        ("none", None),
        ("str", "0,1"),
        ("out-of-range", [*good[:-1], n]),
        ("negative", [-1, *good[1:]]),
        ("fraction", [good[0] + 0.5, *good[1:]]),
        ("nan", [math.nan, *good[1:]]),
        ("2-d", np.array(good)[None, :]),
        ("bools", [True] * len(good)),
        ("str-list", [str(g) for g in good]),
        ("object-array", np.array(good, dtype=object)),
    ]


def _check_path_length(out, kw: dict) -> str | None:
    D, order = np.asarray(kw["distances"]), _alive_list(kw["order"])
    expected = float(sum(D[a, b] for a, b in itertools.pairwise(order)))
    if not isinstance(out, float) or not math.isfinite(out) or abs(out - expected) > 1e-12 * (1 + expected):
        return f"returned {out!r}, the path is {expected!r} long"
    return None


def _is_permutation(out, n: int) -> bool:
    out = np.asarray(out)
    return (
        out.shape == (n,) and np.issubdtype(out.dtype, np.integer) and sorted(out.tolist()) == list(range(n))
    )


def _two_opt_gain(D: np.ndarray, order: np.ndarray) -> float:
    """The largest shortening of the open path ``order`` by reversing one stretch of it."""
    n, best = order.size, 0.0
    length = LAYOUT.path_length(D, order)
    for i in range(n):
        for j in range(i + 1, n):
            trial = np.r_[order[:i], order[i : j + 1][::-1], order[j + 1 :]]
            best = max(best, length - LAYOUT.path_length(D, trial))
    return best


def _check_chain(out, kw: dict) -> str | None:
    D = np.asarray(kw["distances"])
    n = D.shape[0]
    if not _is_permutation(out, n):
        return f"returned {short(out)}, not a permutation of 0..{n - 1}"
    if "max_passes" not in kw or kw["max_passes"] is OMIT:  # the 2-opt ran to its end
        gain = _two_opt_gain(D, np.asarray(out))
        length = LAYOUT.path_length(D, np.asarray(out))
        if gain > 1e-9 * max(length, 1e-300):
            return f"a reversal shortens the path by {gain:.3g} of {length:.3g}: 2-opt stopped early"
    return None


def _graph_of(d: Draw, points: np.ndarray):
    graph = LAYOUT.knn_graph(LAYOUT.pairwise_distances(points), d.int(1, 5))
    kind = d.pick(("csr_array", "csr_array", "csr_matrix", "coo_array"))
    if kind == "csr_matrix":
        return scipy.sparse.csr_matrix(graph)
    if kind == "coo_array":
        return scipy.sparse.coo_array(graph)
    return graph


def _graph_valid(d: Draw, ctx: dict):
    return _graph_of(d, _cloud(d, 3, 14))


def _bad_graph(d: Draw, ctx: dict) -> list:
    graph = scipy.sparse.csr_array(ctx["graph"])
    n = graph.shape[0]
    half = max(n // 2, 2)
    left = LAYOUT.knn_graph(LAYOUT.pairwise_distances(d.normal((half, 2))), 2)
    right = LAYOUT.knn_graph(LAYOUT.pairwise_distances(d.normal((n - half + 2, 2)) + 50.0), 2)
    negative, with_nan = graph.copy(), graph.copy()
    negative.data = -np.abs(negative.data)
    with_nan.data[0] = math.nan
    return [
        ("none", None),
        ("str", "knn"),
        ("dict", {"graph": 1}),
        ("non-square", scipy.sparse.csr_array(np.ones((n, n + 1)))),
        ("disconnected", scipy.sparse.block_diag([left, right], format="csr")),
        ("no-edges", scipy.sparse.csr_array((n, n))),
        ("negative-weights", negative),
        ("nan-weight", with_nan),
    ]


def _check_spectral_coordinate(out, kw: dict) -> str | None:
    n = kw["graph"].shape[0]
    if not isinstance(out, np.ndarray) or out.shape != (n,) or not np.all(np.isfinite(out)):
        return f"returned {short(out)}, expected a finite array of shape ({n},)"
    if n > 2 and (out[0] > 0 or np.ptp(out) == 0):
        return f"returned {short(out)}: its first entry is > 0 or it is constant"
    return None


def _embedding_dims_valid(rows_of: Callable[[dict], int]):
    def gen(d: Draw, ctx: dict):
        return int_like(d, d.int(1, max(1, rows_of(ctx) - 2)))

    return gen


def _bad_embedding_dims(rows_of: Callable[[dict], int]):
    return bad_count(
        1,
        name="dimensions",
        extra=lambda d, ctx: [("above-n-2", rows_of(ctx) - 1), ("above-n", rows_of(ctx) + 1)],
    )


def _check_embedding(rows_of: Callable[[dict], int]):
    def check(out, kw: dict) -> str | None:
        shape = (rows_of(kw), int(kw["dimensions"]))
        if not isinstance(out, np.ndarray) or out.shape != shape or not np.all(np.isfinite(out)):
            return f"returned {short(out)}, expected a finite array of shape {shape}"
        return None

    return check


def _check_spectral_embedding(out, kw: dict) -> str | None:
    problem = _check_embedding(lambda kw: kw["graph"].shape[0])(out, kw)
    if problem is None and np.any(out[0] > 0):
        return f"a column's first entry is > 0: {short(out[0].tolist())}"
    if problem is None and np.any(np.ptp(out, axis=0) == 0):
        return "a column is constant"
    return problem


def _mds_distances_valid(d: Draw, ctx: dict):
    return _distances_of(_cloud(d, 1, 10, dims=d.int(1, 3)))


def _check_mds(out, kw: dict) -> str | None:
    D = np.asarray(kw["distances"])
    n, m = D.shape[0], int(kw["dimensions"])
    if not isinstance(out, np.ndarray) or out.shape != (n, m) or not np.all(np.isfinite(out)):
        return f"returned {short(out)}, expected a finite array of shape ({n}, {m})"
    if n and np.any(out[0] > 0):
        return f"a column's first entry is > 0: {short(out[0].tolist())}"
    rank = np.linalg.matrix_rank(
        -0.5 * (D**2 - (D**2).mean(0) - (D**2).mean(1)[:, None] + (D**2).mean()), 1e-8
    )
    if m >= rank:  # Euclidean distances of points in R^p, p <= m: reproduced
        err = float(np.max(np.abs(_distances_of(out) - D), initial=0.0))
        if err > 1e-6 * (1.0 + float(np.max(D, initial=0.0))):
            return f"the embedding's distances are off by {err:.3g}"
    return None


def _hull_sites_valid(d: Draw, ctx: dict):
    m = d.int(1, 3)
    return d.normal((d.int(m + 1, 8), m)) * d.pick((1.0, 0.1, 5.0))


def _check_hull(out, kw: dict) -> str | None:
    sites = np.asarray(kw["sites"], dtype=np.float64)
    k, m = sites.shape
    count = int(kw["count"])
    if not isinstance(out, np.ndarray) or out.shape != (count, m) or not np.all(np.isfinite(out)):
        return f"returned {short(out)}, expected a finite array of shape ({count}, {m})"
    if np.unique(out, axis=0).shape[0] != count:
        return "returned repeated points"
    low, high = sites.min(axis=0), sites.max(axis=0)
    slack = 1e-9 * (1.0 + float(np.max(np.abs(sites))))
    if np.any(out < low - slack) or np.any(out > high + slack):
        return "a point lies outside the sites' bounding box"
    if _given(kw, "include", False) and k <= count:
        missing = [i for i, s in enumerate(sites) if not np.any(np.all(out == s, axis=1))]
        if missing:
            return f"include=True: sites {missing[:8]} are not among the points"
    again = LAYOUT.hull_design(
        sites, count, **{key: kw[key] for key in ("include", "candidates") if kw.get(key, OMIT) is not OMIT}
    )
    return None if np.array_equal(again, out) else "a second call gave other points"


def _positions_valid(d: Draw, ctx: dict):
    return np.sort(np.array([d.uniform(-1.2, 1.2) for _ in range(d.int(1, 5))]))


def _targets_valid(d: Draw, ctx: dict):
    k = len(ctx["positions"])
    return distinct_points(d, d.int(k, 10))


def _bad_positions(d: Draw, ctx: dict) -> list:
    positions = np.asarray(ctx["positions"])
    out = [*_bad_array_common(positions.shape, d), ("2-d", positions[:, None]), ("python-scalar", 0.5)]
    if positions.size >= 2:
        out.append(("unsorted", positions[::-1].copy()))
    targets = np.asarray(ctx["targets"])
    out.append(("more-than-targets", np.sort(np.r_[positions, np.linspace(2, 3, targets.size)])))
    return out


def _bad_targets(d: Draw, ctx: dict) -> list:
    targets = np.asarray(ctx["targets"])
    k = len(ctx["positions"])
    return [
        *_bad_array_common(targets.shape, d),
        ("2-d", targets[:, None]),
        ("fewer-than-positions", targets[: k - 1]),
        ("python-scalar", 0.5),
    ]


def _check_snap(out, kw: dict) -> str | None:
    positions, targets = np.asarray(kw["positions"]), np.sort(np.asarray(kw["targets"]))
    k = positions.size
    if not isinstance(out, np.ndarray) or out.shape != (k,):
        return f"returned {short(out)}, expected shape ({k},)"
    if np.any(np.diff(out) <= 0) or not np.all(np.isin(out, targets)):
        return f"returned {short(out.tolist())}: not increasing distinct targets"
    cost = float(np.sum(np.abs(out - positions)))
    best = min(
        float(np.sum(np.abs(targets[list(c)] - positions)))
        for c in itertools.combinations(range(targets.size), k)
    )
    if cost > best * (1 + 1e-12) + 1e-15:
        return f"total displacement {cost:.6g}, the least is {best:.6g}"
    return None


def _arc_points_valid(d: Draw, ctx: dict):
    return distinct_points(d, d.int(1, 8))


def _gaps_valid(d: Draw, ctx: dict):
    k = len(ctx["points"])
    gaps = np.abs(d.normal(k - 1)) * d.pick((1.0, 1e-6, 100.0))
    if k > 1 and d.coin(0.2):
        gaps[d.int(0, k - 2)] = 0.0
    if d.coin(0.05):
        gaps[:] = 0.0
    return gaps


def _bad_gaps(d: Draw, ctx: dict) -> list:
    gaps = np.asarray(ctx["gaps"])
    out = [
        *_bad_array_common((max(gaps.size, 1),), d),
        ("2-d", gaps[:, None]),
        ("too-long", np.r_[gaps, 1.0]),
    ]
    if gaps.size:
        negative = gaps.copy()
        negative[0] = -1.0
        out += [("negative", negative), ("too-short", gaps[:-1])]
    return out


def _check_arc(out, kw: dict) -> str | None:
    points = np.sort(np.asarray(kw["points"], dtype=np.float64))
    k = points.size
    if not isinstance(out, np.ndarray) or out.shape != (k,) or not np.all(np.isfinite(out)):
        return f"returned {short(out)}, expected a finite array of shape ({k},)"
    if np.any(np.diff(out) <= 0):
        return f"positions {short(out.tolist())} are not distinct and increasing"
    if out[0] != points[0] or out[-1] != points[-1]:
        return (
            f"positions run from {out[0]!r} to {out[-1]!r}, the points from {points[0]!r} to {points[-1]!r}"
        )
    equal = LAYOUT.arc_positions(np.ones(k - 1), points)
    if not np.allclose(equal, points, rtol=0, atol=1e-12 * (1 + float(np.max(np.abs(points))))):
        return "equal gaps do not give back the points"
    return None


class ReferenceSpec:
    """A valid Reference: samples (M, d) near the origin and a neighbour count."""

    def __init__(self, d: Draw):
        self.samples = d.normal((d.int(4, 20), d.int(1, 3)))
        self.neighbours = d.int(1, 8)
        self.obj = LAYOUT.Reference(self.samples, self.neighbours)

    def __repr__(self) -> str:
        return f"Reference(samples {self.samples.shape}, neighbours={self.neighbours})"


def _reference_param() -> Param:
    return Param("_reference", lambda d, ctx: ReferenceSpec(d), hidden=True)


def _ref_inputs_valid(d: Draw, ctx: dict):
    width = ctx["_reference"].samples.shape[1]
    inputs = d.normal((d.int(1, 8), width))
    if d.coin(0.2):  # far from the reference (ManifoldGCC's batches may be)
        inputs = inputs + d.pick((40.0, -500.0))
    return inputs


def _bad_ref_inputs(d: Draw, ctx: dict) -> list:
    inputs = np.asarray(ctx["inputs"])
    k, width = inputs.shape
    return [
        *_bad_array_common(inputs.shape, d),
        ("other-width", d.normal((k, width + 1))),
        ("1-d", inputs[:, 0].copy()),
        ("3-d", inputs[None]),
        ("python-scalar", 0.5),
    ]


def _ref_rows(ctx: dict) -> int:
    return ctx["_reference"].samples.shape[0]


def _check_consecutive(out, kw: dict) -> str | None:
    points = np.asarray(kw["points"], dtype=np.float64)
    expected = np.sqrt(np.sum(np.diff(points, axis=0) ** 2, axis=1))
    if not isinstance(out, np.ndarray) or out.shape != expected.shape or not np.all(np.isfinite(out)):
        return f"returned {short(out)}, expected a finite array of shape {expected.shape}"
    err = float(np.max(np.abs(out - expected), initial=0.0))
    return None if err <= 1e-12 * (1 + float(np.max(expected, initial=0.0))) else f"off by {err:.3g}"


def _clusters(d: Draw) -> np.ndarray:
    """Points in one to three clusters far apart (so a k-nearest-neighbour graph falls apart)."""
    return np.concatenate([d.normal((d.int(1, 5), 2)) + 40.0 * c for c in range(d.int(1, 3))])


def _unjoined_graph_valid(d: Draw, ctx: dict):
    return LAYOUT.knn_graph(_distances_of(ctx["_points"]), d.int(1, 3), join=False)


def _bad_graph_to_join(d: Draw, ctx: dict) -> list:
    n = ctx["graph"].shape[0]
    with_nan = scipy.sparse.csr_array(ctx["graph"]).copy()
    if with_nan.nnz:
        with_nan.data[0] = math.nan
    return [
        ("none", None),
        ("str", "graph"),
        ("dense-str", np.full((n, n), "x")),
        ("non-square", scipy.sparse.csr_array((n, n + 1))),
        ("other-size", scipy.sparse.csr_array((n + 1, n + 1))),
        *([("nan-weight", with_nan)] if with_nan.nnz else []),
    ]


def _bad_join_distances(d: Draw, ctx: dict) -> list:
    """Malformed distances; non-finite ones only where the docstring says they are refused
    (no component with a finite link out)."""
    D = np.asarray(ctx["distances"])
    n = D.shape[0]
    out = [e for e in _bad_distances()(d, ctx) if e[0] not in ("nan", "inf")]
    out.append(("other-size", np.zeros((n + 1, n + 1))))
    if scipy.sparse.csgraph.connected_components(ctx["graph"], directed=False)[0] > 1:
        out.append(("all-infinite", np.where(np.eye(n) > 0, 0.0, math.inf)))
    return out


def _check_join(out, kw: dict) -> str | None:
    graph, D = scipy.sparse.csr_array(kw["graph"]), np.asarray(kw["distances"])
    n = D.shape[0]
    if not (isinstance(out, tuple) and len(out) == 2 and scipy.sparse.issparse(out[0])):
        return f"returned {short(out)}, expected (graph, components)"
    joined, components = out
    before = scipy.sparse.csgraph.connected_components(graph, directed=False)[0]
    if components != before:
        return f"components {components!r}, the graph had {before}"
    if n and scipy.sparse.csgraph.connected_components(joined, directed=False)[0] != 1:
        return "the joined graph is not connected"
    dense, given = joined.toarray(), graph.toarray()
    if np.any(dense < given) or not np.array_equal(dense, dense.T):
        return "the joined graph lost an edge or is not symmetric"
    added = (dense > 0) & (given == 0)
    if np.any(np.abs(dense[added] - np.maximum(D[added], 1e-300)) > 1e-12 * (1 + np.abs(D[added]))):
        return "an added link's weight is not its distance"
    if int(np.count_nonzero(added)) != 2 * (before - 1):
        return f"{int(np.count_nonzero(added)) // 2} links added to join {before} components"
    return None


def _bad_size(d: Draw, ctx: dict) -> list:
    """check_size's documented refusal: more points than the limit (its message names
    ``name``: drawn as "count" along with it)."""
    limit = getattr(LAYOUT, "MAX_POINTS", 10_000)
    return [("above-limit", limit + 1, {"name": "count"}), ("huge-2**63", 2**63, {"name": "count"})]


def _check_geodesics(out, kw: dict) -> str | None:
    if not (isinstance(out, tuple) and len(out) == 2):
        return f"returned {short(out)}, expected (distances, components)"
    components = out[1]
    if not isinstance(components, (int, np.integer)) or components < 1:
        return f"components is {components!r}"
    return _check_geodesic(out[0], kw)


def _check_geodesic(out, kw: dict) -> str | None:
    inputs = np.asarray(kw["inputs"], dtype=np.float64)
    k = inputs.shape[0]
    if not isinstance(out, np.ndarray) or out.shape != (k, k):
        return f"returned {short(out)}, expected shape ({k}, {k})"
    if not np.all(np.isfinite(out)):
        return f"returned infinite distances ({int(np.sum(~np.isfinite(out)))} of {k * k})"
    scale = 1e-9 * (1.0 + float(np.max(out, initial=0.0)))
    if np.any(np.abs(np.diag(out)) > scale) or np.any(np.abs(out - out.T) > scale):
        return "not symmetric with a zero diagonal"
    if np.any(out < _distances_of(inputs) - scale):
        return "a geodesic distance is shorter than the straight line"
    return None


def _check_coordinate_of(out, kw: dict) -> str | None:
    k = np.shape(kw["inputs"])[0]
    if not isinstance(out, np.ndarray) or out.shape != (k,) or not np.all(np.isfinite(out)):
        return f"returned {short(out)}, expected a finite array of shape ({k},)"
    return None


def _check_reference(out, kw: dict) -> str | None:
    samples = np.asarray(kw["samples"], dtype=np.float64)
    flat = samples.reshape(samples.shape[0], -1)
    if not isinstance(out, LAYOUT.Reference):
        return f"returned {type(out).__name__}"
    if not np.array_equal(out.points, flat):
        return "its points are not the samples, flattened"
    graph = out.graph
    if (
        graph.shape != (flat.shape[0],) * 2
        or scipy.sparse.csgraph.connected_components(graph, directed=False)[0] != 1
    ):
        return "its graph is not one connected component over the samples"
    return None


def _ref_samples_valid(d: Draw, ctx: dict):
    return d.normal((d.int(2, 20), *trailing_shape(d)))


def _bad_ref_samples(d: Draw, ctx: dict) -> list:
    shape = np.shape(ctx["samples"])
    return [
        *_bad_array_common(shape, d),
        ("one-sample", d.normal((1, *shape[1:]))),
        ("empty", np.zeros((0, *shape[1:]))),
        ("python-scalar", 1.5),
        ("0-d-array", np.array(1.5)),
        ("ragged-list", _ragged(shape[0])),
    ]


# -- codedcomputing.gradient_coding ----------------------------------------------------------

GC = cc.gradient_coding


def _divisors(n: int) -> list[int]:
    return [v for v in range(1, n + 1) if n % v == 0]


def _fr_stragglers_valid(d: Draw, ctx: dict):
    return int_like(d, d.pick(_divisors(int(ctx["num_workers"]))) - 1)


def _bad_fr_workers(d: Draw, ctx: dict) -> list:
    s = int(ctx["num_stragglers"])
    out = [("huge-10**6", 10**6, {"num_stragglers": 0})]  # B alone would be 8 TB
    if s >= 1:
        out.append(("not-a-multiple", int(ctx["num_workers"]) + 1))
    return out


def _bad_gc_stragglers(*, fr: bool):
    def extra(d: Draw, ctx: dict) -> list:
        n = int(ctx["num_workers"])
        out = [("equal-num_workers", n), ("above-num_workers", n + 2)]
        if fr:
            off = [s for s in range(1, n) if n % (s + 1)]
            if off:
                out.append(("not-dividing", d.pick(off)))
        return out

    return bad_count(0, name="num_stragglers", extra=extra)


def _check_fr(out, kw: dict) -> str | None:
    n, s = int(kw["num_workers"]), int(kw["num_stragglers"])
    if not isinstance(out, GC.FractionalRepetition):
        return f"returned {type(out).__name__}"
    if (out.num_workers, out.num_stragglers, out.group_size, out.num_groups) != (n, s, s + 1, n // (s + 1)):
        found = (out.num_workers, out.num_stragglers, out.group_size, out.num_groups)
        return f"has (n, s, group size, groups) = {found}"
    groups = np.arange(n) // (s + 1)
    if not np.array_equal(out.encoding_matrix, (groups[:, None] == groups[None, :]).astype(float)):
        return "B is not block-diagonal with blocks of ones"
    return _gradient_code_problem(out)


def _gradient_code_problem(code, seed: int = 0) -> str | None:
    """Any ``n - s`` workers, in any order: ``a^T B_F = 1^T`` (the codes' promise)."""
    rng = np.random.default_rng(seed)
    n, s = code.num_workers, code.num_stragglers
    for _ in range(3):
        alive = rng.permutation(n)[: n - s]
        a = code.decoding_weights(alive)
        err = float(np.max(np.abs(a @ code.encoding_matrix[alive] - 1.0)))
        if not err <= 1e-6:
            return f"a^T B_F is {err:.3g} off 1 for F = {alive.tolist()}"
    return None


def _cr_workers_valid(d: Draw, ctx: dict):
    if d.coin(0.15):  # a realistic size, with the default options: still quick to build
        return int_like(d, d.pick((300, 400)))
    return int_like(d, d.int(1, 12))


def _cr_stragglers_valid(d: Draw, ctx: dict):
    n = int(ctx["num_workers"])
    if n > 12:
        return int_like(d, d.int(0, 2))
    return int_like(d, d.int(0, n - 1))


def _cr_option(make: Callable[[Draw], Any]):
    """A CyclicRepetition option, left at its default for the realistic sizes."""
    return lambda d, ctx: OMIT if int(ctx["num_workers"]) > 12 else omit_or(d, 0.7, lambda: make(d))


def _code_seed_valid(d: Draw, ctx: dict):
    return omit_or(d, 0.5, lambda: int_like(d, d.int(0, 1000)))


def _bad_code_seed(d: Draw, ctx: dict) -> list:
    return [
        ("negative", -1),
        ("float", 1.5),
        ("float-integral", 2.0),
        ("str", "0"),
        ("none", None),
        ("bool-true", True),
        ("list", [0]),
        ("nan", math.nan),
    ]


def _default_is_none(fn, name: str) -> bool:
    """Whether ``fn``'s parameter ``name`` defaults to None (then None is a valid value)."""
    return inspect.signature(fn).parameters[name].default is None


def _cr_refused(case: Case, err: BaseException) -> bool:
    """CyclicRepetition's documented refusal: every draw is worse than max_condition."""
    return type(err) is ValueError and _names(str(err), ("max_condition",))


def _check_cr(out, kw: dict) -> str | None:
    n, s = int(kw["num_workers"]), int(kw["num_stragglers"])
    if not isinstance(out, GC.CyclicRepetition):
        return f"returned {type(out).__name__}"
    if (out.num_workers, out.num_stragglers) != (n, s):
        return f"has (n, s) = ({out.num_workers}, {out.num_stragglers})"
    B = out.encoding_matrix
    if B.shape != (n, n) or not np.all(np.isfinite(B)) or not np.all(np.diag(B) == 1.0):
        return "B is not finite (n, n) with a unit diagonal"
    for i in range(n):
        if set(np.flatnonzero(B[i]).tolist()) - set(out.partitions(i).tolist()):
            return f"worker {i} has coefficients outside its partitions"
    limit = float(_given(kw, "max_condition", 1e10))
    if not out.condition_number <= limit:
        return f"condition_number {out.condition_number:.3g} above max_condition {limit:g}"
    return _gradient_code_problem(out)


class GradientCodeSpec:
    """A valid FR or CR code, drawn by its constructor's spec (small sizes only)."""

    def __init__(self, d: Draw, kind: str):
        self.kind = kind
        n = d.int(1, 10)
        if kind == "fr":
            self.kwargs = {"num_workers": n, "num_stragglers": d.pick(_divisors(n)) - 1}
            self.obj = GC.FractionalRepetition(**self.kwargs)
        else:
            self.kwargs = {"num_workers": n, "num_stragglers": d.int(0, n - 1), "seed": d.int(0, 50)}
            self.obj = GC.CyclicRepetition(**self.kwargs)

    def __repr__(self) -> str:
        return repr(self.obj) if self.kind == "fr" else f"CyclicRepetition({self.kwargs})"


def _gc_param(kind: str) -> Param:
    return Param("_code", lambda d, ctx: GradientCodeSpec(d, kind), hidden=True)


def _gc_alive_valid(d: Draw, ctx: dict):
    code = _code(ctx)
    n, s = code.num_workers, code.num_stragglers
    if ctx["_code"].kind == "fr":  # a member of every group, then any others
        size = s + 1
        chosen = {g * size + d.int(0, s) for g in range(n // size)}
        extras = [w for w in range(n) if w not in chosen]
        chosen |= set(d.rnd.sample(extras, d.int(0, len(extras))))
        alive = list(chosen)
        d.rnd.shuffle(alive)
    else:
        alive = d.sample(n, d.int(n - s, n))
    return alive_like(d, alive)


def _check_weights(out, kw: dict) -> str | None:
    code, alive = _code(kw), _alive_list(kw["alive"])
    if not isinstance(out, np.ndarray) or out.shape != (len(alive),) or not np.all(np.isfinite(out)):
        return f"returned {short(out)}, expected {len(alive)} finite weights"
    err = float(np.max(np.abs(out @ code.encoding_matrix[alive] - 1.0), initial=0.0))
    if not err <= 1e-6:
        return f"a^T B_alive is {err:.3g} off 1^T"
    if kw["_code"].kind == "fr":
        seen, expected = set(), []
        for w in alive:
            expected.append(0.0 if code.group(w) in seen else 1.0)
            seen.add(code.group(w))
        if out.tolist() != expected:
            return f"weights {out.tolist()}, expected the first of each group {expected}"
    elif np.any(out[code.num_workers - code.num_stragglers :] != 0):
        return "a worker beyond the first n - s has a weight"
    return None


def _gradients_valid(d: Draw, ctx: dict):
    return d.normal((_code(ctx).num_workers, *trailing_shape(d)))


def _messages_valid(d: Draw, ctx: dict):
    code, alive, G = _code(ctx), _alive_list(ctx["alive"]), ctx["_gradients"]
    messages = (code.encoding_matrix[alive] @ G.reshape(G.shape[0], -1)).reshape(len(alive), *G.shape[1:])
    return d.pick((messages, messages, messages.tolist()))


def _check_gc_decode(out, kw: dict) -> str | None:
    G = kw["_gradients"]
    truth = G.sum(axis=0)
    if not isinstance(out, np.ndarray) or out.shape != truth.shape:
        return f"returned {short(out)}, expected shape {truth.shape}"
    err = float(np.max(np.abs(out - truth), initial=0.0))
    if not err <= 1e-6 * max(1.0, float(np.max(np.abs(truth), initial=0.0))):
        return f"decoded sum_j g_j {err:.3g} off"
    return None


def _worker_valid(d: Draw, ctx: dict):
    return int_like(d, d.int(0, _code(ctx).num_workers - 1))


def _bad_worker(d: Draw, ctx: dict) -> list:
    n = _code(ctx).num_workers
    return [("equal-num_workers", n), ("above-num_workers", n + 5)]


def _check_partitions(out, kw: dict) -> str | None:
    code, w = _code(kw), int(kw["worker"])
    n, s = code.num_workers, code.num_stragglers
    if kw["_code"].kind == "fr":
        expected = np.arange(w // (s + 1) * (s + 1), (w // (s + 1) + 1) * (s + 1))
    else:
        expected = (w + np.arange(s + 1)) % n
    if not isinstance(out, np.ndarray) or out.tolist() != expected.tolist():
        return f"returned {short(out)}, expected {expected.tolist()}"
    return None


def _check_group(out, kw: dict) -> str | None:
    code, w = _code(kw), int(kw["worker"])
    expected = w // (code.num_stragglers + 1)
    return None if isinstance(out, int) and out == expected else f"returned {out!r}, expected {expected}"


# Problems: least squares (numpy callables) and small torch modules.


class LeastSquares:
    """Partition ``i``: rows ``4i .. 4i + 3`` of ``A x = b`` (``p`` unknowns); the loss is the mean
    squared residual over all rows. Deterministic from ``seed``."""

    def __init__(self, num_partitions: int, p: int, seed: int):
        rng = np.random.default_rng(seed)
        self.n, self.p, self.seed = num_partitions, p, seed
        self.A = rng.normal(size=(4 * num_partitions, p)) / 2
        self.b = rng.normal(size=4 * num_partitions)

    def gradient(self, x, i):
        a, y = self.A[4 * i : 4 * i + 4], self.b[4 * i : 4 * i + 4]
        return 2 * a.T @ (a @ x - y) / 4

    def loss(self, x):
        return float(np.mean((self.A @ x - self.b) ** 2))

    def problem(self):
        return _described(
            GC.Problem(self.gradient, self.loss, np.zeros(self.p), self.n), f"{self!r}.problem()"
        )

    def __repr__(self) -> str:
        return f"LeastSquares(n={self.n}, p={self.p}, seed={self.seed})"


def _torch_module(d: Draw, in_shape: tuple, classes: int, *, nan: bool = False):
    torch.manual_seed(d.int(0, 10**6))
    width = int(np.prod(in_shape))
    if len(in_shape) == 1:
        module, text = torch.nn.Linear(width, classes), f"Linear({width}, {classes})"
    else:
        module = torch.nn.Sequential(torch.nn.Flatten(), torch.nn.Linear(width, classes))
        text = f"Sequential(Flatten(), Linear({width}, {classes}))"
    if nan:
        with torch.no_grad():
            next(module.parameters()).view(-1)[0] = math.nan
        text += " with a NaN weight"
    return _described(module, text)


class ProblemSpec:
    """A valid Problem: least squares, or a torch module on a tiny labelled dataset."""

    def __init__(self, d: Draw, *, torch_ok: bool = True):
        n = d.int(1, 6)
        if torch is None or not torch_ok or d.coin(0.6):
            self.source = LeastSquares(n, d.int(1, 4), d.int(0, 1000))
            self.obj = self.source.problem()
            return
        in_shape, classes = d.pick(((d.int(1, 4),), (2, 2))), d.int(2, 4)
        module = _torch_module(d, in_shape, classes)
        rows = d.int(n, 3 * n + 2)
        inputs = d.normal((rows, *in_shape)).astype(np.float32)
        labels = np.array([d.int(0, classes - 1) for _ in range(rows)])
        self.source = None
        self.obj = _described(
            GC.Problem.from_torch(module, inputs, labels, n, seed=d.int(0, 100)),
            f"Problem.from_torch({_short(module, 0)}, {rows} examples, {n} partitions)",
        )

    def __repr__(self) -> str:
        return _short(self.obj, 0)


def _ls_param() -> Param:
    return Param("_ls", lambda d, ctx: LeastSquares(d.int(1, 6), d.int(1, 4), d.int(0, 1000)), hidden=True)


def _initial_valid(d: Draw, ctx: dict):
    x = d.normal(ctx["_ls"].p) * 0.1
    return d.pick((x, x, x.tolist(), x.astype(np.float32), np.zeros(ctx["_ls"].p, dtype=np.int64)))


def _bad_callable(name: str):
    def pool(d: Draw, ctx: dict) -> list:
        return [("none", None), ("str", name), ("int", 3), ("list", [ctx[name]]), ("dict", {name: 1})]

    return pool


def _bad_initial(d: Draw, ctx: dict) -> list:
    p = ctx["_ls"].p
    return [
        *_bad_array_common((p,), d),
        ("2-d", d.normal((p, 2))),
        ("0-d-array", np.array(0.5)),
        ("python-scalar", 0.5),
        ("ragged-list", [[0.5], [0.5, 0.5]]),
    ]


def _check_problem(out, kw: dict) -> str | None:
    if not isinstance(out, GC.Problem):
        return f"returned {type(out).__name__}"
    initial = np.asarray(kw["initial"], dtype=np.float64)
    if out.num_partitions != int(kw["num_partitions"]):
        return f"num_partitions is {out.num_partitions!r}"
    if (
        not isinstance(out.initial, np.ndarray)
        or out.initial.dtype != np.float64
        or not np.array_equal(out.initial, initial)
    ):
        return f"initial is {short(out.initial)}, not the float64 vector given"
    if out.gradient is not kw["gradient"] or out.loss is not kw["loss"]:
        return "gradient or loss is not the callable given"
    return None


def _module_valid(d: Draw, ctx: dict):
    in_shape = d.pick(((d.int(1, 4),), (d.int(1, 4),), (2, 2)))
    return _torch_module(d, in_shape, d.int(2, 4))


def _module_shape(module) -> tuple[tuple, int]:
    linear = module if isinstance(module, torch.nn.Linear) else module[-1]
    in_shape = (linear.in_features,) if isinstance(module, torch.nn.Linear) else (2, 2)
    return in_shape, linear.out_features


def _torch_inputs_valid(d: Draw, ctx: dict):
    in_shape, _ = _module_shape(ctx["module"])
    n = int(ctx["num_partitions"])
    x = d.normal((d.int(n, 3 * n + 2), *in_shape))
    return d.pick((x, x.astype(np.float32)))


def _torch_labels_valid(d: Draw, ctx: dict):
    _, classes = _module_shape(ctx["module"])
    labels = [d.int(0, classes - 1) for _ in range(len(ctx["inputs"]))]
    return d.pick((np.array(labels), labels, np.array(labels, dtype=np.int32)))


def _bad_module(d: Draw, ctx: dict) -> list:
    in_shape, classes = _module_shape(ctx["module"])
    wider = (in_shape[0] + 1,) if len(in_shape) == 1 else (5,)
    return [
        ("none", None),
        ("str", "linear"),
        ("class", torch.nn.Linear),
        ("function", _affine),
        ("nan-parameter", _torch_module(d, in_shape, classes, nan=True)),
        ("no-parameters", _described(torch.nn.Flatten(), "Flatten()")),
        ("other-input-width", _torch_module(d, wider, classes), {"inputs": ctx["inputs"]}),
    ]


def _bad_torch_inputs(d: Draw, ctx: dict) -> list:
    x = np.asarray(ctx["inputs"], dtype=np.float64)
    rows = x.shape[0]
    return [
        *_bad_array_common(x.shape, d),
        ("other-length", d.normal((rows + 1, *x.shape[1:])), {"labels": ctx["labels"]}),
        ("other-width", d.normal((rows, x.shape[1] + 1, *x.shape[2:])), {"module": ctx["module"]}),
        ("empty", np.zeros((0, *x.shape[1:]))),
        ("python-scalar", 1.5),
    ]


def _bad_torch_labels(d: Draw, ctx: dict) -> list:
    rows = len(ctx["inputs"])
    _, classes = _module_shape(ctx["module"])
    return [
        ("none", None),
        ("str", "abc"),
        ("out-of-range", np.full(rows, classes)),
        ("negative", np.full(rows, -1)),
        ("fraction", np.full(rows, 0.5)),
        ("nan", np.full(rows, math.nan)),
        ("2-d", np.zeros((rows, 2), dtype=np.int64)),
        ("str-list", ["a"] * rows),
        ("other-length", np.zeros(rows + 1, dtype=np.int64), {"inputs": ctx["inputs"]}),
        ("object-array", np.array([object() for _ in range(rows)], dtype=object)),
    ]


def _bad_torch_partitions(d: Draw, ctx: dict) -> list:
    return [("more-than-examples", len(ctx["inputs"]) + 1, {"inputs": ctx["inputs"]})]


def _check_from_torch(out, kw: dict) -> str | None:
    if not isinstance(out, GC.Problem):
        return f"returned {type(out).__name__}"
    n = int(kw["num_partitions"])
    expected = torch.nn.utils.parameters_to_vector(kw["module"].parameters()).detach().double().numpy()
    if out.num_partitions != n:
        return f"num_partitions is {out.num_partitions!r}"
    if not isinstance(out.initial, np.ndarray) or not np.array_equal(out.initial, expected):
        return "initial is not the module's parameters as a float64 vector"
    loss = out.loss(out.initial)
    if not (isinstance(loss, float) and math.isfinite(loss)):
        return f"loss(initial) is {loss!r}"
    for j in range(n):
        g = out.gradient(out.initial, j)
        if not isinstance(g, np.ndarray) or g.shape != expected.shape or not np.all(np.isfinite(g)):
            return f"gradient(initial, {j}) is {short(g)}"
    return None


def _scheme_valid(d: Draw, ctx: dict):
    return d.pick(GC.SCHEMES)


def _problem_valid(d: Draw, ctx: dict):
    return ProblemSpec(d).obj


def _training_stragglers_valid(d: Draw, ctx: dict):
    n = ctx["problem"].num_partitions
    if ctx["scheme"] in ("gc-fr", "pgc-fr"):
        return int_like(d, d.pick(_divisors(n)) - 1)
    return int_like(d, d.int(0, n - 1))


def _bad_training_stragglers(d: Draw, ctx: dict) -> list:
    n = ctx["problem"].num_partitions
    out = [("s>=n", n), ("above-n", n + 2)]
    if ctx["scheme"] in ("gc-fr", "pgc-fr"):
        off = [s for s in range(1, n) if n % (s + 1)]
        if off:
            out.append(("fr-not-dividing", d.pick(off)))
    return out


def _bad_problem(d: Draw, ctx: dict) -> list:
    return [
        ("none", None),
        ("str", "least-squares"),
        ("class", GC.Problem),
        ("dict", {"gradient": _affine}),
        ("function", _affine),
    ]


def _small_delays(d: Draw, ctx: dict):
    return d.pick(
        (
            OMIT,
            None,
            cc.delays.ShiftedExponential(scale=d.uniform(1e-5, 1e-3), rate=1.0),
            cc.delays.AdditiveExponential(mean=d.uniform(1e-5, 1e-3)),
        )
    )


# Later trainers take injected ``faults`` and a ``step_timeout_s``: fuzzed where the signature
# has them (as the library found it).
TRAINING_FAULTS = "faults" in inspect.signature(GC.simulate).parameters
TRAINING_DEADLINE = "step_timeout_s" in inspect.signature(GC.simulate).parameters


def _training_faults_valid(cluster: bool):
    """None, ``{worker: kind}`` or a fault model; no "hang" on threads (it holds its thread
    until the step's deadline)."""

    def gen(d: Draw, ctx: dict):
        if d.coin(0.6):
            return d.pick((OMIT, None))
        n = ctx["problem"].num_partitions
        kinds = [k for k in getattr(GC, "FAULT_KINDS", ()) if not (cluster and k == "hang")]
        if d.coin(0.7) or not kinds:
            return {int_like(d, w): d.pick(kinds) for w in d.sample(n, d.int(0, min(n, 2)))}
        runtime_kinds = [k for k in kinds if k in cc.runtime.faults.KINDS]
        return cc.faults.Independent({d.pick(runtime_kinds): d.uniform(0.0, 0.3)})

    return gen


def _bad_training_faults(d: Draw, ctx: dict) -> list:
    return [
        *[entry for entry in _bad_fixed(d, ctx) if entry[0] != "none"],  # None: no faults
        ("delay-model", cc.delays.AdditiveExponential()),
        ("float", 0.5),
    ]


def _step_timeout_valid(cluster: bool):
    def gen(d: Draw, ctx: dict):
        finite = (1.0, 2.0) if cluster else (0.5, 1.0, 3.0, d.uniform(0.1, 5.0))
        return d.pick((OMIT, OMIT, None, math.inf, real_like(d, d.pick(finite))))

    return gen


_bad_step_timeout = bad_real(lo=0.0, lo_open=True, typical=1.0, none_ok=True, inf_ok=True)


def _faulty(kw: dict) -> bool:
    """Whether a training case has injected faults or a deadline (then steps may fall short)."""
    faults = kw.get("faults", OMIT)
    has_faults = faults is not OMIT and faults is not None and faults != {}
    timeout = kw.get("step_timeout_s", OMIT)
    return has_faults or (timeout is not OMIT and timeout is not None and timeout != math.inf)


def _garbage_possible(kw: dict) -> bool:
    faults = kw.get("faults", OMIT)
    if isinstance(faults, dict):
        return "garbage" in faults.values()
    return faults is not OMIT and faults is not None  # a model: garbage may be drawn


def _training_refused(case: Case, err: BaseException) -> bool:
    """An exact scheme that cannot decode a step raises TooManyStragglersError (its
    docstring), as does any scheme with no usable message: with faults or a deadline."""
    return _faulty(case.kwargs) and isinstance(err, GC.TooManyStragglersError)


def _training_params(*, cluster: bool) -> tuple[Param, ...]:
    params = [
        Param("scheme", _scheme_valid, bad_choice(GC.SCHEMES)),
        Param("problem", _problem_valid, _bad_problem),
        Param(
            "num_stragglers",
            _training_stragglers_valid,
            bad_count(0, name="num_stragglers", extra=_bad_training_stragglers),
        ),
        Param("steps", lambda d, ctx: int_like(d, d.int(0, 3)), bad_count(0, name="steps")),
    ]
    if cluster:
        params.append(Param("cluster", _training_cluster_valid, _bad_cluster_arg))
    params += [
        Param(
            "lr",
            lambda d, ctx: omit_or(d, 0.4, lambda: real_like(d, d.uniform(1e-3, 0.5))),
            bad_real(lo=0.0, lo_open=True, typical=0.1),
        ),
    ]
    if not cluster:
        params.append(Param("compute_s", _compute_s_valid, _bad_nonnegative))
    params += [
        Param("delays", _small_delays if cluster else _delays_valid, _bad_delays),
        Param("seed", lambda d, ctx: omit_or(d, 0.3, lambda: rng_valid(d, ctx)), bad_rng),
        Param("code_seed", _code_seed_valid, _bad_code_seed),
    ]
    if TRAINING_FAULTS:
        params.append(Param("faults", _training_faults_valid(cluster), _bad_training_faults))
    if TRAINING_DEADLINE:
        params.append(
            Param(
                "step_timeout_s", _step_timeout_valid(cluster), _bad_step_timeout, names=("step_timeout_s",)
            )
        )
    return tuple(params)


def shared_training_cluster():
    """One ThreadCluster without delays or faults for the training cases (a thread per worker
    and some to spare, as train_on_cluster's docstring asks)."""
    if "training" not in _SHARED:
        _SHARED["training"] = cc.ThreadCluster(num_threads=12, seed=0)
    return _SHARED["training"]


def _training_cluster_valid(d: Draw, ctx: dict):
    if d.coin(0.2):
        return cc.SimulatedCluster(seed=d.int(0, 100))
    return shared_training_cluster()


def _descent(problem, steps: int, lr: float) -> list[float]:
    """The losses of plain gradient descent on the average gradient (what exact codes follow)."""
    theta = problem.initial.copy()
    losses = [float(problem.loss(theta))]
    n = problem.num_partitions
    for _ in range(steps):
        theta = theta - lr * sum(problem.gradient(theta, j) for j in range(n)) / n
        losses.append(float(problem.loss(theta)))
    return losses


def _check_history(out, kw: dict) -> str | None:
    """Steps 0..steps; times increasing; finite losses; PGC's ages; and for the exact schemes
    (DGD, GC-FR, GC-CR) the iterates of gradient descent on the full gradient."""
    steps, problem, scheme = int(kw["steps"]), kw["problem"], kw["scheme"]
    n, s = problem.num_partitions, int(kw["num_stragglers"])
    if not isinstance(out, list) or len(out) != steps + 1 or not all(isinstance(x, GC.Step) for x in out):
        return f"returned {short(out)}, expected {steps + 1} Steps"
    if [x.step for x in out] != list(range(steps + 1)):
        return f"steps numbered {[x.step for x in out]}"
    walls = [x.wall_time_s for x in out]
    if not all(math.isfinite(w) for w in walls) or any(b < a for a, b in itertools.pairwise(walls)):
        return f"wall times {short(walls)} are not finite and increasing"
    losses = [x.loss for x in out]
    if not all(isinstance(v, float) and math.isfinite(v) for v in losses):
        return f"losses {short(losses)} are not finite floats"
    for x in out[1:]:
        used = list(x.used)
        if len(set(used)) != len(used) or not all(0 <= w < n for w in used):
            return f"step {x.step} used {used}"
        if scheme.startswith("pgc"):
            ages = np.asarray(x.ages)
            if ages.shape != (n, s + 1) or np.any(ages < 0):
                return f"step {x.step}: ages {short(x.ages)}, expected ({n}, {s + 1}) ages >= 0"
    if scheme in ("dgd", "gc-fr", "gc-cr") and any(getattr(x, "degraded", False) for x in out):
        return "an exact scheme took a degraded step (it is exact or raises)"
    if scheme in ("dgd", "gc-fr", "gc-cr") and not _garbage_possible(kw):
        expected = _descent(problem, steps, float(_given(kw, "lr", 0.1)))
        off = max(abs(a - b) / max(1.0, abs(b)) for a, b in zip(losses, expected, strict=True))
        if off > 1e-5:
            return (
                f"an exact scheme left gradient descent: losses {short(losses)}, expected {short(expected)}"
            )
    return None


# -- the extensions' code specs and targets ----------------------------------------------------

EXTENSION_CODE_PARAMS = {
    "manifold": _manifold_params(),
    "thin-plate": _thin_plate_params(),
    "robust": _robust_params(),
    "approxifer": _approxifer_params(),
}
EXTENSION_CODE_CLASSES = {
    "manifold": cc.ManifoldGCC,
    "thin-plate": MANIFOLD.ThinPlateCode,
    "robust": cc.RobustGCC,
    "approxifer": cc.ApproxIFER,
}
EXTENSION_CLASS_NAMES = {
    "manifold": "ManifoldGCC",
    "thin-plate": "ThinPlateCode",
    "robust": "RobustGCC",
    "approxifer": "ApproxIFER",
}
CODE_PARAMS.update(EXTENSION_CODE_PARAMS)


# -- systematic codes (GCC, BACC with systematic=True) and answers per query --------------------
#
# Decisions: ``systematic=True`` needs K <= N (every input at a worker's point), so
# ``num_workers`` below ``num_inputs`` and ``num_inputs`` above ``num_workers`` are invalid here
# (a message naming either counts). Explicit ``beta`` must hold every explicit ``alpha_k``
# exactly: an ``alpha`` off beta's points is invalid (a message naming ``alpha`` or ``beta``
# counts). ``run_queries``' ``tau`` is a positive finite number or None (``inf`` is invalid:
# None means no deadline); its ``wait_for`` is None, a count in ``min_results..N`` or a
# predicate on the arrived workers; ``on_answer`` is None or a callable.

PARITIES = ("between", "ends", "nearest")


def _sys_workers_valid(d: Draw, ctx: dict):
    return int_like(d, d.int(max(2, _typical_int(ctx, "num_inputs", 2)), 16))


def _sys_bad_workers(d: Draw, ctx: dict) -> list:
    k = _typical_int(ctx, "num_inputs", 2)
    return [("below-num_inputs", k - 1)] if k - 1 >= 2 else []


def _sys_bad_inputs(d: Draw, ctx: dict) -> list:
    return [("above-num_workers", int(ctx["num_workers"]) + 1)]


def _sys_beta_valid(d: Draw, ctx: dict):
    if d.coin(0.6):
        return OMIT
    return distinct_points(d, int(ctx["num_workers"]))


def _sys_alpha_valid(d: Draw, ctx: dict):
    beta = ctx["beta"]
    if d.coin(0.5):
        return OMIT
    k = int(ctx["num_inputs"])
    if beta is OMIT:
        return points_like(d, distinct_points(d, k))
    chosen = np.asarray(beta, dtype=np.float64)[d.sample(len(beta), k)]
    return d.pick((chosen, chosen.tolist()))  # exact values: no float32 round trip


def _sys_bad_alpha(d: Draw, ctx: dict) -> list:
    out = bad_points(_n_inputs)(d, ctx)
    beta = ctx["beta"]
    if beta is not OMIT:
        k, beta = int(ctx["num_inputs"]), np.asarray(beta, dtype=np.float64)
        off = np.sort(beta)[:k] + 0.25 * np.min(np.diff(np.sort(beta))) if beta.size > 1 else beta + 0.5
        out.append(("off-beta's-points", off))
    return out


def _systematic_params(kind: str) -> tuple[Param, ...]:
    lambdas = (
        (
            Param("lambda_enc", _lambda_valid, _bad_lambda),
            Param("lambda_dec", _lambda_dec_valid, _bad_lambda_dec),
        )
        if kind == "gcc"
        else ()
    )
    return (
        Param(
            "num_inputs",
            lambda d, ctx: int_like(d, d.int(1, 6)),
            bad_count(1, name="num_inputs", extra=_sys_bad_inputs),
            names=("num_inputs", "num_workers"),
        ),
        Param(
            "num_workers",
            _sys_workers_valid,
            bad_count(2, name="num_workers", extra=_sys_bad_workers),
            names=("num_workers", "num_inputs"),
        ),
        Param("systematic", lambda d, ctx: d.pick((True, np.True_)), bad_flag),
        Param("parity", lambda d, ctx: omit_or(d, 0.3, lambda: d.pick(PARITIES)), bad_choice(PARITIES)),
        Param(
            "assignment",
            lambda d, ctx: omit_or(d, 0.5, lambda: d.pick(("natural", "golden"))),
            bad_choice(("natural", "golden")),
        ),
        *lambdas,
        Param("points", _points_valid, bad_choice(("chebyshev", "equispaced"))),
        Param("beta", _sys_beta_valid, bad_points(lambda ctx: int(ctx["num_workers"]))),
        Param("alpha", _sys_alpha_valid, _sys_bad_alpha, names=("alpha", "beta")),
    )


def _check_systematic_code(code, kw: dict) -> str | None:
    wrong = _check_code(code, kw)
    if wrong is not None:
        return wrong
    workers = np.asarray(code.systematic_workers)
    if np.any(workers < 0) or np.unique(workers).size != workers.size:
        return f"systematic_workers {workers.tolist()}: not a distinct worker per input"
    if not np.array_equal(code.beta[workers], code.alpha):
        return "a systematic worker does not sit at its input's point"
    X = np.random.default_rng(0).normal(size=(code.num_inputs, 2))
    if not np.array_equal(np.asarray(code.encode(X))[workers], X):
        return "encode does not send a systematic worker its raw input, bit for bit"
    return None


SYSTEMATIC_KINDS = {"gcc-systematic": ("gcc", cc.GCC), "bacc-systematic": ("bacc", cc.BACC)}
for _kind, (_base, _cls) in SYSTEMATIC_KINDS.items():
    CODE_PARAMS[_kind] = _systematic_params(_base)
    EXTENSION_CODE_CLASSES[_kind] = _cls
    EXTENSION_CLASS_NAMES[_kind] = f"{_cls.__name__}(systematic=True)"


class AnswerLog:
    """An ``on_answer`` callback that records its calls ``(k, exact, seconds)``."""

    def __init__(self):
        self.calls: list[tuple[int, bool, float]] = []

    def __call__(self, k, estimate, exact, seconds) -> None:
        self.calls.append((k, exact, seconds))

    def __repr__(self) -> str:
        return "AnswerLog()"


def _tau_valid(d: Draw, ctx: dict):
    return d.pick((OMIT, None, 10.0, 1.0, np.float64(2.5), 3, 1e-3))


_bad_tau = bad_real(
    lo=0.0, lo_open=True, typical=1.0, none_ok=True, extra=lambda d, ctx: [("str-number", "1.0")]
)


def _queries_wait_for_valid(d: Draw, ctx: dict):
    if d.coin(0.25):
        return AtLeast(d.int(1, _code(ctx).num_workers))
    return _exec_wait_for_valid(d, ctx)


def _bad_queries_wait_for(d: Draw, ctx: dict) -> list:
    return [entry for entry in _bad_exec_wait_for(d, ctx) if entry[0] != "predicate"]


def _check_answers(out, kw: dict) -> str | None:
    code = _code(kw)
    k, n = code.num_inputs, code.num_workers
    if out.error is not None and not isinstance(out.error, (InsufficientResultsError, MissingResultsError)):
        return f"error of type {type(out.error).__name__}"
    answered, exact, by = np.asarray(out.answered), np.asarray(out.exact), np.asarray(out.answered_by)
    if answered.shape != (k,) or exact.shape != (k,) or by.shape != (k,) or np.shape(out.answered_s) != (k,):
        return "answered, exact, answered_s and answered_by must have shape (K,)"
    if np.any(exact & ~answered) or np.any((by >= 0) & ~exact):
        return "an unanswered input is exact, or an own answer is not"
    own = np.flatnonzero(by >= 0)
    if np.any(by >= n) or not np.array_equal(np.asarray(code.systematic_inputs)[by[own]], own):
        return f"answered_by {by.tolist()} names a worker that does not compute that input raw"
    if not np.array_equal(np.isfinite(out.answered_s), answered):
        return "answered_s is not finite exactly where an input is answered"
    if out.estimates is None:
        return None if not answered.any() else "answers without estimates"
    shape = (k, *_shape(kw["X"])[1:])
    if tuple(_shape(out.estimates)) != shape:
        return f"estimates of shape {_shape(out.estimates)}, expected {shape}"
    if not np.all(np.isfinite(np.asarray(out.estimates)[answered])):
        return "an answered input's estimate has NaN or inf"
    log = kw.get("on_answer")
    if isinstance(log, AnswerLog) and sorted(c[0] for c in log.calls) != np.flatnonzero(answered).tolist():
        return (
            f"on_answer called for {[c[0] for c in log.calls]}, answered {np.flatnonzero(answered).tolist()}"
        )
    return None


def _systematic_targets() -> list[Target]:
    targets = [
        Target(
            EXTENSION_CLASS_NAMES[kind], CODE_PARAMS[kind], lambda kw, cls=cls: cls, _check_systematic_code
        )
        for kind, (_, cls) in SYSTEMATIC_KINDS.items()
    ]
    context = (
        _code_param((*CODE_CLASSES, *SYSTEMATIC_KINDS, *SYSTEMATIC_KINDS)),
        _cluster_param(("simulated", "simulated", "thread")),
        Param("_f", lambda d, ctx: d.pick(FUNCTIONS), hidden=True),
    )
    targets.append(
        Target(
            "CodedExecutor.run_queries",
            (
                *context,
                Param("X", _exec_x_valid, bad_batch(lambda ctx: _code(ctx).num_inputs, "X")),
                Param("tau", _tau_valid, _bad_tau),
                Param(
                    "wait_for",
                    _queries_wait_for_valid,
                    bad_count(1, name="wait_for", extra=_bad_queries_wait_for, none_ok=True),
                ),
                Param(
                    "on_answer",
                    lambda d, ctx: d.pick((OMIT, None, AnswerLog())),
                    lambda d, ctx: [("str", "print"), ("int", 3), ("list", [])],
                ),
            ),
            lambda kw: _executor(kw).run_queries,
            _check_answers,
        )
    )
    return targets


class BoundSpec:
    """A ManifoldGCC drawn by its constructor's spec, bound to a batch drawn for it: ``obj`` is
    ``code.bind(X)`` (a GCC, or a ThinPlateCode for the thin-plate layout). A draw whose
    binding fails is drawn again (``ManifoldGCC.bind``'s own target reports such failures)."""

    kind = "manifold-bound"
    kwargs: ClassVar[dict] = {}  # no fill: _check_decode reads it

    def __init__(self, d: Draw, *, thin_plate: bool | None = None):
        for _ in range(20):
            spec = draw_code(d, "manifold")
            design = _design_of(spec.kwargs.get("layout", OMIT))
            if thin_plate is not None and (design == "thin-plate") != thin_plate:
                continue
            X = _batch_for(spec.kwargs["num_inputs"], _reference_trailing(spec.kwargs), d)
            try:
                self.obj = _quiet(spec.obj.bind, X)
            except Exception:  # reported by the bind target
                continue
            self.spec, self.shape = spec, X.shape
            return
        self.spec = CodeSpec("manifold", {"num_inputs": 3, "num_workers": 6})
        self.shape = (3, 2)
        self.obj = self.spec.obj.bind(np.eye(3, 2))

    def __repr__(self) -> str:
        return f"{self.spec!r}.bind(X of shape {self.shape})"


def _bound_param(thin_plate: bool | None = None) -> Param:
    return Param("_code", lambda d, ctx: BoundSpec(d, thin_plate=thin_plate), hidden=True)


def _ext_alive_valid(d: Draw, ctx: dict):
    code = _code(ctx)
    n = code.num_workers
    return alive_like(d, d.sample(n, d.int(code.min_results, n)))


def _ext_y_valid(d: Draw, ctx: dict):
    """Results for ``alive``; a quarter of the time with a NaN row (an erasure) when enough
    finite ones remain."""
    alive = _alive_list(ctx["alive"])
    y = d.normal((len(alive), *trailing_shape(d)))
    if len(alive) > _code(ctx).min_results and d.coin(0.25):
        y[d.int(0, len(alive) - 1)] = math.nan
    return array_like(d, y)


def _ext_decode_params(code_param: Param) -> tuple[Param, ...]:
    return (
        code_param,
        Param("alive", _ext_alive_valid, bad_alive(lambda ctx: _code(ctx).num_workers)),
        Param("Y", _ext_y_valid, bad_batch(lambda ctx: len(_alive_list(ctx["alive"])), "Y", nan_ok=True)),
    )


def _check_details(out, kw: dict) -> str | None:
    """A Decoded: the estimates as decode's (and equal to them), the workers used and erased
    (sorted), a read-only info."""
    if not isinstance(out, cc.Decoded):
        return f"returned {type(out).__name__}, not a Decoded"
    problem = _check_decode(out.estimates, kw)
    if problem:
        return problem
    alive = np.array(_alive_list(kw["alive"]), dtype=np.int64)
    rows = _as_numpy(kw["Y"]).reshape(alive.size, -1)
    finite = np.all(np.isfinite(rows), axis=1)
    if np.asarray(out.alive).tolist() != sorted(alive[finite].tolist()):
        return f"alive {short(np.asarray(out.alive).tolist())}, expected the finite rows' workers, sorted"
    if np.asarray(out.erased).tolist() != sorted(alive[~finite].tolist()):
        return f"erased {short(np.asarray(out.erased).tolist())}, expected the NaN rows' workers, sorted"
    try:
        out.info["_fuzz"] = 1
    except TypeError:
        pass
    else:
        return "info is writable"
    again = _quiet(_code(kw).decode, kw["Y"], kw["alive"])
    if not np.array_equal(_as_numpy(again), _as_numpy(out.estimates), equal_nan=True):
        return "decode gave other estimates than decode_details"
    return None


def _check_manifold_bind(out, kw: dict) -> str | None:
    return _check_layout(out, _code(kw), kw["X"])


def _check_manifold_encode(out, kw: dict) -> str | None:
    problem = _check_encode(out, kw)
    if problem:
        return problem
    again = _quiet(_code(kw).bind, kw["X"]).encode(kw["X"])
    if not np.array_equal(_as_numpy(again), _as_numpy(out)):
        return "encode(X) is not bind(X).encode(X)"
    return None


def _manifold_x_valid(d: Draw, ctx: dict):
    spec = ctx["_code"]
    X = _batch_for(spec.kwargs["num_inputs"], _reference_trailing(spec.kwargs), d)
    return array_like(d, X)


def _bad_manifold_x(d: Draw, ctx: dict) -> list:
    out = bad_batch(lambda ctx: _code(ctx).num_inputs, "X")(d, ctx)
    if _reference_trailing(ctx["_code"].kwargs) is not None:
        k = _code(ctx).num_inputs
        width = int(np.prod(_reference_trailing(ctx["_code"].kwargs)))
        out.append(("unlike-the-reference", d.normal((k, width + 1))))
    return out


def _unbound_decode_refused(case: Case, err: BaseException) -> bool:
    """ManifoldGCC's own decode refuses (its docstring): decode with the bound code."""
    return type(err) is ValueError and "bind" in str(err)


def _code_methods(
    prefix: str, code_param: Param, *, decoder: str | None = None, minimum: int = 1
) -> list[Target]:
    """encode, decode, decode_details, complete (and ``decoder``) of the code drawn by
    ``code_param``."""
    targets = [
        Target(
            f"{prefix}.encode",
            (code_param, Param("X", _x_valid, bad_batch(lambda ctx: _code(ctx).num_inputs, "X"))),
            _method("encode"),
            _check_encode,
        ),
        Target(f"{prefix}.decode", _ext_decode_params(code_param), _method("decode"), _check_decode),
        Target(
            f"{prefix}.decode_details",
            _ext_decode_params(code_param),
            _method("decode_details"),
            _check_details,
        ),
        Target(
            f"{prefix}.complete",
            (
                code_param,
                Param("alive", _alive_any(lambda ctx: 0), bad_alive(lambda ctx: _code(ctx).num_workers)),
            ),
            _method("complete"),
            _check_bool,
        ),
    ]
    if decoder is not None:
        targets.append(
            Target(
                f"{prefix}.{decoder}",
                (
                    code_param,
                    Param(
                        "alive",
                        _alive_any(lambda ctx, m=minimum: m),
                        bad_alive(lambda ctx: _code(ctx).num_workers),
                    ),
                ),
                _method(decoder),
                _check_decoder,
                valid_error=_gcv_decoder_refused,
            )
        )
    return targets


# The decision that ``layout``'s public functions check their arguments (module docstring);
# False would fuzz them with valid arguments only (their results' invariants still checked).
LAYOUT_CHECKS_ARGUMENTS = True


def _layout_targets() -> list[Target]:
    targets = _layout_target_list()
    if LAYOUT_CHECKS_ARGUMENTS:
        return targets
    unchecked = []
    for target in targets:
        params = tuple(p if p.hidden else dataclasses.replace(p, invalid=None) for p in target.params)
        unchecked.append(dataclasses.replace(target, params=params))
    return unchecked


def _layout_target_list() -> list[Target]:
    bad_neighbours = bad_count(1, name="neighbours")
    return [
        Target(
            "layout.pairwise_distances",
            (
                Param("a", lambda d, ctx: _cloud(d, 1, 10), _bad_array_of("a")),
                Param(
                    "b",
                    lambda d, ctx: d.pick((OMIT, None, d.normal((d.int(1, 8), np.shape(ctx["a"])[1])))),
                    lambda d, ctx: [
                        ("str", "abc"),
                        ("other-columns", d.normal((3, np.shape(ctx["a"])[1] + 1))),
                        ("nan", np.full((2, np.shape(ctx["a"])[1]), math.nan)),
                        ("1-d", d.normal(np.shape(ctx["a"])[1])),
                        ("str-array", np.full((2, np.shape(ctx["a"])[1]), "x")),
                        ("object-array", np.array([object()], dtype=object)),
                    ],
                ),
            ),
            lambda kw: LAYOUT.pairwise_distances,
            _check_pairwise,
        ),
        Target(
            "layout.knn_graph",
            (
                Param("distances", _distances_valid(1, 12), _bad_distances()),
                Param("neighbours", lambda d, ctx: int_like(d, d.int(1, 14)), bad_neighbours),
                *(
                    [Param("join", _flag_valid, bad_flag)]
                    if "join" in inspect.signature(LAYOUT.knn_graph).parameters
                    else []
                ),
            ),
            lambda kw: LAYOUT.knn_graph,
            _check_knn,
        ),
        Target(
            "layout.first_principal_axis",
            (
                Param(
                    "centred",
                    _centred_valid,
                    _bad_array_of("centred", extra=lambda d, ctx: [("empty-rows", np.zeros((0, 3)))]),
                ),
            ),
            lambda kw: LAYOUT.first_principal_axis,
            _check_axis,
        ),
        Target(
            "layout.path_length",
            (
                Param("distances", _distances_valid(1, 10), _bad_distances()),
                Param("order", _order_valid, _bad_order),
            ),
            lambda kw: LAYOUT.path_length,
            _check_path_length,
        ),
        Target(
            "layout.chain_order",
            (
                Param("distances", _distances_valid(1, 12), _bad_distances()),
                Param(
                    "starts",
                    lambda d, ctx: omit_or(d, 0.6, lambda: int_like(d, d.int(1, 70))),
                    bad_count(1, name="starts"),
                ),
                Param(
                    "max_passes",
                    lambda d, ctx: omit_or(d, 0.6, lambda: int_like(d, d.int(0, 60))),
                    bad_count(0, name="max_passes"),
                ),
            ),
            lambda kw: LAYOUT.chain_order,
            _check_chain,
        ),
        Target(
            "layout.spectral_coordinate",
            (Param("graph", _graph_valid, _bad_graph),),
            lambda kw: LAYOUT.spectral_coordinate,
            _check_spectral_coordinate,
        ),
        Target(
            "layout.spectral_embedding",
            (
                Param("graph", _graph_valid, _bad_graph),
                Param(
                    "dimensions",
                    _embedding_dims_valid(lambda ctx: ctx["graph"].shape[0]),
                    _bad_embedding_dims(lambda ctx: ctx["graph"].shape[0]),
                ),
            ),
            lambda kw: LAYOUT.spectral_embedding,
            _check_spectral_embedding,
        ),
        Target(
            "layout.mds_embedding",
            (
                Param("distances", _mds_distances_valid, _bad_distances()),
                Param("dimensions", lambda d, ctx: int_like(d, d.int(1, 4)), bad_count(1, name="dimensions")),
            ),
            lambda kw: LAYOUT.mds_embedding,
            _check_mds,
        ),
        Target(
            "layout.hull_design",
            (
                Param(
                    "sites",
                    _hull_sites_valid,
                    _bad_array_of("sites", extra=lambda d, ctx: [("empty", np.zeros((0, 2)))]),
                ),
                Param("count", lambda d, ctx: int_like(d, d.int(1, 12)), bad_count(1, name="count")),
                Param("include", _flag_valid, bad_flag),
                Param(
                    "candidates",
                    lambda d, ctx: omit_or(d, 0.6, lambda: int_like(d, d.int(1, 40))),
                    bad_count(1, name="candidates"),
                ),
            ),
            lambda kw: LAYOUT.hull_design,
            _check_hull,
        ),
        Target(
            "layout.snap_to",
            (
                Param("positions", _positions_valid, _bad_positions),
                Param("targets", _targets_valid, _bad_targets),
            ),
            lambda kw: LAYOUT.snap_to,
            _check_snap,
        ),
        Target(
            "layout.arc_positions",
            (
                Param("points", _arc_points_valid, _bad_array_of("points", ndim=1)),
                Param("gaps", _gaps_valid, _bad_gaps),
            ),
            lambda kw: LAYOUT.arc_positions,
            _check_arc,
        ),
        Target(
            "layout.Reference",
            (
                Param("samples", _ref_samples_valid, _bad_ref_samples),
                Param("neighbours", lambda d, ctx: int_like(d, d.int(1, 12)), bad_neighbours),
            ),
            lambda kw: LAYOUT.Reference,
            _check_reference,
        ),
        Target(
            "layout.Reference.geodesic_distances",
            (_reference_param(), Param("inputs", _ref_inputs_valid, _bad_ref_inputs)),
            lambda kw: kw["_reference"].obj.geodesic_distances,
            _check_geodesic,
        ),
        Target(
            "layout.Reference.coordinate_of",
            (_reference_param(), Param("inputs", _ref_inputs_valid, _bad_ref_inputs)),
            lambda kw: kw["_reference"].obj.coordinate_of,
            _check_coordinate_of,
        ),
        Target(
            "layout.Reference.embedding_of",
            (
                _reference_param(),
                Param("inputs", _ref_inputs_valid, _bad_ref_inputs),
                Param("dimensions", _embedding_dims_valid(_ref_rows), _bad_embedding_dims(_ref_rows)),
            ),
            lambda kw: kw["_reference"].obj.embedding_of,
            _check_embedding(lambda kw: np.shape(kw["inputs"])[0]),
        ),
        Target(
            "layout.Reference.embedding",
            (
                _reference_param(),
                Param("dimensions", _embedding_dims_valid(_ref_rows), _bad_embedding_dims(_ref_rows)),
            ),
            lambda kw: kw["_reference"].obj.embedding,
            _check_embedding(_ref_rows),
        ),
        *_later_layout_targets(),
    ]


def _later_layout_targets() -> list[Target]:
    """Public functions that later versions of ``layout`` added, where they exist."""
    targets = []
    if hasattr(LAYOUT, "consecutive_distances"):
        targets.append(
            Target(
                "layout.consecutive_distances",
                (Param("points", lambda d, ctx: _cloud(d, 1, 10), _bad_array_of("points")),),
                lambda kw: LAYOUT.consecutive_distances,
                _check_consecutive,
            )
        )
    if hasattr(LAYOUT, "join_components"):
        targets.append(
            Target(
                "layout.join_components",
                (
                    Param("_points", lambda d, ctx: _clusters(d), hidden=True),
                    Param("graph", _unjoined_graph_valid, _bad_graph_to_join),
                    Param("distances", lambda d, ctx: _distances_of(ctx["_points"]), _bad_join_distances),
                ),
                lambda kw: LAYOUT.join_components,
                _check_join,
            )
        )
    if hasattr(LAYOUT, "check_size"):
        limit = getattr(LAYOUT, "MAX_POINTS", 10_000)
        targets.append(
            Target(
                "layout.check_size",
                (
                    Param(
                        "count", lambda d, ctx: int_like(d, d.pick((0, 1, d.int(0, limit), limit))), _bad_size
                    ),
                    Param("name", lambda d, ctx: d.pick(("points", "reference", "X"))),
                ),
                lambda kw: LAYOUT.check_size,
                lambda out, kw: None if out is None else f"returned {out!r}",
            )
        )
    if hasattr(LAYOUT.Reference, "geodesics"):
        targets.append(
            Target(
                "layout.Reference.geodesics",
                (_reference_param(), Param("inputs", _ref_inputs_valid, _bad_ref_inputs)),
                lambda kw: kw["_reference"].obj.geodesics,
                _check_geodesics,
            )
        )
    return targets


def _extension_targets() -> list[Target]:
    targets: list[Target] = []
    for kind, check in (
        ("manifold", _check_manifold),
        ("thin-plate", _check_thin_plate),
        ("robust", _check_robust),
        ("approxifer", _check_approxifer),
    ):
        cls = EXTENSION_CODE_CLASSES[kind]
        targets.append(Target(EXTENSION_CLASS_NAMES[kind], CODE_PARAMS[kind], lambda kw, cls=cls: cls, check))
    for design, cls in LAYOUTS.LAYOUTS.items():  # the layout objects ManifoldGCC takes
        targets.append(
            Target(
                f"layout.{cls.__name__}",
                _layout_option_params(design),
                lambda kw, cls=cls: cls,
                lambda out, kw, cls=cls: _check_layout_object(out, kw, cls),
            )
        )

    manifold = _code_param(("manifold",))
    targets += [
        Target(
            "ManifoldGCC.bind",
            (manifold, Param("X", _manifold_x_valid, _bad_manifold_x)),
            _method("bind"),
            _check_manifold_bind,
        ),
        Target(
            "ManifoldGCC.encode",
            (manifold, Param("X", _manifold_x_valid, _bad_manifold_x)),
            _method("encode"),
            _check_manifold_encode,
        ),
        Target(
            "ManifoldGCC.decode",
            _ext_decode_params(manifold),
            _method("decode"),
            lambda out, kw: "decoded without a layout (its docstring: decode with the bound code)",
            valid_error=_unbound_decode_refused,
        ),
        Target(
            "ManifoldGCC.complete",
            (
                manifold,
                Param("alive", _alive_any(lambda ctx: 0), bad_alive(lambda ctx: _code(ctx).num_workers)),
            ),
            _method("complete"),
            _check_bool,
        ),
    ]
    bound_methods = _code_methods("ManifoldGCC.bound", _bound_param())
    targets += [t for t in bound_methods if not t.name.endswith(".complete")]
    chain = _code_methods("ManifoldGCC.bound", _bound_param(thin_plate=False), decoder="decoder", minimum=2)
    targets.append(chain[-1])  # decoder: a bound GCC's (a ThinPlateCode has none)
    targets += _code_methods("ThinPlateCode", _code_param(("thin-plate",)))
    targets += _layout_targets()

    robust = _code_param(("robust",))
    targets += _code_methods("RobustGCC", robust, minimum=2)  # no decoder: it refuses (its docstring)
    targets += [
        Target("RobustGCC.clip", _clip_params(robust), _method("clip"), _check_clip),
        Target(
            "robust_lambda",
            (
                Param(
                    "num_points",
                    lambda d, ctx: int_like(d, d.pick((2, 3, d.int(2, 50), d.int(2, 5000)))),
                    bad_count(2, name="num_points"),
                ),
                Param(
                    "num_adversaries",
                    lambda d, ctx: int_like(
                        d, d.pick((0, 1, int(ctx["num_points"]), d.int(0, int(ctx["num_points"]))))
                    ),
                    bad_count(
                        0,
                        name="num_adversaries",
                        extra=lambda d, ctx: [("above-num_points", int(ctx["num_points"]) + 1)],
                    ),
                ),
                Param("schedule", _choice_valid(ROBUST.SCHEDULES), bad_choice(ROBUST.SCHEDULES)),
                Param(
                    "scale",
                    lambda d, ctx: omit_or(d, 0.4, lambda: real_like(d, d.pick((0.0, 1e-8, 1.0, 3.5)))),
                    bad_real(typical=1.0),
                ),
            ),
            lambda kw: ROBUST.robust_lambda,
            _check_robust_lambda,
        ),
        *(
            [
                Target(
                    "repeated_median_line",
                    (
                        Param("knots", _rm_knots_valid, _bad_rm_knots),
                        Param("values", _bm_values_valid, _bad_bm_values),
                    ),
                    lambda kw: ROBUST.repeated_median_line,
                    _check_repeated_median,
                )
            ]
            if hasattr(ROBUST, "repeated_median_line")
            else []
        ),
        Target(
            "block_medians",
            (
                Param("knots", _sorted_knots_valid, _bad_bm_knots),
                Param("values", _bm_values_valid, _bad_bm_values),
                Param("size", _bm_size_valid, bad_count(1, name="size")),
                Param("points", _bm_points_valid, _bad_bm_points),
            ),
            lambda kw: ROBUST.block_medians,
            _check_block_medians,
        ),
    ]

    approxifer = _code_param(("approxifer",))
    targets += _code_methods("ApproxIFER", approxifer, decoder="decoder_matrix", minimum=1)
    targets.append(
        Target(
            "ApproxIFER.locates",
            (
                approxifer,
                Param(
                    "num_results", lambda d, ctx: int_like(d, d.int(0, 40)), bad_count(0, name="num_results")
                ),
            ),
            _method("locates"),
            _check_locates,
        )
    )

    for name, cls in ATTACK_CLASSES.items():
        targets.append(
            Target(f"adversaries.{name}", _attack_params(cls), lambda kw, cls=cls: cls, _check_attack(cls))
        )
        targets.append(
            Target(
                f"adversaries.{name}.corrupt",
                _corrupt_params(Param("_attack", lambda d, ctx, n=name: AttackSpec(d, n), hidden=True), "Y"),
                lambda kw: kw["_attack"].obj.corrupt,
                _check_corrupt,
            )
        )
    targets += [
        Target(
            "adversaries.make_attack",
            (
                Param("name", lambda d, ctx: d.pick(tuple(ADV.ATTACKS)), bad_choice(tuple(ADV.ATTACKS))),
                Param(
                    "num_adversaries",
                    lambda d, ctx: int_like(d, d.int(0, 5)),
                    bad_count(0, name="num_adversaries"),
                ),
                Param("bound", _make_attack_bound_valid, _make_attack_bad_bound),
            ),
            lambda kw: ADV.make_attack,
            _check_make_attack,
        ),
        Target(
            "faults.Adversarial",
            (Param("attack", lambda d, ctx: AttackSpec(d).obj, _bad_attack_arg),),
            lambda kw: cc.faults.Adversarial,
            _check_adversarial,
        ),
        Target(
            "faults.Adversarial.corrupt",
            _corrupt_params(Param("_fault", lambda d, ctx: AdversarialSpec(d), hidden=True), "results"),
            lambda kw: kw["_fault"].obj.corrupt,
            _check_adversarial_corrupt,
        ),
        Target(
            "faults.corrupt",
            (
                Param("result", _fault_result_valid, _bad_fault_result),
                Param(
                    "kind",
                    lambda d, ctx: d.pick(("nan", "garbage")),
                    bad_choice_of(("nan", "garbage"), lambda d, ctx: [("raise", "raise"), ("hang", "hang")]),
                ),
                Param("seed", lambda d, ctx: int_like(d, d.int(0, 10**6)), _bad_fault_seed),
            ),
            lambda kw: cc.faults.corrupt,
            _check_fault_corrupt,
        ),
    ]

    targets += [
        Target(
            "gradient_coding.FractionalRepetition",
            (
                Param(
                    "num_workers",
                    lambda d, ctx: int_like(d, d.int(1, 16)),
                    bad_count(1, name="num_workers", extra=_bad_fr_workers),
                ),
                Param("num_stragglers", _fr_stragglers_valid, _bad_gc_stragglers(fr=True)),
            ),
            lambda kw: GC.FractionalRepetition,
            _check_fr,
        ),
        Target(
            "gradient_coding.CyclicRepetition",
            (
                Param(
                    "num_workers",
                    _cr_workers_valid,
                    bad_count(
                        1,
                        name="num_workers",
                        extra=lambda d, ctx: [("huge-10**6", 10**6, {"num_stragglers": 1})],
                    ),
                ),
                Param("num_stragglers", _cr_stragglers_valid, _bad_gc_stragglers(fr=False)),
                Param("seed", _cr_option(lambda d: int_like(d, d.int(0, 1000))), _bad_code_seed),
                Param(
                    "max_condition",
                    _cr_option(lambda d: real_like(d, d.pick((1e10, 1e12, 1e14)))),
                    bad_real(lo=1.0, typical=1e10),
                ),
                Param(
                    "max_subsets",
                    _cr_option(lambda d: int_like(d, d.int(1, 3000))),
                    bad_count(
                        1, name="max_subsets", none_ok=_default_is_none(GC.CyclicRepetition, "max_subsets")
                    ),
                ),
                Param(
                    "retries", _cr_option(lambda d: int_like(d, d.int(1, 10))), bad_count(1, name="retries")
                ),
            ),
            lambda kw: GC.CyclicRepetition,
            _check_cr,
            valid_error=_cr_refused,
        ),
    ]
    for kind, name in (("fr", "FractionalRepetition"), ("cr", "CyclicRepetition")):
        code_param = _gc_param(kind)
        alive = Param("alive", _gc_alive_valid, bad_alive(lambda ctx: _code(ctx).num_workers))
        targets += [
            Target(
                f"gradient_coding.{name}.decoding_weights",
                (code_param, alive),
                _method("decoding_weights"),
                _check_weights,
            ),
            Target(
                f"gradient_coding.{name}.decode",
                (
                    code_param,
                    alive,
                    Param("_gradients", _gradients_valid, hidden=True),
                    Param(
                        "messages",
                        _messages_valid,
                        bad_batch(lambda ctx: len(_alive_list(ctx["alive"])), "messages", nan_ok=True),
                    ),
                ),
                _method("decode"),
                _check_gc_decode,
            ),
            Target(
                f"gradient_coding.{name}.partitions",
                (code_param, Param("worker", _worker_valid, bad_count(0, name="worker", extra=_bad_worker))),
                _method("partitions"),
                _check_partitions,
            ),
        ]
        if kind == "fr":
            targets.append(
                Target(
                    f"gradient_coding.{name}.group",
                    (
                        code_param,
                        Param("worker", _worker_valid, bad_count(0, name="worker", extra=_bad_worker)),
                    ),
                    _method("group"),
                    _check_group,
                )
            )
    targets += [
        Target(
            "gradient_coding.Problem",
            (
                _ls_param(),
                Param("gradient", lambda d, ctx: ctx["_ls"].gradient, _bad_callable("gradient")),
                Param("loss", lambda d, ctx: ctx["_ls"].loss, _bad_callable("loss")),
                Param("initial", _initial_valid, _bad_initial),
                Param(
                    "num_partitions",
                    lambda d, ctx: int_like(d, ctx["_ls"].n),
                    bad_count(1, name="num_partitions"),
                ),
            ),
            lambda kw: GC.Problem,
            _check_problem,
        ),
        Target(
            "gradient_coding.Problem.from_torch",
            (
                Param("module", _module_valid, _bad_module, names=("module", "parameters")),
                Param(
                    "num_partitions",
                    lambda d, ctx: int_like(d, d.int(1, 4)),
                    bad_count(1, name="num_partitions", extra=_bad_torch_partitions),
                ),
                Param("inputs", _torch_inputs_valid, _bad_torch_inputs),
                Param("labels", _torch_labels_valid, _bad_torch_labels),
                Param("seed", _code_seed_valid, _bad_code_seed),
            ),
            lambda kw: GC.Problem.from_torch,
            _check_from_torch,
        ),
        Target(
            "gradient_coding.simulate",
            _training_params(cluster=False),
            lambda kw: GC.simulate,
            _check_history,
            valid_error=_training_refused,
        ),
        Target(
            "gradient_coding.train_on_cluster",
            _training_params(cluster=True),
            lambda kw: GC.train_on_cluster,
            _check_history,
            valid_error=_training_refused,
        ),
    ]
    return targets


# -- the targets -----------------------------------------------------------------------------


def _method(attr: str):
    return lambda kw: getattr(_code(kw), attr)


def _build_targets() -> dict[str, Target]:
    targets: list[Target] = []
    for kind, cls in CODE_CLASSES.items():
        name = CLASS_NAMES[kind]
        targets.append(Target(name, CODE_PARAMS[kind], lambda kw, cls=cls: cls, _check_code))
        targets.append(
            Target(
                f"{name}.encode",
                (
                    _code_param((kind,)),
                    Param("X", _x_valid, bad_batch(lambda ctx: _code(ctx).num_inputs, "X")),
                ),
                _method("encode"),
                _check_encode,
            )
        )
        targets.append(Target(f"{name}.decode", _decode_params(kind), _method("decode"), _check_decode))
        targets.append(
            Target(
                f"{name}.complete",
                (
                    _code_param((kind,)),
                    Param("alive", _alive_any(lambda ctx: 0), bad_alive(lambda ctx: _code(ctx).num_workers)),
                ),
                _method("complete"),
                _check_bool,
            )
        )
    for name, kind, attr, minimum in (
        ("GCC.decoder", "gcc", "decoder", 2),
        ("BACC.decoder_matrix", "bacc", "decoder_matrix", 1),
    ):
        targets.append(
            Target(
                name,
                (
                    _code_param((kind,)),
                    Param(
                        "alive",
                        _alive_any(lambda ctx, m=minimum: m),
                        bad_alive(lambda ctx: _code(ctx).num_workers),
                    ),
                ),
                _method(attr),
                _check_decoder,
                valid_error=_gcv_decoder_refused if kind == "gcc" else None,
            )
        )

    def straggler_check(size: bool, contiguous: bool = False):
        def check(out, kw):
            n = int(kw["num_workers"])
            expected = n - int(kw["num_stragglers"]) if size else None
            return _check_alive_result(out, n, expected, contiguous)

        return check

    targets += [
        Target(
            "stragglers.random",
            _stragglers_params(_num_stragglers),
            lambda kw: cc.stragglers.random,
            straggler_check(True),
        ),
        Target(
            "stragglers.contiguous",
            _stragglers_params(_num_stragglers),
            lambda kw: cc.stragglers.contiguous,
            straggler_check(True, True),
        ),
        Target(
            "stragglers.bernoulli",
            _stragglers_params(_p),
            lambda kw: cc.stragglers.bernoulli,
            straggler_check(False),
        ),
    ]

    targets += [
        Target(
            "metrics.mse",
            (
                Param("est", _pair_valid, _bad_pair("est", "truth")),
                Param("truth", _truth_valid, _bad_pair("truth", "est")),
            ),
            lambda kw: cc.metrics.mse,
            _check_mse,
        ),
        Target(
            "metrics.relative_accuracy",
            (
                Param("est", _pair_valid, _bad_pair("est", "truth")),
                Param("truth", _truth_valid, _bad_pair("truth", "est")),
            ),
            lambda kw: cc.metrics.relative_accuracy,
            _check_fraction,
        ),
        Target(
            "metrics.accuracy",
            (Param("est", _est_classes, _bad_est_for_labels), Param("labels", _labels_valid, _bad_labels)),
            lambda kw: cc.metrics.accuracy,
            _check_fraction,
        ),
    ]

    targets += [
        Target(
            "spline.fit",
            (
                Param("knots", _knots_valid(2), _bad_knots(2)),
                Param("values", _values_valid, _bad_values_all),
                Param("lam", lambda d, ctx: omit_or(d, 0.3, lambda: _lam_valid(d, ctx)), _bad_lam),
            ),
            lambda kw: cc.spline.fit,
            _check_fit,
        ),
        Target(
            "spline.smoothing_matrix",
            (
                Param("knots", _knots_valid(2), _bad_knots(2)),
                Param("lam", _lam_valid, _bad_lam),
                Param("points", _eval_points_valid, _bad_eval_points),
                Param(
                    "tol", lambda d, ctx: d.pick((OMIT, 0, 0.0, 1e-14, 1e-8)), bad_real(hi=1.0, typical=1e-8)
                ),
                Param("derivative", lambda d, ctx: d.pick((OMIT, 0, 2, np.int64(2))), _bad_derivative),
            ),
            lambda kw: cc.spline.smoothing_matrix,
            _check_smoothing_matrix,
        ),
        Target(
            "spline.lambda_grid",
            (
                Param("num_knots", lambda d, ctx: int_like(d, d.int(2, 50)), bad_count(2, name="num_knots")),
                Param(
                    "num",
                    lambda d, ctx: omit_or(d, 0.4, lambda: int_like(d, d.int(1, 12))),
                    bad_count(1, name="num"),
                ),
                Param("low", _low_valid, bad_real(lo=0.0, lo_open=True, typical=1e-6)),
                Param("high", _high_valid, bad_real(lo=0.0, lo_open=True, typical=1e4, extra=_bad_high)),
            ),
            lambda kw: cc.spline.lambda_grid,
            _check_lambda_grid,
        ),
        Target(
            "spline.gcv_lambda",
            (
                Param("knots", _knots_valid(3), _bad_knots(3)),
                Param("values", _values_valid, _bad_values_all),
                Param("grid", _grid_valid, bad_grid),
            ),
            lambda kw: cc.spline.gcv_lambda,
            _check_gcv_lambda,
        ),
        Target(
            "spline.gcv_score",
            (
                Param("knots", _knots_valid(3), _bad_knots(3)),
                Param("values", _values_valid, _bad_values_all),
                Param("lam", _lam_valid, _bad_lam),
            ),
            lambda kw: cc.spline.gcv_score,
            _check_gcv_score,
        ),
        Target(
            "tuning.tune",
            (
                Param("f", lambda d, ctx: d.pick(FUNCTIONS), _bad_f),
                Param("X", _tune_x_valid, _tune_bad_x),
                Param(
                    "num_workers", lambda d, ctx: int_like(d, d.int(2, 10)), bad_count(2, name="num_workers")
                ),
                Param(
                    "stragglers",
                    lambda d, ctx: Pattern(d.int(0, 3)),
                    lambda d, ctx: [
                        ("none", None),
                        ("int", 3),
                        ("str", "random"),
                        *[
                            (bad, Pattern(0, bad))
                            for bad in ("out-of-range", "one-worker", "duplicates", "strings")
                        ],
                    ],
                ),
                Param("trials", _tune_trials_valid, bad_count(1, name="trials")),
                Param("seed", lambda d, ctx: omit_or(d, 0.5, lambda: rng_valid(d, ctx)), bad_rng),
                Param("lambdas_enc", _tune_grid_valid, bad_grid),
                Param("lambdas_dec", _tune_grid_valid, bad_grid),
                Param("points", _points_valid, bad_choice(("chebyshev", "equispaced"))),
            ),
            lambda kw: cc.tuning.tune,
            _check_tune,
            documented_ok=(InsufficientResultsError,),
        ),
    ]

    targets += [
        Target(
            "ThreadCluster",
            (
                Param(
                    "num_threads",
                    lambda d, ctx: omit_or(d, 0.3, lambda: int_like(d, d.int(1, 4))),
                    bad_count(1, name="num_threads"),
                ),
                Param("delays", _delays_valid, _bad_delays),
                Param("faults", _faults_valid, _bad_faults),
                Param("seed", lambda d, ctx: omit_or(d, 0.3, lambda: rng_valid(d, ctx)), bad_rng),
            ),
            lambda kw: cc.ThreadCluster,
            _check_cluster(cc.ThreadCluster),
            cleanup=_close,
        ),
        Target(
            "SimulatedCluster",
            (
                Param("delays", _delays_valid, _bad_delays),
                Param("faults", _faults_valid, _bad_faults),
                Param("seed", lambda d, ctx: omit_or(d, 0.3, lambda: rng_valid(d, ctx)), bad_rng),
                Param("compute_s", _compute_s_valid, _bad_nonnegative),
            ),
            lambda kw: cc.SimulatedCluster,
            _check_cluster(cc.SimulatedCluster),
        ),
    ]
    for name, kind in (("SimulatedCluster.gather", "simulated"), ("ThreadCluster.gather", "thread")):
        targets.append(
            Target(
                name,
                (
                    _cluster_param((kind,)),
                    Param("f", lambda d, ctx: d.pick(FUNCTIONS), _bad_f),
                    Param("inputs", _inputs_valid, _bad_inputs),
                    Param(
                        "wait_for",
                        _gather_wait_for_valid,
                        bad_count(1, name="wait_for", extra=_bad_gather_wait_for),
                    ),
                    Param("deadline", _deadline_valid, _bad_deadline),
                ),
                lambda kw: kw["_cluster"].obj.gather,
                _check_gathered,
            )
        )
    targets.append(
        Target(
            "CodedExecutor",
            (
                Param("code", _executor_code_valid, _bad_code_arg),
                Param("f", lambda d, ctx: d.pick(FUNCTIONS), _bad_f),
                Param("cluster", _executor_cluster_valid, _bad_cluster_arg),
            ),
            lambda kw: cc.CodedExecutor,
            _check_cluster(cc.CodedExecutor),
        )
    )
    executor_context = (
        _code_param(tuple(CODE_CLASSES)),
        _cluster_param(("simulated", "simulated", "thread")),
        Param("_f", lambda d, ctx: d.pick(FUNCTIONS), hidden=True),
    )
    documented = (InsufficientResultsError, MissingResultsError)
    targets += [
        Target(
            "CodedExecutor.run",
            (
                *executor_context,
                Param("X", _exec_x_valid, bad_batch(lambda ctx: _code(ctx).num_inputs, "X")),
                Param(
                    "wait_for",
                    _exec_wait_for_valid,
                    bad_count(1, name="wait_for", extra=_bad_exec_wait_for, none_ok=True),
                ),
                Param("deadline", _deadline_valid, _bad_deadline),
            ),
            lambda kw: _executor(kw).run,
            _check_run,
            documented_ok=documented,
        ),
        Target(
            "CodedExecutor.map",
            (
                *executor_context,
                Param("batches", _batches_valid, _bad_batches, names=("batches", "batch")),
                Param(
                    "wait_for",
                    _exec_wait_for_valid,
                    bad_count(1, name="wait_for", extra=_bad_exec_wait_for, none_ok=True),
                ),
                Param("deadline", _deadline_valid, _bad_deadline),
            ),
            lambda kw: _executor(kw).map,
            _check_map,
            consume=list,
            documented_ok=documented,
        ),
    ]

    dl = cc.delays
    targets += [
        Target(
            "delays.ShiftedExponential",
            (Param("scale", _pos(1e-4, 0.1), _bad_positive), Param("rate", _pos(0.1, 5), _bad_positive)),
            lambda kw: dl.ShiftedExponential,
            _check_delay_model,
        ),
        Target(
            "delays.AdditiveExponential",
            (Param("mean", _pos(1e-4, 0.1), _bad_positive),),
            lambda kw: dl.AdditiveExponential,
            _check_delay_model,
        ),
        Target(
            "delays.Pareto",
            (Param("scale", _pos(1e-4, 0.1), _bad_positive), Param("alpha", _pos(0.5, 3), _bad_positive)),
            lambda kw: dl.Pareto,
            _check_delay_model,
        ),
        Target(
            "delays.Bimodal",
            (
                Param("base", _pos(1e-4, 0.1), _bad_positive),
                Param("p", _pos(0, 1), _bad_probability),
                Param("slowdown", _pos(1, 10), _bad_positive),
                Param("jitter", _pos(0, 0.5), _bad_nonnegative),
            ),
            lambda kw: dl.Bimodal,
            _check_delay_model,
        ),
        Target(
            "delays.BurstyMarkov",
            (
                Param("base", _pos(1e-4, 0.1), _bad_positive),
                Param("p_slow", _pos(0, 1), _bad_probability),
                Param("p_recover", _p_recover_valid, _bad_probability),
                Param("slowdown", _pos(1, 10), _bad_positive),
                Param("jitter", _pos(0, 0.5), _bad_nonnegative),
            ),
            lambda kw: dl.BurstyMarkov,
            _check_delay_model,
        ),
        Target(
            "delays.Trace",
            (
                Param("latencies", _latencies_valid, _bad_latencies),
                Param("shuffle", lambda d, ctx: d.pick((OMIT, True, False, np.bool_(False))), bad_flag),
            ),
            lambda kw: dl.Trace,
            _check_delay_model,
        ),
        Target(
            "faults.Independent",
            (Param("rates", _rates_valid, _bad_rates),),
            lambda kw: cc.faults.Independent,
            _check_fault_model,
        ),
        Target(
            "faults.Fixed",
            (Param("faults", _fixed_valid, _bad_fixed),),
            lambda kw: cc.faults.Fixed,
            _check_fault_model,
        ),
    ]
    return {t.name: t for t in targets}


_EXTENSION_TARGETS = {t.name: t for t in _extension_targets()}
TARGETS: dict[str, Target] = {
    **_build_targets(),
    **{t.name: t for t in _systematic_targets()},
    **_EXTENSION_TARGETS,
}
TARGET_NAMES: tuple[str, ...] = tuple(TARGETS)
# The extensions' callables (ManifoldGCC and layout, RobustGCC and the attacks, gradient
# coding), for ``tests/drivers/fuzz_api.py --only extensions``.
EXTENSION_NAMES: tuple[str, ...] = tuple(_EXTENSION_TARGETS)


# -- cases -----------------------------------------------------------------------------------


def make_case(name: str, draw: Draw, p_perturb: float = 0.75) -> Case:
    """Valid values for every parameter of ``name``, then with probability ``p_perturb`` ONE
    (non-hidden) parameter replaced by one of its invalid values."""
    target = TARGETS[name]
    ctx: dict = {}
    for p in target.params:
        ctx[p.name] = p.valid(draw, ctx)
    perturbable = [p for p in target.params if p.invalid is not None and not p.hidden]
    if not perturbable or not draw.coin(p_perturb):
        return Case(name, ctx)
    param = draw.pick(perturbable)
    label, value, *also = draw.pick(param.invalid(draw, ctx))
    kwargs = {**ctx, param.name: value}
    if also:
        kwargs.update(also[0])
    return Case(name, kwargs, param.name, label, tuple(also[0]) if also else ())


# -- classification --------------------------------------------------------------------------


@dataclass
class Detail:
    """What :func:`classify` saw: ``message`` (the exception as ``Type: text``, or what was
    wrong / returned), ``error`` (the exception), ``where`` (the innermost library frame
    that raised, ``file:line function``), the warnings issued (``numpy_warnings``: numpy's
    own floating-point / casting warnings that leaked to the caller) and the call's time."""

    message: str = ""
    error: BaseException | None = None
    where: str = ""
    numpy_warnings: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    seconds: float = 0.0

    def __str__(self) -> str:
        text = self.message
        if self.where:
            text += f"  (at {self.where})"
        if self.numpy_warnings:
            text += f"  [numpy warnings: {'; '.join(self.numpy_warnings[:3])}]"
        return text


class _Abandoned(BaseException):
    """Raised asynchronously in a case's thread once it has overrun its time limit."""


_NUMPY_WARNING = re.compile(
    r"(overflow|invalid value|divide by zero|underflow) encountered|Mean of empty slice|"
    r"Degrees of freedom|Casting complex values to real"
)
_ALLOWED_TYPES = (ValueError, TypeError)
_DOCUMENTED = (InsufficientResultsError, MissingResultsError)


def _is_numpy_warning(w: warnings.WarningMessage) -> bool:
    category = w.category
    if category.__module__.startswith("numpy"):
        return True
    return issubclass(category, RuntimeWarning) and bool(_NUMPY_WARNING.search(str(w.message)))


def _names(message: str, names: tuple[str, ...]) -> bool:
    return any(re.search(rf"(?<![A-Za-z0-9_]){re.escape(n)}(?![A-Za-z0-9_])", message) for n in names)


def _where(error: BaseException) -> str:
    frames = traceback.extract_tb(error.__traceback__)
    inside = [f for f in frames if "codedcomputing" in f.filename.replace("\\", "/")]
    frame = (inside or frames or [None])[-1]
    if frame is None:
        return ""
    path = frame.filename.replace("\\", "/")
    path = path[path.find("codedcomputing/") :] if "codedcomputing/" in path else path.rsplit("/", 1)[-1]
    return f"{path}:{frame.lineno} {frame.name}"


def _allowed_type(error: BaseException) -> bool:
    """ValueError / TypeError themselves, or the library's own subclasses (the documented
    errors); not numpy's (LinAlgError, AxisError) or Python's other subclasses."""
    cls = type(error)
    if cls in _ALLOWED_TYPES:
        return True
    return isinstance(error, _ALLOWED_TYPES) and cls.__module__.startswith("codedcomputing")


def _run(target: Target, case: Case, box: dict) -> None:
    try:
        fn = target.resolve(case.kwargs)
        result = fn(**case.public_kwargs())
        if target.consume is not None:
            result = target.consume(result)
        box["result"] = result
    except _Abandoned:
        box["abandoned"] = True
    except BaseException as err:  # every outcome is recorded, MemoryError included
        box["error"] = err
    finally:
        box["end"] = time.perf_counter()


def _abandon(thread: threading.Thread) -> None:
    """Ask a hung case's thread to stop at its next bytecode (a pure-Python loop otherwise
    keeps the GIL busy for the rest of the run); C code that never returns stays hung."""
    if thread.ident is not None:
        ctypes.pythonapi.PyThreadState_SetAsyncExc(ctypes.c_ulong(thread.ident), ctypes.py_object(_Abandoned))


_counter = itertools.count()


def classify(case: Case, time_limit: float = TIME_LIMIT_S) -> tuple[str, Detail]:
    """Run ``case`` (in a daemon thread, for at most ``time_limit`` seconds) and classify it
    (see :data:`OUTCOMES`). Warnings are recorded in the detail, never raised."""
    target = TARGETS[case.name]
    box: dict = {}
    detail = Detail()
    thread = threading.Thread(
        target=_run, args=(target, case, box), daemon=True, name=f"api-fuzz-case-{next(_counter)}"
    )
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        start = time.perf_counter()
        thread.start()
        thread.join(time_limit)
        hung = thread.is_alive()
        if hung:
            _abandon(thread)
    detail.seconds = box.get("end", time.perf_counter()) - start
    detail.warnings = [f"{w.category.__name__}: {w.message}" for w in caught]
    detail.numpy_warnings = [f"{w.category.__name__}: {w.message}" for w in caught if _is_numpy_warning(w)]
    if hung or box.get("abandoned"):
        detail.message = f"no answer within {time_limit:g} s"
        return "hang", detail
    if "error" in box:
        err = box["error"]
        detail.error = err
        detail.message = f"{type(err).__module__}.{type(err).__qualname__}: {err}"[:400]
        detail.message = detail.message.removeprefix("builtins.")
        detail.where = _where(err)
        if case.perturbed is None:
            if isinstance(err, target.documented_ok):
                return "ok", detail
            if target.valid_error is not None and target.valid_error(case, err):
                return "ok", detail
            return "valid-raised", detail
        if not _allowed_type(err):
            return "unexpected-type", detail
        # A coupled change (est and truth both empty) may be reported under either name.
        names = tuple(n for p in (case.perturbed, *case.coupled) for n in target.param(p).accepted_names)
        if _names(str(err), names):
            return "named", detail
        if isinstance(err, _DOCUMENTED):
            # Too few results is never about a malformed argument: the invalid value was
            # taken (e.g. best_effort=None read as False, deadline="1.0" as 1 s) and the
            # call then ran out of results.
            detail.message = f"accepted, then raised {detail.message}"
            return "accepted-invalid", detail
        return "unnamed", detail
    result = box.get("result")
    try:
        if case.perturbed is not None:
            detail.message = f"returned {short(result)}"
            return "accepted-invalid", detail
        try:
            with warnings.catch_warnings():  # the check's own calls: not the library's answer
                warnings.simplefilter("ignore")
                problem = target.check(result, case.kwargs)
        except Exception as err:  # an invariant that cannot even be checked is broken
            problem = f"checking the result raised {type(err).__name__}: {err}"
        detail.message = problem or f"returned {short(result)}"
        return ("bad-result" if problem else "ok"), detail
    finally:
        if target.cleanup is not None and result is not None:
            target.cleanup(result)
