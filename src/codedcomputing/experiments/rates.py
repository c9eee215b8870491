"""Convergence rates as the number of workers N grows (Fig. 4 of the GCC paper).

f is LeNet-5 (``models.load("lenet5")``, evaluated under ``torch.no_grad`` on float32 numpy
batches); the K inputs are MNIST test digits. K stays fixed while N runs over a geometric
grid, and we fit the slope of log(mean MSE) against log N per curve. Theory: with at most S
stragglers GCC's loss is O(S^3 N^-3); when each worker straggles independently with
probability p it is O(log_{1/p}(N)^3 N^-3) (the longest run of stragglers, which is what
hurts a spline, is about log_{1/p} N long).

- **(a) Worst case**: a contiguous block of S stragglers (``stragglers.contiguous``, S fixed,
  the block's start uniform) for GCC with tuned lambdas, GCC's natural spline (lambda = 0)
  and BACC. All three see the same inputs and the same block in each trial.
- **(b) Bernoulli**: every worker straggles with probability p (``stragglers.bernoulli``) for
  each p in ``Config.probabilities``, GCC tuned for that p (and natural GCC, recorded in the
  CSV but not drawn), beside panel (a)'s worst-case GCC curve. Theory lines (dashed) are
  ``N^-3`` and ``log_{1/p}(N)^3 N^-3`` scaled to pass through each curve's first point.

Choices:

- S = 2 by default (a gap of three knot spacings): the rate in N is what is at stake and a
  small S reaches the asymptotic regime at small N.
- Tuning (``tuning.tune``) runs once per (N, straggler model) on a calibration batch of K
  *training* digits (disjoint from the test digits the trials use), over ``tuning_trials``
  patterns, with a coarse encoder grid (``lambda_grid(K, num=tuning_enc_grid)``; the quick
  run tunes only ``lambda_dec``, with ``lambda_enc = 0``) and the default decoder grid. The
  tuned lambdas are in every GCC row (BACC rows leave them empty). On this deterministic f
  the tuned lambdas are 0 or negligible, as the README predicts.
- Randomness: trial t at N draws its K test digits and then its straggler patterns (the
  worst-case block, then one Bernoulli pattern per p, in that order) from
  ``default_rng([seed, N, 0, t])``; calibration digits come from ``[seed, N, 1]`` and the
  tuning patterns of setting i from ``[seed, N, 2 + i]``. Rows are therefore reproducible per
  (seed, N, trial) whatever the grid.
- Worker results are computed once per trial and encoder: GCC codes sharing a
  ``lambda_enc`` share ``f(coded)``, and every straggler pattern decodes from them.
- A Bernoulli draw with fewer than 2 returned workers (GCC needs 2) is redrawn from the same
  generator until at least 2 return, deterministically. With N >= 20 and p <= 0.3 the chance
  is below 2e-9 per draw, so in practice this never triggers.

Outputs: the rows (``rates.csv``: one per (N, straggler setting, scheme, trial)), the slopes
(``rates_slopes.csv``: panel, scheme, num_stragglers, p, slope and its 95% interval
slope_low, slope_high; :func:`derived`) and
``rates.png``. :func:`plot` and :func:`headline` recompute the slopes from the rows alone
(:func:`fit_slopes`).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np

from .. import datasets, metrics, models, stragglers
from .._progress import progress as show_progress
from ..codes import BACC, GCC
from ..spline import lambda_grid
from ..tuning import tune
from .records import (
    COUNT,
    NONNEGATIVE,
    SIZE,
    TEXT,
    Cell,
    Headline,
    band_note,
    draw_band,
    means,
    pyplot,
    save_figure,
    scheme_style,
    summarise,
    twins,
)

NAME = "rates"
# one line of `coded experiment --help`
SUMMARY = "Fig. 4: LeNet-5's MSE as N grows (20 to 320), worst-case and Bernoulli stragglers; fitted slopes"
MODEL = "lenet5"
WORST, BERNOULLI = "worst-case", "bernoulli"
CELLS = {
    "scheme": TEXT,
    "panel": TEXT,
    "num_inputs": SIZE,
    "num_workers": SIZE,
    "num_stragglers": Cell("integer", low=0, optional=True),  # empty in Bernoulli rows
    "p": Cell("number", low=0, high=1, above=True, optional=True),  # empty in worst-case rows
    "trial": COUNT,
    "mse": NONNEGATIVE,
}
COLUMNS = tuple(CELLS)


@dataclass(frozen=True)
class Config:
    num_inputs: int = 10
    num_workers: tuple[int, ...] = (20, 28, 40, 56, 80, 113, 160, 226, 320)
    num_stragglers: int = 2
    probabilities: tuple[float, ...] = (0.1, 0.2, 0.3)
    trials: int = 20
    tuning_trials: int = 5
    tuning_enc_grid: int = (
        4  # positive encoder lambdas in the tuning grid besides 0 (0: tune lambda_dec only)
    )


QUICK = Config(num_workers=(20, 40, 80, 160), trials=4, tuning_trials=3, tuning_enc_grid=0)


def _bernoulli(num_workers: int, p: float, rng: np.random.Generator) -> np.ndarray:
    """``stragglers.bernoulli``, redrawn from ``rng`` until at least 2 workers return."""
    while True:
        alive = stragglers.bernoulli(num_workers, p, rng)
        if alive.size >= 2:
            return alive


def _settings(config: Config) -> list[tuple[str, int | str, float | str, object]]:
    """(panel, num_stragglers, p, stragglers(N, rng)) for every straggler model."""
    s = config.num_stragglers
    settings = [(WORST, s, "", lambda n, rng: stragglers.contiguous(n, s, rng))]
    for p in config.probabilities:
        settings.append((BERNOULLI, "", p, lambda n, rng, p=p: _bernoulli(n, p, rng)))
    return settings


def run(config: Config, seed: int, *, progress: bool = True) -> list[dict]:
    """The experiment's rows: one per (N, straggler setting, scheme, trial)."""
    k = config.num_inputs
    f = models.numpy_function(MODEL, progress=progress)
    data = datasets.mnist()
    settings = _settings(config)
    lambdas_enc = lambda_grid(k, num=config.tuning_enc_grid) if config.tuning_enc_grid > 0 else [0.0]
    rows = []
    with show_progress("rates: workers N", len(config.num_workers), enabled=progress) as step:
        for n in config.num_workers:
            calibration = data.train_x[
                np.random.default_rng([seed, n, 1]).choice(len(data.train_x), k, replace=False)
            ]
            tuned = [
                tune(
                    f,
                    calibration,
                    n,
                    draw,
                    trials=config.tuning_trials,
                    seed=[seed, n, 2 + i],
                    lambdas_enc=lambdas_enc,
                    decoding="spline",  # the GCC paper's decoder, whose rates the theory states
                ).code()
                for i, (_, _, _, draw) in enumerate(settings)
            ]
            natural, bacc = GCC(k, n, decoding="spline"), BACC(k, n)
            for trial in range(config.trials):
                rng = np.random.default_rng([seed, n, 0, trial])
                x = data.test_x[rng.choice(len(data.test_x), k, replace=False)]
                truth = f(x)
                results = {natural.lambda_enc: f(natural.encode(x))}  # f(coded) per GCC lambda_enc
                for code in tuned:
                    if code.lambda_enc not in results:
                        results[code.lambda_enc] = f(code.encode(x))
                bacc_results = None
                for (panel, s, p, draw), gcc in zip(settings, tuned, strict=True):
                    alive = draw(n, rng)
                    schemes = [("gcc", gcc, results[gcc.lambda_enc]), ("gcc-natural", natural, results[0.0])]
                    if panel == WORST:
                        bacc_results = f(bacc.encode(x)) if bacc_results is None else bacc_results
                        schemes.append(("bacc", bacc, bacc_results))
                    for scheme, code, y in schemes:
                        est = code.decode(y[alive], alive)
                        rows.append(
                            {
                                "experiment": NAME,
                                "model": MODEL,
                                "scheme": scheme,
                                "panel": panel,
                                "num_inputs": k,
                                "num_workers": n,
                                "num_stragglers": s,
                                "p": p,
                                "trial": trial,
                                "seed": seed,
                                "num_alive": int(alive.size),
                                "mse": metrics.mse(est, truth),
                                "rel_acc": metrics.relative_accuracy(est, truth),
                                "lambda_enc": getattr(code, "lambda_enc", ""),
                                "lambda_dec": getattr(code, "lambda_dec", ""),
                            }
                        )
            step()
    return rows


