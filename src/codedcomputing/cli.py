"""The ``coded`` command line."""

from __future__ import annotations

import difflib
import inspect
import os
import re
import textwrap
import time
from enum import Enum
from pathlib import Path

import numpy as np
import typer
import typer.core
from rich.console import Console
from rich.table import Table

from . import metrics, stragglers
from ._version import __version__
from .codes import BACC, CODES, GCC, LCC, Replication, Uncoded
from .datasets import DATASETS
from .models import MODELS  # its torch loads in the commands that build a model

# The experiments' names, for the help and the checks of NAME and --only, so that starting the
# command line does not import every experiment (and the serving stack); the experiment
# commands import them. tests/test_cli_startup.py checks this against EXPERIMENTS.
EXPERIMENT_NAMES = (
    "stragglers",
    "polynomial",
    "rates",
    "latency",
    "manifold",
    "adversarial",
    "gradient-coding",
    "frontier",
    "serving",
)


def _choices(name: str, values) -> type[Enum]:
    """A str enum of ``values``: typer then lists them in help and rejects anything else."""
    return Enum(name, [(value, value) for value in values], type=str)


PATTERNS = {"random": stragglers.random, "contiguous": stragglers.contiguous}
Pattern = _choices("Pattern", PATTERNS)
Backend = _choices("Backend", ("thread", "ray"))
ModelName = _choices("ModelName", MODELS)
DatasetName = _choices("DatasetName", DATASETS)


def _untyped_flags(params: list) -> list:
    """Flags take no value, so their help shows no ``<bool>`` type (typer's rich help would)."""
    for param in params:
        if getattr(param, "is_flag", False) and param.metavar is None:
            param.metavar = ""
    return params


def _reflow(text: str | None) -> str | None:
    """A docstring's paragraphs as one line each, so that the help wraps them at the terminal's
    width rather than at the source's line ends; a paragraph starting with ``\\b`` is kept as is."""
    if not text:
        return text
    paragraphs = inspect.cleandoc(text).split("\n\n")
    return "\n\n".join(
        part if part.startswith("\b") else " ".join(line.strip() for line in part.splitlines())
        for part in paragraphs
    )


class _Command(typer.core.TyperCommand):
    """A command whose help shows its flags without a type and wraps its paragraphs whole."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.help = _reflow(self.help)

    def get_params(self, ctx):
        return _untyped_flags(super().get_params(ctx))

    def parse_args(self, ctx, args):
        try:
            return super().parse_args(ctx, args)
        except typer.BadParameter as err:
            err.message = _choice_message(err.message)
            raise


def _choice_message(message: str) -> str:
    """A value outside a parameter's choices, said plainly (without the validator's "Value
    error," prefix) and with the nearest choice when one is close; other messages unchanged."""
    found = re.fullmatch(r"(?:Value error, )?'(.*)' is not one of (.*)\.", message, re.DOTALL)
    if not found:
        return message
    value, choices = found.group(1), re.findall(r"'([^']*)'", found.group(2))
    near = difflib.get_close_matches(value, choices, n=1, cutoff=0.6)
    return f"{value!r} is not one of {found.group(2)}" + (f"; did you mean {near[0]!r}?" if near else "")


class _Group(typer.core.TyperGroup):
    """A command group whose help shows its flags without a type."""

    def get_params(self, ctx):
        return _untyped_flags(super().get_params(ctx))


def _unknown(value: str, known, what: str) -> str:
    """``value`` is not one of ``known``: the message, with the nearest name when one is close."""
    near = difflib.get_close_matches(value, list(known), n=1, cutoff=0.6)
    hint = f"; did you mean {near[0]!r}?" if near else ""
    return f"{value!r} is not one of the {what}{hint} (known: {', '.join(known)})"


