"""The ``coded`` command line."""

from __future__ import annotations

import itertools
import re
from pathlib import Path

import pytest
from typer.testing import CliRunner

import codedcomputing as cc
from codedcomputing.cli import app
from codedcomputing.experiments import EXPERIMENTS

runner = CliRunner()
WIDE = {"COLUMNS": "200"}


def test_version_prints_package_version():
    result = runner.invoke(app, ["--version"])
    assert result.exit_code == 0
    assert result.output.strip() == f"codedcomputing {cc.__version__}"


def test_codes_lists_every_code_with_its_description():
    result = runner.invoke(app, ["codes"], env=WIDE)
    assert result.exit_code == 0
    for name, cls in cc.CODES.items():
        assert re.search(rf"\b{name}\b", result.output)
        assert cls.description in result.output


def _mse_by_code(output: str) -> dict[str, float]:
    rows = {}
    for line in output.splitlines():
        cells = [c.strip() for c in re.split(r"[│┃|]", line) if c.strip()]
        if cells and cells[0] in cc.CODES and cells[2] != "-":
            rows[cells[0]] = float(cells[2])
    return rows


def test_example_prints_an_error_per_code_and_gcc_beats_bacc():
    result = runner.invoke(app, ["example", "--trials", "10", "--seed", "3"], env=WIDE)
    assert result.exit_code == 0, result.output
    mse = _mse_by_code(result.output)
    assert {"gcc", "bacc", "lcc", "uncoded", "replication"} <= set(mse)
    assert mse["gcc"] < mse["bacc"]
    # exact copies, and N = 5K survives 5 stragglers: rounding only (f on 50 rows and on 10 may
    # take different BLAS kernels)
    assert mse["replication"] < 1e-24


def test_example_is_reproducible_from_its_seed():
    args = ["example", "--trials", "5", "--seed", "7"]
    first = runner.invoke(app, args, env=WIDE).output
    assert first == runner.invoke(app, args, env=WIDE).output
    assert first != runner.invoke(app, ["example", "--trials", "5", "--seed", "8"], env=WIDE).output


@pytest.mark.parametrize(
    ("args", "needle"),
    [
        (["--num-stragglers", "50"], "num_stragglers"),
        (["--num-workers", "1"], "num_workers"),
        (["--num-inputs", "0"], "num_inputs"),
        (["--pattern", "diagonal"], "pattern"),
    ],
)
def test_example_rejects_bad_options_naming_them(args, needle):
    result = runner.invoke(app, ["example", *args], env=WIDE)
    assert result.exit_code == 2
    assert needle in result.output


# -- choices, help, and `coded plot` on files it does not know ------------------------------------

HELP = {"COLUMNS": "300"}  # wide enough for the list of experiments on one line


def test_experiment_help_names_every_experiment():
    result = runner.invoke(app, ["experiment", "--help"], env=HELP)
    assert result.exit_code == 0
    for name, module in EXPERIMENTS.items():
        assert re.search(rf"^ {name} +{re.escape(module.SUMMARY)}", result.output, re.MULTILINE)
    assert "see `coded experiment --help`" not in result.output


@pytest.mark.parametrize(
    ("command", "choices"),
    [
        (["demo"], ["thread|ray"]),
        (["example"], ["random|contiguous"]),
        (["models", "train"], ["lenet5|vit", "mnist|digits"]),
    ],
)
def test_help_lists_fixed_choices_and_shows_no_bool_type_for_flags(command, choices):
    result = runner.invoke(app, [*command, "--help"], env=HELP)
    assert result.exit_code == 0
    assert all(f"<{listed}>" in result.output for listed in choices)
    assert "<bool>" not in result.output
    assert "--help" in result.output


def test_top_level_help_shows_no_bool_type():
    result = runner.invoke(app, ["--help"], env=HELP)
    assert result.exit_code == 0 and "--version" in result.output and "<bool>" not in result.output


