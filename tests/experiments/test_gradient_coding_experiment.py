"""The gradient-coding experiment: its rows, the target and time-to-target tables, the
driver's CSV round trip and figure."""

from __future__ import annotations

import itertools
import math

import pytest

from codedcomputing.experiments import EXPERIMENTS, gradient_coding, redraw, run_experiment
from codedcomputing.experiments.records import read_csv
from codedcomputing.gradient_coding import SCHEMES, simulate

SMALL = gradient_coding.Config(
    dataset="digits",
    stragglers=(1, 3),
    ratios=(1.0,),
    sweep_ratios=(0.5, 2.0),
    sweep_stragglers=3,
    steps=30,
    target_step=20,
    trials=2,
)


@pytest.fixture(scope="module")
def rows():
    return gradient_coding.run(SMALL, 0, progress=False)


def test_rows_hold_every_scheme_setting_step_and_trial(rows):
    assert EXPERIMENTS["gradient-coding"] is gradient_coding
    assert set(gradient_coding.COLUMNS) <= set(rows[0])
    settings = {(r["num_stragglers"], r["delay_ratio"], r["delays"]) for r in rows}
    exponential = {(1, 1.0), (3, 1.0), (3, 0.5), (3, 2.0)}
    assert settings == {(*k, "exponential") for k in exponential} | {(1, 1.0, "bursty"), (3, 1.0, "bursty")}
    for s, ratio, kind in settings:
        for scheme in SCHEMES:
            for trial in range(SMALL.trials):
                steps = [
                    r["step"]
                    for r in rows
                    if (r["num_stragglers"], r["delay_ratio"], r["delays"]) == (s, ratio, kind)
                    and (r["scheme"], r["trial"]) == (scheme, trial)
                ]
                assert steps == list(range(SMALL.steps + 1))
    run = sorted(
        (
            r
            for r in rows
            if (r["scheme"], r["num_stragglers"], r["trial"], r["delays"]) == ("gc-cr", 3, 0, "exponential")
            and r["delay_ratio"] == 1.0
        ),
        key=lambda r: r["step"],
    )
    for before, after in itertools.pairwise(run):  # a step's time is the wall clock's increment
        assert after["step_time_s"] == pytest.approx(after["wall_time_s"] - before["wall_time_s"])
    grid = {(r["num_stragglers"], r["delay_ratio"]) for r in rows if r["in_grid"]}
    sweep = {(r["num_stragglers"], r["delay_ratio"]) for r in rows if r["in_sweep"]}
    assert grid == {(1, 1.0), (3, 1.0)} and sweep == {(3, 0.5), (3, 2.0)}


def test_time_to_target_is_the_first_step_at_or_below_dgds_loss(rows):
    target = gradient_coding.target_loss(rows)
    dgd = [
        r["loss"]
        for r in rows
        if (r["scheme"], r["step"], r["delay_ratio"], r["delays"]) == ("dgd", 20, 1.0, "exponential")
    ]
    assert target == pytest.approx(sum(dgd) / len(dgd))
    reach = gradient_coding.times_to_target(rows)
    mine = [
        r
        for r in rows
        if (r["scheme"], r["num_stragglers"], r["delay_ratio"]) == ("pgc-fr", 3, 1.0)
        and r["delays"] == "exponential"
    ]
    firsts = []
    for trial in range(SMALL.trials):
        first = min((r for r in mine if r["trial"] == trial and r["loss"] <= target), key=lambda r: r["step"])
        firsts.append(first["wall_time_s"])
    assert reach[("pgc-fr", 3, 1.0)][0] == pytest.approx(sum(firsts) / len(firsts))
    # the pipelined codes reach it sooner than gradient coding at s = 3
    assert reach[("pgc-fr", 3, 1.0)][0] < reach[("gc-fr", 3, 1.0)][0]
    assert reach[("pgc-cr", 3, 1.0)][0] < reach[("gc-cr", 3, 1.0)][0]
    assert all(math.isfinite(v[0]) for k, v in reach.items() if k[0] == "dgd")
    bursty = gradient_coding.times_to_target(rows, "bursty")
    assert set(bursty) == {(scheme, s, 1.0) for scheme in SCHEMES for s in (1, 3)}
    # persistent slowness costs DGD (it waits for the slowest) more than the schemes that skip it
    assert bursty[("dgd", 3, 1.0)][0] > reach[("dgd", 3, 1.0)][0]
    assert bursty[("pgc-fr", 3, 1.0)][0] < bursty[("dgd", 3, 1.0)][0]


def test_the_driver_writes_and_redraws(tmp_path, monkeypatch):
    monkeypatch.setattr(gradient_coding, "QUICK", SMALL)
    paths = run_experiment("gradient-coding", tmp_path, quick=True, progress=False)
    assert [p.name for p in paths] == ["gradient-coding.csv", "gradient-coding.png"]
    back = read_csv(tmp_path / "gradient-coding.csv")
    assert len(back) == len(SCHEMES) * (4 + 2) * SMALL.trials * (SMALL.steps + 1)
    figures = redraw(tmp_path / "gradient-coding.csv", tmp_path / "again")
    assert [p.name for p in figures] == ["gradient-coding.png"]


@pytest.mark.parametrize("model", gradient_coding.MODELS)
def test_every_model_option_builds_a_problem_that_trains(model):
    config = gradient_coding.Config(dataset="digits", model=model)
    task = gradient_coding.problem(config, 0)
    assert task.num_partitions == 12 and task.initial.ndim == 1
    history = simulate("pgc-cr", task, 2, 15, lr=0.5, seed=0)
    assert history[-1].loss < history[0].loss
    with pytest.raises(ValueError, match="model"):
        gradient_coding.problem(gradient_coding.Config(dataset="digits", model="resnet"), 0)
