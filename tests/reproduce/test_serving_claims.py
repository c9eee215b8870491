"""The serving experiment's claims, computed from rows: held, not held, or not measured and why."""

from __future__ import annotations

from codedcomputing.experiments import serving
from codedcomputing.reproduce.claims import PAPERS, claims_of

REGIME = serving.HEADLINE_REGIME
MODEL = 0.98


def cell(scheme, family, p999, accuracy=MODEL, *, utilisation=0.5, backend="simulated", grid="full", p50=1.0):
    """Two replicates of one (backend, grid, regime, utilisation, scheme), p99.9 +-5% around ``p999``."""
    return [
        {
            "experiment": "serving",
            "backend": backend,
            "grid": grid,
            "regime": REGIME if grid == "full" else "bimodal-p0.05-x10",
            "arrivals": "poisson",
            "utilisation": utilisation,
            "scheme": scheme,
            "family": family,
            "replicate": replicate,
            "num_replicas": 15 if grid == "full" else 6,
            "group_size": 10 if grid == "full" else 4,
            "num_workers": 15 if grid == "full" else 6,
            "queries": 10_000 if grid == "full" else 300,
            "time_unit_s": 0.02 if backend != "simulated" else "",
            "p50": p50,
            "p99": p999 * 0.8,
            "p999": p999 * (0.95 if replicate == 0 else 1.05),
            "accuracy": accuracy,
            "rel_acc": accuracy / MODEL,
            "model_acc": MODEL,
            "extra_load": 0.5,
            "load": utilisation * 1.5,
        }
        for replicate in (0, 1)
    ]


def grid_rows(code_p999, code_accuracy, *, parm=None, utilisation=0.5):
    """A full-grid setting: none, replication, hedge (p99.9 11, 8, 4) and one code."""
    rows = cell("none", "none", 11.0, utilisation=utilisation)
    rows += cell("replication", "replication", 8.0, utilisation=utilisation)
    rows += cell("hedge d=1.5", "hedge", 4.0, utilisation=utilisation)
    rows += cell("bacc tau=1.5", "bacc", code_p999, code_accuracy, utilisation=utilisation)
    if parm is not None:
        rows += cell("parm k=2", "parm", *parm, utilisation=utilisation)
    return rows


def one(claims, start):
    (found,) = [c for c in claims if c.claim.startswith(start)]
    return found


def test_serving_has_its_paper_and_its_claims_without_rows_are_not_measured():
    assert PAPERS["serving"].experiments == ("serving",)
    for config in (serving.QUICK, serving.Config()):
        claims = claims_of("serving", [], config)
        assert len(claims) == 2 + len(config.regimes) + len(config.live_backends)
        assert all(c.verdict == "not measured" and c.measured == "no rows" for c in claims)


def test_the_goal_holds_at_a_third_of_the_best_baseline_within_one_point():
    held = one(claims_of("serving", grid_rows(1.2, MODEL - 0.005)), "Goal")
    assert held.held is True and "hedge d=1.5 4" in held.measured and "ratio 0.3" in held.measured
    assert one(claims_of("serving", grid_rows(2.0, MODEL)), "Goal").held is False  # half the baseline
    short = one(claims_of("serving", grid_rows(1.0, MODEL - 0.05)), "Goal")  # fast, 5 points short
    assert short.held is False and "accuracy 0.930 (model 0.980" in short.measured


def test_the_goal_is_not_measured_without_rows_at_half_load():
    rows = grid_rows(1.0, MODEL, utilisation=0.3)
    goal = one(claims_of("serving", rows, serving.QUICK), "Goal")
    assert goal.held is None and "at utilisation 0.5" in goal.measured


def test_the_advantage_at_higher_load_names_the_crossover():
    rows = grid_rows(1.0, MODEL, utilisation=0.3) + grid_rows(2.0, MODEL, utilisation=0.5)
    rows += grid_rows(3.0, 0.5, utilisation=0.8)  # a lower tail, but half the queries wrong
    claim = one(claims_of("serving", rows), "Coding's advantage")
    assert claim.held is False
    assert "advantage at 0.3, 0.5, lost from 0.8" in claim.measured
    assert "p99.9 below the baseline's at 0.3, 0.5, 0.8" in claim.measured
    assert one(claims_of("serving", rows[: len(rows) * 2 // 3]), "Coding's advantage").held is True


def test_against_parm_needs_parm_rows_and_compares_where_parm_keeps_accuracy():
    without = one(claims_of("serving", grid_rows(1.0, MODEL), serving.QUICK), "At 50% utilisation")
    assert without.held is None and "no ParM rows" in without.measured
    beats = one(claims_of("serving", grid_rows(1.0, MODEL, parm=(9.0, MODEL))), "At 50% utilisation")
    assert beats.held is True
    loses = one(claims_of("serving", grid_rows(1.0, MODEL, parm=(0.5, MODEL))), "At 50% utilisation")
    assert loses.held is False
    parm_short = one(claims_of("serving", grid_rows(1.0, MODEL, parm=(0.5, 0.9))), "At 50% utilisation")
    assert parm_short.held is True  # ParM's tail is lower, but it gives up the accuracy


def live_rows(threads_p50, threads_p99):
    """The small grid: three schemes on the simulated clock and on threads."""
    sim = {"none": (1.0, 20.0), "hedge d=1.5": (1.1, 3.3), "bacc tau=1.5": (1.2, 3.0)}
    rows = []
    for scheme, (p50, p99) in sim.items():
        family = scheme.split()[0]
        rows += cell(scheme, family, p99 / 0.8, grid="small", p50=p50)
        rows += cell(
            scheme,
            family,
            threads_p99[scheme] / 0.8,
            grid="small",
            backend="threads",
            p50=threads_p50[scheme],
        )
    return rows


def test_the_simulated_clock_against_threads():
    close = live_rows(
        {"none": 1.1, "hedge d=1.5": 1.2, "bacc tau=1.5": 1.3},
        {"none": 19.0, "hedge d=1.5": 3.2, "bacc tau=1.5": 3.5},
    )
    claim = one(claims_of("serving", close), "The simulated clock predicts live threads")
    assert claim.held is True  # hedge and bacc swapped, but 10% apart on the simulated clock: a tie
    assert "p50 within 25%: 3 of 3" in claim.measured and "1 of 3 pairs swapped" in claim.measured
    slow = live_rows(
        {"none": 1.1, "hedge d=1.5": 1.8, "bacc tau=1.5": 1.3},
        {"none": 19.0, "hedge d=1.5": 4.5, "bacc tau=1.5": 3.5},
    )
    claim = one(claims_of("serving", slow), "The simulated clock predicts live threads")
    assert claim.held is False and "hedge d=1.5 at 0.5: 1.80 vs 1.10" in claim.measured
    swapped = live_rows(
        {"none": 1.0, "hedge d=1.5": 1.1, "bacc tau=1.5": 1.2},
        {"none": 3.8, "hedge d=1.5": 4.0, "bacc tau=1.5": 3.0},
    )
    claim = one(claims_of("serving", swapped), "The simulated clock predicts live threads")
    assert claim.held is False and "none/hedge d=1.5 at 0.5 (506% apart simulated)" in claim.measured


def test_a_live_backend_without_rows_is_not_measured():
    claims = claims_of("serving", grid_rows(1.0, MODEL), serving.Config())
    ray = one(claims, "The simulated clock predicts live Ray actors")
    assert ray.held is None and ray.measured == "no small-grid rows on ray and the simulated clock"
