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
``benchmarks/fuzz_api.py``, driven by hypothesis (``st.randoms()``) in ``test_api_fuzz.py``.
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
"""

from __future__ import annotations

import ctypes
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
from typing import Any

import numpy as np

import codedcomputing as cc
from codedcomputing.errors import InsufficientResultsError, MissingResultsError
from codedcomputing.spline.gaps import GapAwareInterpolant

try:  # torch tensors are valid X / Y; without torch they are simply not drawn
    import torch
except ImportError:  # pragma: no cover - the dev environment has torch
    torch = None

__all__ = [
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
        args = ", ".join(f"{k}={short(v)}" for k, v in self.public_kwargs().items())
        context = ", ".join(f"{k[1:]}={short(v)}" for k, v in self.kwargs.items() if k.startswith("_"))
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


def _short(value, depth: int) -> str:
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
    return repr(value)


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
        return [
            ("unknown", first[:4]),
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
            self._obj = CODE_CLASSES[self.kind](**self.kwargs)
        return self._obj

    def __repr__(self) -> str:
        args = ", ".join(f"{k}={short(v, 30)}" for k, v in self.kwargs.items())
        return f"{CLASS_NAMES[self.kind]}({args})"


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
    (README is silent; the original raised a TypeError from inside SmoothingMap)."""
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
            "tuning.lambda_grid",
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
            lambda kw: cc.tuning.lambda_grid,
            _check_lambda_grid,
        ),
        Target(
            "tuning.gcv_lambda",
            (
                Param("knots", _knots_valid(3), _bad_knots(3)),
                Param("values", _values_valid, _bad_values_all),
                Param("grid", _grid_valid, bad_grid),
            ),
            lambda kw: cc.tuning.gcv_lambda,
            _check_gcv_lambda,
        ),
        Target(
            "tuning.gcv_score",
            (
                Param("knots", _knots_valid(3), _bad_knots(3)),
                Param("values", _values_valid, _bad_values_all),
                Param("lam", _lam_valid, _bad_lam),
            ),
            lambda kw: cc.tuning.gcv_score,
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


TARGETS: dict[str, Target] = _build_targets()
TARGET_NAMES: tuple[str, ...] = tuple(TARGETS)


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
            problem = target.check(result, case.kwargs)
        except Exception as err:  # an invariant that cannot even be checked is broken
            problem = f"checking the result raised {type(err).__name__}: {err}"
        detail.message = problem or f"returned {short(result)}"
        return ("bad-result" if problem else "ok"), detail
    finally:
        if target.cleanup is not None and result is not None:
            target.cleanup(result)
