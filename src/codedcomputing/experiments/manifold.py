"""Manifold-aware GCC against standard GCC and BACC when a batch lies on a manifold.

A batch of K inputs is coded for N = 5 K workers, K in {10, 50}. Tasks:

- ``lenet5``, ``vit``: the networks of :mod:`codedcomputing.models` on K MNIST test images
  (images lie near a low-dimensional manifold of digits);
- ``poly-curve``, ``poly-surface``: inputs on a known manifold of dimension 1 (a curve) or 2
  (a surface) in R^100: latent ``t`` uniform in [0, 1] (or [0, 1]^2), mapped by a fixed
  random two-layer tanh net, ``x = tanh(t A + b) W / sqrt(32)`` (32 hidden units, ``A`` with
  N(0, 4^2) entries, ``b`` uniform in [-2, 2], ``W`` standard normal); f is a fixed random
  cubic R^100 -> R^10 built from rank-10 projections, ``f(x) = (x P)^3 C + (x Q)^2 D + x E``
  (elementwise powers; ``P``, ``Q`` N(0, 1/100), ``C``, ``D`` N(0, 1/10), ``E`` N(0, 1/100)).
  The maps and f are drawn from the seed and the task's name.

Schemes, all at the same N, all with lambda_enc = 0 and GCC's default decoder (lambda_dec = 0):
no lambda is tuned, so that the run is fast and the schemes differ only in where the inputs sit
on the code's line.

- ``gcc``: standard :class:`~codedcomputing.GCC`, the inputs in the order drawn;
  ``gcc-golden``: the same with ``assignment="golden"``, ManifoldGCC's default worker
  assignment, so that what the assignment buys (under contiguous stragglers: nearly all of
  it) is not credited to the layout;
- ``manifold-gcc``: :class:`~codedcomputing.ManifoldGCC` as built with no options (its
  default design, distances within the batch); ``manifold-gcc-reference``: the same design
  with a reference set (geodesic distances): for the MNIST tasks 1,000 training images
  (never the test images coded), for the polynomial tasks 200 points sampled from the task's
  manifold independently of the inputs, to show what the reference buys (on MNIST: nothing;
  it raised the MSE in the measured runs, which is why the headline scheme goes without);
- ``manifold-gcc-<design>``: each other layout of ``codedcomputing.codes.layout.LAYOUTS``
  with its defaults (no reference); ``manifold-gcc-none`` keeps the batch as drawn but has
  everything else of ManifoldGCC (the spacing by distances, systematic placement, the golden
  assignment), so the rows separate what the order buys from the rest;
- ``bacc``: Berrut, the inputs in the order drawn; ``bacc-ordered``: Berrut with
  ManifoldGCC's worker assignment on the batch permuted by ``manifold-gcc``'s layout order,
  its estimates permuted back: ordering (and the assignment) help BACC too, so this is the
  fair baseline.

Pairing: per (task, K) and trial one batch is drawn; every scheme codes that batch and its
workers' results are computed once. For each straggler pattern (``random``, ``contiguous``)
and S = round(fraction N), fraction from 0 to 0.6, one set of surviving workers is drawn and
every scheme decodes from it. So every scheme sees the same inputs and stragglers per trial,
and per-trial ratios between schemes can be bootstrapped in pairs.

Metrics per (task, K, pattern, S, scheme, trial): MSE against f(x), relative accuracy
(argmax agreement with f(x); MNIST tasks only, empty otherwise) and ``layout_s``, the seconds
that laying out the batch took (ManifoldGCC's ``bind``; ``bacc-ordered`` pays for the same
layout; 0 for ``gcc`` and ``bacc``).
"""

from __future__ import annotations

import zlib
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from .. import datasets, metrics, models, stragglers
from .._progress import progress as show_progress
from ..codes import BACC, GCC, ManifoldGCC
from ..codes.layout import LAYOUTS, ChainLayout
from .records import (
    COUNT,
    FLOOR_NOTE,
    NONNEGATIVE,
    SIZE,
    TEXT,
    Cell,
    Headline,
    band_note,
    curves_over_s,
    draw_band,
    floor_if_exact,
    grouped,
    means,
    pyplot,
    save_figure,
    scheme_style,
    show_floor,
    twins,
)

