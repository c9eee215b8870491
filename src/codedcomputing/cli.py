"""The ``coded`` command line."""

from __future__ import annotations

import os
import time
from pathlib import Path

import numpy as np
import typer
from rich.console import Console
from rich.table import Table

from . import metrics, stragglers
from ._version import __version__
from .codes import BACC, CODES, GCC, LCC, Replication, Uncoded

app = typer.Typer(
    help="Straggler-resilient approximate coded computing: GCC, BACC, LCC and baselines.",
    no_args_is_help=True,
    add_completion=False,
)


def console() -> Console:
    """A console made per command, so that COLUMNS and redirection are read when it runs."""
    return Console()


def _version(value: bool) -> None:
    if value:
        console().print(f"codedcomputing {__version__}")
        raise typer.Exit()


@app.callback()
def main(
    version: bool = typer.Option(
        False, "--version", callback=_version, is_eager=True, help="Print the version and exit."
    ),
) -> None:
    """Straggler-resilient approximate coded computing."""


@app.command("codes")
def list_codes() -> None:
    """List the available codes."""
    table = Table(title="codes")
    table.add_column("name")
    table.add_column("description")
    for name, cls in CODES.items():
        table.add_row(name, cls.description)
    console().print(table)


PATTERNS = {"random": stragglers.random, "contiguous": stragglers.contiguous}


