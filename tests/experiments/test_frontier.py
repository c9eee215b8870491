"""The frontier experiment: per-query arithmetic against brute-force loops, extra load, rows,
figure, headline and claims, on a tiny stand-in f (the ``linear`` task), never LeNet."""

from __future__ import annotations

import dataclasses
import math

import numpy as np
import pytest

from codedcomputing.experiments import EXPERIMENTS, frontier, run_experiment
from codedcomputing.experiments.driver import redraw
from codedcomputing.reproduce.claims import claims_of

TINY = frontier.Config(
    task="linear",
    num_inputs=4,
    levels=(1.5,),
    regimes=("bimodal-p0.2-x10", "shifted-exp"),
    groups=30,
    taus=(1.2, 2.0),
    wait_fractions=(0.75, 1.0),
    parity_k=(2,),
)

# hand-made finish times: 2 groups of K = 4 queries; extra positions 4..7
DRAWS = np.array(
    [
        [1.0, 9.0, 1.1, 1.05, 1.2, 2.0, 0.5, 3.0],
        [8.0, 8.5, 1.0, 1.0, 9.5, 1.3, 7.0, 1.01],
    ]
)


@pytest.fixture(scope="module")
def rows():
    return frontier.run(TINY, 0, progress=False)


def test_replication_is_the_first_copy():
    own, copy = DRAWS[:, :4], np.where(np.arange(4) < 2, DRAWS[:, 4:], np.inf)
    expected = [[min(own[g, q], copy[g, q]) for q in range(4)] for g in range(2)]
    assert np.array_equal(frontier.replication_latency(own, copy), expected)


@pytest.mark.parametrize("delay", [0.0, 1.02, 1.5, 20.0])
def test_hedge_is_the_primary_or_the_backup_sent_at_the_delay(delay):
    primary, backup = DRAWS[:, :4], DRAWS[:, 4:]
    expected = np.empty_like(primary)
    hedged = 0
    for g in range(2):
        for q in range(4):
            if primary[g, q] <= delay:  # back before the delay: no backup
                expected[g, q] = primary[g, q]
            else:
                hedged += 1
                expected[g, q] = min(primary[g, q], delay + backup[g, q])
    assert np.array_equal(frontier.hedge_latency(primary, backup, delay), expected)
    assert frontier.hedged_share(primary, delay) == hedged / primary.size


@pytest.mark.parametrize("tau", [None, 1.02, 1.5, 8.2])
def test_parity_reconstructs_a_query_once_the_parity_and_the_others_arrived(tau):
    own, parity = DRAWS[:, :4], DRAWS[:, 4:6]  # k = 2: queries (0, 1) and (2, 3)
    latency, rebuilt = frontier.parity_latency(own, parity, 2, tau)
    for g in range(2):
        for q in range(4):
            group = q // 2
            others = [own[g, j] for j in range(2 * group, 2 * group + 2) if j != q]
            at = max(parity[g, group], *others, 0.0 if tau is None else tau)
            assert latency[g, q] == min(own[g, q], at)
            assert rebuilt[g, q] == (at < own[g, q])
    if tau is None:  # group (0, 1) of the first draw: query 1 (9.0) rebuilt at max(parity 1.2, 1.0)
        assert latency[0, 1] == 1.2 and rebuilt[0, 1]


def test_parity_with_ties_and_larger_groups():
    own = np.array([[2.0, 2.0, 1.0, 5.0]])
    latency, rebuilt = frontier.parity_latency(own, np.array([[1.5]]), 4)
    # query 3 (5.0): others' latest 2.0, parity 1.5 -> 2.0; the tied 2.0s: each other's 2.0 and 5.0
    assert latency.tolist() == [[2.0, 2.0, 1.0, 2.0]]
    assert rebuilt.tolist() == [[False, False, False, True]]


@pytest.mark.parametrize("tau", [0.9, 1.06, 1.5, 3.0])
def test_systematic_answers_from_the_own_worker_by_tau_else_decodes_at_tau(tau):
    own, workers = DRAWS[:, :4], DRAWS
    latency, t_dec = frontier.systematic_latency(own, workers, tau, min_results=2)
    for g in range(2):
        decode_at = max(tau, sorted(workers[g])[1])  # not before 2 results are in
        assert t_dec[g] == decode_at
        for q in range(4):
            assert latency[g, q] == (own[g, q] if own[g, q] <= decode_at else decode_at)