NAME = "manifold"
# one line of `coded experiment --help`
SUMMARY = "ManifoldGCC vs GCC and BACC on MNIST and on manifolds in R^100 (K = 10, 50; N = 5 K)"
MNIST_TASKS = ("lenet5", "vit")
MANIFOLD_DIMS = {"poly-curve": 1, "poly-surface": 2}
TASKS = (*MNIST_TASKS, *MANIFOLD_DIMS)
PATTERNS = {"random": stragglers.random, "contiguous": stragglers.contiguous}
CELLS = {
    "task": TEXT,
    "scheme": TEXT,
    "num_inputs": SIZE,
    "num_workers": SIZE,
    "pattern": TEXT,
    "num_stragglers": COUNT,
    "trial": COUNT,
    "mse": NONNEGATIVE,
    "rel_acc": Cell("number", low=0, high=1, optional=True),  # empty off the MNIST tasks
    "layout_s": NONNEGATIVE,
}
COLUMNS = tuple(CELLS)
DIM, OUT_DIM, HIDDEN, RANK = 100, 10, 32, 10  # the polynomial tasks' spaces (module docstring)


@dataclass(frozen=True)
class Config:
    tasks: tuple[str, ...] = TASKS
    num_inputs: tuple[int, ...] = (10, 50)
    workers_per_input: int = 5
    fractions: tuple[float, ...] = (0.0, 0.1, 0.2, 0.3, 0.4, 0.5, 0.6)
    patterns: tuple[str, ...] = tuple(PATTERNS)
    trials: int = 50
    reference_size: int = 1000  # MNIST training images
    # points on the polynomial tasks' manifolds (the measured figures used 200)
    manifold_reference_size: int = 200


# K = 10 only: the thin-plate design's decoder takes ~1-4 s per batch at K = 50 (measured)
QUICK = Config(num_inputs=(10,), fractions=(0.0, 0.2, 0.4, 0.6), trials=5)


def schemes() -> tuple[str, ...]:
    """The schemes, in drawing order: one ``manifold-gcc-<design>`` per layout of
    :data:`~codedcomputing.codes.layout.LAYOUTS` other than the default, read when called."""
    default = ManifoldGCC(2, 2).design
    others = [d for d in LAYOUTS if d != default]
    return (
        "gcc",
        "gcc-golden",
        "manifold-gcc",
        "manifold-gcc-reference",
        *(f"manifold-gcc-{d}" for d in others),
        "bacc",
        "bacc-ordered",
    )


def manifold_map(rng: np.random.Generator, latent_dim: int):
    """A fixed random smooth embedding of [0, 1]^latent_dim in R^100 (module docstring)."""
    a = rng.normal(scale=4.0, size=(latent_dim, HIDDEN))
    b = rng.uniform(-2.0, 2.0, size=HIDDEN)
    w = rng.normal(size=(HIDDEN, DIM)) / np.sqrt(HIDDEN)
    return lambda t: np.tanh(t @ a + b) @ w


def cubic(rng: np.random.Generator):
    """A fixed random cubic R^100 -> R^10 from rank-10 projections (module docstring)."""
    p, q = (rng.normal(size=(DIM, RANK)) / np.sqrt(DIM) for _ in range(2))
    c, d = (rng.normal(size=(RANK, OUT_DIM)) / np.sqrt(RANK) for _ in range(2))
    e = rng.normal(size=(DIM, OUT_DIM)) / np.sqrt(DIM)
    return lambda x: ((x @ p) ** 3) @ c + ((x @ q) ** 2) @ d + x @ e


def _task_rng(seed: int, *key) -> np.random.Generator:
    """A stream of its own per (seed, key): a task's numbers do not depend on which other
    tasks or sizes the config holds."""
    return np.random.default_rng([seed, *(zlib.crc32(str(part).encode()) for part in key)])


