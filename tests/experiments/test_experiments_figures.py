"""The figures as a reader sees them: what each band is, exact schemes on a marked floor,
coinciding curves told apart, threshold and theory lines labelled, bounded bands in bounds."""

from __future__ import annotations

import numpy as np
import pytest

from codedcomputing.experiments import latency, polynomial, rates, records, stragglers
from codedcomputing.experiments.records import EXACT_MSE, Interval, draw_band, pyplot, show_floor, twins


class Drawn:
    """The figures a module's ``plot`` saves, inspected before they are closed."""

    def __init__(self, monkeypatch, module):
        self.captions: dict[str, str] = {}
        self.axes: dict[str, list[dict]] = {}
        real = records.save_figure

        def save(fig, out_dir, name, caption=""):
            self.captions[name], self.axes[name] = caption, self._describe(fig)
            return real(fig, out_dir, name, caption)

        monkeypatch.setattr(module, "save_figure", save)

    @staticmethod
    def _describe(fig) -> list[dict]:
        out = []
        for ax in fig.axes:
            legend = ax.get_legend()
            out.append(
                {
                    "title": ax.get_title(),
                    "legend": [t.get_text() for t in legend.get_texts()] if legend else [],
                    "yticklabels": [t.get_text() for t in ax.get_yticklabels()],
                    "ylim": ax.get_ylim(),
                    "yscale": ax.get_yscale(),
                    "bands": [p.get_paths() for p in ax.collections],
                    "lines": [
                        (line.get_label(), line.get_linestyle(), line.get_marker()) for line in ax.lines
                    ],
                }
            )
        return out


def test_twins_names_the_curve_another_hides_under():
    curves = {
        "gcc": [1.0, 2.0, 3.0],
        "gcc-natural": [1.0, 2.0, 3.0],
        "bacc": [1.0, 2.01, 3.0],
        "lcc": [5, 5, 5],
    }
    assert twins(curves) == {"gcc-natural": "same as gcc", "bacc": "within 0.5% of gcc"}


def test_exact_points_sit_on_a_labelled_floor_without_a_band():
    plt = pyplot()
    fig, ax = plt.subplots()
    exact = [Interval(1e-12, 1e-13, 1e-11), Interval(0.0, 0.0, 0.0)]
    inexact = [Interval(0.5, 0.4, 0.6), Interval(2.0, 1.0, 3.0)]
    floor = records.exact_floor([0.4, 0.5, 0.6, 1.0, 2.0, 3.0, 1e-12, 0.0])
    assert floor == pytest.approx(0.01)  # a decade below the lowest inexact value, 0.4
    line = draw_band(ax, [0, 1, 2, 3], [*exact, *inexact], "replication", {"marker": "v"}, floor=floor)
    show_floor(ax, floor)
    drawn = np.asarray(line.get_ydata(), dtype=float)
    assert np.isnan(drawn[:2]).all() and drawn[2:].tolist() == [0.5, 2.0]  # the labelled line: inexact
    at_floor = [np.asarray(other.get_ydata(), float) for other in ax.lines[1:2]]
    assert at_floor[0][:2].tolist() == [floor, floor]
    labels = [t.get_text() for t in ax.get_yticklabels()]
    assert labels[0] == "exact" and ax.get_yticks()[0] == pytest.approx(floor)
    assert ax.get_ylim()[0] == pytest.approx(floor / 3) and ax.get_yscale() == "log"
    band = ax.collections[-1].get_paths()[0].vertices
    assert band[:, 1].min() >= 0.4 - 1e-12  # no band reaches the floor from the exact points
    assert EXACT_MSE == 1e-10
    plt.close(fig)


