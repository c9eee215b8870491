"""``coded demo`` and ``coded experiment latency`` (LeNet-5 on real MNIST, on real clusters)."""

from __future__ import annotations

import re

import numpy as np
import pytest
from typer.testing import CliRunner

from codedcomputing.cli import app
from codedcomputing.experiments import latency
from codedcomputing.experiments.latency import label, percentiles

runner = CliRunner()
WIDE = {"COLUMNS": "200"}


def _table(output: str) -> dict[str, list[str]]:
    rows = {}
    for line in output.splitlines():
        cells = [c.strip() for c in re.split(r"[│┃|]", line) if c.strip()]
        if cells and cells[0] in ("uncoded", "replication", "bacc", "gcc"):
            rows[cells[0]] = cells
    return rows


@pytest.mark.slow
def test_demo_prints_every_scheme_with_accuracy_and_latency(trained_models):
    result = runner.invoke(app, ["demo", "--quick", "--calls", "6"], env=WIDE)
    assert result.exit_code == 0, result.output
    rows = _table(result.output)
    assert set(rows) == {"uncoded", "replication", "bacc", "gcc"}
    workers = {name: int(cells[1]) for name, cells in rows.items()}
    assert workers == {"uncoded": 10, "replication": 50, "bacc": 50, "gcc": 50}
    assert rows["gcc"][2] == rows["bacc"][2] == "35"  # N - S with the defaults
    rel_acc = {name: float(cells[4].rstrip("%")) for name, cells in rows.items()}
    assert rel_acc["uncoded"] == rel_acc["replication"] == 100.0  # exact schemes
    assert rel_acc["gcc"] >= 90.0
    p50 = {name: float(cells[6]) for name, cells in rows.items()}
    p99 = {name: float(cells[7]) for name, cells in rows.items()}
    assert all(p50[name] >= 50.0 for name in rows)  # every worker's delay is at least 50 ms
    assert all(p99[name] >= p50[name] for name in rows)


@pytest.mark.parametrize(
    ("args", "needle"),
    [
        (["--backend", "mpi"], "--backend"),
        (["-n", "15"], "--num-workers"),  # replication needs N >= 2K
        (["-s", "49"], "--num-stragglers"),
        (["--delay-ms", "0"], "--delay-ms"),
        (["--ray-address", "auto"], "--ray-address"),  # only with --backend ray
    ],
)
def test_demo_rejects_bad_options_naming_them(args, needle):
    result = runner.invoke(app, ["demo", *args], env=WIDE)
    assert result.exit_code != 0
    assert needle in result.output


@pytest.fixture(scope="module")
def latency_rows(trained_models):
    """The quick configuration with fewer calls (the simulated backend's K = 100, N = 500 calls
    run LeNet-5 500 times each, for real): what the tests check holds on a dozen calls."""
    import dataclasses

    return latency.run(dataclasses.replace(latency.QUICK, trials=6, sim_trials=12), 0, progress=False)


@pytest.mark.slow
def test_latency_rows_one_per_backend_delay_scheme_and_trial(latency_rows, tmp_path):
    rows = latency_rows
    required = {"experiment", "backend", "delay_model", "scheme", "num_workers", "num_stragglers", "trial"}
    assert required | {"latency_s", "rel_acc", "encode_s", "decode_s", "wait_s"} <= set(rows[0])
    assert set(latency.COLUMNS) <= set(rows[0])
    assert {row["backend"] for row in rows} == {"thread", "simulated"}
    assert {row["scheme"] for row in rows} == {"uncoded", "replication", "bacc", "gcc"}
    settings = {(r["backend"], r["delay_model"], label(r)) for r in rows}
    for setting in settings:
        trials = sorted(r["trial"] for r in rows if (r["backend"], r["delay_model"], label(r)) == setting)
        assert trials == list(range(len(trials)))
    assert all(row["latency_s"] >= row["wait_s"] > 0 for row in rows)
    figures = latency.plot(rows, tmp_path)
    assert figures == [tmp_path / "latency_cdf.png", tmp_path / "latency_percentiles.png"]
    assert all(figure.stat().st_size > 10_000 for figure in figures)


@pytest.mark.slow
def test_latency_headline_has_p50_p99_and_the_ratio_to_uncoded(latency_rows):
    headline = latency.headline(latency_rows)
    stats = percentiles(latency_rows)
    assert len(headline.rows) == len(stats)
    for backend, delay, name, p50, p99, ratio, rel_acc, calls in headline.rows:
        expected = stats[(backend, delay, name)]
        assert (p50, p99) == pytest.approx((expected["p50"] * 1e3, expected["p99"] * 1e3))
        assert ratio == pytest.approx(expected["p99"] / stats[(backend, delay, "uncoded")]["p99"])
        assert rel_acc == expected["rel_acc"] and calls == expected["trials"]
    names = headline.column("scheme")
    assert "gcc S=10" in names and "gcc S=200" in names


@pytest.mark.slow
def test_latency_coding_cuts_the_simulated_tail(latency_rows):
    """On the virtual clock: waiting for N - S of N cuts uncoded's p99 tail. The wait is
    compared, not the total: the master's encode and decode are real time, which a busy
    machine can stretch at N = 500."""
    rows = latency_rows
    stats = percentiles(rows)

    def p99_wait(delay, name):
        mine = [r for r in rows if (r["backend"], r["delay_model"], label(r)) == ("simulated", delay, name)]
        return np.percentile([r["wait_s"] for r in mine], 99)

    for delay in ("shifted-exp", "pareto"):
        for s in (100, 200):
            assert p99_wait(delay, f"gcc S={s}") < 0.5 * p99_wait(delay, "uncoded")
            assert stats[("simulated", delay, f"gcc S={s}")]["rel_acc"] >= 0.95
    exact = [r["rel_acc"] for r in rows if r["scheme"] in ("uncoded", "replication")]
    assert np.all(np.array(exact) == 1.0)


@pytest.mark.slow
def test_a_recorded_trace_holds_every_workers_service_time_and_reads_back(tmp_path):
    table = latency.record_trace("thread", 3, seed=0, num_workers=6)
    assert table.shape == (3, 6) and np.all(np.isfinite(table)) and np.all(table > 0)
    from codedcomputing.runtime.delays import Trace

    back = Trace.from_csv(latency.write_trace(table, tmp_path / "trace.csv")).latencies
    assert np.allclose(back, table, atol=1e-6)
    with pytest.raises(ValueError, match="backend"):
        latency.record_trace("simulated", 1)
