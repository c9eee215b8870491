"""Coded inference of real networks as stragglers grow (Fig. 2 of the GCC paper).

For LeNet-5 and the ViT (trained on real MNIST digits, see :mod:`codedcomputing.models`),
K = 10 test images are coded for N = 50 workers and S random workers straggle, S from 0 to
60% of N. Schemes, all at the same N:

- ``gcc``: GCC with (lambda_enc, lambda_dec) tuned for that S by :func:`~codedcomputing.tuning.tune`
  on several calibration batches of training images, never test images (recorded in every
  row); tuning on one batch let a pair win by fitting that batch's quirks;
- ``gcc-natural``: GCC with lambda = 0 (natural splines); ``bacc``: Berrut;
- ``replication``: each image on N / K = 5 workers, the first copy wins;
- ``uncoded``: K workers, one image each, with the same straggler fraction (round(S K / N)
  of them straggle); a missing output is reported as zeros (MSE = ||f(x)||^2) and counts as
  wrong for the relative accuracy.

Metrics per (model, scheme, S, trial): MSE against f(x) and relative accuracy (argmax
agreement with f(x)); the figure shows their mean and 95% confidence band over trials.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np

from .. import datasets, metrics, models, stragglers
from ..codes import BACC, GCC, Replication, Uncoded
from ..tuning import tune
from .records import figure_dir, output_dir, progress, pyplot, read_csv, save_figure, summarise, write_csv

NAME = "stragglers"
SCHEMES = ("gcc", "gcc-natural", "bacc", "replication", "uncoded")


@dataclass(frozen=True)
class Config:
    models: tuple[str, ...] = ("lenet5", "vit")
    num_inputs: int = 10
    num_workers: int = 50
    stragglers: tuple[int, ...] = (0, 2, 5, 8, 10, 15, 20, 25, 30)
    trials: int = 100
    tuning_batches: int = 5
    tuning_trials: int = 20


QUICK = Config(stragglers=(0, 5, 10, 20, 30), trials=5, tuning_batches=2, tuning_trials=4)


def run(out_dir: Path, *, quick: bool = False, seed: int = 0, show_progress: bool = True) -> Path:
    out_dir = output_dir(out_dir)  # fail now, not after the run, if it cannot be written
    config = QUICK if quick else Config()
    k, n = config.num_inputs, config.num_workers
    data = datasets.mnist()
    natural, bacc, replication = GCC(k, n), BACC(k, n), Replication(k, n // k, fill=np.nan)
    uncoded = Uncoded(k, fill=np.nan)
    rows = []
    steps = len(config.models) * len(config.stragglers)
    with progress("stragglers: models x S", steps, show_progress) as step:
        for model_name in config.models:
            f = models.numpy_function(model_name, progress=show_progress)
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
    path = write_csv(rows, Path(out_dir) / f"{NAME}.csv")
    plot(path, out_dir)
    return path


def plot(csv_path: Path, out_dir: Path | None = None) -> list[Path]:
    """MSE (log scale) and relative accuracy against S, one row of panels per model."""
    plt = pyplot()

    rows = read_csv(csv_path)
    out_dir = figure_dir(csv_path, out_dir)
    model_names = list(dict.fromkeys(row["model"] for row in rows))
    fig, axes = plt.subplots(len(model_names), 2, figsize=(11, 3.8 * len(model_names)), squeeze=False)
    for axes_row, model_name in zip(axes, model_names, strict=True):
        mine = [row for row in rows if row["model"] == model_name]
        for ax, value, label in ((axes_row[0], "mse", "MSE"), (axes_row[1], "rel_acc", "relative accuracy")):
            summary = summarise(mine, ("scheme", "num_stragglers"), value)
            for scheme in SCHEMES:
                points = sorted((s, v) for (name, s), v in summary.items() if name == scheme)
                if value == "mse":  # a log axis: exact (zero) errors cannot be drawn
                    points = [(s, v) for s, v in points if v[0] > 0]
                s_values = [s for s, _ in points]
                mean, low, high = (np.array([v[i] for _, v in points]) for i in range(3))
                if value == "mse":
                    low = np.maximum(low, mean / 10)  # keep the band on the log axis
                ax.plot(s_values, mean, marker="o", ms=3, label=scheme)
                ax.fill_between(s_values, low, high, alpha=0.2)
            if value == "mse":
                ax.set_yscale("log")
            ax.set_xlabel("number of stragglers S")
            ax.set_ylabel(label)
            ax.set_title(f"{model_name}: {label} (N = {mine[0]['num_workers']}, K = {mine[0]['num_inputs']})")
            ax.legend(fontsize=8)
    return [save_figure(fig, out_dir, NAME)]
