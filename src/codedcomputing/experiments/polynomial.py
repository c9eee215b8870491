"""GCC against LCC and BACC on a polynomial (Fig. 3 of the GCC paper).

f is a random quadratic map R^dim -> R^out, ``f(x) = (x A) * (x B) + x C`` (elementwise
product), so LCC's recovery threshold is ``(K - 1) * 2 + 1``. For each number of random
stragglers S the experiment draws fresh inputs and straggler sets per trial and records the
MSE of: LCC (exact from the threshold on; beyond it, the best-effort interpolant through what
returned), GCC with lambdas tuned for that S on a separate calibration batch, GCC's natural
spline (lambda = 0) and BACC. LCC is exact to rounding while at least ``threshold`` results
return and breaks down past it; GCC degrades smoothly.
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from .. import metrics, stragglers
from .._progress import progress as show_progress
from ..codes import BACC, GCC, LCC
from ..tuning import tune
from .records import (
    COUNT,
    FLOOR_NOTE,
    NONNEGATIVE,
    SIZE,
    TEXT,
    Headline,
    band_note,
    curves_over_s,
    draw_band,
    floor_if_exact,
    means,
    pyplot,
    save_figure,
    scheme_style,
    show_floor,
    twins,
)

NAME = "polynomial"
# one line of `coded experiment --help`
SUMMARY = "Fig. 3: GCC against LCC and BACC on a random quadratic (K = 10, N = 40), S = 0 to 36"
APPROXIMATE = ("gcc", "gcc-natural", "bacc")
CELLS = {
    "function": TEXT,
    "scheme": TEXT,
    "num_inputs": SIZE,
    "num_workers": SIZE,
    "num_stragglers": COUNT,
    "recovery_threshold": SIZE,
    "trial": COUNT,
    "mse": NONNEGATIVE,
}
COLUMNS = tuple(CELLS)


@dataclass(frozen=True)
class Config:
    num_inputs: int = 10
    num_workers: int = 40
    degree: int = 2
    dim: int = 20
    out_dim: int = 10
    trials: int = 30
    tuning_trials: int = 10
    stragglers: tuple[int, ...] = tuple(range(0, 37))


QUICK = Config(trials=6, tuning_trials=4, stragglers=(0, 6, 12, 18, 20, 21, 22, 24, 27, 30, 34))


def quadratic(rng: np.random.Generator, dim: int, out_dim: int):
    a, b, c = (rng.normal(size=(dim, out_dim)) / np.sqrt(dim) for _ in range(3))
    return lambda x: (x @ a) * (x @ b) + x @ c


def run(config: Config, seed: int, *, progress: bool = True) -> list[dict]:
    """The experiment's rows: one per (S, scheme, trial)."""
    rng = np.random.default_rng(seed)
    k, n = config.num_inputs, config.num_workers
    f = quadratic(rng, config.dim, config.out_dim)
    lcc, bacc, natural = LCC(k, n, config.degree, best_effort=True), BACC(k, n), GCC(k, n, decoding="spline")
    rows = []
    with show_progress("polynomial: stragglers", len(config.stragglers), enabled=progress) as step:
        for s in config.stragglers:
            tuned = tune(
                f,
                rng.normal(size=(k, config.dim)),
                n,
                lambda num_workers, r, s=s: stragglers.random(num_workers, s, r),
                trials=config.tuning_trials,
                seed=seed + s,
            )
            gcc = tuned.code()
            for trial in range(config.trials):
                x = rng.normal(size=(k, config.dim))
                truth = f(x)
                alive = stragglers.random(n, s, rng)
                for scheme, code in (("lcc", lcc), ("gcc", gcc), ("gcc-natural", natural), ("bacc", bacc)):
                    y = f(code.encode(x))[alive]
                    with warnings.catch_warnings():  # LCC below its threshold warns each time
                        warnings.simplefilter("ignore", RuntimeWarning)
                        est = code.decode(y, alive)
                    rows.append(
                        {
                            "experiment": NAME,
                            "function": f"quadratic-{config.dim}-{config.out_dim}",
                            "scheme": scheme,
                            "num_inputs": k,
                            "num_workers": n,
                            "num_stragglers": s,
                            "recovery_threshold": lcc.recovery_threshold,
                            "trial": trial,
                            "seed": seed,
                            "mse": metrics.mse(est, truth),
                            "lambda_enc": getattr(code, "lambda_enc", ""),
                            "lambda_dec": getattr(code, "lambda_dec", ""),
                        }
                    )
            step()
    return rows


