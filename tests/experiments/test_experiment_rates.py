"""The convergence-rate experiment (Fig. 4): rows, slopes, figure, and what the numbers must show."""

from __future__ import annotations

import math
import shutil

import numpy as np
import pytest

from codedcomputing.experiments import rates, redraw, run_experiment
from codedcomputing.experiments.records import read_csv

REQUIRED = {
    "experiment",
    "model",
    "scheme",
    "panel",
    "num_inputs",
    "num_workers",
    "num_stragglers",
    "p",
    "trial",
    "seed",
    "mse",
    "rel_acc",
    "lambda_enc",
    "lambda_dec",
}


@pytest.fixture(scope="module")
def rates_rows(trained_models):
    """The quick experiment's rows, computed once; LeNet-5 comes from the session's weight cache."""
    return rates.run(rates.QUICK, 0, progress=False)


@pytest.fixture(scope="module")
def rates_files(rates_rows, tmp_path_factory):
    """The same run through the driver: the CSV, the slopes CSV and the figure."""
    out = tmp_path_factory.mktemp("rates")
    paths = run_experiment("rates", out, quick=True, seed=0, progress=False)
    assert paths == [out / "rates.csv", out / "rates_slopes.csv", out / "rates.png"]
    return out


def slopes_by_curve(rows):
    return {(r["panel"], r["scheme"], r["num_stragglers"], r["p"]): r["slope"] for r in rows}


def test_one_row_per_setting_scheme_and_trial(rates_rows):
    rows = rates_rows
    config = rates.QUICK
    assert REQUIRED <= set(rows[0])
    assert set(rates.COLUMNS) <= set(rows[0])
    assert {(r["experiment"], r["model"], r["seed"], r["num_inputs"]) for r in rows} == {
        ("rates", "lenet5", 0, config.num_inputs)
    }
    keys = [
        (r["panel"], r["scheme"], r["num_workers"], r["num_stragglers"], r["p"], r["trial"]) for r in rows
    ]
    assert len(keys) == len(set(keys))
    per_trial = 3 + 2 * len(
        config.probabilities
    )  # worst case: gcc, gcc-natural, bacc; bernoulli: gcc, natural
    assert len(rows) == len(config.num_workers) * config.trials * per_trial
    assert sorted({r["num_workers"] for r in rows}) == sorted(config.num_workers)
    worst = [r for r in rows if r["panel"] == "worst-case"]
    bernoulli = [r for r in rows if r["panel"] == "bernoulli"]
    assert {r["scheme"] for r in worst} == {"gcc", "gcc-natural", "bacc"}
    assert {r["scheme"] for r in bernoulli} == {"gcc", "gcc-natural"}
    assert {(r["num_stragglers"], r["p"]) for r in worst} == {(config.num_stragglers, "")}
    assert {r["num_stragglers"] for r in bernoulli} == {""}
    assert sorted({r["p"] for r in bernoulli}) == sorted(config.probabilities)
    assert all(math.isfinite(r["mse"]) and r["mse"] >= 0 and 0 <= r["rel_acc"] <= 1 for r in rows)


def test_lambdas_are_recorded_for_gcc_and_empty_for_bacc(rates_rows):
    rows = rates_rows
    assert all(r["lambda_enc"] == "" and r["lambda_dec"] == "" for r in rows if r["scheme"] == "bacc")
    assert all(r["lambda_enc"] == 0 and r["lambda_dec"] == 0 for r in rows if r["scheme"] == "gcc-natural")
    tuned = [r for r in rows if r["scheme"] == "gcc"]
    assert all(
        isinstance(r[key], float) and r[key] >= 0 for r in tuned for key in ("lambda_enc", "lambda_dec")
    )
    # tuned once per (N, straggler model): the same lambdas in every trial of a setting
    per_setting = {}
    for r in tuned:
        per_setting.setdefault((r["panel"], r["num_workers"], r["p"]), set()).add(
            (r["lambda_enc"], r["lambda_dec"])
        )
    assert all(len(pairs) == 1 for pairs in per_setting.values())


@pytest.mark.slow  # draws figures with matplotlib: seconds each; CI runs it
def test_driver_writes_the_rows_the_slopes_and_the_figure(rates_rows, rates_files):
    out = rates_files
    rows = read_csv(out / "rates.csv")
    assert rows == rates_rows  # the CSV holds exactly the rows: same seed, same numbers
    figure = out / "rates.png"
    assert figure.exists() and figure.stat().st_size > 20_000
    written = read_csv(out / "rates_slopes.csv")
    assert set(written[0]) == {"panel", "scheme", "num_stragglers", "p", "slope", "slope_low", "slope_high"}
    assert all(row["slope_low"] < row["slope"] < row["slope_high"] for row in written)
    expected = slopes_by_curve(rates.fit_slopes(rows))
    assert slopes_by_curve(written) == pytest.approx(expected)
    s = rates.QUICK.num_stragglers
    assert {("worst-case", scheme, s, "") for scheme in ("gcc", "gcc-natural", "bacc")} <= set(expected)
    assert {("bernoulli", "gcc", "", p) for p in rates.QUICK.probabilities} <= set(expected)


def test_gcc_mse_decays_faster_in_n_than_bacc_under_worst_case_stragglers(rates_rows):
    rows = rates_rows
    slopes = slopes_by_curve(rates.fit_slopes(rows))
    s = rates.QUICK.num_stragglers
    gcc, bacc = slopes[("worst-case", "gcc", s, "")], slopes[("worst-case", "bacc", s, "")]
    assert gcc < bacc  # steeper (more negative) log-log slope
    # and every GCC curve decays at least about as fast as the N^-3 theory
    assert all(v < -2.5 for (_, scheme, _, _), v in slopes.items() if scheme == "gcc")
    largest = max(rates.QUICK.num_workers)
    mean = {
        scheme: np.mean(
            [
                r["mse"]
                for r in rows
                if (r["panel"], r["scheme"], r["num_workers"]) == ("worst-case", scheme, largest)
            ]
        )
        for scheme in ("gcc", "bacc")
    }
    assert mean["gcc"] < mean["bacc"]