@pytest.mark.parametrize("cost", [0.0, 0.05, 0.3])
def test_decoding_takes_its_cost_and_an_own_result_back_meanwhile_wins(cost):
    own, workers = DRAWS[:, :4], DRAWS
    latency, t_dec = frontier.systematic_latency(own, workers, 1.06, min_results=2, decode_cost=cost)
    for g in range(2):
        done = max(1.06, sorted(workers[g])[1]) + cost
        assert t_dec[g] == done - cost
        for q in range(4):
            assert latency[g, q] == (own[g, q] if own[g, q] <= done else done)
    for w in (1, 5):
        assert frontier.wait_latency(DRAWS, w, cost).tolist() == [sorted(row)[w - 1] + cost for row in DRAWS]


def test_a_decode_cost_delays_the_coded_schemes_only():
    config = dataclasses.replace(TINY, regimes=("bimodal-p0.2-x10",), groups=10)
    free = frontier.run(config, 0, progress=False)
    costly = frontier.run(dataclasses.replace(config, decode_cost=0.5), 0, progress=False)
    for a, b in zip(free, costly, strict=True):
        assert (a["scheme"], a["knob_value"]) == (b["scheme"], b["knob_value"]) and b["decode_cost"] == 0.5
        if a["scheme"] in frontier.NON_SYSTEMATIC:  # every query decoded: exactly 0.5 later
            assert b["p50"] == pytest.approx(a["p50"] + 0.5) and b["p999"] == pytest.approx(a["p999"] + 0.5)
        elif a["scheme"] in frontier.SYSTEMATIC:  # decoded ones later, some now their own answer
            assert a["p999"] <= b["p999"] <= a["p999"] + 0.5 + 1e-12
            assert b["degraded_share"] <= a["degraded_share"]
        else:
            assert a | {"decode_cost": 0.5} == b


def test_waiting_for_w_of_n_answers_every_query_at_the_w_th_arrival():
    for w in range(1, 9):
        assert frontier.wait_latency(DRAWS, w).tolist() == [sorted(row)[w - 1] for row in DRAWS]


def test_waiting_for_w_agrees_with_the_simulated_cluster():
    from codedcomputing import BACC
    from codedcomputing.runtime import CodedExecutor, SimulatedCluster
    from codedcomputing.runtime.delays import Trace

    code = BACC(4, 8)
    cluster = SimulatedCluster(delays=Trace(DRAWS), compute_s=0.0)
    executor = CodedExecutor(code, lambda x: 2 * x, cluster)
    x = np.arange(8.0).reshape(4, 2)
    for g, w in ((0, 5), (1, 6)):
        result = executor.run(x, wait_for=w)
        assert result.report.wait_s == pytest.approx(frontier.wait_latency(DRAWS[g], w))


def test_systematic_arithmetic_agrees_with_run_queries_where_the_codes_name_their_workers():
    from codedcomputing.runtime import CodedExecutor, SimulatedCluster
    from codedcomputing.runtime.delays import Trace

    code = frontier.systematic_code("bacc", 4, 6)
    if not hasattr(CodedExecutor, "run_queries") or not np.any(
        np.asarray(getattr(code, "systematic_inputs", [-1])) >= 0
    ):
        pytest.skip("the codes do not name their systematic workers yet")
    positions = frontier._positions(code, 4, True)
    times = DRAWS[:, positions]  # worker n's finish time
    cluster = SimulatedCluster(delays=Trace(times), compute_s=0.0)
    executor = CodedExecutor(code, lambda x: 2 * x, cluster)
    x = np.arange(8.0).reshape(4, 2)
    for g in range(2):
        answers = executor.run_queries(x, tau=1.5)
        latency, _ = frontier.systematic_latency(DRAWS[g, :4], times[g], 1.5, code.min_results)
        assert np.allclose(answers.answered_s, latency)