app = typer.Typer(
    cls=_Group,
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


@app.command("codes", cls=_Command)
def list_codes() -> None:
    """List the available codes."""
    table = Table(title="codes")
    table.add_column("name")
    table.add_column("description")
    for name, cls in CODES.items():
        table.add_row(name, cls.description)
    console().print(table)


@app.command("example", cls=_Command)
def example(
    num_inputs: int = typer.Option(10, "--num-inputs", "-k", help="K, the number of inputs."),
    num_workers: int = typer.Option(50, "--num-workers", "-n", help="N, the number of workers."),
    num_stragglers: int = typer.Option(5, "--num-stragglers", "-s", help="S, workers that never return."),
    pattern: Pattern = typer.Option("random", help="Straggler pattern."),
    trials: int = typer.Option(20, min=1, help="Straggler patterns to average over."),
    seed: int = typer.Option(0, min=0, help="Seed for the inputs, the function and the stragglers."),
) -> None:
    """Encode K inputs, drop S stragglers, decode, and print each code's error.

    f is a fixed random two-layer tanh network (64 -> 128 -> 10) on Gaussian inputs. Uncoded
    and replication (same N, first copy wins) leave an input missing when all its copies
    straggle: their MSE counts only the inputs that arrived, and the missing fraction is shown.
    """
    pattern = pattern.value
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


@app.command("demo", cls=_Command)
def demo(
    quick: bool = typer.Option(False, "--quick", help="Fewer queries (or calls with --batch): seconds."),
    backend: Backend = typer.Option(
        "thread", help="thread (embedded), or ray (a local Ray, or --ray-address)."
    ),
    seed: int = typer.Option(0, min=0, help="Seed for the arrivals, the digits and the stragglers."),
    ray_address: str = typer.Option(
        None, help="With --backend ray: a running Ray cluster's address (default: start a local Ray)."
    ),
    queries: int = typer.Option(None, min=1, help="Queries per scheme (default 1000, or 120 with --quick)."),
    utilisation: float = typer.Option(
        None, min=0.01, max=0.99, help="Offered load: the replicas' busy share with no redundancy (0.5)."
    ),
    replicas: int = typer.Option(None, "--replicas", "-r", min=2, help="R, the LeNet-5 replicas (6)."),
    stragglers: float = typer.Option(None, min=0.0, max=1.0, help="The share of tasks that straggle (0.02)."),
    slowdown: float = typer.Option(None, min=1.0, help="A straggler's slowdown (10)."),
    service_ms: float = typer.Option(
        None, min=0.1, help="A task's injected service time in ms before LeNet-5 runs (20)."
    ),
    group_size: int = typer.Option(None, min=2, help="coded: K, queries per group (4)."),
    parities: int = typer.Option(None, min=1, help="coded: parity tasks per group (2)."),
    tau: float = typer.Option(
        None,
        min=0.01,
        help="coded: ms a query's own task may run (or wait behind a running one) before the query is "
        "decoded, and at least this long after its group's close (1.5 service times: 30).",
    ),
    hedge_delay: float = typer.Option(
        None, min=0.01, help="hedge: ms before the backup request (1.5 service times: 30)."
    ),
    max_group_wait: float = typer.Option(
        None, min=0.01, help="coded and ParM: ms a group waits for its last query (2 service times: 40)."
    ),
    batch: bool = typer.Option(
        False, "--batch", help="The batch demo instead: coded calls of K digits on N workers."
    ),
    num_inputs: int = typer.Option(
        None, "--num-inputs", "-k", min=1, help="--batch: K, images per call (10)."
    ),
    num_workers: int = typer.Option(
        None, "--num-workers", "-n", min=2, help="--batch: N, the number of workers (50)."
    ),
    num_stragglers: int = typer.Option(
        None, "--num-stragglers", "-s", min=0, help="--batch: S, BACC and GCC use the fastest N - S (15)."
    ),
    calls: int = typer.Option(None, min=1, help="--batch: calls per scheme (40, or 12 with --quick)."),
    delay_ms: float = typer.Option(
        None, min=0.1, help="--batch: shifted-exponential delay T = delay_ms * (1 + Exp(1)) (50)."
    ),
) -> None:
    """Serve LeNet-5 on real MNIST digits with rare heavy stragglers, scheme by scheme, at equal resources.

    R replicas (threads, or Ray actors) serve one Poisson stream of test digits at the stated
    utilisation; each task sleeps an injected service time first, 10 times longer for the
    rare stragglers. Every scheme runs on the same replicas, arrivals, digits and draws: none
    (load-balanced), replication (2 copies), hedging, coded BACC and GCC (systematic, K queries
    per group plus parities, decoding a query once its own task ran, or waited behind a running
    one, for --tau, and --tau after its group's close), and ParM when its parity
    model is cached. Prints a line per scheme as it runs, then latency percentiles, accuracy,
    agreement with the exact model, the decoded share and the work per query, and a verdict.
    With --batch: the batch demo (uncoded, replication, BACC and GCC per call of K digits).
    """
    from . import datasets

    backend = backend.value
    if ray_address is not None and backend != "ray":
        raise typer.BadParameter("needs --backend ray", param_hint="--ray-address")
    serving_options = {
        "--queries": queries,
        "--utilisation": utilisation,
        "--replicas": replicas,
        "--stragglers": stragglers,
        "--slowdown": slowdown,
        "--service-ms": service_ms,
        "--group-size": group_size,
        "--parities": parities,
        "--tau": tau,
        "--hedge-delay": hedge_delay,
        "--max-group-wait": max_group_wait,
    }
    batch_options = {
        "--num-inputs": num_inputs,
        "--num-workers": num_workers,
        "--num-stragglers": num_stragglers,
        "--calls": calls,
        "--delay-ms": delay_ms,
    }
    for name, value in (serving_options if batch else batch_options).items():
        if value is not None:
            raise typer.BadParameter(
                "is an option of the serving demo" if batch else "needs --batch", param_hint=name
            )
    if batch:
        _batch_demo(
            quick,
            backend,
            10 if num_inputs is None else num_inputs,
            50 if num_workers is None else num_workers,
            15 if num_stragglers is None else num_stragglers,
            calls,
            50.0 if delay_ms is None else delay_ms,
            seed,
            ray_address,
        )
        return
    import dataclasses

    from .experiments import demo as serving_demo

    config = serving_demo.QUICK if quick else serving_demo.DemoConfig()
    unit = config.unit_ms if service_ms is None else service_ms
    changes = {
        "queries": queries,
        "utilisation": utilisation,
        "replicas": replicas,
        "straggler_p": stragglers,
        "slowdown": slowdown,
        "group_size": group_size,
        "parities": parities,
        "unit_ms": service_ms,
        "tau": None if tau is None else tau / unit,
        "hedge_delay": None if hedge_delay is None else hedge_delay / unit,
        "max_group_wait": None if max_group_wait is None else max_group_wait / unit,
    }
    config = dataclasses.replace(
        config, **{key: value for key, value in changes.items() if value is not None}
    )
    try:
        config.check()
    except ValueError as err:
        raise typer.BadParameter(str(err)) from None
    import torch

    from .models import parity

    torch.set_num_threads(1)  # the replicas are the parallelism: one torch thread each
    data = datasets.mnist()
    f = serving_demo.load_model("lenet5", say=lambda line: typer.echo(line, err=True))
    parity_f, parm_note = None, None
    if config.parm and parity.is_cached("lenet5", 2):
        parity_f = parity.parity_function(parity.load_parity("lenet5", 2, progress=False))
    else:
        parm_note = (
            "ParM left out: no parity model of LeNet-5 for groups of 2 is shipped or cached (train it "
            "with codedcomputing.models.parity.load_parity('lenet5', 2): about 3 to 6 minutes on 2 cores)"
        )
    rows = serving_demo.run(
        config,
        f,
        data.test_x,
        data.test_y,
        seed,
        parity_f=parity_f,
        backend=backend,
        address=ray_address,
        progress=lambda line: typer.echo(line, err=True),
    )
    out = console()
    wide = Console(width=max(out.width, 120), file=out.file)
    wide.print(_demo_table(rows, config, backend))
    if parm_note:
        wide.print(parm_note)
    wide.print(f"verdict: {serving_demo.verdict(rows)}")


def _demo_table(rows: list[dict], config, backend: str) -> Table:
    """The serving demo's rows as a table."""
    unit = config.unit_ms
    title = (
        f"LeNet-5 serving {config.queries} MNIST test digits per scheme on {config.replicas} {backend} "
        f"replicas: Poisson arrivals at {config.utilisation:.0%} utilisation, service {unit:g} ms, "
        f"{config.straggler_p:.0%} stragglers x{config.slowdown:g}; the same arrivals, digits and "
        f"draws for every scheme; exact model {rows[0]['exact_accuracy']:.1%} on these digits"
    )
    caption = (
        "work/query: service time of all its tasks (copies, hedges, parities) per second of the "
        "queries' own; agrees: the exact model's class; decoded: answered by its group's decode"
    )
    table = Table(title=title, caption=caption)
    columns = ("scheme", "work/query", "p50 ms", "p99 ms", "p99.9 ms", "accuracy", "agrees", "decoded")
    for column in columns:
        table.add_column(column, justify="left" if column == "scheme" else "right")
    for row in rows:
        table.add_row(
            row["scheme"],
            f"{1 + row['extra_load']:.2f}x",
            f"{row['p50_ms']:.0f}",
            f"{row['p99_ms']:.0f}",
            f"{row['p99.9_ms']:.0f}",
            f"{row['accuracy']:.1%}",
            f"{row['agreement']:.1%}",
            f"{row['decoded']:.1%}",
        )
    return table


def _batch_demo(quick, backend, num_inputs, num_workers, num_stragglers, calls, delay_ms, seed, ray_address):
    """`coded demo --batch`: coded inference of LeNet-5 on MNIST digits with stragglers, by scheme.

    Each call sends K test images to N workers (uncoded: K workers) on the chosen backend;
    every worker's result is delayed by a seeded shifted-exponential draw. Uncoded waits for
    all K, replication (N / K copies) for one copy of each image, BACC and GCC for the
    fastest N - S. Prints accuracy against the labels, agreement with the uncoded network,
    and end-to-end latency (encode + wait + decode) percentiles.
    """
    from . import datasets
    from .experiments.demo import load_model
    from .experiments.latency import measure, schemes
    from .runtime import CodedExecutor, RayCluster, ThreadCluster
    from .runtime.delays import ShiftedExponential

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
    f = load_model("lenet5", say=lambda line: typer.echo(line, err=True))
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


models_app = typer.Typer(
    cls=_Group, help="Train and cache the models used for coded inference.", no_args_is_help=True
)
app.add_typer(models_app, name="models")


@models_app.command("train", cls=_Command)
def train_model(
    name: ModelName = typer.Argument(..., help="The model."),
    dataset: DatasetName = typer.Option(None, help="The digits to train on (default: the model's recipe's)."),
    epochs: int = typer.Option(None, min=1, help="Training epochs (default: the model's recipe)."),
    seed: int = typer.Option(0, min=0, help="Seed for initialisation, shuffling and augmentation."),
    retrain: bool = typer.Option(False, help="Train even when cached weights exist."),
) -> None:
    """Train a model on real digits (or load it from the cache) and report its held-out accuracy."""
    import dataclasses

    from . import models

    name = name.value
    recipe = models.MODELS[name][1]
    changes = {"seed": seed}
    if dataset is not None:
        changes["dataset"] = dataset.value
    if epochs is not None:
        changes["epochs"] = epochs
    recipe = dataclasses.replace(recipe, **changes)
    model = models.load(name, recipe, retrain=retrain)
    shipped = models.is_shipped(name, recipe) and not retrain
    weights = "shipped with the package" if shipped else models.weights_path(name, recipe)
    console().print(
        f"{name} on {recipe.dataset}: held-out accuracy {model.test_accuracy:.2%} "
        f"({recipe.epochs} epochs, seed {recipe.seed}); weights: {weights}",
        soft_wrap=True,
    )


SHIPPED_NAMES = ("lenet5", "vit", "parity-lenet5-k2", "parity-lenet5-k4")  # models.shipped.SHIPPED
ShippedName = _choices("ShippedName", SHIPPED_NAMES)


@app.command("train", cls=_Command)
def train_shipped(
    name: ShippedName = typer.Argument(..., help="The shipped weights to train again."),
    ship: bool = typer.Option(
        False, "--ship", help="Write the result as the package's shipped weights (for maintainers)."
    ),
) -> None:
    """Train shipped weights again from their default recipe and compare them with the shipped file.

    Says whether the retrained weights equal the shipped ones bit for bit, and if not, the
    difference in test accuracy (for a parity model: its degraded-mode agreement with LeNet-5).
    Training runs on one torch thread, so on the machine that trained the shipped file the bits
    are equal; another CPU or torch build may round otherwise. LeNet-5 takes about 25 s on 2
    cores, the ViT 3 min, a parity model 3 min."""
    from .models.retrain import retrain

    comparison = retrain(name.value, ship=ship)
    console().print(comparison.summary(), soft_wrap=True, markup=False, highlight=False)
    if ship:
        console().print(f"wrote the shipped weights of {name.value}", markup=False, highlight=False)


def _check_out(out: Path, option: str = "--out") -> None:
    """A folder ``option`` (``--out``, ``--docs``) that cannot be written fails before any work,
    in one line naming it."""
    from .experiments.records import output_dir

    try:
        output_dir(out)
    except ValueError as err:
        raise typer.BadParameter(str(err), param_hint=option) from None


EXPERIMENT_INTRO = (
    "Run one of the papers' experiments: write its long-format CSV and PNG figures in --out, "
    "and print its headline."
)


def _experiment_help(width: int | None = None) -> str:
    """The help of ``coded experiment``: a line per experiment, its summary wrapped at ``width``
    (the terminal's, less the help's margins) under itself, so that no word is split."""
    from .experiments import EXPERIMENTS

    width = console().width if width is None else width
    indent = max(len(name) for name in EXPERIMENTS) + 2
    entries = [
        textwrap.fill(
            f"{name:<{indent - 1}} {module.SUMMARY}",
            width=max(width - 4, indent + 20),
            subsequent_indent=" " * indent,
            break_long_words=False,
            break_on_hyphens=False,
        )
        for name, module in EXPERIMENTS.items()
    ]
    return EXPERIMENT_INTRO + "\n\n\bNAME is one of:\n" + "\n".join(entries)


class _ExperimentCommand(_Command):
    """``coded experiment``: its list of experiments (which imports them) is made, and wrapped,
    when the help is shown; until then its help is the first paragraph, the commands' list's."""

    def format_help(self, ctx, formatter):
        self.help = _experiment_help()
        return super().format_help(ctx, formatter)


def _experiment_name(value: str) -> str:
    if value not in EXPERIMENT_NAMES:
        raise typer.BadParameter(_unknown(value, EXPERIMENT_NAMES, "experiments"))
    return value


@app.command("experiment", cls=_ExperimentCommand, help=EXPERIMENT_INTRO)
def experiment(
    name: str = typer.Argument(
        ...,
        metavar="NAME",
        callback=_experiment_name,
        help="The experiment (listed above).",
        show_default=False,
    ),
    out: Path = typer.Option(Path("results"), "--out", help="Directory for the CSV and the figures."),
    quick: bool = typer.Option(False, "--quick", help="A smaller grid and fewer trials (seconds)."),
    seed: int = typer.Option(0, min=0, help="Seed for everything random in the experiment."),
) -> None:
    from .experiments import run_experiment

    _check_out(out)
    out_console = console()
    start = time.perf_counter()
    paths = run_experiment(name, out, quick=quick, seed=seed, console=out_console)
    elapsed = time.perf_counter() - start
    out_console.print(
        f"{name}: wrote {', '.join(str(path) for path in paths)} ({elapsed:.0f} s)", soft_wrap=True
    )


@app.command("reproduce", cls=_Command)
def reproduce_command(
    out: Path = typer.Option(Path("reproduction"), "--out", help="Directory for CSVs, figures, report."),
    quick: bool = typer.Option(False, "--quick", help="Every experiment's smaller grid (minutes)."),
    only: str = typer.Option(
        None,
        "--only",
        help=f"Comma-separated experiments to run (default: all of {', '.join(EXPERIMENT_NAMES)}).",
    ),
    force: bool = typer.Option(False, "--force", help="Rerun experiments already done in --out."),
    seed: int = typer.Option(0, min=0, help="Seed for everything random in the experiments."),
    docs: Path = typer.Option(
        None,
        "--docs",
        help="Also write Sphinx pages here (index.rst, a page per experiment, its figures), "
        "e.g. docs/results.",
        show_default=False,
    ),
) -> None:
    """Run every experiment (or --only some), check each paper's claims against the CSVs they
    wrote, and write report.md and report.html (figures embedded) in --out, and with --docs
    the same as Sphinx pages. Finished experiments with the same configuration are reused
    unless --force; a failing one is reported and the others go on."""
    from .reproduce import reproduce
    from .reproduce.run import experiment_names

    try:  # a typo in --only is refused before --out is created
        experiment_names(only)
    except ValueError as err:
        typer.echo(f"coded reproduce: {err}", err=True)
        raise typer.Exit(2) from None
    _check_out(out)
    if docs is not None:
        _check_out(docs, "--docs")
    out_console = console()
    try:
        done = reproduce(out, quick=quick, only=only, force=force, seed=seed, console=out_console, docs=docs)
    except ValueError as err:  # --only naming no experiment: a usage error, in one line
        typer.echo(f"coded reproduce: {err}", err=True)
        raise typer.Exit(2) from None
    verdicts = [claim.verdict for claim in done.claims]
    out_console.print(
        f"reproduce: {len(verdicts)} claims: {verdicts.count('held')} held, "
        f"{verdicts.count('not held')} not held, {verdicts.count('not measured')} not measured; "
        f"wrote {done.markdown} and {done.html} ({done.seconds:.0f} s)",
        soft_wrap=True,  # one line, in a log too: a path cut in two cannot be copied
    )
    if done.pages:
        pages = [page for page in done.pages if page.suffix == ".rst"]
        out_console.print(
            f"reproduce: wrote {len(pages)} page(s) in {docs}: {', '.join(p.name for p in pages)}",
            soft_wrap=True,
        )
    failed = [part.name for part in done.parts if part.status == "failed"]
    if failed:
        out_console.print(f"reproduce: failed: {', '.join(failed)} (see the report)", soft_wrap=True)
        raise typer.Exit(1)


@app.command("plot", cls=_Command)
def plot(
    csv_path: Path = typer.Argument(..., exists=True, dir_okay=False, help="A CSV written by an experiment."),
    out: Path = typer.Option(None, "--out", help="Directory for the figures (default: beside the CSV)."),
) -> None:
    """Redraw an experiment's figures from its CSV, without recomputing, and print its headline.

    Says which figures it wrote, and which of them replaced a file of the same name. Rows with
    a cell a figure cannot use (NaN, empty, text where a number goes, out of range, a line cut
    short) are left out, and one line says how many and why."""
    from .experiments import NotAnExperimentCSV, redraw

    out = out if out is not None else csv_path.parent
    _check_out(out)
    out_console = console()
    existing = {path.resolve() for path in out.iterdir() if path.is_file()}
    try:
        figures = redraw(
            csv_path, out, console=out_console, warn=lambda line: typer.echo(f"coded plot: {line}", err=True)
        )
    except NotAnExperimentCSV as err:  # one line, with a usage error's status
        typer.echo(f"coded plot: {err}", err=True)
        raise typer.Exit(2) from None
    for figure in figures:
        replaced = Path(figure).resolve() in existing
        out_console.print(
            f"wrote {figure}" + (" (replaced the existing file)" if replaced else ""), soft_wrap=True
        )


SERVE_MODELS = ("lenet5", "vit", "identity")
SERVE_SCHEMES = ("none", "replication", "hedge", "coded", "parm")
# coded serve's scheme options under --scheme's own, in the server's clock units (ms)
SERVE_DEFAULTS = {
    "replication": {"copies": 2},
    "hedge": {"delay": 10.0},
    "coded": {"code": "bacc", "k": 4, "parities": 2, "tau": 10.0, "max_group_wait": 20.0},
    "parm": {"k": 4, "max_group_wait": 20.0},
}


def _input_shape(text: str | None, default: tuple) -> tuple:
    if text is None:
        return default
    try:
        shape = tuple(int(n) for n in text.split(","))
    except ValueError:
        shape = ()
    if not shape or min(shape) < 1:
        raise typer.BadParameter(f"must be positive ints separated by commas, got {text!r}")
    return shape


def _serving_model(model: str, input_shape: tuple | None):
    """``(f, input shape)`` for ``coded serve --model``: a built-in name, or a torch module file."""
    if model == "identity":
        return (lambda x: x), input_shape or (1, 28, 28)
    import torch

    torch.set_num_threads(1)  # the replicas are the parallelism: one torch thread each
    from . import models

    if model in ("lenet5", "vit"):
        return models.numpy_function(model), input_shape or (1, 28, 28)
    path = Path(model)
    if not path.is_file():
        raise typer.BadParameter(
            f"must be one of {', '.join(SERVE_MODELS)} or a file saved with torch.save, got {model!r}",
            param_hint="--model",
        )
    try:  # a whole pickled module: loading it runs its code, so serve only files you trust
        module = torch.load(path, weights_only=False, map_location="cpu")
    except Exception as err:
        raise typer.BadParameter(
            f"{path} could not be loaded with torch.load ({err})", param_hint="--model"
        ) from None
    if not isinstance(module, torch.nn.Module):
        raise typer.BadParameter(
            f"{path} holds a {type(module).__name__}, not a torch module", param_hint="--model"
        )
    module.eval()
    return models.numpy_function(module), input_shape or (1, 28, 28)


@app.command("serve", cls=_Command)
def serve(
    model: str = typer.Option(
        "lenet5", help="lenet5, vit, identity (f(x) = x, for tests), or a torch module saved with torch.save."
    ),
    scheme: str = typer.Option(
        "none",
        help="The scheme and its options in one place, NAME or NAME:key=value,... (e.g. "
        "coded:k=4,tau=10): none; replication (copies=2); hedge (delay=10); coded (code=bacc, k=4, "
        "parities=2, tau=10, max_group_wait=20, rule=straggling; code bacc, gcc or manifold-gcc; "
        "rule straggling or group); parm (k=4, max_group_wait=20). Times in ms; the defaults shown.",
    ),
    replicas: int = typer.Option(4, "--replicas", "-r", min=1, help="R, the model replicas."),
    backend: Backend = typer.Option(
        "thread",
        help="thread (replica threads in this process) or ray (one Ray actor per replica).",
    ),
    ray_address: str = typer.Option(
        None,
        help="With --backend ray: a running cluster to join (auto, host:port, ray://...); default: "
        "a local Ray started with the server and stopped at its shutdown.",
    ),
    host: str = typer.Option("127.0.0.1", help="The address to listen on."),
    port: int = typer.Option(8000, min=0, max=65535, help="The port to listen on."),
    input_shape: str = typer.Option(
        None, help="One input's shape, e.g. 1,28,28 (default 1,28,28: the digits models')."
    ),
    service_ms: float = typer.Option(
        0.0, min=0.0, help="An injected service time in ms added to every task (demos, tests)."
    ),
    stragglers: float = typer.Option(
        0.0, min=0.0, max=1.0, help="With --service-ms: the share of tasks that straggle."
    ),
    slowdown: float = typer.Option(10.0, min=1.0, help="With --stragglers: a straggler's slowdown."),
    max_body_bytes: int = typer.Option(16 * 2**20, min=1, help="Larger request bodies get 413."),
    max_inputs: int = typer.Option(1024, min=1, help="More inputs in one request get 413."),
    seed: int = typer.Option(0, min=0, help="Seed for the balancer's choices."),
    log_level: str = typer.Option("warning", help="uvicorn's log level."),
    http_impl: str = typer.Option("auto", help="uvicorn's HTTP/1.1 parser: auto, h11 or httptools."),
    graceful_timeout: float = typer.Option(
        None,
        min=0.0,
        help="Seconds the shutdown waits for requests in flight; those still waiting then get 503 "
        "(default: no limit).",
    ),
    query_timeout: float = typer.Option(
        30.0,
        help="Seconds a query may take; past it the query fails and its request answers 504.",
    ),
) -> None:
    """Serve a model over HTTP on R replicas with a straggler scheme (codedcomputing.serving.http).

    Replicas are threads in this process, or with --backend ray Ray actors (the model shipped
    once through the object store) on the cluster at --ray-address, or on a local Ray that the
    server starts and stops. /health answers 503 until every replica is up.

    POST /predict {"inputs": [...]} -> {"outputs": [...], "exact": [...]}; GET /health (200 once
    ready); GET /metrics (Prometheus text). --scheme names the scheme and its options in one
    place (e.g. coded:k=4,parities=2,tau=10). Times (the scheme's, --service-ms) are in
    milliseconds, --query-timeout and --graceful-timeout in seconds. SIGINT or SIGTERM drains the
    queries in flight and exits 0.
    A port in use, or an address that cannot be listened on, is said in one line (exit status 3)
    before anything starts.
    """
    import math

    try:
        from .serving import http
    except ImportError as err:
        typer.echo(f"coded serve: {err}", err=True)
        raise typer.Exit(2) from None
    from .serving import RayServer, ThreadServer, make_scheme

    if ray_address is not None and backend.value != "ray":
        raise typer.BadParameter("needs --backend ray", param_hint="--ray-address")
    if http_impl not in ("auto", "h11", "httptools"):
        raise typer.BadParameter(
            f"must be auto, h11 or httptools, got {http_impl!r}", param_hint="--http-impl"
        )
    from .serving import parse_scheme

    try:
        chosen = parse_scheme(scheme, SERVE_DEFAULTS)
        if chosen.name == "parm":
            if model not in ("lenet5", "vit"):
                raise ValueError("parm needs --model lenet5 or vit (their parity models)")
            from .models import parity

            k = chosen.group_size
            if not parity.is_cached(model, k):
                raise ValueError(
                    f"no parity model of {model} for groups of {k} is cached: train it first "
                    f"(codedcomputing.models.parity.load_parity('{model}', {k}))"
                )
            parity_f = parity.parity_function(parity.load_parity(model, k))
            chosen = make_scheme("parm", k=k, max_group_wait=chosen.max_group_wait, parity_f=parity_f)
        chosen.check(replicas)
    except ValueError as err:
        raise typer.BadParameter(str(err), param_hint="--scheme") from None
    shape = _input_shape(input_shape, None) if input_shape is not None else None
    if stragglers > 0 and service_ms == 0:
        raise typer.BadParameter("needs --service-ms (the straggler's base time)", param_hint="--stragglers")
    if not (query_timeout > 0 and math.isfinite(query_timeout)):
        raise typer.BadParameter(
            f"must be a finite number of seconds > 0, got {query_timeout}", param_hint="--query-timeout"
        )
    unusable = _cannot_listen(host, port)
    if unusable:  # before the model loads, the URL line and Ray: none of them could be used
        typer.echo(f"coded serve: {unusable}", err=True)
        raise typer.Exit(3)
    f, shape = _serving_model(model, shape)
    service = None
    if service_ms > 0:
        from .runtime.delays import Bimodal

        service = Bimodal(base=service_ms, p=stragglers, slowdown=slowdown, jitter=0.0)

    def make_server():
        options = {"service": service, "time_unit": 1e-3, "seed": seed, "query_timeout": 1e3 * query_timeout}
        if backend.value == "ray":  # on the Ray that _start_ray joined or started
            return RayServer(f, replicas, chosen, address=ray_address, **options)
        return ThreadServer(f, replicas, chosen, **options)

    app_ = http.create_app(make_server, shape, max_body_bytes=max_body_bytes, max_inputs=max_inputs)
    where = "" if backend.value == "thread" else f" ({ray_address or 'a local Ray'})"
    typer.echo(
        f"coded serve: {model} on {replicas} {backend.value} replicas{where}, scheme {scheme}, "
        f"http://{host}:{port} (POST /predict, GET /health, GET /metrics)",
        err=True,
    )
    ray = _start_ray(ray_address) if backend.value == "ray" else None
    try:
        http.run(
            app_, host, port, log_level=log_level, http=http_impl, timeout_graceful_shutdown=graceful_timeout
        )
    finally:
        if ray is not None:
            ray.shutdown()


def _cannot_listen(host: str, port: int) -> str | None:
    """Why ``host:port`` cannot be listened on, in a few words, or None when it can.

    Binds it as uvicorn does (asyncio's ``create_server``: every address ``host`` resolves to,
    SO_REUSEADDR on POSIX, IPv6 only on IPv6 sockets) and closes the sockets at once, so that
    the port is free again for the server."""
    import errno
    import socket

    where = f"[{host}]:{port}" if ":" in host else f"{host}:{port}"
    try:
        addresses = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)
    except OSError as err:  # socket.gaierror: a name that does not resolve
        return f"cannot listen on {where}: {err.strerror or err}"
    for family, kind, protocol, _, address in set(addresses):
        try:
            with socket.socket(family, kind, protocol) as sock:
                if os.name == "posix":
                    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
                if family == getattr(socket, "AF_INET6", None):
                    sock.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 1)
                sock.bind(address)
        except OSError as err:
            if err.errno == errno.EADDRINUSE:
                return f"{where} is in use (another server listens there): choose another --port"
            return f"cannot listen on {where}: {err.strerror or err}"
    return None


