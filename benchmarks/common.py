"""What the benchmark scripts share: bootstrap intervals, interleaved timing and its clocks, a
random MLP, and the package (or some of its modules) as it was at a git revision.

A script under ``perf/`` or ``studies/`` imports it after putting this folder on the path, so
that ``python benchmarks/perf/X.py`` runs from anywhere::

    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # benchmarks/: common.py
    from common import bootstrap

Intervals are 95% percentile-bootstrap intervals; every function takes an explicit
``numpy.random.Generator`` so a script's figures are reproducible from its seed.
"""

from __future__ import annotations

import importlib
import importlib.util
import subprocess
import sys
import tarfile
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]  # the repository

# ``--clock``: the elapsed time, or the calling thread's CPU time, which a machine whose cores
# other processes keep busy inflates less (with one BLAS thread all the work is this thread's).
CLOCKS: dict[str, Callable[[], float]] = {"wall": time.perf_counter, "cpu": time.thread_time}


def add_clock_option(parser) -> None:
    """Add ``--clock wall|cpu`` (default wall) to an argparse parser; ``CLOCKS[args.clock]``."""
    parser.add_argument(
        "--clock",
        choices=list(CLOCKS),
        default="wall",
        help="wall: elapsed time; cpu: this thread's CPU time (time.thread_time), which a machine "
        "shared with busy processes does not inflate by the time spent waiting for a core",
    )


def bootstrap(
    values, statistic=np.median, rng: np.random.Generator | None = None, draws: int = 2000
) -> tuple[float, float, float]:
    """``(statistic(values), low, high)``: the statistic and its 95% percentile-bootstrap
    interval over ``draws`` resamples of ``values`` (1-D). ``statistic`` takes ``axis=``
    (``np.mean``, ``np.median``). ``rng`` defaults to ``numpy.random.default_rng(0)``."""
    values = np.asarray(values, dtype=np.float64)
    if values.ndim != 1 or values.size == 0:
        raise ValueError(f"values: expected a non-empty 1-D array, got shape {values.shape}")
    rng = np.random.default_rng(0) if rng is None else rng
    index = rng.integers(0, values.size, size=(draws, values.size))
    boots = statistic(values[index], axis=1)
    low, high = np.quantile(boots, [0.025, 0.975])
    return float(statistic(values)), float(low), float(high)


def ratio_interval(
    numerator, denominator, rng: np.random.Generator, draws: int = 2000, statistic=np.mean
) -> tuple[float, float, float]:
    """``statistic(numerator) / statistic(denominator)`` and its 95% *paired* bootstrap
    interval: the two arrays hold one value per trial (or repeat) each, measured together, and
    are resampled with the same trials. A ratio with a zero denominator (an exact scheme) is
    ``inf`` or ``nan``, without a warning."""
    numerator = np.asarray(numerator, dtype=np.float64)
    denominator = np.asarray(denominator, dtype=np.float64)
    if numerator.shape != denominator.shape or numerator.ndim != 1 or numerator.size == 0:
        raise ValueError(
            f"numerator, denominator: expected non-empty 1-D arrays of one shape, got "
            f"{numerator.shape} and {denominator.shape}"
        )
    index = rng.integers(0, numerator.size, size=(draws, numerator.size))
    with np.errstate(divide="ignore", invalid="ignore"):
        ratios = statistic(numerator[index], axis=1) / statistic(denominator[index], axis=1)
        low, high = np.quantile(ratios, [0.025, 0.975])
        return float(statistic(numerator) / statistic(denominator)), float(low), float(high)


def interleaved(
    calls: dict, repeats: int, setup=None, clock: Callable[[], float] = time.perf_counter, idle: float = 0.0
) -> dict[str, np.ndarray]:
    """Seconds of each callable at every repeat, timed in turn, the order rotated from one
    repeat to the next (a call can slow the one after it: memory left to reclaim, a thread pool
    still spinning; load drifting over minutes is shared by all). ``setup(r)`` (untimed) runs
    first at each repeat and its result goes to every callable (``None`` without a setup).
    ``idle`` seconds of sleep after each call let a thread pool that spins after a parallel
    call (OpenBLAS's ~0.1 s) go quiet."""
    times: dict[str, list[float]] = {name: [] for name in calls}
    names = list(calls)
    for r in range(repeats):
        arg = setup(r) if setup is not None else None
        for name in names[r % len(names) :] + names[: r % len(names)]:
            start = clock()
            calls[name](arg)
            times[name].append(clock() - start)
            if idle:
                time.sleep(idle)
    return {name: np.array(t) for name, t in times.items()}


