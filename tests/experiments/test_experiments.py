"""Experiments: their rows and what the numbers must show; the driver (CSV, figures, headline)
end to end through the CLI; the bootstrap bands and the CSV reader."""

from __future__ import annotations

import numpy as np
import pytest
from scipy import stats
from typer.testing import CliRunner

from codedcomputing.cli import app
from codedcomputing.experiments import EXPERIMENTS, polynomial, run_experiment, stragglers
from codedcomputing.experiments.records import interval, means, read_csv, summarise, write_csv

runner = CliRunner()
WIDE = {"COLUMNS": "200"}
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
def polynomial_rows():
    return polynomial.run(polynomial.QUICK, 0, progress=False)


def test_polynomial_rows_are_long_format(polynomial_rows):
    rows = polynomial_rows
    assert REQUIRED | {"lambda_enc", "lambda_dec", "recovery_threshold"} <= set(rows[0])
    assert set(polynomial.COLUMNS) <= set(rows[0])  # what `coded plot` requires of a CSV
    assert {row["scheme"] for row in rows} == {"lcc", "gcc", "gcc-natural", "bacc"}
    assert sorted({row["num_stragglers"] for row in rows}) == sorted(polynomial.QUICK.stragglers)
    per_setting = means(rows, ("scheme", "num_stragglers"), "mse")
    trials = {row["trial"] for row in rows}
    assert trials == set(range(polynomial.QUICK.trials))
    assert len(rows) == len(per_setting) * len(trials)  # one row per (setting, scheme, trial)


def test_polynomial_shows_lcc_exact_then_breaking_down_and_gcc_degrading_smoothly(polynomial_rows):
    rows = polynomial_rows
    n, threshold = rows[0]["num_workers"], rows[0]["recovery_threshold"]
    lcc = means([r for r in rows if r["scheme"] == "lcc"], ("num_stragglers",), "mse")
    gcc = means([r for r in rows if r["scheme"] == "gcc"], ("num_stragglers",), "mse")
    exact = [lcc[key] for key in lcc if key[0] <= n - threshold]
    beyond = [lcc[key] for key in lcc if key[0] > n - threshold]
    assert max(exact) <= 1e-9
    assert min(beyond) > 1e3 * max(gcc.values())  # orders of magnitude above GCC
    gcc_beyond = [gcc[key] for key in gcc if key[0] > n - threshold]
    assert max(gcc_beyond) < 1e3  # GCC stays bounded where LCC explodes


def test_polynomial_headline_brackets_lccs_threshold(polynomial_rows):
    headline = polynomial.headline(polynomial_rows)
    last_exact = polynomial_rows[0]["num_workers"] - polynomial_rows[0]["recovery_threshold"]
    s_values = headline.column("S")
    assert s_values[0] == 0 and s_values[-1] == max(polynomial.QUICK.stragglers)
    assert last_exact in s_values and last_exact + 1 in s_values
    lcc = dict(zip(s_values, headline.column("lcc"), strict=True))
    gcc = dict(zip(s_values, headline.column("gcc"), strict=True))
    assert lcc[last_exact] < 1e-9 < gcc[last_exact]
    assert lcc[last_exact + 1] > 1e3 * gcc[last_exact + 1]
    expected = means(polynomial_rows, ("scheme", "num_stragglers"), "mse")
    assert all(headline.column("bacc")[i] == expected[("bacc", s)] for i, s in enumerate(s_values))


def test_experiment_rows_are_reproducible_from_their_seed(polynomial_rows):
    assert polynomial.run(polynomial.QUICK, 0, progress=False) == polynomial_rows
    other = polynomial.run(polynomial.QUICK, 1, progress=False)
    assert [r["mse"] for r in other] != [r["mse"] for r in polynomial_rows]


def test_progress_is_plain_lines_off_a_terminal(capsys):
    quick = polynomial.Config(trials=1, tuning_trials=1, stragglers=(0, 5))
    polynomial.run(quick, 0, progress=True)
    lines = capsys.readouterr().err.splitlines()
    assert lines[0] == "polynomial: stragglers: 0/2 (0%), started"
    assert lines[-1].startswith("polynomial: stragglers: 2/2 (100%), done in")


