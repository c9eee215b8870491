"""`coded plot` on damaged CSVs: every experiment's CSV, damaged in every way of
:func:`damages.csv_damages`, gives either a figure that leaves the bad rows out and says how
many and why, or one line ``coded plot: FILE: what is wrong`` with exit status 2; never a
traceback."""

from __future__ import annotations

import random

import pytest

from damages import CELL_DAMAGES, SMALL, csv_damages, small_csv

pytestmark = pytest.mark.slow  # each case draws an experiment's figures with matplotlib: 11 s together

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
        ("polynomial", "one row"),  # a fit with one row: drawn or left out, no raw ValueError
        ("rates", "mse: inf in a row"),  # the row is left out of the fit (no LinAlgError)
        ("rates", "mse: nan in row 1"),
        ("polynomial", "last line cut in half"),  # the other rows are still drawn
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
    experiment): ``tests/drivers/damaged_reports.py`` runs all of them (628 figures, about 11
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