@pytest.mark.parametrize(
    ("call", "name"),
    [
        (lambda: frontier.systematic_latency([1.0], [1.0, 2.0], 0.0), "tau"),
        (lambda: frontier.systematic_latency([1.0], [1.0, 2.0], math.nan), "tau"),
        (lambda: frontier.systematic_latency([1.0], [1.0, 2.0], math.inf), "tau"),
        (lambda: frontier.hedge_latency([1.0], [1.0], -0.1), "delay"),
        (lambda: frontier.parity_latency([1.0, 2.0], [1.0], 2, tau=0.0), "tau"),
        (lambda: frontier.hedged_share([1.0], -1.0), "delay"),
        (lambda: frontier.hedge_delay([1.0], 1.5), "extra_share"),
        (lambda: frontier.systematic_latency([1.0], [1.0, 2.0], 1.2, decode_cost=-0.1), "decode_cost"),
        (lambda: frontier.check_config(dataclasses.replace(TINY, decode_cost=math.nan)), "decode_cost"),
        (lambda: frontier.hedge_delay([1.0, np.inf], 0.5), "calibration"),
        (lambda: frontier.check_config(dataclasses.replace(TINY, levels=(0.9,))), "levels"),
        (lambda: frontier.check_config(dataclasses.replace(TINY, taus=(0.0,))), "taus"),
        (lambda: frontier.check_config(dataclasses.replace(TINY, taus=(math.nan,))), "taus"),
        (lambda: frontier.check_config(dataclasses.replace(TINY, regimes=("pareto",))), "regimes"),
        (lambda: frontier.check_config(dataclasses.replace(TINY, regimes=("bimodal-p2-x10",))), "regimes"),
        (lambda: frontier.check_config(dataclasses.replace(TINY, task="resnet")), "task"),
        (lambda: frontier.replication_latency([1.0], [-1.0]), "copy"),
    ],
)
def test_bad_input_raises_naming_the_parameter(call, name):
    with pytest.raises(ValueError, match=name):
        call()


def test_rows_cover_every_cell_with_ordered_percentiles(rows):
    assert set(frontier.COLUMNS) <= set(rows[0])
    schemes = {row["scheme"] for row in rows}
    assert schemes == {"uncoded", "replication", "hedge", "parm-k2", *frontier.CODED}
    for regime in TINY.regimes:
        mine = [row for row in rows if row["regime"] == regime]
        assert sum(row["scheme"] == "uncoded" for row in mine) == 1
        assert sum(row["scheme"] == "manifold-gcc" for row in mine) == len(TINY.taus)
        assert sum(row["scheme"] == "gcc" for row in mine) == len(TINY.wait_fractions)
    for row in rows:
        assert row["p50"] <= row["p99"] <= row["p999"]
        assert row["p999_low"] <= row["p999"] * (1 + 1e-12) and row["p999"] <= row["p999_high"] * (1 + 1e-12)
        assert row["accuracy_low"] <= row["accuracy"] <= row["accuracy_high"]
        assert row["queries"] == TINY.groups * TINY.num_inputs
        assert frontier.row_problem(row) == ""


def test_the_hedge_delay_is_a_quantile_of_an_earlier_period_not_of_the_reported_draws(rows):
    assert frontier.hedge_delay([[1.0, 2.0], [3.0, 4.0]], 0.5) == 2.5
    assert frontier.hedge_delay([1.0, 2.0, 3.0], 0.0) == 3.0  # no extra load: never hedged
    for regime in TINY.regimes:
        (hedge,) = [r for r in rows if r["regime"] == regime and r["scheme"] == "hedge"]
        rng = frontier._task_rng(0, "calibration", regime)
        model = frontier.delay_model(regime, TINY, frontier._task_rng(0, "delays", regime))
        earlier = np.stack([model.sample(TINY.num_inputs, rng) for _ in range(TINY.groups)])
        assert hedge["knob_value"] == frontier.hedge_delay(earlier, 0.5)
        reported_rng = frontier._task_rng(0, "delays", regime)
        model = frontier.delay_model(regime, TINY, reported_rng)
        reported = np.stack([model.sample(2 * TINY.num_inputs, reported_rng) for _ in range(TINY.groups)])
        assert hedge["knob_value"] != np.quantile(reported[:, : TINY.num_inputs], 0.5)
        assert hedge["extra_load"] == frontier.hedged_share(
            reported[:, : TINY.num_inputs], hedge["knob_value"]
        )


def test_extra_load_counts_every_copy_backup_and_parity_as_a_full_call(rows):
    for row in rows:
        if row["scheme"] == "uncoded":
            assert row["extra_load"] == 0 and row["level"] == 1.0
        elif row["scheme"] == "hedge":  # measured: the share hedged, matched to the level
            # the delay set on an earlier period's draws: the share hedged varies around L - 1
            queries = TINY.groups * TINY.num_inputs
            assert abs(row["extra_load"] - 0.5) <= 4 * math.sqrt(0.25 / queries)
        else:  # (N - K) / K, used or not
            assert row["extra_load"] == (row["num_workers"] - row["num_inputs"]) / row["num_inputs"] == 0.5