def test_every_experiment_has_the_drivers_interface():
    for name, module in EXPERIMENTS.items():
        assert module.NAME == name
        assert isinstance(module.QUICK, module.Config) and module.SUMMARY
        assert all(callable(getattr(module, verb)) for verb in ("run", "plot", "headline"))


@pytest.mark.slow  # draws figures with matplotlib: seconds each; CI runs it
def test_cli_runs_the_experiment_end_to_end_through_the_csv_and_figures(polynomial_rows, tmp_path):
    """``coded experiment``: the CSV holds exactly the rows, the figure is drawn, the headline
    printed; ``coded plot`` redraws the figure from the CSV alone and prints it again."""
    out = tmp_path / "run"
    result = runner.invoke(app, ["experiment", "polynomial", "--quick", "--out", str(out)], env=WIDE)
    assert result.exit_code == 0, result.output
    assert read_csv(out / "polynomial.csv") == polynomial_rows
    assert (out / "polynomial.png").stat().st_size > 10_000
    assert "around LCC's threshold" in result.output and "gcc-natural" in result.output
    assert f"wrote {out / 'polynomial.csv'}" in result.output

    redrawn = tmp_path / "redrawn"
    result = runner.invoke(app, ["plot", str(out / "polynomial.csv"), "--out", str(redrawn)], env=WIDE)
    assert result.exit_code == 0, result.output
    assert (redrawn / "polynomial.png").stat().st_size > 10_000
    assert "around LCC's threshold" in result.output


def test_driver_checks_the_out_dir_before_running(tmp_path, monkeypatch):
    ran = []
    monkeypatch.setattr(polynomial, "run", lambda *args, **kwargs: ran.append(1))
    blocker = tmp_path / "a-file"
    blocker.write_text("")
    with pytest.raises(ValueError, match="out_dir"):
        run_experiment("polynomial", blocker, quick=True, progress=False)
    assert not ran


def test_unknown_experiment_is_a_usage_error(tmp_path):
    result = runner.invoke(app, ["experiment", "nonesuch", "--out", str(tmp_path)])
    assert result.exit_code == 2 and "polynomial" in result.output


def test_interval_is_scipys_seeded_percentile_bootstrap_of_the_mean():
    values = np.random.default_rng(0).lognormal(0.0, 2.0, size=40)  # heavy-tailed, like MSE
    mean, low, high = interval(values)
    expected = stats.bootstrap(
        (values,),
        np.mean,
        n_resamples=2000,
        method="percentile",
        random_state=np.random.default_rng(0),
    ).confidence_interval
    assert mean == pytest.approx(values.mean())
    assert (low, high) == pytest.approx((expected.low, expected.high))
    assert interval(values) == (mean, low, high)  # seeded: a figure redraws identically
    assert 0 < values.min() <= low < mean < high <= values.max()  # positive: drawable on a log axis
    assert interval([5.0]) == (5.0, 5.0, 5.0)
    assert interval([0.3] * 4) == (0.3, 0.3, 0.3)


def test_interval_of_a_bounded_mean_stays_within_its_bounds():
    rng = np.random.default_rng(1)
    for _ in range(20):
        accuracy = np.minimum(1.0, rng.choice([0.8, 0.9, 1.0, 1.0, 1.0], size=5))
        _, low, high = interval(accuracy)
        assert 0.0 <= low <= high <= 1.0
    _, low, high = interval([1.0, 1.0, 1.0, 1.0, 0.9])
    assert high == 1.0 and 0.9 <= low < 1.0


def test_interval_covers_the_true_mean_about_as_often_as_it_claims():
    rng = np.random.default_rng(2)
    covered = []
    for seed in range(200):
        values = rng.normal(3.0, 2.0, size=40)
        _, low, high = interval(values, resamples=1000, seed=seed)
        covered.append(low <= 3.0 <= high)
    assert 0.88 <= np.mean(covered) <= 0.99


