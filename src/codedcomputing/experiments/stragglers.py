"""Coded inference of real networks as stragglers grow (Fig. 2 of the GCC paper).

For LeNet-5 and the ViT (trained on real MNIST digits, see :mod:`codedcomputing.models`),
K = 10 test images are coded for N = 50 workers and S random workers straggle, S from 0 to
70% of N. Schemes, all at the same N:

- ``gcc``: GCC with its default decoder (the gap-aware blend of the linear and the cubic
  interpolant, lambda_dec = 0; :mod:`codedcomputing.spline.gaps`) and lambda_enc tuned for that S by
  :func:`~codedcomputing.tuning.tune` on several calibration batches of training images,
  never test images (recorded in every row); tuning on one batch let a lambda win by
  fitting that batch's quirks;
- ``gcc-natural``: GCC's natural-spline decoder (``decoding="spline"``, lambda = 0), the
  GCC paper's interpolating variant; ``bacc``: Berrut;
- ``replication``: each image on N / K = 5 workers, the first copy wins;
- ``uncoded``: K workers, one image each, with the same straggler fraction (round(S K / N)
  of them straggle); a missing output is reported as zeros (MSE = ||f(x)||^2) and counts as
  wrong for the relative accuracy.

Metrics per (model, scheme, S, trial): MSE against f(x) and relative accuracy (argmax
agreement with f(x)); the figure shows their mean and a 95% bootstrap band over trials.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np

from .. import datasets, metrics, models, stragglers
from .._progress import progress as show_progress
from ..codes import BACC, GCC, Replication, Uncoded
from ..tuning import tune
from .records import (
    COUNT,
    FLOOR_NOTE,
    FRACTION,
    NONNEGATIVE,
    SIZE,
    TEXT,
    Headline,
    band_note,
    curves_over_s,
    draw_band,
    exact_floor,
    means,
    pyplot,
    save_figure,
    scheme_style,
    show_floor,
    twins,
)

NAME = "stragglers"
# one line of `coded experiment --help`
SUMMARY = "Fig. 2: LeNet-5 and the ViT on MNIST (K = 10, N = 50) as S grows; GCC, BACC, replication, uncoded"
SCHEMES = ("gcc", "gcc-natural", "bacc", "replication", "uncoded")
CELLS = {
    "model": TEXT,
    "scheme": TEXT,
    "num_inputs": SIZE,
    "num_workers": SIZE,
    "num_stragglers": COUNT,
    "trial": COUNT,
    "mse": NONNEGATIVE,
    "rel_acc": FRACTION,
}
COLUMNS = tuple(CELLS)


@dataclass(frozen=True)
class Config:
    models: tuple[str, ...] = ("lenet5", "vit")
    num_inputs: int = 10
    num_workers: int = 50
    stragglers: tuple[int, ...] = (0, 2, 5, 8, 10, 15, 20, 25, 30, 35)
    trials: int = 100
    tuning_batches: int = 5
    tuning_trials: int = 20


QUICK = Config(stragglers=(0, 5, 10, 20, 35), trials=5, tuning_batches=2, tuning_trials=4)


def run(config: Config, seed: int, *, progress: bool = True) -> list[dict]:
    """The experiment's rows: one per (model, scheme, S, trial)."""
    k, n = config.num_inputs, config.num_workers
    data = datasets.mnist()
    natural, bacc, replication = GCC(k, n, decoding="spline"), BACC(k, n), Replication(k, n // k, fill=np.nan)
    uncoded = Uncoded(k, fill=np.nan)
    rows = []
    steps = len(config.models) * len(config.stragglers)
    # loaded (or trained) before the bar starts: training shows a bar of its own
    functions = {name: models.numpy_function(name, progress=progress) for name in config.models}
    with show_progress("stragglers: models x S", steps, enabled=progress) as step:
        for model_name, f in functions.items():
            rng = np.random.default_rng(seed)
            for s in config.stragglers:
                calibration = [
                    data.train_x[rng.choice(len(data.train_x), size=k, replace=False)]
                    for _ in range(config.tuning_batches)
                ]
                tuned = tune(
                    f,
                    calibration,
                    n,
                    lambda num_workers, r, s=s: stragglers.random(num_workers, s, r),
                    trials=config.tuning_trials,
                    seed=seed + s,
                    lambdas_dec=[0.0],  # the default decoder: lambda_enc is what is tuned
                ).code()
                for trial in range(config.trials):
                    x = data.test_x[rng.choice(len(data.test_x), size=k, replace=False)]
                    truth = f(x)
                    alive = stragglers.random(n, s, rng)
                    estimates = {
                        scheme: code.decode(f(code.encode(x))[alive], alive)
                        for scheme, code in (("gcc", tuned), ("gcc-natural", natural), ("bacc", bacc))
                    }
                    estimates["replication"] = replication.decode(f(replication.encode(x))[alive], alive)
                    alive_uncoded = stragglers.random(k, round(s * k / n), rng)
                    estimates["uncoded"] = uncoded.decode(f(x)[alive_uncoded], alive_uncoded)
                    for scheme in SCHEMES:
                        est = estimates[scheme]
                        missing = np.isnan(est).any(axis=1)
                        est = np.where(missing[:, None], 0.0, est)  # nothing arrived: zeros
                        correct = (est.argmax(axis=1) == truth.argmax(axis=1)) & ~missing
                        code = tuned if scheme == "gcc" else natural if scheme == "gcc-natural" else None
                        rows.append(
                            {
                                "experiment": NAME,
                                "model": model_name,
                                "scheme": scheme,
                                "num_inputs": k,
                                "num_workers": k if scheme == "uncoded" else n,
                                "num_stragglers": s,
                                "trial": trial,
                                "seed": seed,
                                "mse": metrics.mse(est, truth),
                                "rel_acc": float(correct.mean()),
                                "missing": float(missing.mean()),
                                "lambda_enc": code.lambda_enc if code else "",
                                "lambda_dec": code.lambda_dec if code else "",
                            }
                        )
                step()
    return rows


def plot(rows: list[dict], out_dir: Path) -> list[Path]:
    """``stragglers.png``: MSE (log scale) and relative accuracy against S, a row of panels
    per model. Exact schemes (replication while a copy of each image arrives, uncoded with
    no stragglers) sit at a marked floor, not at their ~1e-12 rounding error."""
    plt = pyplot()
    model_names = list(dict.fromkeys(row["model"] for row in rows))
    fig, axes = plt.subplots(len(model_names), 2, figsize=(12, 4.2 * len(model_names)), squeeze=False)
    for axes_row, model_name in zip(axes, model_names, strict=True):
        mine = [row for row in rows if row["model"] == model_name]
        n = max(row["num_workers"] for row in mine)
        for ax, value in zip(axes_row, ("mse", "rel_acc"), strict=True):
            curves = curves_over_s(mine, SCHEMES, value)
            # accuracies near 1 are all within 2% of each other: only identical ones are twins
            estimates = {scheme: [v.estimate for _, v in points] for scheme, points in curves.items()}
            same = twins(estimates, rtol=0.02 if value == "mse" else 0.0)
            floor = None
            if value == "mse":
                floor = exact_floor(x for points in curves.values() for _, v in points for x in v)
            for scheme, points in curves.items():
                label = f"{scheme} ({same[scheme]})" if scheme in same else scheme
                s_values, intervals = zip(*points, strict=True)
                draw_band(ax, s_values, intervals, label, scheme_style(scheme), floor=floor)
            if value == "mse":
                show_floor(ax, floor)
                ax.set_ylabel("MSE against f(x)")
                ax.set_title(f"{model_name}: MSE (K = {mine[0]['num_inputs']}, N = {n})")
            else:
                ax.set_ylim(min(ax.get_ylim()[0], 0.95), 1.02)
                ax.set_ylabel("relative accuracy (argmax agrees with f(x))")
                ax.set_title(f"{model_name}: relative accuracy (K = {mine[0]['num_inputs']}, N = {n})")
            ax.set_xlabel("number of stragglers S (uncoded: the same fraction of its K workers)")
            ax.legend(fontsize=8)
    trials = len({row["trial"] for row in rows})
    return [save_figure(fig, out_dir, NAME, f"{band_note(trials)}; {FLOOR_NOTE}")]


def headline(rows: list[dict]) -> Headline:
    """Per model and S, BACC's mean MSE over tuned GCC's (above 1: GCC is better; NaN where
    the rows lack one of them), and at how many S GCC's relative accuracy is at least BACC's."""
    mse = means(rows, ("model", "scheme", "num_stragglers"), "mse")
    acc = means(rows, ("model", "scheme", "num_stragglers"), "rel_acc")
    model_names = list(dict.fromkeys(row["model"] for row in rows))
    s_values = sorted({row["num_stragglers"] for row in rows})
    table_rows, notes = [], []
    for model_name in model_names:
        nan = float("nan")
        ratios = [
            mse.get((model_name, "bacc", s), nan) / mse.get((model_name, "gcc", s), nan) for s in s_values
        ]
        table_rows.append((model_name, *ratios))
        keeps_up = sum(
            acc.get((model_name, "gcc", s), nan) >= acc.get((model_name, "bacc", s), nan) for s in s_values
        )
        notes.append(f"{model_name} {keeps_up}/{len(s_values)}")
    return Headline(
        title="stragglers: BACC's mean MSE over tuned GCC's (> 1: GCC better)",
        columns=("model", *(f"S={s}" for s in s_values)),
        rows=table_rows,
        note="S at which GCC's relative accuracy >= BACC's: " + ", ".join(notes),
    )
