"""Without rich (the core install has no ``cli`` extra) an experiment's headline prints as an
aligned plain table, and the experiments package imports."""

from __future__ import annotations

import subprocess
import sys

from codedcomputing.experiments.driver import _show
from codedcomputing.experiments.records import Headline


def test_headline_prints_as_a_plain_aligned_table_without_rich(monkeypatch, capsys):
    monkeypatch.setitem(sys.modules, "rich.console", None)  # ``import rich.console`` raises ImportError
    rows = [("replication", 10.123), ("gcc", 1.5)]
    headline = Headline("latency p99.9 (ms)", ("scheme", "p99.9"), rows, "a note")
    _show(headline, None)
    lines = capsys.readouterr().out.splitlines()
    assert lines[0] == "latency p99.9 (ms)" and lines[-1] == "a note"
    assert lines[1].split() == ["scheme", "p99.9"] and lines[2].split() == ["replication", "10.1"]
    assert lines[3].split() == ["gcc", "1.50"]
    assert lines[1].index("p99.9") == lines[2].index("10.1") == lines[3].index("1.50")


def test_the_experiments_package_imports_without_rich():
    code = (
        "import sys\nsys.modules['rich'] = None\nsys.modules['rich.console'] = None\n"
        "sys.modules['rich.table'] = None\nimport codedcomputing.experiments.driver\nprint('ok')"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0 and done.stdout.strip() == "ok", done.stderr[-2000:]