def test_summarise_bands_each_group():
    rows = [
        {"scheme": s, "trial": t, "mse": float(t + (s == "bacc"))} for s in ("gcc", "bacc") for t in range(6)
    ]
    summary = summarise(rows, ("scheme",), "mse")
    assert list(summary) == [("gcc",), ("bacc",)]
    assert summary[("gcc",)] == interval([0.0, 1, 2, 3, 4, 5])
    assert summary[("bacc",)].estimate == pytest.approx(3.5)


def test_csv_round_trip_keeps_numbers_and_text(tmp_path):
    rows = [{"scheme": "gcc", "trial": 3, "mse": 1.5e-12, "lambda_dec": ""}]
    assert read_csv(write_csv(rows, tmp_path / "r.csv")) == rows


def test_read_csv_refuses_what_is_not_a_csv_of_rows(tmp_path):
    ragged = tmp_path / "ragged.csv"
    ragged.write_text("a,b\n1,2\n3,4,5\n")
    with pytest.raises(ValueError, match="line 3 has 3 fields where the header has 2"):
        read_csv(ragged)
    binary = tmp_path / "figure.png"
    binary.write_bytes(b"\x89PNG\r\n\x1a\n\xff\xfe")
    with pytest.raises(ValueError, match="not UTF-8"):
        read_csv(binary)


@pytest.mark.slow
def test_stragglers_rows_for_every_model_scheme_and_trial(stragglers_rows, tmp_path):
    rows = stragglers_rows
    assert (REQUIRED - {"function"}) | {"model", "rel_acc", "lambda_enc", "lambda_dec"} <= set(rows[0])
    assert set(stragglers.COLUMNS) <= set(rows[0])
    assert {row["model"] for row in rows} == {"lenet5", "vit"}
    assert {row["scheme"] for row in rows} == {"gcc", "gcc-natural", "bacc", "replication", "uncoded"}
    settings = means(rows, ("model", "scheme", "num_stragglers"), "mse")
    assert len(rows) == len(settings) * len({row["trial"] for row in rows})
    assert all(isinstance(row["lambda_dec"], float) for row in rows if row["scheme"] == "gcc")
    assert all(0.0 <= row["rel_acc"] <= 1.0 and row["mse"] >= 0.0 for row in rows)
    (figure,) = stragglers.plot(rows, tmp_path)
    assert figure == tmp_path / "stragglers.png" and figure.stat().st_size > 10_000


@pytest.mark.slow
def test_stragglers_gcc_beats_bacc_and_uncoded_loses_inputs(stragglers_rows):
    """Quick run (5 trials): GCC's MSE is below BACC's at most S and by a geometric-mean factor, its relative
    accuracy keeps up, and uncoded computation loses the stragglers' inputs."""
    rows = stragglers_rows
    for model in ("lenet5", "vit"):
        mine = [row for row in rows if row["model"] == model]
        mse = means(mine, ("scheme", "num_stragglers"), "mse")
        acc = means(mine, ("scheme", "num_stragglers"), "rel_acc")
        s_values = sorted({s for _, s in mse})
        wins = [mse[("gcc", s)] < mse[("bacc", s)] for s in s_values]
        assert sum(wins) >= 0.8 * len(s_values)
        # The mean over S would be the largest S's 5 noisy trials; the log ratio weighs each S alike.
        log_ratios = [np.log(mse[("bacc", s)] / mse[("gcc", s)]) for s in s_values]
        assert np.exp(np.mean(log_ratios)) > 1.2
        assert np.mean([acc[("gcc", s)] - acc[("bacc", s)] for s in s_values]) >= -0.02
        assert acc[("uncoded", max(s_values))] < 0.7  # 70% of workers straggle


@pytest.mark.slow
def test_stragglers_headline_is_bacc_over_gcc_per_model_and_s(stragglers_rows):
    headline = stragglers.headline(stragglers_rows)
    assert headline.columns == ("model", *(f"S={s}" for s in stragglers.QUICK.stragglers))
    mse = means(stragglers_rows, ("model", "scheme", "num_stragglers"), "mse")
    for model, *ratios in headline.rows:
        expected = [mse[(model, "bacc", s)] / mse[(model, "gcc", s)] for s in stragglers.QUICK.stragglers]
        assert ratios == pytest.approx(expected)
    assert headline.column("model") == ["lenet5", "vit"]
    assert "relative accuracy" in headline.note
