"""Experiments: CSV and figures from the CLI, and what their numbers must show."""

from __future__ import annotations

import numpy as np
import pytest
from scipy import stats
from typer.testing import CliRunner

from codedcomputing.cli import app
from codedcomputing.experiments.records import mean_ci, read_csv, summarise, write_csv

runner = CliRunner()
REQUIRED = {
    "experiment",
    "function",
    "scheme",
    "num_inputs",
    "num_workers",
    "num_stragglers",
    "trial",
    "seed",
    "mse",
}


@pytest.fixture(scope="module")
def polynomial_run(tmp_path_factory):
    out = tmp_path_factory.mktemp("polynomial")
    result = runner.invoke(
        app, ["experiment", "polynomial", "--quick", "--out", str(out)], env={"COLUMNS": "200"}
    )
    assert result.exit_code == 0, result.output
    return out, read_csv(out / "polynomial.csv")


def test_polynomial_writes_long_csv_and_figure(polynomial_run):
    out, rows = polynomial_run
    assert REQUIRED | {"lambda_enc", "lambda_dec"} <= set(rows[0])
    assert {row["scheme"] for row in rows} == {"lcc", "gcc", "gcc-natural", "bacc"}
    per_setting = summarise(rows, ("scheme", "num_stragglers"), "mse")
    trials = {row["trial"] for row in rows}
    assert len(rows) == len(per_setting) * len(trials)  # one row per (setting, scheme, trial)
    figure = out / "polynomial.png"
    assert figure.exists() and figure.stat().st_size > 10_000


def test_polynomial_shows_lcc_exact_then_breaking_down_and_gcc_degrading_smoothly(polynomial_run):
    _, rows = polynomial_run
    n, threshold = rows[0]["num_workers"], rows[0]["recovery_threshold"]
    lcc = summarise([r for r in rows if r["scheme"] == "lcc"], ("num_stragglers",), "mse")
    gcc = summarise([r for r in rows if r["scheme"] == "gcc"], ("num_stragglers",), "mse")
    exact = [lcc[key][0] for key in lcc if key[0] <= n - threshold]
    beyond = [lcc[key][0] for key in lcc if key[0] > n - threshold]
    assert max(exact) <= 1e-9
    assert min(beyond) > 1e3 * max(gcc[key][0] for key in gcc)  # orders of magnitude above GCC
    gcc_beyond = [gcc[key][0] for key in gcc if key[0] > n - threshold]
    assert max(gcc_beyond) < 1e3  # GCC stays bounded where LCC explodes


def test_experiment_is_reproducible_from_its_seed(polynomial_run, tmp_path):
    _, rows = polynomial_run
    result = runner.invoke(app, ["experiment", "polynomial", "--quick", "--out", str(tmp_path)])
    assert result.exit_code == 0
    assert read_csv(tmp_path / "polynomial.csv") == rows


def test_plot_redraws_figures_from_the_csv(polynomial_run, tmp_path):
    out, _ = polynomial_run
    result = runner.invoke(app, ["plot", str(out / "polynomial.csv"), "--out", str(tmp_path)])
    assert result.exit_code == 0, result.output
    assert (tmp_path / "polynomial.png").stat().st_size > 10_000


def test_unknown_experiment_is_a_usage_error(tmp_path):
    result = runner.invoke(app, ["experiment", "nonesuch", "--out", str(tmp_path)])
    assert result.exit_code == 2 and "polynomial" in result.output


def test_mean_ci_matches_student_t():
    values = np.random.default_rng(0).normal(3.0, 2.0, size=12)
    mean, low, high = mean_ci(values)
    expected = stats.t.interval(0.95, 11, loc=values.mean(), scale=stats.sem(values))
    assert mean == pytest.approx(values.mean())
    assert (low, high) == pytest.approx(expected)
    assert mean_ci([5.0]) == (5.0, 5.0, 5.0)


def test_csv_round_trip_keeps_numbers_and_text(tmp_path):
    rows = [{"scheme": "gcc", "trial": 3, "mse": 1.5e-12, "lambda_dec": ""}]
    assert read_csv(write_csv(rows, tmp_path / "r.csv")) == rows


@pytest.fixture(scope="module")
def stragglers_run(trained_models, tmp_path_factory):
    out = tmp_path_factory.mktemp("stragglers")
    result = runner.invoke(
        app, ["experiment", "stragglers", "--quick", "--out", str(out)], env={"COLUMNS": "200"}
    )
    assert result.exit_code == 0, result.output
    return out, read_csv(out / "stragglers.csv")


@pytest.mark.slow
def test_stragglers_writes_rows_for_every_model_scheme_and_trial(stragglers_run):
    out, rows = stragglers_run
    assert (REQUIRED - {"function"}) | {"model", "rel_acc", "lambda_enc", "lambda_dec"} <= set(rows[0])
    assert {row["model"] for row in rows} == {"lenet5", "vit"}
    assert {row["scheme"] for row in rows} == {"gcc", "gcc-natural", "bacc", "replication", "uncoded"}
    settings = summarise(rows, ("model", "scheme", "num_stragglers"), "mse")
    assert len(rows) == len(settings) * len({row["trial"] for row in rows})
    assert all(isinstance(row["lambda_dec"], float) for row in rows if row["scheme"] == "gcc")
    assert (out / "stragglers.png").stat().st_size > 10_000


@pytest.mark.slow
def test_stragglers_gcc_beats_bacc_and_uncoded_loses_inputs(stragglers_run):
    """Quick run (5 trials): GCC's MSE is below BACC's at most S and by a geometric-mean factor, its relative
    accuracy keeps up, and uncoded computation loses the stragglers' inputs."""
    _, rows = stragglers_run
    for model in ("lenet5", "vit"):
        mine = [row for row in rows if row["model"] == model]
        mse = summarise(mine, ("scheme", "num_stragglers"), "mse")
        acc = summarise(mine, ("scheme", "num_stragglers"), "rel_acc")
        s_values = sorted({s for _, s in mse})
        wins = [mse[("gcc", s)][0] < mse[("bacc", s)][0] for s in s_values]
        assert sum(wins) >= 0.8 * len(s_values)
        # The mean over S would be the largest S's 5 noisy trials; the log ratio weighs each S alike.
        log_ratios = [np.log(mse[("bacc", s)][0] / mse[("gcc", s)][0]) for s in s_values]
        assert np.exp(np.mean(log_ratios)) > 1.2
        assert np.mean([acc[("gcc", s)][0] - acc[("bacc", s)][0] for s in s_values]) >= -0.02
        assert acc[("uncoded", max(s_values))][0] < 0.7  # 60% of workers straggle
