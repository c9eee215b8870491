"""The gradient-coding experiment: its rows, the target and time-to-target tables, the
driver's CSV round trip and figure."""

from __future__ import annotations

import dataclasses
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
    backends=("threads",),
    backend_trials=1,
)


@pytest.fixture(scope="module")
def rows():
    return gradient_coding.run(SMALL, 0, progress=False)


@pytest.mark.slow  # trains the small grid's networks (80 s on an idle 2-core machine)
def test_rows_hold_every_scheme_setting_step_and_trial(rows):
    assert EXPERIMENTS["gradient-coding"] is gradient_coding
    assert set(gradient_coding.COLUMNS) | {"step_time_s", "seed"} <= set(rows[0])
    assert {r["backend"] for r in rows} == {"simulated", "threads"}
    rows = [r for r in rows if r["backend"] == "simulated"]
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


@pytest.mark.slow  # trains the small grid's networks (80 s on an idle 2-core machine)
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
        and gradient_coding._backend(r) == "simulated"  # the real threads' rows are the same setting
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


def _losses(rows, backend, scheme):
    run = [
        r
        for r in rows
        if (r["backend"], r["scheme"], r["num_stragglers"], r["trial"]) == (backend, scheme, 3, 0)
    ]
    run = [r for r in run if r["delays"] == "exponential" and r["delay_ratio"] == 1.0]
    return [r["loss"] for r in sorted(run, key=lambda r: r["step"])]


def check_real_backend(rows, backend):
    """A real backend's rows: every scheme, every step, real seconds increasing; the exact
    codes follow DGD's iterates whatever the timing, so their losses equal the simulated
    DGD's step for step; the pipelined codes train."""
    real = [r for r in rows if r["backend"] == backend]
    assert {r["scheme"] for r in real} == set(SCHEMES)
    assert {(r["num_stragglers"], r["delay_ratio"], r["in_grid"], r["in_sweep"]) for r in real} == {
        (3, 1.0, False, False)
    }
    dgd = _losses(rows, "simulated", "dgd")
    for scheme in ("dgd", "gc-fr", "gc-cr"):
        assert _losses(rows, backend, scheme) == pytest.approx(dgd, rel=1e-5)
    for scheme in ("pgc-fr", "pgc-cr", "is-sgd"):
        losses = _losses(rows, backend, scheme)
        assert len(losses) == SMALL.steps + 1 and losses[-1] < 0.7 * losses[0]
    times = sorted((r["step"], r["wall_time_s"]) for r in real if (r["scheme"], r["trial"]) == ("pgc-cr", 0))
    assert all(b[1] > a[1] for a, b in itertools.pairwise(times))
    reach = gradient_coding.times_to_target(rows, backend=backend)
    assert set(reach) == {(scheme, 3, 1.0) for scheme in SCHEMES}
    labels = gradient_coding.headline(rows).column("delay/compute")
    assert f"{backend} 1 (real s)" in labels


@pytest.mark.slow  # trains the small grid's networks (80 s on an idle 2-core machine)
def test_real_threads_run_every_scheme_and_exact_codes_follow_dgd(rows):
    check_real_backend(rows, "threads")


@pytest.mark.slow
def test_the_ray_backend_runs_every_scheme_and_exact_codes_follow_dgd():
    pytest.importorskip("ray")  # the README's install has the ray extra: this runs in CI
    import dataclasses

    # 8 workers, not 12: one Ray actor each, and starting an actor (a process importing torch) costs
    # seconds on a busy machine; s = 3 still divides them into FR groups of 4
    config = dataclasses.replace(
        SMALL, num_workers=8, stragglers=(3,), sweep_ratios=(), bursty=False, backends=("ray",)
    )
    rows = gradient_coding.run(config, 0, progress=False)
    check_real_backend(rows, "ray")


def test_unknown_backends_are_refused():
    with pytest.raises(ValueError, match="backends"):
        gradient_coding.run(gradient_coding.Config(dataset="digits", backends=("mpi",)), 0, progress=False)


# The driver's plumbing (write, read back, redraw) on the least grid that draws: its work once
# reached the 1,200 s hang guard at load 14-27 with SMALL (80 s idle).
TINY = dataclasses.replace(SMALL, steps=8, target_step=5, trials=1)


@pytest.mark.slow  # trains the tiny grid's networks
def test_the_driver_writes_and_redraws(tmp_path, monkeypatch):
    monkeypatch.setattr(gradient_coding, "QUICK", TINY)
    paths = run_experiment("gradient-coding", tmp_path, quick=True, progress=False)
    assert [p.name for p in paths] == ["gradient-coding.csv", "gradient-coding.png"]
    back = read_csv(tmp_path / "gradient-coding.csv")
    simulated = len(SCHEMES) * (4 + 2) * TINY.trials * (TINY.steps + 1)
    assert len(back) == simulated + len(SCHEMES) * TINY.backend_trials * (TINY.steps + 1)
    figures = redraw(tmp_path / "gradient-coding.csv", tmp_path / "again")
    assert [p.name for p in figures] == ["gradient-coding.png"]


@pytest.mark.parametrize(
    "model",
    [pytest.param(m, marks=pytest.mark.slow) if m == "lenet5" else m for m in gradient_coding.MODELS],
)
def test_every_model_option_builds_a_problem_that_trains(model):
    config = gradient_coding.Config(dataset="digits", model=model)
    task = gradient_coding.problem(config, 0)
    assert task.num_partitions == 12 and task.initial.ndim == 1
    history = simulate("pgc-cr", task, 2, 15, lr=0.5, seed=0)
    assert history[-1].loss < history[0].loss
    with pytest.raises(ValueError, match="model"):
        gradient_coding.problem(gradient_coding.Config(dataset="digits", model="resnet"), 0)


@pytest.mark.slow  # trains the small grid's networks (80 s on an idle 2-core machine)
def test_a_grid_without_the_sweep_or_bursty_rows_still_draws(rows, tmp_path):
    kept = [
        {**r, "in_sweep": False}
        for r in rows
        if r["delays"] == "exponential" and r["delay_ratio"] == 1.0 and r["backend"] == "simulated"
    ]
    (path,) = gradient_coding.plot(kept, tmp_path)
    assert path.is_file() and path.stat().st_size > 10_000
