"""Argument checks for the public API: each returns the value in canonical form or raises a
``ValueError`` whose message names the parameter. No other module of the package is imported.
"""

from __future__ import annotations

import math
import numbers

import numpy as np

__all__ = [
    "MAX_COUNT",
    "check_choice",
    "check_count",
    "check_flag",
    "check_number",
    "check_probability",
    "check_real_array",
    "check_rng",
    "check_shape",
]

# Sizes (inputs, workers, replicas, ...) above this are refused before anything is allocated:
# far beyond any cluster, and the points alone would take 80 MB.
MAX_COUNT = 10**7


def check_count(value, name: str, minimum: int = 0, maximum: int = MAX_COUNT) -> int:
    """``value`` as an int in ``[minimum, maximum]``; bools and floats (even 3.0) are refused."""
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, (int, np.integer)):
        raise ValueError(f"{name} must be an integer, got {value!r}")
    if value < minimum:
        raise ValueError(f"{name} must be >= {minimum}, got {value}")
    if value > maximum:
        raise ValueError(f"{name} must be at most {maximum:,}, got {value}")
    return int(value)


def check_number(
    value,
    name: str,
    *,
    low: float = -math.inf,
    high: float = math.inf,
    low_open: bool = False,
    high_open: bool = False,
    allow_inf: bool = False,
) -> float:
    """``value`` (a real number, not a bool or a string) as a float within the bounds; finite
    unless ``allow_inf`` (then +inf passes where ``high`` allows it). An int too large for a
    float is refused either way."""
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, numbers.Real):
        raise ValueError(f"{name} must be a real number, got {value!r}")
    try:
        number = float(value)
    except OverflowError:  # a huge int: no float holds it
        number = math.nan
    below = number <= low if low_open else number < low
    above = number >= high if high_open else number > high
    finite = math.isfinite(number) or (allow_inf and number == math.inf)
    if not finite or below or above:
        # what is accepted, exactly: -inf never is, +inf only with allow_inf
        opening = "(" if low_open or low == -math.inf else "["
        closing = "]" if not high_open and (high < math.inf or allow_inf) else ")"
        kind = "a number" if allow_inf and high == math.inf and not high_open else "a finite number"
        raise ValueError(f"{name} must be {kind} in {opening}{low:g}, {high:g}{closing}, got {value!r}")
    return number


def check_choice(value, name: str, choices) -> object:
    """``value`` if it is one of ``choices`` (compared by equality; strings must be strings)."""
    if not isinstance(value, (str, int)) or isinstance(value, bool) or value not in tuple(choices):
        raise ValueError(f"{name} must be one of {', '.join(map(str, choices))}; got {value!r}")
    return value


def check_shape(shape, name: str) -> tuple[int, ...]:
    """``shape`` (a sequence of sizes >= 0) as a tuple of ints."""
    try:
        sizes = tuple(shape)
    except TypeError:
        sizes = None
    if sizes is None or not all(
        isinstance(size, (int, np.integer)) and not isinstance(size, (bool, np.bool_)) and size >= 0
        for size in sizes
    ):
        raise ValueError(f"{name} must be a sequence of sizes >= 0, got {shape!r}")
    return tuple(int(size) for size in sizes)


def check_flag(value, name: str) -> bool:
    """``value`` (a bool or numpy bool) as a bool; strings, None and numbers are refused."""
    if not isinstance(value, (bool, np.bool_)):
        raise ValueError(f"{name} must be True or False, got {value!r}")
    return bool(value)


def check_probability(value, name: str, *, allow_one: bool = True) -> float:
    """``value`` as a probability in ``[0, 1]`` (``[0, 1)`` unless ``allow_one``)."""
    return check_number(value, name, low=0.0, high=1.0, high_open=not allow_one)


def check_rng(rng, name: str = "rng") -> np.random.Generator:
    """A ``numpy.random.Generator`` from a seed (an integer >= 0 or a sequence of them), a
    ``SeedSequence``, a bit generator or a ``Generator`` (returned as is).

    ``None`` (fresh entropy) is refused: every draw in this package is reproducible.
    """
    if isinstance(rng, np.random.Generator):
        return rng
    if isinstance(rng, (np.random.SeedSequence, np.random.BitGenerator)):
        return np.random.default_rng(rng)
    seeds = rng if isinstance(rng, (list, tuple, np.ndarray)) else [rng]
    valid = len(seeds) > 0 and all(
        isinstance(s, (int, np.integer)) and not isinstance(s, (bool, np.bool_)) and s >= 0 for s in seeds
    )
    if not valid or (isinstance(rng, np.ndarray) and rng.ndim != 1):
        raise ValueError(
            f"{name} must be a seed (an integer >= 0, or a sequence of them) or a "
            f"numpy.random.Generator, got {rng!r}"
        )
    return np.random.default_rng(rng)


def check_seed(seed, name: str) -> int:
    """``seed`` as an int >= 0 (numpy integers too, any size; bools refused)."""
    if isinstance(seed, (bool, np.bool_)) or not isinstance(seed, (int, np.integer)) or seed < 0:
        raise ValueError(f"{name} must be an integer >= 0, got {seed!r}")
    return int(seed)


def check_adversaries(num_adversaries, num_workers) -> int:
    """``num_adversaries`` as an int in ``0..N-1`` (with ``N`` liars no one is honest); an
    invalid ``num_workers`` is left for its own check."""
    q = check_count(num_adversaries, "num_adversaries", 0)
    valid_n = isinstance(num_workers, (int, np.integer)) and not isinstance(num_workers, (bool, np.bool_))
    if valid_n and q >= num_workers:
        raise ValueError(f"num_adversaries must be below num_workers = {int(num_workers)}, got {q}")
    return q


def check_real_array(values, name: str) -> np.ndarray:
    """``values`` as a float64 array; refuses complex, non-numeric and ragged input."""
    try:
        arr = np.asarray(values)
    except (TypeError, ValueError) as err:  # ragged nesting
        raise ValueError(f"{name} must be an array of real numbers: {err}") from None
    if arr.dtype == object or not np.issubdtype(arr.dtype, np.number):
        raise ValueError(f"{name} must hold real numbers, got dtype {arr.dtype}")
    if np.iscomplexobj(arr):
        raise ValueError(f"{name} must hold real numbers, got complex dtype {arr.dtype}")
    return arr.astype(np.float64, copy=False)


def number_or_text(text: str):
    """``text`` read as an int, else a float (``inf`` and ``nan`` included), else itself: a
    value from a CSV cell or a ``key=value`` option."""
    for kind in (int, float):
        try:
            return kind(text)
        except ValueError:
            pass
    return text
