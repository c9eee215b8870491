"""`coded reproduce`: the report's claim table against the CSVs it was computed from (figures
recomputed here independently, with numpy), resuming, --force, a failing experiment, and the
self-contained HTML."""

from __future__ import annotations

import json
import re

import numpy as np
import pytest
from typer.testing import CliRunner

from codedcomputing.cli import app
from codedcomputing.experiments import EXPERIMENTS
from codedcomputing.experiments.records import read_csv
from codedcomputing.reproduce import PAPERS, reproduce
from codedcomputing.reproduce.claims import CLAIMS, claims_of
from damages import claim_table

runner = CliRunner()
WIDE = {"COLUMNS": "200"}


@pytest.fixture(scope="module")
def quick_run(tmp_path_factory):
    out = tmp_path_factory.mktemp("reproduction")
    result = runner.invoke(
        app, ["reproduce", "--quick", "--only", "polynomial,rates", "--out", str(out)], env=WIDE
    )
    assert result.exit_code == 0, result.output
    return out, result.output


def mean_by(rows, *keys, value="mse"):
    groups = {}
    for row in rows:
        groups.setdefault(tuple(row[k] for k in keys), []).append(row[value])
    return {key: float(np.mean(v)) for key, v in groups.items()}


@pytest.mark.slow  # runs the quick experiments
def test_the_claim_table_matches_the_csvs(quick_run):
    out, output = quick_run
    report = (out / "report.md").read_text()
    claims = claim_table(report)
    assert len(claims) == 7 and all(row[3] in ("held", "not held", "not measured") for row in claims)
    assert f"{len(claims)} claims" in output
    # polynomial: LCC's largest mean MSE up to its threshold, recomputed from the CSV
    poly = read_csv(out / "polynomial.csv")
    last_exact = poly[0]["num_workers"] - poly[0]["recovery_threshold"]
    mse = mean_by(poly, "scheme", "num_stragglers")
    worst_exact = max(v for (scheme, s), v in mse.items() if scheme == "lcc" and s <= last_exact)
    exact = next(row for row in claims if row[0].startswith("LCC recovers"))
    assert f"{worst_exact:.3g}" in exact[1]
    assert exact[3] == ("held" if worst_exact < 1e-10 else "not held")
    beyond = [mse[("lcc", s)] / mse[("gcc", s)] for (scheme, s) in mse if scheme == "lcc" and s > last_exact]
    unstable = next(row for row in claims if row[0].startswith("Beyond LCC"))
    assert f">= {min(beyond):.3g}" in unstable[1]
    assert unstable[3] == ("held" if min(beyond) > 1 else "not held")
    # rates: GCC's and BACC's worst-case slopes, fitted here from the CSV's means
    rates = read_csv(out / "rates.csv")
    worst = [row for row in rates if row["panel"] == "worst-case"]
    means = mean_by(worst, "scheme", "num_workers")

    def slope(scheme):
        """The slope and its 95% interval: scipy's linregress and Student's t with n - 2 d.o.f."""
        from scipy import stats

        points = sorted((n, m) for (s, n), m in means.items() if s == scheme)
        fit = stats.linregress(np.log([n for n, _ in points]), np.log([m for _, m in points]))
        half = stats.t.ppf(0.975, len(points) - 2) * fit.stderr
        return fit.slope, f"{fit.slope:.2f} (95% CI {fit.slope - half:.2f} to {fit.slope + half:.2f})"

    (gcc, gcc_text), (bacc, bacc_text) = slope("gcc"), slope("bacc")
    rate = next(row for row in claims if row[0].startswith("With at most S stragglers"))
    assert rate[1] == f"slope {gcc_text}" and rate[3] == ("held" if gcc <= -2.8 else "not held")
    faster = next(row for row in claims if row[0].startswith("Under worst-case"))
    assert faster[1] == f"slopes GCC {gcc_text}, BACC {bacc_text}"
    assert faster[3] == ("held" if gcc < bacc else "not held")
    probabilistic = [row for row in claims if "probability p" in row[0]]
    assert len(probabilistic) == len({row["p"] for row in rates if row["panel"] != "worst-case"})
    # the summary line counts the table's verdicts
    held = sum(row[3] == "held" for row in claims)
    assert f"{held} held" in report.splitlines()[2]
    # the configuration, not the rows, says which claims there are
    expected = [
        c.claim for name in ("polynomial", "rates") for c in claims_of(name, [], EXPERIMENTS[name].QUICK)
    ]
    assert [row[0] for row in claims] == expected


@pytest.mark.slow  # runs the quick experiments
def test_the_html_is_self_contained_with_every_figure(quick_run):
    out, _ = quick_run
    page = (out / "report.html").read_text()
    figures = sorted(p.name for p in out.glob("*.png"))
    assert figures == ["polynomial.png", "rates.png"]
    images = re.findall(r'<img alt="[^"]*" src="([^"]*)"', page)
    assert len(images) == len(figures) and all(src.startswith("data:image/png;base64,") for src in images)
    assert "http://" not in page and "https://" not in page and "<script" not in page
    assert (
        page.count('class="held"') + page.count('class="not-held"') + page.count('class="not-measured"') == 7
    )
    markdown = (out / "report.md").read_text()
    for name in figures:  # each figure linked with its caption: what it shows and what the band is
        caption = re.search(rf"!\[([^\]]*)\]\({re.escape(name)}\)", markdown).group(1)
        assert "bootstrap" in caption and len(caption) > 60
    assert "## Environment" in markdown and "| numpy |" in markdown and "| CPUs |" in markdown