def test_exact_schemes_agree_with_the_model_and_systematic_latency_stays_by_tau(rows):
    for row in rows:
        if row["scheme"] in frontier.EXACT:
            assert row["rel_acc"] == 1.0 and row["accuracy"] == row["model_acc"]
            assert row["degraded_acc"] == ""
        if row["scheme"] in frontier.SYSTEMATIC and row["regime"].startswith("bimodal"):
            # tau: answered or decoded by then (enough fast workers are back by tau here;
            # under 1 + Exp(1) fewer than min_results can be, and the decode waits for them)
            assert row["p999"] <= row["knob_value"]
        if row["scheme"] == "replication":
            assert row["vs_replication"] == 1.0
        if row["scheme"] == "hedge":
            assert row["vs_hedge"] == 1.0
    # the linear stand-in's parity is exact: f(sum) - the others = the missing output
    parm = [row for row in rows if row["scheme"] == "parm-k2"]
    assert parm and all(row["rel_acc"] == 1.0 for row in parm)
    assert any(row["degraded_share"] > 0 and row["degraded_acc"] == 1.0 for row in parm)
    assert len(parm) == len(TINY.taus) * len(TINY.regimes)


def test_under_heavy_stragglers_a_systematic_code_cuts_the_tail_and_decodes_some_queries(rows):
    mine = {(row["scheme"], row["knob_value"]): row for row in rows if row["regime"] == "bimodal-p0.2-x10"}
    code = mine[("gcc-systematic", 1.2)]
    assert code["p999"] <= 1.2 < 10 <= mine[("replication", 1.5)]["p999"]
    assert 0 < code["degraded_share"] < 1 and code["vs_replication"] < 0.2


def test_the_run_is_seeded(rows):
    again = frontier.run(dataclasses.replace(TINY, regimes=TINY.regimes[:1]), 0, progress=False)
    assert again == [row for row in rows if row["regime"] == TINY.regimes[0]]


def test_headline_and_table_compare_with_both_baselines(rows):
    table = frontier.frontier_table(rows)
    assert {(e["regime"], e["level"]) for e in table} == {(r, 1.5) for r in TINY.regimes}
    for entry in table:
        mine = [r for r in rows if (r["regime"], r["level"]) == (entry["regime"], entry["level"])]
        model = next(r for r in mine if r["scheme"] == "replication")
        keeps = [
            r
            for r in mine
            if r["scheme"] in frontier.CODED and r["select_accuracy"] >= model["select_accuracy"] - 0.01
        ]
        if keeps:  # chosen on the even groups, reported on the odd ones
            chosen = min(keeps, key=lambda r: (r["select_p999"], -r["select_accuracy"]))
            assert (entry["scheme"], entry["knob_value"]) == (chosen["scheme"], chosen["knob_value"])
            assert entry["p999"] == chosen["heldout_p999"] and entry["accuracy"] == chosen["heldout_accuracy"]
        assert entry["keeps_accuracy"] == (entry["accuracy"] >= model["heldout_accuracy"] - 0.01)
        assert entry["queries"] + entry["select_queries"] == TINY.groups * TINY.num_inputs
        baseline = min(entry["replication_p999"], entry["hedge_p999"])
        assert entry["wins"] == (entry["keeps_accuracy"] and entry["p999"] < baseline)
    headline = frontier.headline(rows)
    assert len(headline.rows) == len(table)
    assert set(headline.column("coding")) <= {
        "wins",
        "wins?",
        "ties",
        "loses:\nlatency",
        "loses:\nlatency?",
        "loses:\naccuracy",
    }
    assert [row[1].split()[0] for row in headline.rows] == [e["scheme"] for e in table]


def test_a_verdict_whose_paired_interval_holds_1_is_not_clear():
    def verdict(low, high, code=1.2):
        rows = _cell_rows({"replication": 10.0, "hedge": 8.0, "manifold-gcc": code}, {"manifold-gcc": 0.975})
        rows[-1] |= {"heldout_vs_hedge_low": low, "heldout_vs_hedge_high": high}
        return frontier.frontier_table(rows)[0]["verdict"]

    assert verdict(0.1, 0.2) == "wins"
    assert verdict(0.1, 1.01) == "wins (not clear)"  # against the faster baseline, hedging
    assert verdict(0.9, 1.2, code=9.0) == "loses (latency, not clear)"
    assert verdict(1.05, 1.2, code=9.0) == "loses (latency)"


