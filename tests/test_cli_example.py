"""``coded example`` refuses options it cannot run, naming the option."""

from __future__ import annotations

import pytest
from typer.testing import CliRunner

from codedcomputing.cli import app

runner = CliRunner()


@pytest.mark.parametrize(
    ("args", "needle"),
    [
        (["--trials", "0"], "trials"),
        (["--trials", "-3"], "trials"),
        (["--seed", "-1"], "seed"),
        (["--num-stragglers", "49"], "num_stragglers"),
        (["-k", "1", "-n", "2", "-s", "1"], "num_stragglers"),
    ],
    ids=["trials-0", "trials-neg", "seed-neg", "one-survivor", "one-survivor-small"],
)
def test_example_rejects_options_it_cannot_run(args, needle):
    """--trials 0 (or negative) prints a table of '-' and 'nan%' with a numpy RuntimeWarning
    (exit 0); --seed -1 and S = N - 1 (one survivor, but GCC needs 2) crash with a traceback
    (numpy's 'expected non-negative integer', InsufficientResultsError; exit 1). Each should be
    a usage error (exit 2) naming the option (cli.py:60-61, 85-97)."""
    result = runner.invoke(app, ["example", *args], env={"COLUMNS": "200"})
    assert result.exit_code == 2, result.output
    assert needle in result.output.replace("-", "_")
