"""The manifold experiment: its rows (every scheme, S and pattern; paired trials; the
layout's cost), what the numbers must show on the curve, the driver's CSV round trip and
figures, and the CLI's refusals."""

from __future__ import annotations

import io
import math

import pytest
from rich.console import Console
from typer.testing import CliRunner

from codedcomputing.cli import app
from codedcomputing.codes.layout import LAYOUTS
from codedcomputing.experiments import EXPERIMENTS, manifold, redraw, run_experiment
from codedcomputing.experiments.records import means, read_csv

runner = CliRunner()
WIDE = {"COLUMNS": "200"}
# the polynomial tasks only: no network to load or train, a few seconds
SMALL = manifold.Config(
    tasks=("poly-curve", "poly-surface"), num_inputs=(10,), fractions=(0.0, 0.2, 0.4, 0.6), trials=8
)
LAYOUT_SCHEMES = {name for name in manifold.schemes() if name.startswith("manifold-gcc")} | {"bacc-ordered"}


@pytest.fixture(scope="module")
def rows():
    return manifold.run(SMALL, 0, progress=False)


def test_schemes_are_gcc_bacc_and_a_manifold_gcc_per_design():
    names = manifold.schemes()
    assert names[:4] == ("gcc", "gcc-golden", "manifold-gcc", "manifold-gcc-reference")
    assert names[-2:] == ("bacc", "bacc-ordered")
    default = manifold.ManifoldGCC(2, 2).design
    others = {f"manifold-gcc-{design}" for design in LAYOUTS if design != default}
    assert "manifold-gcc-none" in others
    assert set(names[4:-2]) == others and len(names) == len(set(names))
    assert EXPERIMENTS["manifold"] is manifold


def test_rows_hold_every_scheme_pattern_and_s_once_per_trial(rows):
    also_written = {"experiment", "seed", "design", "reference", "straggler_fraction"}
    assert set(manifold.COLUMNS) | also_written <= set(rows[0])
    assert {row["experiment"] for row in rows} == {"manifold"}
    schemes, patterns = manifold.schemes(), tuple(manifold.PATTERNS)
    k = SMALL.num_inputs[0]
    n = SMALL.workers_per_input * k
    expected_s = {round(fraction * n) for fraction in SMALL.fractions}
    for task in SMALL.tasks:
        mine = [row for row in rows if row["task"] == task]
        assert {(row["num_inputs"], row["num_workers"]) for row in mine} == {(k, n)}
        for pattern in patterns:
            for s in expected_s:
                setting = [row for row in mine if (row["pattern"], row["num_stragglers"]) == (pattern, s)]
                for scheme in schemes:
                    trials = [row["trial"] for row in setting if row["scheme"] == scheme]
                    # paired: every scheme has each trial exactly once, so ratios pair up by trial
                    assert sorted(trials) == list(range(SMALL.trials)), (task, pattern, s, scheme)
    assert len(rows) == len(SMALL.tasks) * len(patterns) * len(expected_s) * len(schemes) * SMALL.trials


def test_mse_is_finite_and_relative_accuracy_only_for_networks(rows):
    assert all(math.isfinite(row["mse"]) and row["mse"] >= 0 for row in rows)
    assert all(row["rel_acc"] == "" for row in rows)  # polynomial tasks: no classes
    assert all(row["lambda_enc"] == 0.0 and row["lambda_dec"] == 0.0 for row in rows)


def test_layout_seconds_are_positive_exactly_for_the_schemes_that_lay_out_the_batch(rows):
    for row in rows:
        if row["scheme"] in LAYOUT_SCHEMES:
            assert row["layout_s"] > 0, row
        else:
            assert row["layout_s"] == 0, row
    # one layout per batch: the same seconds at every pattern and S, and bacc-ordered pays manifold-gcc's
    per_batch = {}
    for row in rows:
        per_batch.setdefault((row["task"], row["scheme"], row["trial"]), set()).add(row["layout_s"])
    assert all(len(seconds) == 1 for seconds in per_batch.values())
    for (task, scheme, trial), seconds in per_batch.items():
        if scheme == "bacc-ordered":
            assert seconds == per_batch[(task, "manifold-gcc", trial)]


def test_reference_and_design_are_recorded(rows):
    by_scheme = {row["scheme"]: (row["design"], row["reference"]) for row in rows}
    default = manifold.ManifoldGCC(2, 2).design
    size = SMALL.manifold_reference_size
    assert by_scheme["gcc"] == by_scheme["gcc-golden"] == by_scheme["bacc"] == ("", 0)
    assert by_scheme["manifold-gcc"] == by_scheme["bacc-ordered"] == (default, 0)
    assert by_scheme["manifold-gcc-reference"] == (default, size)
    for scheme, (design, reference) in by_scheme.items():
        if scheme.startswith("manifold-gcc-") and scheme != "manifold-gcc-reference":
            assert (design, reference) == (scheme.removeprefix("manifold-gcc-"), 0)