def test_fit_slopes_recovers_a_known_power_law():
    rows = [
        {
            "panel": "worst-case",
            "scheme": "gcc",
            "num_stragglers": 2,
            "p": "",
            "num_workers": n,
            "mse": 5.0 * n**-3.0,
        }
        for n in (20, 40, 80, 160)
    ]
    assert rates.fit_slopes(rows)[0]["slope"] == pytest.approx(-3.0)


def test_same_seed_gives_identical_rows_and_slopes(rates_rows, rates_files):
    again = rates.run(rates.QUICK, 0, progress=False)
    assert again == rates_rows
    assert read_csv(rates_files / "rates_slopes.csv") == rates.fit_slopes(again)


def test_headline_lists_every_fitted_slope(rates_rows):
    headline = rates.headline(rates_rows)
    slopes = rates.fit_slopes(rates_rows)
    assert headline.column("slope") == [row["slope"] for row in slopes]
    s = rates.QUICK.num_stragglers
    interval = f"{slopes[0]['slope_low']:.2f} to {slopes[0]['slope_high']:.2f}"
    assert headline.rows[0] == (f"gcc, worst case S = {s}", slopes[0]["slope"], interval, "N^-3")
    assert f"bacc, worst case S = {s}" in headline.column("curve")
    assert all(f"gcc, bernoulli p = {p}" in headline.column("curve") for p in rates.QUICK.probabilities)


@pytest.mark.slow  # draws figures with matplotlib: seconds each; CI runs it
def test_plot_redraws_from_the_csv_alone(rates_files, tmp_path):
    out = rates_files
    figures = redraw(out / "rates.csv", tmp_path / "redrawn")
    assert figures == [tmp_path / "redrawn" / "rates.png"]
    assert figures[0].stat().st_size > 20_000
    alone = tmp_path / "alone"
    alone.mkdir()
    shutil.copy(out / "rates.csv", alone / "rates.csv")  # no slopes file beside it
    (figure,) = redraw(alone / "rates.csv")
    assert figure == alone / "rates.png" and figure.stat().st_size > 20_000


def test_bernoulli_draw_redraws_until_two_workers_return():
    rng = np.random.default_rng(0)
    draws = [rates._bernoulli(3, 0.9, rng) for _ in range(50)]
    assert all(alive.size >= 2 for alive in draws)
    again = np.random.default_rng(0)
    assert all(np.array_equal(a, rates._bernoulli(3, 0.9, again)) for a in draws)


def test_slope_interval_is_linregress_slope_and_stderr_with_the_t_quantile():
    from scipy import stats

    rng = np.random.default_rng(4)
    x = np.log([20, 28, 40, 56, 80])
    y = 1.0 - 3.0 * x + rng.normal(scale=0.3, size=x.size)
    slope, low, high = rates.slope_interval(x, y)
    reference = stats.linregress(x, y)
    half = stats.t.ppf(0.975, x.size - 2) * reference.stderr
    assert slope == pytest.approx(reference.slope)
    assert (low, high) == pytest.approx((reference.slope - half, reference.slope + half))
    assert rates.slope_interval(x, y, level=0.5)[2] - slope < half  # a narrower level, a narrower interval


def test_slope_interval_covers_the_true_slope_about_95_percent_of_the_time():
    rng = np.random.default_rng(5)
    x = np.log([20, 40, 80, 160])
    draws = 1000
    covered = 0
    for _ in range(draws):
        _, low, high = rates.slope_interval(x, 2.0 - 3.0 * x + rng.normal(scale=0.5, size=x.size))
        covered += low <= -3.0 <= high
    # binomial(1000, 0.95): standard deviation 0.7 points; 4.5 of them either side
    assert 0.92 <= covered / draws <= 0.98


def test_slope_interval_is_nan_from_two_points_and_rejects_bad_inputs():
    slope, low, high = rates.slope_interval([0.0, 1.0], [0.0, -3.0])
    assert slope == pytest.approx(-3.0) and math.isnan(low) and math.isnan(high)
    with pytest.raises(ValueError, match="x and y"):
        rates.slope_interval([1.0], [2.0])
    with pytest.raises(ValueError, match="level"):
        rates.slope_interval([0.0, 1.0, 2.0], [0.0, 1.0, 2.0], level=95)


def test_fit_slopes_gives_each_slope_its_interval_and_an_exact_power_law_a_zero_width_one():
    rows = [
        {
            "panel": "worst-case",
            "scheme": scheme,
            "num_stragglers": 2,
            "p": "",
            "num_workers": n,
            "mse": 5.0 * n**-3.0 * (1.0 if scheme == "gcc" else np.exp(0.2 * (-1) ** i)),
        }
        for scheme in ("gcc", "bacc")
        for i, n in enumerate((20, 40, 80, 160))
    ]
    exact, noisy = rates.fit_slopes(rows)
    assert exact["scheme"] == "gcc"
    assert exact["slope_low"] == pytest.approx(-3.0) and exact["slope_high"] == pytest.approx(-3.0)
    assert noisy["slope_low"] < noisy["slope"] < noisy["slope_high"]
    assert noisy["slope_high"] - noisy["slope_low"] > 0.1