@pytest.mark.parametrize(
    ("args", "needle"),
    [
        (["experiment", "nonesuch"], "'nonesuch' is not one of the experiments"),
        (["demo", "--backend", "mpi"], "'--backend'"),
        (["example", "--pattern", "diagonal"], "'--pattern'"),
        (["models", "train", "resnet"], "'resnet' is not one of 'lenet5', 'vit'"),
        (["models", "train", "lenet5", "--dataset", "cifar"], "'cifar' is not one of 'mnist', 'digits'"),
    ],
)
def test_a_value_outside_the_choices_is_a_usage_error_naming_them(args, needle):
    result = runner.invoke(app, args, env=WIDE)
    assert result.exit_code == 2
    assert needle in result.output and "Traceback" not in result.output


def _not_an_experiments_csv(tmp_path, kind):
    path = tmp_path / f"{kind}.csv"
    if kind == "readme":
        return Path(__file__).resolve().parents[1] / "README.md"
    if kind == "no-experiment-column":
        path.write_text("scheme,mse\ngcc,0.5\n")
    elif kind == "unknown-experiment":
        path.write_text("experiment,scheme,mse\nnonesuch,gcc,0.5\n")
    elif kind == "missing-columns":
        path.write_text("experiment,scheme\npolynomial,gcc\n")
    elif kind == "header-only":
        path.write_text("experiment,scheme,mse\n")
    elif kind == "binary":
        path.write_bytes(b"\x89PNG\r\n\x1a\n\x00\xff")
    return path


@pytest.mark.parametrize(
    ("kind", "says"),
    [
        ("readme", "has no 'experiment' column"),
        ("no-experiment-column", "has no 'experiment' column"),
        ("unknown-experiment", "unknown experiment 'nonesuch'"),
        ("missing-columns", "lacks the polynomial columns"),
        ("header-only", "has no rows"),
        ("binary", "not UTF-8 text"),
    ],
)
def test_plot_says_in_one_line_when_a_file_is_not_an_experiments_csv(tmp_path, kind, says):
    path = _not_an_experiments_csv(tmp_path, kind)
    result = runner.invoke(app, ["plot", str(path), "--out", str(tmp_path / "figures")], env=WIDE)
    assert result.exit_code == 2
    assert result.output.count("\n") == 1 and "Traceback" not in result.output
    assert result.output.startswith(f"coded plot: {path}") and says in result.output
    assert not list((tmp_path / "figures").glob("*.png"))


# -- help at 80 and 100 columns, typos, and files replaced ----------------------------------------


def _help_words(text: str) -> set[str]:
    """The words of a help screen, its box drawing and padding left out."""
    return set(re.sub(r"[│╭╮╰╯─]", " ", text).split())


@pytest.mark.parametrize("columns", ["80", "100"])
@pytest.mark.parametrize(
    "command",
    [
        [],
        ["example"],
        ["experiment"],
        ["reproduce"],
        ["plot"],
        ["demo"],
        ["serve"],
        ["bench-serve"],
        ["models", "train"],
    ],
)
def test_help_splits_no_word_at_80_and_100_columns(command, columns):
    """Every word shown at 80 or 100 columns is a word of the same help at 300 columns, where
    nothing wraps: a word cut at the edge would show as pieces that are not."""
    narrow = runner.invoke(app, [*command, "--help"], env={"COLUMNS": columns}).output
    wide = runner.invoke(app, [*command, "--help"], env={"COLUMNS": "300"}).output
    assert max(len(line) for line in narrow.splitlines()) <= int(columns)
    assert _help_words(narrow) - _help_words(wide) == set()


@pytest.mark.parametrize("columns", ["80", "100"])
@pytest.mark.parametrize(
    "command", [["example"], ["reproduce"], ["demo"], ["serve"], ["bench-serve"], ["plot"]]
)
def test_a_docstring_paragraph_is_not_broken_at_its_source_line_ends(command, columns):
    """A paragraph fills the terminal's width: no line of it ends short while the next word
    would have fitted (the source's line breaks used to survive rich's own wrapping)."""
    result = runner.invoke(app, [*command, "--help"], env={"COLUMNS": columns})
    lines = result.output.split("╭")[0].splitlines()  # the description, above the first panel
    for line, following in itertools.pairwise(lines):
        text, nxt = line.rstrip(), following.strip()
        if text.strip() and nxt:
            assert len(text) + 1 + len(nxt.split()[0]) > int(columns) - 2, (line, following)