def _tasks(config: Config, seed: int, progress: bool) -> dict:
    """``{task: (f, draw(rng, k) -> batch, reference)}``."""
    unknown = [task for task in config.tasks if task not in TASKS]
    if unknown:
        raise ValueError(f"unknown tasks {unknown} (known: {', '.join(TASKS)})")
    tasks = {}
    if any(task in MNIST_TASKS for task in config.tasks):
        data = datasets.mnist()
        picks = _task_rng(seed, "mnist-reference").choice(
            len(data.train_x), config.reference_size, replace=False
        )
        reference = data.train_x[picks]  # training images: disjoint from the test images coded

        def draw_images(rng, k, test_x=data.test_x):
            return test_x[rng.choice(len(test_x), size=k, replace=False)]

        for task in config.tasks:
            if task in MNIST_TASKS:  # loaded (or trained) before the bar starts: training has its own
                tasks[task] = (models.numpy_function(task, progress=progress), draw_images, reference)
    for task in config.tasks:
        if task in MANIFOLD_DIMS:
            rng, latent = _task_rng(seed, task), MANIFOLD_DIMS[task]
            embed, f = manifold_map(rng, latent), cubic(rng)

            def draw_points(rng, k, embed=embed, latent=latent):
                return embed(rng.uniform(size=(k, latent)))

            tasks[task] = (f, draw_points, draw_points(rng, config.manifold_reference_size))
    return {task: tasks[task] for task in config.tasks}


def run(config: Config, seed: int, *, progress: bool = True) -> list[dict]:
    """The experiment's rows: one per (task, K, pattern, S, scheme, trial)."""
    tasks = _tasks(config, seed, progress)
    names = schemes()
    rows = []
    steps = len(tasks) * len(config.num_inputs) * config.trials
    with show_progress("manifold: tasks x K x trials", steps, enabled=progress) as step:
        for task, (f, draw, reference) in tasks.items():
            for k in config.num_inputs:
                n = config.workers_per_input * k
                rng = _task_rng(seed, task, k, "trials")
                layouts = _layouts(names, k, n, reference)
                # what each scheme's rows say about its layout: (design, reference size)
                described = {
                    scheme: (code.design, _size(code.layout.reference)) for scheme, code in layouts.items()
                }
                described |= {
                    "gcc": ("", 0),
                    "gcc-golden": ("", 0),
                    "bacc": ("", 0),
                    "bacc-ordered": described["manifold-gcc"],
                }
                # the baselines that share ManifoldGCC's worker assignment (golden by default)
                assignment = layouts["manifold-gcc"].assignment
                gcc, bacc = GCC(k, n), BACC(k, n)
                gcc_golden, bacc_same = GCC(k, n, assignment="golden"), BACC(k, n, assignment=assignment)
                for trial in range(config.trials):
                    x = draw(rng, k)
                    truth = f(x)
                    # per scheme: (the code that decodes, the workers' results, the layout's seconds)
                    coded = {
                        "gcc": (gcc, f(gcc.encode(x)), 0.0),
                        "gcc-golden": (gcc_golden, f(gcc_golden.encode(x)), 0.0),
                        "bacc": (bacc, f(bacc.encode(x)), 0.0),
                    }
                    for scheme, code in layouts.items():
                        bound = code.bind(x)
                        coded[scheme] = (bound, f(bound.encode(x)), bound.layout.seconds)
                    default = coded["manifold-gcc"][0].layout
                    order = getattr(default, "order", None)
                    if order is None:  # a default design without an order: BACC as drawn
                        order = np.arange(k)
                    coded["bacc-ordered"] = (bacc_same, f(bacc_same.encode(x[order])), default.seconds)
                    for pattern in config.patterns:
                        for fraction in config.fractions:
                            s = round(fraction * n)
                            alive = PATTERNS[pattern](n, s, rng)
                            for scheme in names:
                                code, y, layout_s = coded[scheme]
                                est = code.decode(y[alive], alive)
                                if scheme == "bacc-ordered":  # estimate i is input order[i]'s
                                    est = est[np.argsort(order)]
                                design, reference_size = described[scheme]
                                rows.append(
                                    {
                                        "experiment": NAME,
                                        "task": task,
                                        "scheme": scheme,
                                        "design": design,
                                        "reference": reference_size,
                                        "num_inputs": k,
                                        "num_workers": n,
                                        "pattern": pattern,
                                        "num_stragglers": s,
                                        "straggler_fraction": fraction,
                                        "trial": trial,
                                        "seed": seed,
                                        "mse": metrics.mse(est, truth),
                                        "rel_acc": metrics.relative_accuracy(est, truth)
                                        if task in MNIST_TASKS
                                        else "",
                                        "layout_s": layout_s,
                                        "lambda_enc": 0.0,
                                        "lambda_dec": 0.0,
                                    }
                                )
                    step()
    return rows


