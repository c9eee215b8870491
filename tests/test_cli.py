"""The ``coded`` command line."""

from __future__ import annotations

import re

import pytest
from typer.testing import CliRunner

import codedcomputing as cc
from codedcomputing.cli import app

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
    assert mse["replication"] == 0.0  # exact copies, and N = 5K survives 5 stragglers


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