def test_experiment_help_wraps_each_summary_under_itself():
    result = runner.invoke(app, ["experiment", "--help"], env={"COLUMNS": "80"})
    indent = max(len(name) for name in EXPERIMENTS) + 3  # a space of margin, then name and gap
    listed = result.output.split("NAME is one of:")[1].split("╭")[0].splitlines()[1:]
    names = [line.split()[0] for line in listed if line.strip() and not line.startswith(" " * indent)]
    assert names == list(EXPERIMENTS)
    continued = [line for line in listed if line.strip() and line.startswith(" " * indent)]
    assert continued and all(line[indent] != " " for line in continued)


@pytest.mark.parametrize(
    ("typed", "meant"),
    [("rats", "rates"), ("polynomal", "polynomial"), ("gradient_coding", "gradient-coding")],
)
def test_an_unknown_experiment_name_says_so_and_suggests_the_nearest(typed, meant):
    result = runner.invoke(app, ["experiment", typed], env=WIDE)
    assert result.exit_code == 2
    assert f"{typed!r} is not one of the experiments; did you mean {meant!r}?" in result.output
    assert "Value error" not in result.output


def test_a_name_far_from_every_experiment_gets_no_suggestion():
    result = runner.invoke(app, ["experiment", "zzzz"], env=WIDE)
    assert result.exit_code == 2 and "did you mean" not in result.output
    assert "known: " + ", ".join(EXPERIMENTS) in result.output


def test_reproduce_refuses_a_typo_in_only_before_creating_anything(tmp_path):
    out = tmp_path / "new" / "reproduction"
    result = runner.invoke(app, ["reproduce", "--only", "polynomial,ratse", "--out", str(out)], env=WIDE)
    assert result.exit_code == 2
    assert "'ratse' -> 'rates'" in result.output and "Traceback" not in result.output
    assert not (tmp_path / "new").exists()


POLYNOMIAL_CSV = """\
experiment,function,scheme,num_inputs,num_workers,num_stragglers,recovery_threshold,trial,seed,mse,\
lambda_enc,lambda_dec
polynomial,quadratic-20-10,lcc,10,40,0,19,0,0,3.2e-29,,
polynomial,quadratic-20-10,gcc,10,40,0,19,0,0,0.0004,0.0,0.0
polynomial,quadratic-20-10,bacc,10,40,0,19,0,0,0.02,,
polynomial,quadratic-20-10,lcc,10,40,22,19,0,0,2e9,,
polynomial,quadratic-20-10,gcc,10,40,22,19,0,0,2.5,0.0,0.0
polynomial,quadratic-20-10,bacc,10,40,22,19,0,0,5.6,,
"""


def test_plot_says_which_figures_it_wrote_and_which_it_replaced(tmp_path):
    """Each in one line, however narrow the terminal: a path cut in two cannot be copied."""
    csv = tmp_path / "a folder with a long name, longer than the terminal is wide" / "polynomial.csv"
    csv.parent.mkdir()
    csv.write_text(POLYNOMIAL_CSV)
    narrow = {"COLUMNS": "60"}
    first = runner.invoke(app, ["plot", str(csv)], env=narrow)
    assert first.exit_code == 0, first.output
    figure = csv.parent / "polynomial.png"
    assert f"wrote {figure}\n" in first.output and "replaced" not in first.output
    before = figure.stat().st_mtime_ns
    again = runner.invoke(app, ["plot", str(csv)], env=narrow)
    assert again.exit_code == 0
    assert f"wrote {figure} (replaced the existing file)" in again.output
    assert figure.stat().st_mtime_ns >= before


@pytest.mark.parametrize(
    ("args", "says"),
    [
        (["demo", "--backend", "rey"], "'rey' is not one of 'thread', 'ray'; did you mean 'ray'?"),
        (["models", "train", "lenet"], "'lenet' is not one of 'lenet5', 'vit'; did you mean 'lenet5'?"),
        (["example", "--pattern", "contigous"], "did you mean 'contiguous'?"),
        (["example", "--pattern", "zzz"], "'zzz' is not one of 'random', 'contiguous'"),
    ],
)
def test_every_fixed_choice_says_plainly_what_is_wrong_and_suggests_the_nearest(args, says):
    result = runner.invoke(app, args, env=WIDE)
    assert result.exit_code == 2
    assert says in result.output and "Value error" not in result.output
    assert ("did you mean" in result.output) == ("did you mean" in says)