def row_problem(row: dict) -> str:
    """Why a row of the CSV cannot be drawn across its cells ("" if it can): a worst-case row
    has an S, a Bernoulli row a p below 1."""
    if row["panel"] == WORST:
        return "num_stragglers empty in a worst-case row" if row["num_stragglers"] == "" else ""
    if row["panel"] == BERNOULLI:
        return "p not in (0, 1) in a bernoulli row" if row["p"] == "" or row["p"] >= 1 else ""
    return "panel neither worst-case nor bernoulli"


def derived(rows: list[dict]) -> dict[str, list[dict]]:
    """Tables computed from the rows, written beside the CSV: ``rates_slopes.csv``."""
    return {f"{NAME}_slopes": fit_slopes(rows)}


def slope_interval(x, y, level: float = 0.95) -> tuple[float, float, float]:
    """``(slope, low, high)``: the least-squares slope b of ``y`` on ``x`` and its ``level``
    confidence interval b -/+ t_{n-2, (1 + level)/2} se, where se^2 = sum(r^2) / (n - 2) /
    sum((x - mean x)^2) and r are the fit's residuals. The interval measures how well the n
    points lie on a line (trial noise in the means and any curvature alike), not a bootstrap
    over trials; with two points it is undefined (NaN)."""
    from scipy import stats

    x, y = np.asarray(x, dtype=float), np.asarray(y, dtype=float)
    n = x.size
    if n < 2 or y.shape != x.shape:
        raise ValueError(f"x and y must hold the same number (2 or more) of points, got {x.shape}, {y.shape}")
    if not 0.0 < level < 1.0:
        raise ValueError(f"level must be in (0, 1), got {level!r}")
    dx = x - x.mean()
    slope = float(dx @ (y - y.mean()) / (dx @ dx))
    if n == 2:
        return slope, float("nan"), float("nan")
    residuals = y - y.mean() - slope * dx
    se = float(np.sqrt(residuals @ residuals / (n - 2) / (dx @ dx)))
    half = float(stats.t.ppf(0.5 + level / 2, n - 2)) * se
    return slope, slope - half, slope + half