def test_the_headline_fits_100_columns_off_a_terminal():
    import io

    from rich.console import Console

    from codedcomputing.experiments.driver import _show

    rows = _cell_rows(
        {"replication": 10.123, "hedge": 8.123, "bacc-systematic": 1.2345, "parm-k2": 10.6789},
        {"bacc-systematic": 0.9755, "parm-k2": 0.9876},
        regime="bimodal-p0.05-x20",
        level=1.25,
    )
    out = io.StringIO()
    _show(frontier.headline(rows), Console(file=out, width=80))
    table = out.getvalue().split("\n\n")[0] if "\n\n" in out.getvalue() else out.getvalue()
    assert max(len(line) for line in table.splitlines()) <= 100
    assert "…" not in out.getvalue() and "bimodal-p0.05-x20" in out.getvalue()
    assert "bacc-systematic" in out.getvalue()


def test_driver_writes_csv_and_figure_and_redraws(tmp_path, monkeypatch):
    monkeypatch.setattr(frontier, "QUICK", dataclasses.replace(TINY, regimes=("shifted-exp",), groups=10))
    assert EXPERIMENTS["frontier"] is frontier
    paths = run_experiment("frontier", tmp_path, quick=True, progress=False)
    assert [p.name for p in paths] == ["frontier.csv", "frontier.png"]
    figures = redraw(paths[0], tmp_path / "again")
    assert [p.name for p in figures] == ["frontier.png"] and figures[0].stat().st_size > 0


def _cell_rows(p999: dict, accuracy: dict, regime="bimodal-p0.05-x10", level=1.5, model_acc=0.98):
    """Rows of one (regime, level) with given p99.9 and accuracy per scheme."""
    rows = []
    for scheme, value in p999.items():
        rows.append(
            {
                "task": "linear",
                "regime": regime,
                "level": level,
                "num_inputs": 20,
                "scheme": scheme,
                "knob": "tau" if scheme in frontier.CODED else "",
                "knob_value": 1.2 if scheme in frontier.CODED else "",
                "p999": value,
                "accuracy": accuracy.get(scheme, model_acc),
                "degraded_acc": "",
                "model_acc": model_acc,
                "extra_load": 0.5,
                "queries": 5000,
                "vs_replication": value / p999["replication"],
                "vs_replication_low": value / p999["replication"] * 0.9,
                "vs_replication_high": value / p999["replication"] * 1.1,
                "vs_hedge": value / p999["hedge"],
                "vs_hedge_low": value / p999["hedge"] * 0.9,
                "vs_hedge_high": value / p999["hedge"] * 1.1,
            }
        )
        # the same figures on both halves of the groups
        row = rows[-1]
        row |= {"select_p999": value, "select_accuracy": row["accuracy"], "heldout_queries": 2500}
        row |= {f"heldout_{key}": row[key] for key in ("p999", "accuracy")}
        row |= {f"heldout_{key}": row[key] for key in row if key.startswith("vs_")}
    return rows


def test_the_best_knob_is_chosen_on_one_half_of_the_groups_and_reported_on_the_other():
    rows = _cell_rows({"replication": 10.0, "hedge": 8.0, "manifold-gcc": 1.2}, {"manifold-gcc": 0.975})
    other = dict(rows[-1], knob_value=2.0)
    rows.append(other)
    # tau = 1.2 looks best where chosen (1.2 < 1.5) but is slower held out (3.0 > 1.3)
    rows[-2] |= {"select_p999": 1.2, "heldout_p999": 3.0, "heldout_vs_replication": 0.3}
    other |= {"select_p999": 1.5, "heldout_p999": 1.3, "heldout_vs_replication": 0.13}
    (entry,) = frontier.frontier_table(rows)
    assert entry["knob_value"] == 1.2 and entry["p999"] == 3.0 and entry["vs_replication"][0] == 0.3
    # a knob that keeps accuracy only held out is not chosen
    other |= {"select_accuracy": 0.9, "select_p999": 1.0}
    assert frontier.frontier_table(rows)[0]["knob_value"] == 1.2