def plot(rows: list[dict], out_dir: Path) -> list[Path]:
    """``polynomial.png``: (a) the approximate codes (GCC tuned and natural, BACC) on an axis
    of their own; (b) LCC against GCC: exact (drawn at a marked floor) up to its recovery
    threshold, orders of magnitude worse past it. Both mark the threshold."""
    plt = pyplot()
    curves = curves_over_s(rows, (*APPROXIMATE, "lcc"), "mse")
    k, n, threshold = rows[0]["num_inputs"], rows[0]["num_workers"], rows[0]["recovery_threshold"]
    last_exact = n - threshold  # LCC is exact while S <= N - threshold
    fig, axes = plt.subplots(1, 2, figsize=(12, 4.6))
    for ax, schemes, title in (
        (axes[0], APPROXIMATE, "(a) the approximate codes: GCC and BACC"),
        (axes[1], ("gcc", "lcc"), "(b) LCC against GCC"),
    ):
        shown = {scheme: curves[scheme] for scheme in schemes if scheme in curves}
        same = twins({scheme: [v.estimate for _, v in points] for scheme, points in shown.items()})
        values = [x for points in shown.values() for _, v in points for x in v]
        floor = floor_if_exact(values)
        for scheme, points in shown.items():
            label = f"{scheme} ({same[scheme]})" if scheme in same else scheme
            if scheme == "lcc":
                label = "lcc (best effort past its threshold)"
            s_values, intervals = zip(*points, strict=True)
            draw_band(ax, s_values, intervals, label, scheme_style(scheme), floor=floor)
        ax.axvline(
            last_exact + 0.5,
            color="0.4",
            ls=":",
            lw=1.2,
            label=rf"LCC's recovery threshold: exact for $S \leq N - {threshold} = {last_exact}$",
        )
        ax.set_yscale("log")
        if floor is not None:
            show_floor(ax, floor)
        ax.set_xlabel("number of stragglers S")
        ax.set_ylabel("MSE against f(x)")
        ax.set_title(title)
        ax.legend(fontsize=8)
    shape = rows[0]["function"].split("-")  # written by run as quadratic-{dim}-{out_dim}
    if len(shape) == 3:
        space = rf"$\mathbb{{R}}^{{{shape[1]}}} \to \mathbb{{R}}^{{{shape[2]}}}$"
        fig.suptitle(f"f: a random quadratic map {space}, K = {k}, N = {n}")
    else:
        fig.suptitle(f"f: {rows[0]['function']}, K = {k}, N = {n}")
    trials = len({row["trial"] for row in rows})
    return [save_figure(fig, out_dir, NAME, f"{band_note(trials)}; {FLOOR_NOTE}")]


def headline(rows: list[dict]) -> Headline:
    """Mean MSE of LCC, GCC and BACC at S = 0, around LCC's threshold and at the largest S
    (NaN where the rows hold none)."""
    mse = means(rows, ("scheme", "num_stragglers"), "mse")
    n, threshold = rows[0]["num_workers"], rows[0]["recovery_threshold"]
    last_exact = n - threshold
    s_values = sorted({s for _, s in mse})
    near = [s for s in s_values if last_exact - 2 <= s <= last_exact + 3]
    shown = sorted({s_values[0], *near, s_values[-1]})
    return Headline(
        title=f"polynomial: mean MSE around LCC's threshold (exact for S <= {last_exact})",
        columns=("S", "lcc", "gcc", "gcc-natural", "bacc"),
        rows=[
            (s, *(mse.get((scheme, s), float("nan")) for scheme in ("lcc", "gcc", "gcc-natural", "bacc")))
            for s in shown
        ],
    )
