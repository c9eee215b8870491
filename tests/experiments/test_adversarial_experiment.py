"""The adversarial experiment: its rows, the slopes table against theory, the goal block,
the driver's CSV round trip and figures."""

from __future__ import annotations

import math

import numpy as np
import pytest

from codedcomputing.codes.robust import PILOT_GRID
from codedcomputing.experiments import EXPERIMENTS, adversarial, redraw, run_experiment
from codedcomputing.experiments.records import means, read_csv

SMALL = adversarial.Config(
    functions=("xsinx",),
    attacks=("concentrated", "garbage"),
    exponents=(0.0, 0.5),
    num_workers=(50, 200),
    trials=2,
    calibration_trials=1,
    approxifer_max_workers=50,
)


@pytest.fixture(scope="module")
def rows():
    return adversarial.run(SMALL, 0, progress=False)


def test_rows_cover_every_setting_scheme_and_trial(rows):
    assert EXPERIMENTS["adversarial"] is adversarial
    assert set(adversarial.COLUMNS) | {"num_adversaries", "bound"} <= set(rows[0])
    sweep = [row for row in rows if row["exponent"] != ""]
    for a in SMALL.exponents:
        for n in SMALL.num_workers:
            q = math.ceil(n**a)
            mine = [row for row in sweep if (row["exponent"], row["num_workers"]) == (a, n)]
            assert {row["num_adversaries"] for row in mine} == {q}
            schemes = {row["scheme"] for row in mine}
            dropped = {"approxifer"} if n > SMALL.approxifer_max_workers else set()
            expected = set(adversarial.SCHEMES) - dropped
            assert schemes == expected
            for attack in SMALL.attacks:
                for scheme in schemes:
                    trials = [r["trial"] for r in mine if (r["attack"], r["scheme"]) == (attack, scheme)]
                    assert sorted(trials) == list(range(SMALL.trials))
    goal = [row for row in rows if row["exponent"] == ""]
    settings = {(row["num_workers"], row["num_adversaries"], row["attack"]) for row in goal}
    assert settings == {(200, 10, "concentrated")}
    assert {row["scheme"] for row in goal} == set(adversarial.SCHEMES)
    assert all(math.isfinite(row["mse"]) and row["decode_s"] > 0 for row in rows)
    # the published decoder under the pilot rule (its lambda picked per decode) and the paper's schedule
    rules = {(row["scheme"], row["lambda_rule"]) for row in rows if row["scheme"].startswith("robust-gcc")}
    assert {("robust-gcc", "pilot"), ("robust-gcc-paper", "paper")} <= rules
    picked = {row["lambda_dec"] for row in rows if row["scheme"] == "robust-gcc"}
    assert picked <= set(PILOT_GRID.tolist()) and len(picked) > 1


def test_robust_decoders_beat_plain_gcc_where_the_liars_are_concentrated(rows):
    goal = means([row for row in rows if row["exponent"] == ""], ("scheme",), "mse")
    assert goal[("robust-gcc-tukey",)] < 0.1 * goal[("gcc",)]
    assert goal[("robust-gcc-tukey",)] < 0.1 * goal[("bacc",)]
    garbage = means([r for r in rows if r["attack"] == "garbage"], ("scheme",), "mse")
    assert garbage[("gcc",)] > 1e20  # unbounded garbage passes straight through plain GCC
    assert all(garbage[(scheme,)] < 1e4 for scheme in adversarial.ROBUST)  # clipped to M = 100


def test_slopes_are_fitted_per_curve_with_the_theory_beside_them(rows):
    slopes = adversarial.fit_slopes(rows)
    curves = {(s["attack"], s["scheme"], s["exponent"]) for s in slopes}
    assert ("concentrated", "robust-gcc-tukey", 0.5) in curves
    for s in slopes:
        assert s["theory"] == pytest.approx(1.2 * (s["exponent"] - 1))
        assert s["within_0.2_or_steeper"] == (s["slope"] <= s["theory"] + 0.2)
    # the slope is that of the two-point line through the mean MSEs
    mse = means(
        [r for r in rows if r["exponent"] == 0.0 and r["attack"] == "concentrated" and r["scheme"] == "gcc"],
        ("num_workers",),
        "mse",
    )
    expected = math.log(mse[(200,)] / mse[(50,)]) / math.log(200 / 50)
    key = ("concentrated", "gcc", 0.0)
    (fitted,) = [s for s in slopes if (s["attack"], s["scheme"], s["exponent"]) == key]
    assert fitted["slope"] == pytest.approx(expected)
    # two sizes leave no degree of freedom for an interval
    assert math.isnan(fitted["slope_low"]) and math.isnan(fitted["slope_high"])


def test_each_slope_carries_the_95_percent_interval_of_its_least_squares_fit():
    from scipy import stats

    wobble = {50: 1.3, 100: 0.8, 200: 1.1, 400: 0.9}
    rows = [
        {"function": "xsinx", "attack": "random", "scheme": "robust-gcc", "exponent": 0.5}
        | {"num_workers": n, "trial": 0, "mse": wobble[n] * n**-0.6}
        for n in wobble
    ]
    (row,) = adversarial.fit_slopes(rows)
    fit = stats.linregress(np.log(list(wobble)), np.log([wobble[n] * n**-0.6 for n in wobble]))
    half = stats.t.ppf(0.975, 2) * fit.stderr
    assert row["slope"] == pytest.approx(fit.slope)
    assert (row["slope_low"], row["slope_high"]) == pytest.approx((fit.slope - half, fit.slope + half))


@pytest.mark.slow  # draws figures with matplotlib: seconds each; CI runs it
def test_the_driver_writes_and_redraws(tmp_path, monkeypatch):
    monkeypatch.setattr(adversarial, "QUICK", SMALL)
    paths = run_experiment("adversarial", tmp_path, quick=True, progress=False)
    names = [p.name for p in paths]
    assert names[:2] == ["adversarial.csv", "adversarial_slopes.csv"]
    assert {"adversarial.png", "adversarial_schemes.png"} <= set(names)
    back = read_csv(tmp_path / "adversarial.csv")
    assert len(back) == len(adversarial.run(SMALL, 0, progress=False))
    assert {row["exponent"] for row in back} == {0, 0.5, ""}
    figures = redraw(tmp_path / "adversarial.csv", tmp_path / "again")
    assert sorted(p.name for p in figures) == ["adversarial.png", "adversarial_schemes.png"]