def _start_ray(address: str | None):
    """Join ``address`` or start a local Ray, here in the main thread (Ray's driver expects it),
    before the HTTP server starts; the ``ray`` module, to shut down after it stops."""
    try:
        import ray
    except ImportError:
        typer.echo("coded serve: --backend ray needs Ray: pip install 'codedcomputing[ray]'", err=True)
        raise typer.Exit(2) from None
    ray.init(
        address="local" if address is None else address,
        include_dashboard=False,
        log_to_driver=False,
        configure_logging=False,
    )
    return ray


@app.command("bench-serve", cls=_Command)
def bench_serve(
    url: str = typer.Argument(..., help="The server's base URL, e.g. http://127.0.0.1:8000."),
    rate: float = typer.Option(100.0, "--rate", min=0.001, help="Q, requests per second (Poisson)."),
    duration: float = typer.Option(10.0, "--duration", min=0.001, help="S, seconds of arrivals."),
    inputs_from: str = typer.Option("mnist", help="mnist (test digits) or random (Gaussian inputs)."),
    input_shape: str = typer.Option(None, help="With --inputs-from random: one input's shape (1,28,28)."),
    batch: int = typer.Option(1, min=1, help="Inputs per request."),
    timeout: float = typer.Option(30.0, min=0.001, help="Seconds a request may take."),
    connections: int = typer.Option(64, min=1, help="At most this many keep-alive connections."),
    seed: int = typer.Option(0, min=0, help="Seed for the arrivals and the inputs."),
) -> None:
    """An open-loop load client for coded serve: POST /predict at Poisson times for S seconds.

    Each request is due at its arrival time whether or not earlier ones were answered, and its
    latency counts from then (a request waiting for a free connection waits in its latency).
    Plain HTTP/1.1 over asyncio streams with keep-alive connections (a general client such as
    httpx takes more CPU than the server here). Prints the latency percentiles of the answered
    requests, the throughput, the errors by kind, and the share of answers that were decoded
    ("exact": false in the server's response)."""
    import asyncio
    import json
    from urllib.parse import urlsplit

    parts = urlsplit(url)
    if parts.scheme != "http" or not parts.hostname:
        raise typer.BadParameter(f"must be an http:// URL (no TLS), got {url!r}", param_hint="URL")
    host, port = parts.hostname, parts.port or 80
    rng = np.random.default_rng(seed)
    if inputs_from == "mnist":
        from . import datasets

        pool = datasets.mnist().test_x[:1000]
    elif inputs_from == "random":
        pool = rng.normal(size=(1000, *_input_shape(input_shape, (1, 28, 28)))).astype(np.float32)
    else:
        raise typer.BadParameter(f"must be mnist or random, got {inputs_from!r}", param_hint="--inputs-from")
    head = (
        f"POST {parts.path.rstrip('/')}/predict HTTP/1.1\r\nHost: {parts.netloc}\r\n"
        "Content-Type: application/json\r\nContent-Length: {}\r\n\r\n"
    )
    requests = []
    for _ in range(min(1000, max(1, int(rate * duration)))):
        body = json.dumps({"inputs": pool[rng.integers(len(pool), size=batch)].reshape(batch, -1).tolist()})
        requests.append(head.format(len(body)).encode() + body.encode())
    times = np.cumsum(rng.exponential(1.0 / rate, size=int(rate * duration * 1.5) + 10))
    times = times[times < duration]
    # (status code or error kind, seconds from the due time, the body's "exact" list unparsed)
    results: list[tuple[str, float, bytes]] = []

    async def exchange(connection, request: bytes) -> tuple[str, bytes]:
        reader, writer = connection
        writer.write(request)
        status_line = await reader.readuntil(b"\r\n")
        headers = await reader.readuntil(b"\r\n\r\n")
        length = 0
        for line in headers.split(b"\r\n"):
            if line.lower().startswith(b"content-length:"):
                length = int(line.split(b":", 1)[1])
        body = await reader.readexactly(length)
        # only the "exact" list is kept, and parsed after the run: the client stays cheap and small
        at = body.rfind(b'"exact"')
        return status_line.split()[1].decode(), body[at:] if at >= 0 else b""

    async def main() -> tuple[float, float]:
        idle: asyncio.Queue = asyncio.Queue()
        for _ in range(connections):
            idle.put_nowait(None)  # a slot: None until its connection is opened
        start = time.perf_counter()

        async def one(request: bytes, due: float) -> None:
            connection = await idle.get()
            try:
                if connection is None:
                    connection = await asyncio.wait_for(asyncio.open_connection(host, port), timeout)
                kind, exact = await asyncio.wait_for(exchange(connection, request), timeout)
            except asyncio.TimeoutError:
                kind, exact, connection = "timeout", b"", None
            except (OSError, asyncio.IncompleteReadError, ValueError) as err:
                kind, exact, connection = type(err).__name__, b"", None
            results.append((kind, time.perf_counter() - start - due, exact))
            if connection is None or kind == "timeout":
                connection = None
            idle.put_nowait(connection)

        tasks, lag = [], 0.0
        for i, due in enumerate(times):
            now = time.perf_counter() - start
            if due > now:
                await asyncio.sleep(due - now)
            lag = max(lag, time.perf_counter() - start - due)
            tasks.append(asyncio.create_task(one(requests[i % len(requests)], due)))
        await asyncio.gather(*tasks)
        return time.perf_counter() - start, lag

    elapsed, lag = asyncio.run(main())
    answered = np.array([s for kind, s, _ in results if kind == "200"]) * 1e3
    kinds: dict[str, int] = {}
    for kind, _, _ in results:
        kinds[kind] = kinds.get(kind, 0) + 1
    flags = [flag for _, _, exact in results for flag in _exact_flags(exact) if flag is not None]
    errors = ", ".join(f"{kind}: {n}" for kind, n in sorted(kinds.items()) if kind != "200") or "none"
    out = console()
    out.print(
        f"{len(results)} requests ({batch} input{'s' * (batch > 1)} each) at {rate:g}/s over {duration:g} s; "
        f"answered {answered.size}; errors: {errors}"
    )
    if answered.size:
        p50, p99, p999 = np.percentile(answered, [50, 99, 99.9])
        out.print(
            f"latency ms: p50 {p50:.2f}, p99 {p99:.2f}, p99.9 {p999:.2f}, max {answered.max():.2f}; "
            f"throughput {answered.size / elapsed:.1f} requests/s "
            f"({answered.size * batch / elapsed:.1f} inputs/s); "
            f"client lag up to {lag * 1e3:.1f} ms"
        )
    if flags:  # the answers of 200s, and of the 503s that answered some inputs
        decoded = flags.count(False)
        out.print(f"decoded: {decoded} of {len(flags)} answers ({decoded / len(flags):.1%})")


def _exact_flags(tail: bytes) -> list:
    """The ``"exact"`` list that a /predict response body ends with (``tail``: from the key on),
    or ``[]`` when it has none (an error without answers, a body cut short)."""
    import json

    text = tail.decode("utf-8", "replace")
    start = text.find("[")
    try:
        flags = json.JSONDecoder().raw_decode(text, start)[0] if start >= 0 else []
    except ValueError:
        return []
    return flags if isinstance(flags, list) else []
