"""The progress helper: plain, timed lines where no terminal watches, a bar where one does."""

from __future__ import annotations

import ast
import io
import re
import sys
from pathlib import Path

import pytest

from codedcomputing import _progress
from codedcomputing._progress import progress


class FakeClock:
    """A clock that moves only when a test says so."""

    def __init__(self):
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture(autouse=True)
def no_forced_terminal(monkeypatch):
    # rich treats FORCE_COLOR and TTY_COMPATIBLE=1 as "a terminal": a CI that sets them must
    # not change which branch these tests exercise.
    monkeypatch.delenv("FORCE_COLOR", raising=False)
    monkeypatch.delenv("TTY_COMPATIBLE", raising=False)


def run_steps(total: int, seconds_per_step: float, *, interval_s: float = 5.0, **kwargs) -> list[str]:
    clock, out = FakeClock(), io.StringIO()
    with progress("work", total, interval_s=interval_s, clock=clock, file=out, **kwargs) as advance:
        for _ in range(total):
            clock.now += seconds_per_step
            advance()
    return out.getvalue().splitlines()


def test_not_a_terminal_prints_a_start_line_one_per_interval_and_an_end_line():
    lines = run_steps(10, 2.0)  # 20 s of work, a line at most every 5 s
    assert lines == [
        "work: 0/10 (0%), started",
        "work: 3/10 (30%), 6s elapsed, ~14s left",
        "work: 6/10 (60%), 12s elapsed, ~8s left",
        "work: 9/10 (90%), 18s elapsed, ~2s left",
        "work: 10/10 (100%), done in 20s",
    ]


def test_steps_faster_than_the_interval_print_no_more_lines():
    lines = run_steps(1280, 1 / 128)  # 10 s of 1,280 quick steps (1/128 s: exact in binary)
    assert len(lines) == 2 + 1  # start, one at 5 s, end
    assert lines[1] == "work: 640/1280 (50%), 5s elapsed, ~5s left"
    assert lines[-1] == "work: 1280/1280 (100%), done in 10s"


def test_long_runs_read_in_minutes_and_hours_and_advance_takes_several_steps():
    clock, out = FakeClock(), io.StringIO()
    with progress("training vit on mnist", 40, clock=clock, file=out) as advance:
        clock.now = 70.0
        advance(12)
        clock.now = 3725.0
        advance(28)
    assert out.getvalue().splitlines()[1:] == [
        "training vit on mnist: 12/40 (30%), 1m10s elapsed, ~2m43s left",
        "training vit on mnist: 40/40 (100%), done in 1h02m",
    ]


class FlushRecorder(io.StringIO):
    """A stream that remembers what had been written at each flush."""

    def __init__(self):
        super().__init__()
        self.flushed: list[str] = []

    def flush(self):
        self.flushed.append(self.getvalue())
        super().flush()


def test_every_line_is_flushed_as_it_is_written():
    """A CI log (a pipe, a file: block-buffered) shows each line now, not when the buffer fills."""
    clock, out = FakeClock(), FlushRecorder()
    with progress("work", 3, interval_s=1.0, clock=clock, file=out) as advance:
        for _ in range(3):
            clock.now += 1.0
            advance()
    lines = out.getvalue().splitlines(keepends=True)
    assert len(lines) == 4
    assert out.flushed == ["".join(lines[: n + 1]) for n in range(4)]  # one flush after each line


def test_default_stream_is_stderr_at_call_time(capsys):
    clock = FakeClock()
    with progress("work", 2, clock=clock) as advance:
        clock.now = 6.0
        advance()
        # already written, not waiting in a buffer for the end
        assert capsys.readouterr().err.splitlines() == [
            "work: 0/2 (0%), started",
            "work: 1/2 (50%), 6s elapsed, ~6s left",
        ]
        advance()
    captured = capsys.readouterr()
    assert captured.err == "work: 2/2 (100%), done in 6s\n" and captured.out == ""


def test_disabled_prints_nothing(capsys):
    out = io.StringIO()
    for stream in (out, None):
        with progress("work", 3, enabled=False, interval_s=0.0, file=stream) as advance:
            advance()
            advance(2)
    assert out.getvalue() == ""
    assert capsys.readouterr() == ("", "")


def test_work_that_raises_ends_with_a_stopped_line_and_the_error_propagates():
    clock, out = FakeClock(), io.StringIO()
    with pytest.raises(KeyError), progress("work", 4, clock=clock, file=out) as advance:
        advance()
        clock.now = 3.0
        raise KeyError("boom")
    assert out.getvalue().splitlines() == ["work: 0/4 (0%), started", "work: 1/4 (25%), stopped after 3s"]


def test_no_steps_at_all_is_complete():
    assert run_steps(0, 1.0) == ["work: 0/0 (100%), started", "work: 0/0 (100%), done in 0s"]


def test_a_terminal_gets_a_bar_and_no_plain_lines(monkeypatch):
    monkeypatch.setenv("TTY_COMPATIBLE", "1")  # rich: this stream understands escape codes
    out = io.StringIO()
    with progress("work", 3, interval_s=0.0, file=out) as advance:
        for _ in range(3):
            advance()
    shown = out.getvalue()
    assert "work" in shown and "3/3" in shown and "\x1b[" in shown  # drawn with escape codes
    assert not re.search(r"started|elapsed|done in", shown)
    assert shown.endswith("\x1b[2K")  # transient: the bar erases itself at the end


def test_imports_only_the_standard_library_and_rich():
    """It sits below every other layer of the package, so it imports none of them (nor numpy
    or torch). Read from its source: importing it runs ``codedcomputing/__init__`` anyway."""
    nodes = list(ast.walk(ast.parse(Path(_progress.__file__).read_text())))
    relative = [node.module for node in nodes if isinstance(node, ast.ImportFrom) and node.level]
    absolute = {alias.name for node in nodes if isinstance(node, ast.Import) for alias in node.names}
    absolute |= {node.module for node in nodes if isinstance(node, ast.ImportFrom) and not node.level}
    assert relative == []
    assert {name.split(".")[0] for name in absolute} - {"rich"} <= sys.stdlib_module_names
    assert "rich.progress" in absolute and "time" in absolute  # the walk does see its imports