@pytest.mark.slow  # draws figures with matplotlib: seconds each; CI runs it
def test_polynomial_figure_separates_lcc_marks_its_threshold_and_says_what_the_bands_are(
    monkeypatch, tmp_path
):
    drawn = Drawn(monkeypatch, polynomial)
    rows = polynomial.run(polynomial.QUICK, 0, progress=False)
    assert polynomial.plot(rows, tmp_path) == [tmp_path / "polynomial.png"]
    caption = drawn.captions["polynomial"]
    trials = polynomial.QUICK.trials
    assert f"bands: 95% bootstrap interval of the mean over {trials} trials" in caption
    assert "'exact'" in caption
    approximate, against_lcc = drawn.axes["polynomial"]
    # (a) compares GCC and BACC on their own axis: LCC's ~1e-28 is not on it
    assert not any(label.startswith("lcc") for label in approximate["legend"])
    assert approximate["ylim"][0] > 1e-6
    # (b) LCC's exact points on the floor, its threshold labelled in both panels
    assert "exact" in against_lcc["yticklabels"]
    last_exact = rows[0]["num_workers"] - rows[0]["recovery_threshold"]
    for panel in (approximate, against_lcc):
        assert any("recovery threshold" in label and str(last_exact) in label for label in panel["legend"])
    styles = {label.split(" ")[0]: (ls, marker) for label, ls, marker in approximate["lines"]}
    assert styles["gcc"] != styles["gcc-natural"]  # coinciding curves: told apart by line style and marker


def test_latency_figures_draw_each_s_apart_on_log_axes(monkeypatch, tmp_path):
    rng = np.random.default_rng(0)
    rows = []
    for scheme, s, wait_for in (("uncoded", 0, "complete"), ("gcc", 10, 40), ("gcc", 20, 30)):
        for trial in range(12):
            rows.append(
                {
                    "backend": "simulated",
                    "delay_model": "pareto",
                    "scheme": scheme,
                    "num_inputs": 10,
                    "num_workers": 10 if scheme == "uncoded" else 50,
                    "num_stragglers": s,
                    "wait_for": wait_for,
                    "trial": trial,
                    "latency_s": float(rng.pareto(1.5) + 1) * (1.0 if scheme == "uncoded" else 0.1),
                    "rel_acc": 1.0,
                    "encode_s": 0.0,
                    "decode_s": 0.0,
                }
            )
    drawn = Drawn(monkeypatch, latency)
    latency.plot(rows, tmp_path)
    (cdf,) = drawn.axes["latency_cdf"]
    assert cdf["legend"] == ["uncoded", "gcc S=10", "gcc S=20"]  # one line per scheme and S
    styles = {label: ls for label, ls, _ in cdf["lines"]}
    assert styles["gcc S=10"] != styles["gcc S=20"]
    (bars,) = drawn.axes["latency_percentiles"]
    assert bars["yscale"] == "log"  # Pareto's uncoded tail does not flatten the coded bars
    caption = drawn.captions["latency_percentiles"]
    assert "error bars: 95% bootstrap interval of the percentile over 12 calls" in caption


@pytest.mark.slow
def test_stragglers_accuracy_bands_stay_within_0_and_1(stragglers_rows, monkeypatch, tmp_path):
    drawn = Drawn(monkeypatch, stragglers)
    rows = stragglers_rows
    stragglers.plot(rows, tmp_path)
    panels = drawn.axes["stragglers"]
    for panel in panels:
        if "relative accuracy" in panel["title"]:
            for paths in panel["bands"]:
                for path in paths:
                    assert 0.0 <= path.vertices[:, 1].min() and path.vertices[:, 1].max() <= 1.0
        else:
            assert "exact" in panel["yticklabels"]  # replication and uncoded at S = 0 are exact
            assert {"gcc", "bacc", "replication", "uncoded"} <= {
                label.split(" ")[0] for label in panel["legend"]
            }
    assert "bootstrap interval of the mean" in drawn.captions["stragglers"]


@pytest.mark.slow
def test_rates_theory_lines_are_labelled_in_maths(trained_models, monkeypatch, tmp_path):
    drawn = Drawn(monkeypatch, rates)
    rows = rates.run(rates.QUICK, 0, progress=False)
    rates.plot(rows, tmp_path)
    worst, bernoulli = drawn.axes["rates"]
    assert any("$N^{-3}$" in label for label in worst["legend"])
    assert any(r"$\log_{1/p}(N)^3\,N^{-3}$" in label for label in bernoulli["legend"])
    assert any("slope" in label for label in worst["legend"])
    assert "bands: 95% bootstrap interval of the mean" in drawn.captions["rates"]