def fit_slopes(rows) -> list[dict]:
    """Least-squares slope of log(mean MSE over trials) against log N, one per curve
    (panel, scheme, num_stragglers, p), from the experiment's rows (as read from its CSV),
    with its 95% interval (``slope_low``, ``slope_high``: :func:`slope_interval`)."""
    curves: dict[tuple, list[tuple[int, float]]] = {}
    for (*curve, n), mean in means(
        rows, ("panel", "scheme", "num_stragglers", "p", "num_workers"), "mse"
    ).items():
        curves.setdefault(tuple(curve), []).append((n, mean))
    slopes = []
    for (panel, scheme, s, p), points in sorted(curves.items(), key=lambda item: _curve_order(item[0])):
        points = sorted((n, mean) for n, mean in points if mean > 0)
        if len(points) < 2:
            continue
        log_n, log_mse = np.log([n for n, _ in points]), np.log([mean for _, mean in points])
        slope, low, high = slope_interval(log_n, log_mse)
        slopes.append(
            {
                "panel": panel,
                "scheme": scheme,
                "num_stragglers": s,
                "p": p,
                "slope": slope,
                "slope_low": low,
                "slope_high": high,
            }
        )
    return slopes


def _curve_order(curve: tuple) -> tuple:
    panel, scheme, _, p = curve
    schemes = ("gcc", "gcc-natural", "bacc")
    return (panel != WORST, schemes.index(scheme) if scheme in schemes else len(schemes), str(p), scheme)


def _curve_label(row: dict) -> str:
    if row["panel"] == WORST:
        return f"{row['scheme']}, worst case S = {row['num_stragglers']}"
    return f"{row['scheme']}, bernoulli p = {row['p']}"


def _theory(ax, n, mean, shape, color, label):
    """The theory curve ``shape(N)`` scaled through the curve's first point, dashed."""
    values = shape(n)
    ax.plot(n, values * mean[0] / values[0], ls="--", lw=1, color=color, label=label)