def _layouts(names, k: int, n: int, reference) -> dict[str, ManifoldGCC]:
    """The ManifoldGCC of each ``manifold-gcc*`` scheme in ``names``."""
    layouts = {
        "manifold-gcc": ManifoldGCC(k, n),
        "manifold-gcc-reference": ManifoldGCC(k, n, layout=ChainLayout(reference=reference)),
    }
    for scheme in names:
        if scheme.startswith("manifold-gcc-") and scheme not in layouts:
            design = scheme.removeprefix("manifold-gcc-")
            layouts[scheme] = ManifoldGCC(k, n, layout=design)
    return layouts


def _size(reference) -> int:
    return 0 if reference is None else len(reference)


# gcc and bacc keep the look they have in every figure; the layouts' schemes get their own
STYLES = {
    "gcc-golden": {"color": "C0", "ls": ":", "marker": "o", "mfc": "none", "ms": 6},
    "manifold-gcc": {"color": "C3", "ls": "-", "marker": "D"},
    "manifold-gcc-reference": {"color": "C3", "ls": ":", "marker": "D", "mfc": "none", "ms": 6},
    "bacc-ordered": {"color": "C2", "ls": "--", "marker": "^", "mfc": "none", "ms": 6},
}
DESIGN_LOOKS = (("C1", "s"), ("C4", "v"), ("C5", "P"), ("C6", "X"), ("C7", "*"), ("C8", "h"))


def _style(scheme: str, others: list[str]) -> dict:
    """``scheme``'s look; ``others``: the ``manifold-gcc-<design>`` schemes, each given the
    next colour and marker."""
    if scheme in STYLES:
        return dict(STYLES[scheme])
    if scheme in others:
        color, marker = DESIGN_LOOKS[others.index(scheme) % len(DESIGN_LOOKS)]
        return {"color": color, "ls": "-.", "marker": marker}
    return scheme_style(scheme)


def row_problem(row: dict) -> str:
    """Why a row of the CSV cannot be drawn across its cells ("" if it can): an MNIST task's
    row has a relative accuracy."""
    return "rel_acc empty in an MNIST row" if row["task"] in MNIST_TASKS and row["rel_acc"] == "" else ""


def plot(rows: list[dict], out_dir: Path) -> list[Path]:
    """``manifold_mse.png``: MSE (log scale) against S, a panel per (task, K) and pattern;
    ``manifold_accuracy.png``: relative accuracy, the MNIST tasks only."""
    figures = [_figure(rows, "mse", out_dir)]
    mnist = [row for row in rows if row["task"] in MNIST_TASKS]
    if mnist:
        figures.append(_figure(mnist, "rel_acc", out_dir))
    return figures


