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
from ..codes import BACC, GCC, LCC
from ..tuning import tune
from .records import figure_dir, output_dir, progress, pyplot, read_csv, save_figure, summarise, write_csv

NAME = "polynomial"


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


def run(out_dir: Path, *, quick: bool = False, seed: int = 0, show_progress: bool = True) -> Path:
    out_dir = output_dir(out_dir)  # fail now, not after the run, if it cannot be written
    config = QUICK if quick else Config()
    rng = np.random.default_rng(seed)
    k, n = config.num_inputs, config.num_workers
    f = quadratic(rng, config.dim, config.out_dim)
    lcc, bacc, natural = LCC(k, n, config.degree, best_effort=True), BACC(k, n), GCC(k, n)
    rows = []
    with progress("polynomial: stragglers", len(config.stragglers), show_progress) as step:
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
    path = write_csv(rows, Path(out_dir) / f"{NAME}.csv")
    plot(path, out_dir)
    return path


def plot(csv_path: Path, out_dir: Path | None = None) -> list[Path]:
    """Two panels from the CSV: up to LCC's recovery threshold (zoom) and the whole range."""
    plt = pyplot()

    rows = read_csv(csv_path)
    out_dir = figure_dir(csv_path, out_dir)
    summary = summarise(rows, ("scheme", "num_stragglers"), "mse")
    n, threshold = rows[0]["num_workers"], rows[0]["recovery_threshold"]
    last_exact = n - threshold  # LCC is exact while S <= N - threshold
    fig, axes = plt.subplots(1, 2, figsize=(11, 4.2))
    for ax, limit, title in (
        (axes[0], last_exact, f"(a) S <= N - threshold = {last_exact}"),
        (axes[1], max(s for _, s in summary), "(b) all S"),
    ):
        for scheme in ("gcc", "gcc-natural", "bacc", "lcc"):
            points = sorted((s, v) for (name, s), v in summary.items() if name == scheme and s <= limit)
            if not points:
                continue
            s_values = [s for s, _ in points]
            mean = np.array([v[0] for _, v in points])
            low = np.maximum(np.array([v[1] for _, v in points]), mean * 1e-3)
            ax.plot(s_values, mean, marker="o", ms=3, label=scheme)
            ax.fill_between(s_values, low, np.array([v[2] for _, v in points]), alpha=0.2)
        ax.axvline(last_exact, color="grey", ls=":", lw=1)
        ax.set_yscale("log")
        ax.set_xlabel("number of stragglers S")
        ax.set_ylabel("MSE")
        ax.set_title(title)
        ax.legend()
    fig.suptitle(f"Polynomial f, K = {rows[0]['num_inputs']}, N = {n}, LCC threshold {threshold}")
    return [save_figure(fig, out_dir, NAME)]
