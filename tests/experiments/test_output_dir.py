"""``--out`` is checked before the experiment runs."""

from __future__ import annotations

import pytest
from typer.testing import CliRunner

from codedcomputing.cli import app


@pytest.mark.parametrize("where", ["a-file", "under-a-file"])
def test_an_unwritable_out_fails_at_once_naming_the_path(tmp_path, monkeypatch, where):
    blocker = tmp_path / "blocker"
    blocker.write_text("")
    out = blocker if where == "a-file" else blocker / "results"
    ran = []
    from codedcomputing.experiments import EXPERIMENTS

    monkeypatch.setattr(EXPERIMENTS["polynomial"], "run", lambda *a, **k: ran.append(1))
    result = CliRunner().invoke(app, ["experiment", "polynomial", "--out", str(out)], env={"COLUMNS": "300"})
    assert result.exit_code == 2 and not ran
    assert str(out) in result.output and "Traceback" not in result.output
    with pytest.raises(ValueError, match="out_dir"):
        from codedcomputing.experiments.records import output_dir

        output_dir(out)
