"""`coded plot` on damaged CSVs: every experiment's CSV, damaged in every way of
:func:`csv_damages`, gives either a figure that leaves the bad rows out and says how many
and why, or one line ``coded plot: FILE: what is wrong`` with exit status 2; never a
traceback.

:func:`csv_damages` is also what ``benchmarks/damaged_reports.py`` runs on the quick
experiments' CSVs, so it imports nothing of the library at module level.
"""

from __future__ import annotations

import csv
import io
import random

import pytest

CELL_DAMAGES = {
    "nan": "nan",
    "inf": "inf",
    "empty": "",
    "text": "abc",
    "negative": "-1.5",
    "zero": "0",
}


def csv_damages(text: str, columns, rng: random.Random) -> dict[str, str]:
    """Damaged versions of the CSV ``text``, by name: for each of ``columns`` (those a figure
    reads), the cell of one row (drawn from ``rng``) set to each of :data:`CELL_DAMAGES`, and the
    column dropped; NaN in the first row's cell too (figures read their setting from the first
    row); and the whole file as one row, as its header alone, as its first tenth, and with its
    last line cut in half."""
    table = list(csv.reader(io.StringIO(text)))
    header, rows = table[0], [row for row in table[1:] if row]

    def write(header, rows) -> str:
        out = io.StringIO()
        csv.writer(out, lineterminator="\n").writerows([header, *rows])
        return out.getvalue()

    damaged = {}
    for column in columns:
        if column not in header:
            continue
        index = header.index(column)
        picks = [("a row", rng.randrange(len(rows))), ("row 1", 0)]
        for kind, value in CELL_DAMAGES.items():
            for where, row_index in picks:
                if where == "row 1" and kind != "nan":
                    continue
                copy = [list(row) for row in rows]
                copy[row_index][index] = value
                damaged[f"{column}: {kind} in {where}"] = write(header, copy)
        kept = [i for i in range(len(header)) if i != index]
        damaged[f"{column}: column missing"] = write(
            [header[i] for i in kept], [[row[i] for i in kept] for row in rows]
        )
    damaged["one row"] = write(header, rows[:1])
    damaged["header only"] = write(header, [])
    damaged["first tenth of the rows"] = write(header, rows[: max(2, len(rows) // 10)])
    whole = write(header, rows).rstrip("\n")
    damaged["last line cut in half"] = whole[: len(whole) - len(whole.splitlines()[-1]) // 2] + "\n"
    return damaged


# -- small CSVs shaped as each experiment writes them ----------------------------------------------


def _polynomial(rng) -> list[dict]:
    n, threshold = 12, 7  # LCC exact up to S = 5
    return [
        {
            "experiment": "polynomial",
            "function": "quadratic-4-2",
            "scheme": scheme,
            "num_inputs": 4,
            "num_workers": n,
            "num_stragglers": s,
            "recovery_threshold": threshold,
            "trial": trial,
            "seed": 0,
            "mse": (1e-13 if s <= n - threshold else 10.0**s)
            if scheme == "lcc"
            else rng.uniform(0.1, 1) * (1 + s),
            "lambda_enc": 0.0 if scheme == "gcc" else "",
            "lambda_dec": 0.0 if scheme == "gcc" else "",
        }
        for s in (0, 3, 5, 6, 8)
        for trial in range(2)
        for scheme in ("lcc", "gcc", "gcc-natural", "bacc")
    ]


def _rates(rng) -> list[dict]:
    rows = []
    settings = [("worst-case", 2, "", ("gcc", "gcc-natural", "bacc"))]
    settings += [("bernoulli", "", p, ("gcc", "gcc-natural")) for p in (0.1, 0.2)]
    for n in (20, 40, 80):
        for trial in range(2):
            for panel, s, p, schemes in settings:
                for scheme in schemes:
                    rows.append(
                        {
                            "experiment": "rates",
                            "model": "lenet5",
                            "scheme": scheme,
                            "panel": panel,
                            "num_inputs": 10,
                            "num_workers": n,
                            "num_stragglers": s,
                            "p": p,
                            "trial": trial,
                            "seed": 0,
                            "num_alive": n - 2,
                            "mse": rng.uniform(0.5, 2) * n ** (-3.0 if scheme == "gcc" else -2.0),
                            "rel_acc": 1.0,
                            "lambda_enc": 0.0 if scheme != "bacc" else "",
                            "lambda_dec": 0.0 if scheme != "bacc" else "",
                        }
                    )
    return rows


def _latency(rng) -> list[dict]:
    rows = []
    for backend in ("thread", "simulated"):
        schemes = [("uncoded", 10, 0, "complete"), ("replication", 50, 0, "complete")]
        schemes += [(scheme, 50, s, 50 - s) for s in (10, 20) for scheme in ("bacc", "gcc")]
        for scheme, n, s, wait_for in schemes:
            for trial in range(6):
                rows.append(
                    {
                        "experiment": "latency",
                        "backend": backend,
                        "delay_model": "shifted-exp",
                        "model": "lenet5",
                        "scheme": scheme,
                        "num_inputs": 10,
                        "num_workers": n,
                        "num_stragglers": s,
                        "wait_for": wait_for,
                        "trial": trial,
                        "seed": 0,
                        "latency_s": 0.05 * (1 + rng.exponential()) * (2 if wait_for == "complete" else 1),
                        "encode_s": 1e-4,
                        "wait_s": 0.05,
                        "decode_s": 2e-4,
                        "worker_compute_s": 0.01,
                        "rel_acc": 1.0 if wait_for == "complete" else 0.9,
                        "accuracy": 0.95,
                        "mse": 0.0 if wait_for == "complete" else 0.1,
                        "failed": 0,
                        "dropped": 0,
                    }
                )
    return rows


def _stragglers(rng) -> list[dict]:
    return [
        {
            "experiment": "stragglers",
            "model": "lenet5",
            "scheme": scheme,
            "num_inputs": 10,
            "num_workers": 10 if scheme == "uncoded" else 50,
            "num_stragglers": s,
            "trial": trial,
            "seed": 0,
            "mse": 1e-12 if scheme == "replication" else rng.uniform(0.01, 1) * (1 + s),
            "rel_acc": rng.uniform(0.8, 1.0),
            "missing": 0.0,
            "lambda_enc": 0.0 if scheme == "gcc" else "",
            "lambda_dec": 0.0 if scheme == "gcc" else "",
        }
        for s in (0, 5, 10)
        for trial in range(2)
        for scheme in ("gcc", "gcc-natural", "bacc", "replication", "uncoded")
    ]


def _manifold(rng) -> list[dict]:
    return [
        {
            "experiment": "manifold",
            "task": task,
            "scheme": scheme,
            "design": "",
            "reference": 0,
            "num_inputs": 10,
            "num_workers": 50,
            "pattern": pattern,
            "num_stragglers": s,
            "straggler_fraction": s / 50,
            "trial": trial,
            "seed": 0,
            "mse": rng.uniform(0.1, 1) * (1 + s),
            "rel_acc": rng.uniform(0.8, 1.0) if task == "lenet5" else "",
            "layout_s": 0.01 if scheme == "manifold-gcc" else 0.0,
            "lambda_enc": "",
            "lambda_dec": "",
        }
        for task in ("lenet5", "poly-curve")
        for pattern in ("random", "contiguous")
        for s in (0, 10)
        for trial in range(2)
        for scheme in ("gcc", "manifold-gcc", "bacc", "bacc-ordered")
    ]


def _adversarial(rng) -> list[dict]:
    rows = []
    settings = [(a, n, "random") for a in (0.0, 0.5) for n in (50, 100, 200)]
    settings += [(a, n, "concentrated") for a in (0.0, 0.5) for n in (50, 100, 200)]
    settings += [("", 200, "concentrated")]
    for exponent, n, attack in settings:
        for scheme in ("gcc", "bacc", "robust-gcc", "robust-gcc-tukey", "approxifer"):
            for trial in range(2):
                q = 1 if exponent == "" else max(1, round(n**exponent))
                rows.append(
                    {
                        "experiment": "adversarial",
                        "function": "xsinx",
                        "attack": attack,
                        "scheme": scheme,
                        "exponent": exponent,
                        "num_inputs": 9,
                        "num_workers": n,
                        "num_adversaries": q,
                        "bound": 100.0,
                        "lambda_dec": "" if scheme in ("bacc", "approxifer") else 0.0,
                        "scale": "",
                        "trial": trial,
                        "seed": 0,
                        "mse": rng.uniform(0.5, 2) * (q / n) ** 1.2,
                        "decode_s": rng.uniform(1e-4, 1e-3),
                    }
                )
    return rows


def _gradient_coding(rng) -> list[dict]:
    from codedcomputing.experiments.gradient_coding import SCHEMES

    rows = []
    grid = [(s, ratio, "exponential", True, False) for s in (1, 3) for ratio in (1.0, 2.0)]
    sweep = [(2, ratio, "exponential", False, True) for ratio in (0.5, 2.0)]
    bursty = [(s, 1.0, "bursty", False, False) for s in (1, 3)]
    real = [(3, 1.0, "exponential", False, False)]
    for backend, settings in (("simulated", grid + sweep + bursty), ("threads", real)):
        for s, ratio, delays, in_grid, in_sweep in settings:
            for trial in range(2):
                for i, scheme in enumerate(SCHEMES):
                    per_step = (1 + i) * ratio * rng.uniform(0.9, 1.1)
                    for step in range(0, 9):
                        rows.append(
                            {
                                "experiment": "gradient-coding",
                                "dataset": "digits",
                                "backend": backend,
                                "scheme": scheme,
                                "num_workers": 12,
                                "num_stragglers": s,
                                "delay_ratio": ratio,
                                "delays": delays,
                                "model": "logistic",
                                "compute_s": 1e-3,
                                "step": step,
                                "wall_time_s": per_step * step,
                                "step_time_s": per_step,
                                "loss": 1.0 / (1 + step),
                                "trial": trial,
                                "seed": 0,
                                "target_step": 5,
                                "in_grid": in_grid,
                                "in_sweep": in_sweep,
                            }
                        )
    return rows


SMALL = {
    "polynomial": _polynomial,
    "rates": _rates,
    "latency": _latency,
    "stragglers": _stragglers,
    "manifold": _manifold,
    "adversarial": _adversarial,
    "gradient-coding": _gradient_coding,
}


def small_csv(name: str, folder) -> str:
    """The text of a small CSV of experiment ``name`` as its run writes them (every panel of
    its figures drawn), seeded."""
    import numpy as np

    from codedcomputing.experiments.records import write_csv

    path = write_csv(SMALL[name](np.random.default_rng(0)), folder / f"{name}.csv")
    return path.read_text()


# -- the tests ---------------------------------------------------------------------------------------


def plot_csv(path, out):
    """`coded plot PATH --out OUT`; a warning it would print (a RuntimeWarning of numpy, a
    UserWarning of matplotlib) fails the test: a user would see it as lines of noise."""
    import warnings

    from typer.testing import CliRunner

    from codedcomputing.cli import app

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        result = CliRunner().invoke(app, ["plot", str(path), "--out", str(out)], env={"COLUMNS": "200"})
    noise = [str(w.message) for w in caught if issubclass(w.category, (RuntimeWarning, UserWarning))]
    assert not noise, (path, noise)
    return result


def check_outcome(result, path, out, case: str, cells) -> str:
    """What `coded plot` did with a damaged CSV, asserting that it is one of the two allowed:
    a figure (with a line saying how many rows were left out and why, whenever the damage
    made a cell unusable), or exit status 2 with one line naming the file."""
    assert result.exception is None or isinstance(result.exception, SystemExit), (case, result.exception)
    said = [line for line in result.output.splitlines() if line.startswith("coded plot:")]
    assert "Traceback" not in result.output and "Warning" not in result.output, (case, result.output)
    if result.exit_code == 2:
        assert said == [line for line in result.output.splitlines() if line.strip()], (case, result.output)
        assert len(said) == 1 and said[0].startswith(f"coded plot: {path}"), (case, result.output)
        return "refused"
    assert result.exit_code == 0, (case, result.output)
    assert list(out.glob("*.png")), case
    column, _, kind = case.partition(": ")
    value = CELL_DAMAGES.get(kind.split(" in ")[0])
    parsed = {"nan": float("nan"), "inf": float("inf"), "-1.5": -1.5, "0": 0}.get(value, value)
    unusable = column in cells and value is not None and cells[column].problem(parsed) != ""
    if unusable or case == "last line cut in half":
        (line,) = said
        assert line.startswith(f"coded plot: {path}: left out 1 of "), (case, line)
    return "left out" if said else "drawn"


def test_a_cell_says_what_it_is_instead_of_what_a_figure_needs():
    from codedcomputing.experiments.records import COUNT, NONNEGATIVE, POSITIVE, TEXT, Cell

    assert [NONNEGATIVE.problem(v) for v in (0.5, 0, float("nan"), float("inf"), "", "abc", -1.5)] == [
        "",
        "",
        "NaN",
        "infinite",
        "empty",
        "text",
        "negative",
    ]
    assert POSITIVE.problem(0) == "zero" and POSITIVE.problem(1e-9) == ""
    assert COUNT.problem(2.5) == "not a whole number" and COUNT.problem(3) == ""
    assert TEXT.problem("gcc") == "" and TEXT.problem(0.5) == "a number" and TEXT.problem("") == "empty"
    assert Cell("number", low=0, high=1, above=True, optional=True).problem("") == ""
    assert Cell("number", low=0, high=1).problem(1.5) == "1.5, out of range"
    assert Cell("flag").problem("True") == "" and Cell("flag").problem("maybe") == "not True or False"


def test_plot_leaves_out_the_bad_rows_and_says_how_many_and_why(tmp_path):
    from codedcomputing.experiments.records import read_csv

    text = small_csv("polynomial", tmp_path)
    lines = text.splitlines()
    header = lines[0].split(",")
    damaged = []
    for number, line in enumerate(lines[1:], start=1):
        fields = line.split(",")
        if number in (3, 7):
            fields[header.index("mse")] = "nan"
        if number == 11:
            fields[header.index("trial")] = "first"
        damaged.append(",".join(fields))
    path = tmp_path / "damaged" / "polynomial.csv"
    path.parent.mkdir()
    path.write_text("\n".join([lines[0], *damaged]) + "\n")
    result = plot_csv(path, tmp_path / "figures")
    assert result.exit_code == 0, result.output
    total = len(read_csv(tmp_path / "polynomial.csv"))
    assert (
        f"coded plot: {path}: left out 3 of {total} rows: mse NaN (2 rows), trial text (1 row)\n"
        in result.output
    )
    assert (tmp_path / "figures" / "polynomial.png").is_file()


def test_plot_with_no_row_left_to_draw_exits_2_naming_the_file(tmp_path):
    text = small_csv("latency", tmp_path)
    header, *rows = text.splitlines()
    index = header.split(",").index("latency_s")
    path = tmp_path / "damaged.csv"
    path.write_text("\n".join([header, *(",".join(_cell(r.split(","), index, "-1")) for r in rows)]) + "\n")
    result = plot_csv(path, tmp_path / "figures")
    assert result.exit_code == 2
    why = f"latency_s negative ({len(rows)} rows)"
    assert result.output == f"coded plot: {path}: none of its {len(rows)} rows can be drawn: {why}\n"
    assert not (tmp_path / "figures").exists() or not list((tmp_path / "figures").glob("*.png"))


def _cell(fields, index, value):
    fields[index] = value
    return fields


@pytest.mark.parametrize(
    ("name", "case"),
    [
        ("polynomial", "one row"),  # was: ValueError: min() arg is an empty sequence
        ("rates", "mse: inf in a row"),  # was: LinAlgError: SVD did not converge
        ("rates", "mse: nan in row 1"),
        ("polynomial", "last line cut in half"),  # was: exit 2 for the whole file
        ("latency", "scheme: text in a row"),
        ("stragglers", "model: text in a row"),
        ("manifold", "task: text in a row"),
        ("adversarial", "function: text in a row"),
        ("gradient-coding", "num_stragglers: zero in a row"),
    ],
)
def test_plot_on_a_damaged_csv_draws_without_the_bad_rows_or_says_why_not(tmp_path, name, case):
    from codedcomputing.experiments import EXPERIMENTS

    module = EXPERIMENTS[name]
    text = small_csv(name, tmp_path)
    damaged = csv_damages(text, module.COLUMNS, random.Random(0))[case]
    path = tmp_path / "damaged" / f"{name}.csv"
    path.parent.mkdir()
    path.write_text(damaged)
    out = tmp_path / "figures"
    outcome = check_outcome(plot_csv(path, out), path, out, case, module.CELLS)
    assert outcome in ("left out", "drawn")


STRUCTURAL = ("one row", "header only", "first tenth of the rows", "last line cut in half")
SAMPLED = 3  # cell damages drawn per experiment, besides the structural ones


@pytest.mark.slow  # 7 figures per experiment, about 1 s each; the benchmark draws all 628
@pytest.mark.parametrize("name", list(SMALL))
def test_plot_never_fails_with_a_traceback_on_any_damage(tmp_path, name):
    """A seeded sample of the damages (every structural one and SAMPLED cell damages per
    experiment): ``benchmarks/damaged_reports.py`` runs all of them (628 figures, about 11
    minutes on 2 shared cores: too long for the suite)."""
    from codedcomputing.experiments import EXPERIMENTS

    module = EXPERIMENTS[name]
    text = small_csv(name, tmp_path)
    outcomes = []
    damages = csv_damages(text, module.COLUMNS, random.Random(0))
    cells = sorted(case for case in damages if case not in STRUCTURAL)
    chosen = [*STRUCTURAL, *random.Random(name).sample(cells, min(SAMPLED, len(cells)))]
    for case, damaged in ((case, damages[case]) for case in chosen):
        path = tmp_path / "damaged" / f"{name}.csv"
        path.parent.mkdir(exist_ok=True)
        path.write_text(damaged)
        out = tmp_path / "figures" / str(len(outcomes))
        outcomes.append(check_outcome(plot_csv(path, out), path, out, case, module.CELLS))
    # a refusal only where no row is left, or a column the figures read is gone
    refused = [case for case, outcome in zip(chosen, outcomes, strict=True) if outcome == "refused"]
    assert all(case == "header only" or case.endswith("column missing") for case in refused), refused