@pytest.mark.slow  # runs the quick experiments
def test_a_second_run_reuses_finished_experiments_and_force_reruns(tmp_path):
    first = reproduce(tmp_path, quick=True, only=["polynomial"], progress=False)
    assert [p.status for p in first.parts] == ["ran"]
    manifest = json.loads((tmp_path / "polynomial.run.json").read_text())
    assert manifest["fingerprint"]["quick"] is True and "polynomial.csv" in manifest["files"]
    csv_time = (tmp_path / "polynomial.csv").stat().st_mtime_ns
    again = reproduce(tmp_path, quick=True, only="polynomial", progress=False)
    assert [p.status for p in again.parts] == ["reused"]
    assert (tmp_path / "polynomial.csv").stat().st_mtime_ns == csv_time
    assert [c.measured for c in again.claims] == [c.measured for c in first.claims]
    other_seed = reproduce(tmp_path, quick=True, only="polynomial", seed=1, progress=False)
    assert [p.status for p in other_seed.parts] == ["ran"]  # another configuration: run again
    forced = reproduce(tmp_path, quick=True, only="polynomial", seed=1, force=True, progress=False)
    assert [p.status for p in forced.parts] == ["ran"]
    (tmp_path / "polynomial.png").unlink()  # a file of the run is gone: it is not reused
    assert [
        p.status for p in reproduce(tmp_path, quick=True, only="polynomial", seed=1, progress=False).parts
    ] == ["ran"]


@pytest.mark.slow  # runs the quick experiments
def test_a_failing_experiment_is_reported_and_the_others_go_on(tmp_path, monkeypatch):
    def broken(config, seed, *, progress=True):
        raise RuntimeError("the model cache is unreadable")

    monkeypatch.setattr(EXPERIMENTS["rates"], "run", broken)
    result = runner.invoke(
        app, ["reproduce", "--quick", "--only", "rates,polynomial", "--out", str(tmp_path)], env=WIDE
    )
    assert result.exit_code == 1
    assert "failed: rates" in result.output
    report = (tmp_path / "report.md").read_text()
    assert "RuntimeError: the model cache is unreadable" in report
    assert "| rates | failed |" in report and "| polynomial | ran |" in report
    assert not (tmp_path / "rates.run.json").exists()  # so the next run retries it
    claims = claim_table(report)  # polynomial's claims are still checked; rates' are there, not measured
    rates_claims = 2 + len(EXPERIMENTS["rates"].QUICK.probabilities)
    assert len(claims) == 2 + rates_claims
    not_measured = [row for row in claims if row[3] == "not measured"]
    assert len(not_measured) >= rates_claims
    assert all(row[1] == "the experiment failed" for row in not_measured[-rates_claims:])


def test_unknown_experiments_are_refused_naming_the_option(tmp_path):
    result = runner.invoke(app, ["reproduce", "--only", "polynomial,fig9", "--out", str(tmp_path)], env=WIDE)
    assert result.exit_code == 2
    assert "only" in result.output and "fig9" in result.output and "polynomial" in result.output
    assert not (tmp_path / "report.md").exists()


def test_every_experiment_has_claims_and_a_paper():
    assert set(CLAIMS) == set(EXPERIMENTS)
    tested = {name for paper in PAPERS.values() for name in paper.experiments}
    assert tested == set(EXPERIMENTS)


def test_the_expected_time_adds_training_for_models_not_cached(tmp_path, monkeypatch):
    from rich.console import Console

    from codedcomputing import models

    def not_run(config, seed, *, progress=True):
        raise RuntimeError("not run in this test")

    monkeypatch.setattr(EXPERIMENTS["stragglers"], "run", not_run)
    monkeypatch.setattr(models, "is_cached", lambda name, recipe=None: name == "lenet5")
    console = Console(record=True, width=200)
    done = reproduce(tmp_path, only="stragglers", progress=False, console=console)
    said = console.export_text()
    assert "plus about 3 min 30 s to train vit (not cached yet)" in said and "lenet5 (" not in said
    assert [p.status for p in done.parts] == ["failed"]


@pytest.mark.slow  # runs the quick polynomial experiment
def test_a_reused_experiment_that_ran_with_other_versions_is_named_in_the_report(tmp_path):
    reproduce(tmp_path, quick=True, only="polynomial", progress=False)
    manifest_path = tmp_path / "polynomial.run.json"
    manifest = json.loads(manifest_path.read_text())
    assert manifest["environment"]["numpy"] == np.__version__
    report = (tmp_path / "report.md").read_text()
    assert "another environment" not in report
    manifest["environment"]["numpy"] = "1.0.0"
    manifest_path.write_text(json.dumps(manifest))
    assert [p.status for p in reproduce(tmp_path, quick=True, only="polynomial", progress=False).parts] == [
        "reused"
    ]
    report = (tmp_path / "report.md").read_text()
    assert "Reused experiments that ran in another environment: polynomial ran with numpy 1.0.0." in report