def test_on_the_curve_manifold_gcc_beats_standard_gcc_at_every_s_and_pattern(rows):
    mse = means(
        [row for row in rows if row["task"] == "poly-curve"], ("pattern", "num_stragglers", "scheme"), "mse"
    )
    settings = {(pattern, s) for pattern, s, _ in mse}
    for pattern, s in settings:
        assert mse[(pattern, s, "manifold-gcc")] < mse[(pattern, s, "gcc")], (pattern, s)
        assert mse[(pattern, s, "bacc-ordered")] < mse[(pattern, s, "bacc")], (pattern, s)


def test_rows_are_reproducible_from_their_seed_but_for_the_measured_seconds():
    tiny = manifold.Config(tasks=("poly-curve",), num_inputs=(10,), fractions=(0.0, 0.4), trials=2)

    def without_seconds(rows):
        return [{key: value for key, value in row.items() if key != "layout_s"} for row in rows]

    first = without_seconds(manifold.run(tiny, 3, progress=False))
    assert without_seconds(manifold.run(tiny, 3, progress=False)) == first
    assert [row["mse"] for row in without_seconds(manifold.run(tiny, 4, progress=False))] != [
        row["mse"] for row in first
    ]


def test_unknown_task_is_refused():
    with pytest.raises(ValueError, match="unknown tasks"):
        manifold.run(manifold.Config(tasks=("cifar",)), 0, progress=False)


@pytest.mark.slow  # draws figures with matplotlib: seconds each; CI runs it
def test_driver_writes_the_csv_that_redraws_the_same_figures_and_headline(rows, tmp_path, monkeypatch):
    """run_experiment writes exactly the rows; ``redraw`` reads them back into the same
    headline; the headline's ratios are the ratios of mean MSEs."""
    computed = [dict(row) for row in rows]  # the fixture's rows: not computed again
    monkeypatch.setattr(manifold, "run", lambda config, seed, **options: computed)
    console = Console(file=io.StringIO(), width=200)
    paths = run_experiment("manifold", tmp_path, quick=True, progress=False, console=console)
    assert paths[0] == tmp_path / "manifold.csv"
    assert paths[1:] == [tmp_path / "manifold_mse.png"]  # no network: no accuracy figure
    assert paths[1].stat().st_size > 10_000
    assert read_csv(paths[0]) == computed
    printed = console.file.getvalue()
    assert "manifold-gcc's mean MSE over" in printed and "contiguous / bacc-ordered" in printed

    again = Console(file=io.StringIO(), width=200)
    figures = redraw(paths[0], tmp_path / "redrawn", console=again)
    assert figures == [tmp_path / "redrawn" / "manifold_mse.png"]
    assert again.file.getvalue() == printed

    headline = manifold.headline(read_csv(paths[0]))
    mse = means(computed, ("task", "pattern", "scheme", "num_stragglers"), "mse")
    for task, s, ratio in zip(
        headline.column("task"), headline.column("S"), headline.column("random / gcc"), strict=True
    ):
        expected = mse[(task, "random", "manifold-gcc", s)] / mse[(task, "random", "gcc", s)]
        assert ratio == pytest.approx(expected)
    assert len(headline.rows) == len(SMALL.tasks) * len(SMALL.fractions)
    seconds = [value for value in headline.column("layout s") if value != ""]
    assert len(seconds) == len(SMALL.tasks) and all(value > 0 for value in seconds)


@pytest.mark.parametrize(
    ("args", "needle"),
    [
        (["--seed", "-1"], "--seed"),
        (["--trials", "3"], "No such option"),
        (["--quick", "yes"], "unexpected extra argument"),
    ],
)
def test_cli_refuses_bad_options_before_any_work(args, needle, tmp_path, monkeypatch):
    ran = []
    monkeypatch.setattr(manifold, "run", lambda *a, **k: ran.append(1))
    result = runner.invoke(app, ["experiment", "manifold", "--out", str(tmp_path), *args], env=WIDE)
    assert result.exit_code == 2, result.output
    assert needle in result.output and not ran


def test_cli_refuses_an_out_that_is_a_file(tmp_path, monkeypatch):
    ran = []
    monkeypatch.setattr(manifold, "run", lambda *a, **k: ran.append(1))
    blocker = tmp_path / "a-file"
    blocker.write_text("")
    result = runner.invoke(app, ["experiment", "manifold", "--out", str(blocker)], env=WIDE)
    assert result.exit_code == 2 and "is not a directory" in result.output and not ran


@pytest.mark.slow
def test_quick_run_through_the_cli_covers_the_networks(trained_models, tmp_path):
    out = tmp_path / "run"
    result = runner.invoke(app, ["experiment", "manifold", "--quick", "--out", str(out)], env=WIDE)
    assert result.exit_code == 0, result.output
    rows = read_csv(out / "manifold.csv")
    assert {row["task"] for row in rows} == set(manifold.TASKS)
    networks = [row for row in rows if row["task"] in manifold.MNIST_TASKS]
    assert networks and all(0.0 <= row["rel_acc"] <= 1.0 for row in networks)
    assert {row["scheme"] for row in rows} == set(manifold.schemes())
    assert (out / "manifold_accuracy.png").stat().st_size > 10_000
    redrawn = tmp_path / "redrawn"
    result = runner.invoke(app, ["plot", str(out / "manifold.csv"), "--out", str(redrawn)], env=WIDE)
    assert result.exit_code == 0, result.output
    assert (redrawn / "manifold_accuracy.png").exists()