def median_seconds(
    calls: dict,
    repeats: int,
    setup=None,
    clock: Callable[[], float] = time.perf_counter,
    idle: float = 0.0,
    warm_up: bool = False,
) -> dict[str, float]:
    """The median over repeats of each callable's seconds, timed by :func:`interleaved` (same
    arguments); ``warm_up`` calls each once first, untimed (with ``setup(-1)``'s result)."""
    if warm_up:
        arg = setup(-1) if setup is not None else None
        for call in calls.values():
            call(arg)
    times = interleaved(calls, repeats, setup, clock, idle)
    return {name: float(np.median(t)) for name, t in times.items()}


def random_mlp(rng: np.random.Generator, d_in: int = 64, hidden: int = 128, d_out: int = 10):
    """A fresh random two-layer tanh network ``x -> tanh(x W1 + b1) W2`` (numpy), weights
    scaled by ``1/sqrt(fan-in)``: the smooth function the accuracy studies use beside the
    trained networks."""
    w1 = rng.normal(size=(d_in, hidden)) / np.sqrt(d_in)
    w2 = rng.normal(size=(hidden, d_out)) / np.sqrt(hidden)
    b1 = rng.normal(size=hidden) * 0.1
    return lambda x: np.tanh(x @ w1 + b1) @ w2


def git_source(rev: str, path: str) -> str:
    """The text of the repository's file ``path`` at git revision ``rev``."""
    return subprocess.run(
        ["git", "show", f"{rev}:{path}"], cwd=ROOT, capture_output=True, text=True, check=True
    ).stdout


def load_module_at(rev: str, path: str, name: str, replace: dict[str, str] | None = None):
    """The package's module ``path`` (below ``src/codedcomputing/``, e.g. ``"codes/robust"``) as
    it was at git revision ``rev``, loaded as ``codedcomputing.<folder>.<name>`` beside the
    current modules, so that its relative imports resolve against the installed package.
    ``replace`` maps strings of its source to what they become first (to make it import other
    modules loaded at the same revision)."""
    source = git_source(rev, f"src/codedcomputing/{path}.py")
    for old, new in (replace or {}).items():
        source = source.replace(old, new)
    package = ".".join(["codedcomputing", *path.split("/")[:-1]])
    full = f"{package}.{name}"
    spec = importlib.util.spec_from_loader(full, loader=None)
    module = importlib.util.module_from_spec(spec)
    module.__package__ = package
    sys.modules[full] = module
    exec(compile(source, f"{rev}:{path}.py", "exec"), module.__dict__)
    return module


def load_package_at(rev: str, folder) -> object:
    """The whole package as it was at git revision ``rev``, extracted under ``folder`` and
    imported as ``_codedcomputing_at_<rev>`` (its imports are relative, so it runs beside the
    current one)."""
    folder = Path(folder)
    archive = folder / "source.tar"
    with archive.open("wb") as handle:
        subprocess.run(["git", "archive", rev, "src/codedcomputing"], cwd=ROOT, check=True, stdout=handle)
    with tarfile.open(archive) as tar:
        tar.extractall(folder, filter="data")
    name = f"_codedcomputing_at_{rev}".replace("-", "_").replace("~", "_").replace("^", "_")
    (folder / "src" / "codedcomputing").rename(folder / "src" / name)
    sys.path.insert(0, str(folder / "src"))
    try:
        return importlib.import_module(name)
    finally:
        sys.path.pop(0)


def say(*parts) -> None:
    """``print`` flushed at once: a long study's rows appear as they are measured."""
    print(*parts, flush=True)
