"""The convergence-rate experiment (Fig. 4): CSV, slopes, figure, and what the numbers must show."""

from __future__ import annotations

import math
import shutil

import numpy as np
import pytest

from codedcomputing.experiments import rates
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
def rates_run(trained_models, tmp_path_factory):
    """The quick experiment, run once; LeNet-5 comes from the session's weight cache."""
    out = tmp_path_factory.mktemp("rates")
    path = rates.run(out, quick=True, seed=0, show_progress=False)
    assert path == out / "rates.csv"
    return out, read_csv(path)


def slopes_by_curve(rows):
    return {(r["panel"], r["scheme"], r["num_stragglers"], r["p"]): r["slope"] for r in rows}


def test_csv_has_one_row_per_setting_scheme_and_trial(rates_run):
    _, rows = rates_run
    config = rates.QUICK
    assert REQUIRED <= set(rows[0])
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


def test_lambdas_are_recorded_for_gcc_and_empty_for_bacc(rates_run):
    _, rows = rates_run
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


def test_slopes_file_matches_the_csv_and_figure_exists(rates_run):
    out, rows = rates_run
    figure = out / "rates.png"
    assert figure.exists() and figure.stat().st_size > 20_000
    written = read_csv(out / "rates_slopes.csv")
    assert set(written[0]) == {"panel", "scheme", "num_stragglers", "p", "slope"}
    expected = slopes_by_curve(rates.fit_slopes(rows))
    assert slopes_by_curve(written) == pytest.approx(expected)
    s = rates.QUICK.num_stragglers
    assert {("worst-case", scheme, s, "") for scheme in ("gcc", "gcc-natural", "bacc")} <= set(expected)
    assert {("bernoulli", "gcc", "", p) for p in rates.QUICK.probabilities} <= set(expected)


def test_gcc_mse_decays_faster_in_n_than_bacc_under_worst_case_stragglers(rates_run):
    _, rows = rates_run
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


def test_same_seed_gives_identical_csv(rates_run, tmp_path):
    out, rows = rates_run
    again = rates.run(tmp_path, quick=True, seed=0, show_progress=False)
    assert read_csv(again) == rows
    assert (tmp_path / "rates_slopes.csv").read_text() == (out / "rates_slopes.csv").read_text()


def test_plot_redraws_from_the_csv_alone(rates_run, tmp_path):
    out, _ = rates_run
    figures = rates.plot(out / "rates.csv", tmp_path / "redrawn")
    assert figures == [tmp_path / "redrawn" / "rates.png"]
    assert figures[0].stat().st_size > 20_000
    alone = tmp_path / "alone"
    alone.mkdir()
    shutil.copy(out / "rates.csv", alone / "rates.csv")  # no slopes file beside it
    (figure,) = rates.plot(alone / "rates.csv")
    assert figure == alone / "rates.png" and figure.stat().st_size > 20_000


def test_bernoulli_draw_redraws_until_two_workers_return():
    rng = np.random.default_rng(0)
    draws = [rates._bernoulli(3, 0.9, rng) for _ in range(50)]
    assert all(alive.size >= 2 for alive in draws)
    again = np.random.default_rng(0)
    assert all(np.array_equal(a, rates._bernoulli(3, 0.9, again)) for a in draws)