def test_claims_say_where_coding_wins_and_where_it_loses_from_the_rows():
    win = _cell_rows({"replication": 10.0, "hedge": 8.0, "manifold-gcc": 1.2}, {"manifold-gcc": 0.975})
    claims = claims_of("frontier", win)
    assert [c.held for c in claims] == [True, True, None]  # goal, every level, against ParM (no rows)
    assert "1.2" in claims[0].measured and "0.975" in claims[0].measured
    assert "ParM" in claims[2].measured
    inaccurate = _cell_rows({"replication": 10.0, "hedge": 8.0, "manifold-gcc": 1.2}, {"manifold-gcc": 0.95})
    claims = claims_of("frontier", inaccurate)
    assert [c.held for c in claims[:2]] == [False, False] and "loses (accuracy)" in claims[1].measured
    slow = _cell_rows({"replication": 10.0, "hedge": 2.0, "manifold-gcc": 1.5}, {})  # 0.75x hedging
    claims = claims_of("frontier", slow)
    assert [c.held for c in claims[:2]] == [False, True]
    # against learned parity: held where ParM keeps accuracy only with a higher p99.9, or loses it
    for parm, accuracy, held in ((5.0, 0.98, True), (1.0, 0.98, False), (1.0, 0.9, True)):
        rows = _cell_rows(
            {"replication": 10.0, "hedge": 8.0, "manifold-gcc": 1.2, "parm-k2": parm},
            {"manifold-gcc": 0.975, "parm-k2": accuracy},
        )
        assert claims_of("frontier", rows)[2].held is held
    # a config whose goal regime has no rows: there, not measured, never left out
    config = dataclasses.replace(TINY, regimes=("bimodal-p0.02-x10", "bimodal-p0.05-x10"), levels=(1.5,))
    claims = claims_of("frontier", win, config)
    assert len(claims) == 6 and claims[0].held is None and "bimodal-p0.02-x10" in claims[0].measured


@pytest.mark.slow  # draws figures with matplotlib: seconds each; CI runs it
def test_the_figure_keeps_its_title_above_the_panels_and_its_legend_names_every_scheme(
    rows, monkeypatch, tmp_path
):
    figures, save = [], frontier.save_figure
    monkeypatch.setattr(frontier, "save_figure", lambda fig, *args: figures.append(fig) or save(fig, *args))
    # ten regimes (the full config's height); ParM drawn in the last panel only
    tall = [
        dict(row, regime=f"{row['regime']}-{i}")
        for i in range(5)
        for row in rows
        if not (row["scheme"].startswith("parm-") and i < 4)
    ]
    frontier.plot(tall, tmp_path)
    (fig,) = figures
    from matplotlib.backends.backend_agg import FigureCanvasAgg

    canvas = FigureCanvasAgg(fig)  # save_figure closed it, laid out as saved
    canvas.draw()
    renderer = canvas.get_renderer()
    title_bottom = fig._suptitle.get_window_extent(renderer).y0
    assert all(ax.title.get_window_extent(renderer).y1 < title_bottom for ax in fig.axes)
    legend = fig.axes[0].get_legend()
    assert "parm-k2 (over tau)" in [text.get_text() for text in legend.get_texts()]


@pytest.mark.parametrize("backend", ["thread", "ray"])
def test_the_shipped_traces_are_the_latency_experiments_and_the_regimes_replay_them(backend):
    from codedcomputing.runtime.delays import Trace

    table = Trace.from_csv(frontier.shipped_trace(backend)).latencies
    assert table.shape == (100, 50) and np.all(table > 0) and np.median(table) < 0.1  # seconds
    model = frontier.delay_model(f"trace-{backend}", TINY, np.random.default_rng(0))
    draws = np.stack([model.sample(80, np.random.default_rng(i)) for i in range(50)])
    # scaled to median 1, every value one of the measured ones (workers beyond 50: a random column)
    assert np.isclose(np.median(model.latencies), 1.0)
    assert np.isin(np.round(draws * np.median(table), 6), np.round(table, 6)).all()


def test_the_trace_regime_replays_a_given_csv_else_the_synthetic_trace(tmp_path):
    from codedcomputing.experiments import latency

    path = latency.write_trace(np.array([[1.0, 2.0, 3.0], [2.0, 2.0, 4.0]]), tmp_path / "t.csv")
    config = dataclasses.replace(TINY, trace_csv=str(path))
    model = frontier.delay_model("trace", config, np.random.default_rng(0))
    assert np.array_equal(np.sort(model.latencies.ravel()), np.array([0.5, 1.0, 1.0, 1.0, 1.5, 2.0]))
    synthetic = frontier.delay_model("trace", TINY, np.random.default_rng(0))
    assert synthetic.latencies.shape == (1000, 64)
    with pytest.raises(ValueError, match="backend"):
        frontier.shipped_trace("gpu")
    with pytest.raises(ValueError, match="latencies"):
        latency.write_trace(np.array([1.0, np.nan]), tmp_path / "u.csv")