def _figure(rows: list[dict], value: str, out_dir: Path) -> Path:
    plt = pyplot()
    settings = list(dict.fromkeys((row["task"], row["num_inputs"]) for row in rows))
    patterns = list(dict.fromkeys(row["pattern"] for row in rows))
    names = list(dict.fromkeys(row["scheme"] for row in rows))
    others = [name for name in names if name.startswith("manifold-gcc-") and name not in STYLES]
    fig, axes = plt.subplots(
        len(settings), len(patterns), figsize=(6.2 * len(patterns), 3.9 * len(settings)), squeeze=False
    )
    floored = False
    for axes_row, (task, k) in zip(axes, settings, strict=True):
        for ax, pattern in zip(axes_row, patterns, strict=True):
            mine = [
                row for row in rows if (row["task"], row["num_inputs"], row["pattern"]) == (task, k, pattern)
            ]
            if not mine:  # a CSV read back with rows left out
                ax.set_axis_off()
                ax.set_title(f"{task}, K = {k}: no {pattern} rows", fontsize=10)
                continue
            curves = curves_over_s(mine, names, value)
            estimates = {scheme: [v.estimate for _, v in points] for scheme, points in curves.items()}
            same = twins(estimates, rtol=0.02 if value == "mse" else 0.0)
            floor = None
            if value == "mse":
                values = [x for points in curves.values() for _, v in points for x in v]
                floor = floor_if_exact(values)
            for scheme, points in curves.items():
                label = f"{scheme} ({same[scheme]})" if scheme in same else scheme
                s_values, intervals = zip(*points, strict=True)
                draw_band(ax, s_values, intervals, label, _style(scheme, others), floor=floor)
            n = mine[0]["num_workers"]
            if value == "mse":
                ax.set_yscale("log")
                if floor is not None:
                    show_floor(ax, floor)
                    floored = True
                ax.set_ylabel("MSE against f(x)")
            else:
                ax.set_ylim(min(ax.get_ylim()[0], 0.9), 1.02)
                ax.set_ylabel("relative accuracy")
            ax.set_title(f"{task}, K = {k}, N = {n}: {pattern} stragglers", fontsize=10)
            ax.set_xlabel("number of stragglers S")
            ax.legend(fontsize=6)
    trials = len({row["trial"] for row in rows})
    caption = f"{band_note(trials)}; every scheme decodes the same batches and straggler sets"
    name = f"{NAME}_mse" if value == "mse" else f"{NAME}_accuracy"
    return save_figure(fig, out_dir, name, f"{caption}; {FLOOR_NOTE}" if floored else caption)


def headline(rows: list[dict]) -> Headline:
    """Per task, K and S, manifold-gcc's mean MSE over gcc's and over bacc-ordered's under
    each pattern (below 1: ManifoldGCC is better; NaN where the rows lack one of them), and
    the median seconds its layout took per batch (on each setting's first line)."""
    mse = means(rows, ("task", "num_inputs", "pattern", "scheme", "num_stragglers"), "mse")
    layout = grouped(
        [row for row in rows if row["scheme"] == "manifold-gcc"], ("task", "num_inputs"), "layout_s"
    )
    settings = list(dict.fromkeys((row["task"], row["num_inputs"]) for row in rows))
    patterns = list(dict.fromkeys(row["pattern"] for row in rows))
    ratios = [(pattern, other) for pattern in patterns for other in ("gcc", "bacc-ordered")]
    table_rows = []
    for task, k in settings:
        s_values = sorted(
            {row["num_stragglers"] for row in rows if (row["task"], row["num_inputs"]) == (task, k)}
        )
        for i, s in enumerate(s_values):
            cells = [
                mse.get((task, k, pattern, "manifold-gcc", s), np.nan)
                / mse.get((task, k, pattern, other, s), np.nan)
                for pattern, other in ratios
            ]
            seconds = float(np.median(layout[(task, k)])) if i == 0 and (task, k) in layout else ""
            table_rows.append((task, k, s, *cells, seconds))
    return Headline(
        title="manifold: manifold-gcc's mean MSE over another scheme's (< 1: ManifoldGCC better)",
        columns=("task", "K", "S", *(f"{pattern} / {other}" for pattern, other in ratios), "layout s"),
        rows=table_rows,
        note="N = 5 K workers; layout s: median seconds to lay out one batch (manifold-gcc)",
    )