def plot(rows: list[dict], out_dir: Path) -> list[Path]:
    """``rates.png``: (a) worst case, GCC vs BACC; (b) GCC under Bernoulli stragglers. Fitted
    slopes in the legends; theory lines dashed, through each curve's first point."""
    plt = pyplot()
    from matplotlib.lines import Line2D

    slopes = {(r["panel"], r["scheme"], r["p"]): r["slope"] for r in fit_slopes(rows)}
    summary = summarise(rows, ("panel", "scheme", "num_stragglers", "p", "num_workers"), "mse")

    def curve(panel, scheme, p):
        return sorted(
            (n, v) for (pa, sc, _, pp, n), v in summary.items() if (pa, sc, pp) == (panel, scheme, p)
        )

    worst = [r for r in rows if r["panel"] == WORST]
    s = worst[0]["num_stragglers"] if worst else None
    probabilities = sorted({r["p"] for r in rows if r["panel"] == BERNOULLI})
    fig, (ax_a, ax_b) = plt.subplots(1, 2, figsize=(13, 5.2))

    shown = {scheme: curve(WORST, scheme, "") for scheme in ("gcc", "gcc-natural", "bacc")}
    shown = {scheme: points for scheme, points in shown.items() if len(points) >= 2}
    same = twins({scheme: [v.estimate for _, v in points] for scheme, points in shown.items()})
    theory = None
    for scheme, points in shown.items():
        twin = f", {same[scheme]}" if scheme in same else ""
        label = f"{scheme} (slope {slopes[(WORST, scheme, '')]:.2f}{twin})"
        n, intervals = (np.array(values) for values in zip(*points, strict=True))
        line = draw_band(ax_a, n, intervals, label, scheme_style(scheme))
        if scheme == "gcc":
            theory = (n, intervals[:, 0], line.get_color())
    if theory is not None:  # drawn last, so that it is the legend's last entry
        _theory(
            ax_a, *theory[:2], lambda n: n**-3.0, theory[2], r"theory: $N^{-3}$, through gcc's first point"
        )
    ax_a.legend(fontsize=8)
    ax_a.set_title(f"(a) worst case: a block of S = {s} contiguous stragglers")

    # (b): one colour per straggler model; each dashed theory line is in its curve's colour
    colors = plt.rcParams["axes.prop_cycle"].by_key()["color"]
    curves = []
    points = curve(WORST, "gcc", "")
    if len(points) >= 2:
        label = f"gcc, worst case S = {s} (slope {slopes[(WORST, 'gcc', '')]:.2f})"
        curves.append((points, label, scheme_style("gcc"), lambda n: n**-3.0))
    markers = ("s", "^", "D", "v", "P")
    for i, p in enumerate(probabilities):
        points = curve(BERNOULLI, "gcc", p)
        if len(points) >= 2:
            label = f"gcc, p = {p:g} (slope {slopes[(BERNOULLI, 'gcc', p)]:.2f})"
            style = {"color": colors[(3 + i) % len(colors)], "ls": "-", "marker": markers[i % len(markers)]}
            curves.append((points, label, style, lambda n, p=p: (np.log(n) / np.log(1 / p)) ** 3 * n**-3.0))
    for points, label, style, shape in curves:
        n, intervals = (np.array(values) for values in zip(*points, strict=True))
        line = draw_band(ax_b, n, intervals, label, style)
        _theory(ax_b, n, intervals[:, 0], shape, line.get_color(), None)
    handles, labels = ax_b.get_legend_handles_labels()
    dashed = [
        Line2D([], [], color=scheme_style("gcc")["color"], ls="--", lw=1),
        Line2D([], [], color="0.4", ls="--", lw=1),
    ]
    theory_labels = [
        r"theory, worst case: $N^{-3}$",
        r"theory for p: $\log_{1/p}(N)^3\,N^{-3}$, in p's colour",
    ]
    ax_b.legend([*handles, *dashed], [*labels, *theory_labels], fontsize=8, loc="lower left")
    ax_b.set_title("(b) gcc, each worker straggles with probability p")

    grid = sorted({r["num_workers"] for r in rows})
    for ax in (ax_a, ax_b):
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.set_xticks(grid, [str(n) for n in grid], minor=False)
        ax.set_xticks([], minor=True)
        ax.set_xlabel("number of workers N")
        ax.set_ylabel("MSE against f(x)")
    fig.suptitle(
        f"LeNet-5 on MNIST, K = {rows[0]['num_inputs']}: MSE vs N (log-log); "
        "slopes fitted to log(mean MSE) against log N"
    )
    trials = len({r["trial"] for r in rows})
    return [save_figure(fig, out_dir, NAME, band_note(trials))]


def headline(rows: list[dict]) -> Headline:
    """The fitted slopes, one line per curve, with their 95% intervals (least squares, t with
    n - 2 degrees of freedom), beside the rate theory promises."""
    table_rows = []
    for row in fit_slopes(rows):
        if row["scheme"] == "bacc":
            theory = "-"
        elif row["panel"] == WORST:
            theory = "N^-3"
        else:
            theory = "log_{1/p}(N)^3 N^-3"
        low, high = row["slope_low"], row["slope_high"]
        interval = f"{low:.2f} to {high:.2f}" if np.isfinite(low) and np.isfinite(high) else "- (2 sizes)"
        table_rows.append((_curve_label(row), row["slope"], interval, theory))
    grid = sorted({r["num_workers"] for r in rows})
    return Headline(
        title=f"rates: slope of log(mean MSE) against log N, N = {', '.join(map(str, grid))}",
        columns=("curve", "slope", "95% interval", "theory (GCC)"),
        rows=table_rows,
    )