@app.command("example")
def example(
    num_inputs: int = typer.Option(10, "--num-inputs", "-k", help="K, the number of inputs."),
    num_workers: int = typer.Option(50, "--num-workers", "-n", help="N, the number of workers."),
    num_stragglers: int = typer.Option(5, "--num-stragglers", "-s", help="S, workers that never return."),
    pattern: str = typer.Option("random", help="Straggler pattern: random or contiguous."),
    trials: int = typer.Option(20, min=1, help="Straggler patterns to average over."),
    seed: int = typer.Option(0, min=0, help="Seed for the inputs, the function and the stragglers."),
) -> None:
    """Encode K inputs, drop S stragglers, decode, and print each code's error.

    f is a fixed random two-layer tanh network (64 -> 128 -> 10) on Gaussian inputs. Uncoded
    and replication (same N, first copy wins) leave an input missing when all its copies
    straggle: their MSE counts only the inputs that arrived, and the missing fraction is shown.
    """
    if pattern not in PATTERNS:
        raise typer.BadParameter(f"must be one of {sorted(PATTERNS)}", param_hint="--pattern")
    if 0 <= num_workers - 2 < num_stragglers:
        raise typer.BadParameter(
            f"num_stragglers must leave at least 2 of the {num_workers} workers (GCC decodes from 2)",
            param_hint="--num-stragglers",
        )
    rng = np.random.default_rng(seed)
    w1 = rng.normal(size=(64, 128)) / 8.0
    w2 = rng.normal(size=(128, 10)) / np.sqrt(128)

    def f(x):
        return np.tanh(x @ w1) @ w2

    try:
        codes = [GCC(num_inputs, num_workers), BACC(num_inputs, num_workers)]
        if num_inputs <= num_workers - num_stragglers:  # LCC's threshold for linear f is K
            codes.append(LCC(num_inputs, num_workers, degree=1))
        codes.append(Uncoded(num_inputs, fill=np.nan))
        if num_workers >= 2 * num_inputs:
            codes.append(Replication(num_inputs, num_workers // num_inputs, fill=np.nan))
        stragglers.random(num_workers, num_stragglers, seed)  # validates S against N
    except ValueError as err:
        raise typer.BadParameter(str(err)) from None
    X = rng.normal(size=(num_inputs, 64))
    truth = f(X)
    table = Table(title=f"K={num_inputs}, N={num_workers}, S={num_stragglers} ({pattern}), {trials} trials")
    for column in ("code", "workers", "mean MSE", "rel. accuracy", "inputs missing"):
        table.add_column(column, justify="left" if column == "code" else "right")
    for code in codes:
        errors, accuracies, missing = [], [], []
        coded = code.encode(X)
        outputs = f(coded)
        for _ in range(trials):
            s = min(num_stragglers, code.num_workers - 1)
            alive = PATTERNS[pattern](code.num_workers, s, rng)
            est = code.decode(outputs[alive], alive)
            got = ~np.isnan(est).any(axis=1)  # copying codes fill a missing input with NaN
            missing.append(1.0 - got.mean())
            if got.any():
                errors.append(metrics.mse(est[got], truth[got]))
                accuracies.append(metrics.relative_accuracy(est[got], truth[got]))
        table.add_row(
            code.name,
            str(code.num_workers),
            f"{np.mean(errors):.3g}" if errors else "-",
            f"{np.mean(accuracies):.1%}" if accuracies else "-",
            f"{np.mean(missing):.1%}",
        )
    console().print(table)


@app.command("demo")
def demo(
    quick: bool = typer.Option(False, "--quick", help="Fewer calls (finishes in seconds)."),
    backend: str = typer.Option("thread", help="thread (embedded, the default) or ray (a local Ray)."),
    num_inputs: int = typer.Option(10, "--num-inputs", "-k", min=1, help="K, images per call."),
    num_workers: int = typer.Option(50, "--num-workers", "-n", min=2, help="N, the number of workers."),
    num_stragglers: int = typer.Option(
        15, "--num-stragglers", "-s", min=0, help="S: BACC and GCC use the fastest N - S workers."
    ),
    calls: int = typer.Option(None, min=1, help="Calls per scheme (default 40, or 12 with --quick)."),
    delay_ms: float = typer.Option(
        50.0, min=0.1, help="Shifted-exponential delay: T = delay_ms * (1 + Exp(1))."
    ),
    seed: int = typer.Option(0, min=0, help="Seed for the images and the delays."),
    ray_address: str = typer.Option(
        None, help="With --backend ray: a running Ray cluster's address (default: start a local Ray)."
    ),
) -> None:
    """Coded inference of LeNet-5 on real MNIST digits with stragglers, scheme by scheme.

    Each call sends K test images to N workers (uncoded: K workers) on the chosen backend;
    every worker's result is delayed by a seeded shifted-exponential draw. Uncoded waits for
    all K, replication (N / K copies) for one copy of each image, BACC and GCC for the
    fastest N - S. Prints accuracy against the labels, agreement with the uncoded network,
    and end-to-end latency (encode + wait + decode) percentiles.
    """
    from . import datasets, models
    from .experiments.latency import measure, schemes
    from .runtime import CodedExecutor, RayCluster, ThreadCluster
    from .runtime.delays import ShiftedExponential

    if backend not in ("thread", "ray"):
        raise typer.BadParameter("must be thread or ray", param_hint="--backend")
    if ray_address is not None and backend != "ray":
        raise typer.BadParameter("needs --backend ray", param_hint="--ray-address")
    if num_workers < 2 * num_inputs:
        raise typer.BadParameter(
            f"needs N >= 2K for replication ({num_workers} < 2 x {num_inputs})", param_hint="--num-workers"
        )
    if num_stragglers > num_workers - 2:
        raise typer.BadParameter(
            f"must leave at least 2 of the {num_workers} workers", param_hint="--num-stragglers"
        )
    calls = calls or (12 if quick else 40)
    data = datasets.mnist()
    f = models.numpy_function("lenet5", progress=True)
    delays = ShiftedExponential(delay_ms / 1e3)
    cluster = (
        ThreadCluster(num_threads=os.cpu_count() or 2, delays=delays, seed=seed)
        if backend == "thread"
        else RayCluster(ray_address, delays=delays, seed=seed)
    )
    title = (
        f"LeNet-5 on MNIST, {backend} backend: K={num_inputs}, N={num_workers}, S={num_stragglers}, "
        f"delays {delay_ms:g} ms x (1 + Exp(1)), {calls} calls per scheme"
    )
    table = Table(title=title)
    for column in ("scheme", "workers", "waits for", "accuracy", "rel. accuracy", "MSE", "p50 ms", "p99 ms"):
        table.add_column(column, justify="left" if column == "scheme" else "right")
    with cluster:
        for scheme, code, wait_for, _ in schemes(num_inputs, num_workers, (num_stragglers,)):
            executor = CodedExecutor(code, f, cluster)
            executor.run(data.test_x[:num_inputs], wait_for=wait_for)  # warm-up
            rows = measure(
                executor, wait_for, data.test_x, data.test_y, f, calls, np.random.default_rng(seed)
            )
            latency = np.array([row["latency_s"] for row in rows]) * 1e3
            table.add_row(
                scheme,
                str(code.num_workers),
                "all" if scheme == "uncoded" else "1/image" if wait_for is None else str(wait_for),
                f"{np.mean([row['accuracy'] for row in rows]):.1%}",
                f"{np.mean([row['rel_acc'] for row in rows]):.1%}",
                f"{np.mean([row['mse'] for row in rows]):.3g}",
                f"{np.percentile(latency, 50):.0f}",
                f"{np.percentile(latency, 99):.0f}",
            )
    out = console()
    Console(width=max(out.width, 110), file=out.file).print(table)


models_app = typer.Typer(help="Train and cache the models used for coded inference.", no_args_is_help=True)
app.add_typer(models_app, name="models")


@models_app.command("train")
def train_model(
    name: str = typer.Argument(..., help="lenet5 or vit."),
    dataset: str = typer.Option(None, help="mnist or digits (default: the model's recipe, mnist)."),
    epochs: int = typer.Option(None, min=1, help="Training epochs (default: the model's recipe)."),
    seed: int = typer.Option(0, min=0, help="Seed for initialisation, shuffling and augmentation."),
    retrain: bool = typer.Option(False, help="Train even when cached weights exist."),
) -> None:
    """Train a model on real digits (or load it from the cache) and report its held-out accuracy."""
    import dataclasses

    from . import models

    if name not in models.MODELS:
        raise typer.BadParameter(f"must be one of {sorted(models.MODELS)}", param_hint="NAME")
    recipe = models.MODELS[name][1]
    changes = {"seed": seed}
    if dataset is not None:
        if dataset not in ("mnist", "digits"):
            raise typer.BadParameter("must be mnist or digits", param_hint="--dataset")
        changes["dataset"] = dataset
    if epochs is not None:
        changes["epochs"] = epochs
    recipe = dataclasses.replace(recipe, **changes)
    model = models.load(name, recipe, retrain=retrain)
    weights = models.weights_path(name, recipe)
    console().print(
        f"{name} on {recipe.dataset}: held-out accuracy {model.test_accuracy:.2%} "
        f"({recipe.epochs} epochs, seed {recipe.seed}); weights: {weights}"
    )


def _check_out(out: Path) -> None:
    """A ``--out`` that cannot be written fails before any work, in one line naming it."""
    from .experiments.records import output_dir

    try:
        output_dir(out)
    except ValueError as err:
        raise typer.BadParameter(str(err), param_hint="--out") from None


@app.command("experiment")
def experiment(
    name: str = typer.Argument(..., help="Which experiment (see `coded experiment --help`)."),
    out: Path = typer.Option(Path("results"), "--out", help="Directory for the CSV and the figures."),
    quick: bool = typer.Option(False, "--quick", help="A smaller grid and fewer trials."),
    seed: int = typer.Option(0, min=0, help="Seed for everything random in the experiment."),
) -> None:
    """Run one of the papers' experiments: writes a long-format CSV and PNG figures."""
    from .experiments import EXPERIMENTS

    if name not in EXPERIMENTS:
        raise typer.BadParameter(f"must be one of {sorted(EXPERIMENTS)}", param_hint="NAME")
    _check_out(out)
    start = time.perf_counter()
    csv_path = EXPERIMENTS[name].run(out, quick=quick, seed=seed)
    console().print(f"{name}: wrote {csv_path} and figures in {out} ({time.perf_counter() - start:.0f} s)")


@app.command("plot")
def plot(
    csv_path: Path = typer.Argument(..., exists=True, dir_okay=False, help="A CSV written by an experiment."),
    out: Path = typer.Option(None, "--out", help="Directory for the figures (default: beside the CSV)."),
) -> None:
    """Redraw an experiment's figures from its CSV, without recomputing."""
    from .experiments import EXPERIMENTS
    from .experiments.records import read_csv

    if out is not None:
        _check_out(out)
    rows = read_csv(csv_path)
    name = rows[0].get("experiment") if rows else None
    if name not in EXPERIMENTS:
        raise typer.BadParameter(f"no experiment {name!r} known for this CSV", param_hint="CSV_PATH")
    for figure in EXPERIMENTS[name].plot(csv_path, out):
        console().print(f"wrote {figure}")
