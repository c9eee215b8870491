"""Progress of long work (model training, experiments), shown wherever it is watched.

On a terminal it is a transient rich progress bar on stderr. Elsewhere (CI logs, pipes,
files) a bar would be one escape-code line written at the end, so a long run would look
hung: it prints plain lines to stderr instead, at the start, every few seconds and at the
end::

    training vit on mnist: 12/40 (30%), 1m10s elapsed, ~2m43s left

Only the standard library is imported at module level, and rich (the ``cli`` extra) only
when progress is shown; without rich, terminals get the plain lines too. Every layer of the
package may use it.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import TextIO

__all__ = ["progress"]


@contextmanager
def progress(
    description: str,
    total: int,
    *,
    enabled: bool = True,
    interval_s: float = 5.0,
    clock: Callable[[], float] = time.monotonic,
    file: TextIO | None = None,
) -> Iterator[Callable[[int], None]]:
    """Show the progress of ``total`` steps of work; yields ``advance(steps=1)`` to call as
    steps finish.

    A transient rich bar when ``file`` (default: ``sys.stderr`` at call time) is a terminal,
    as rich decides it, and rich is installed; otherwise a plain, flushed line at the start, at most one every
    ``interval_s`` seconds while advancing, and one at the end (also when the work raises).
    Nothing at all when not ``enabled``. ``clock`` is injectable for tests.
    """
    if not enabled:
        yield lambda steps=1: None
        return
    console = _console(file)
    if console is not None and console.is_terminal:
        with _bar(console, description, total) as advance:
            yield advance
        return
    stream = file if file is not None else sys.stderr  # looked up now, so capture can swap it
    start = clock()
    last_line = start
    done = 0

    def line(status: str) -> None:
        stream.write(f"{description}: {done}/{total} ({_percent(done, total)}), {status}\n")
        stream.flush()  # a CI log shows it now, not when the buffer fills

    def advance(steps: int = 1) -> None:
        nonlocal done, last_line
        done += steps
        now = clock()
        if now - last_line >= interval_s and done < total:  # the last step's line is the end line
            last_line = now
            elapsed = now - start
            left = f", ~{_duration(elapsed * (total - done) / done)} left" if done > 0 else ""
            line(f"{_duration(elapsed)} elapsed{left}")

    line("started")
    try:
        yield advance
    except BaseException:
        line(f"stopped after {_duration(clock() - start)}")
        raise
    line(f"done in {_duration(clock() - start)}")


def _console(file: TextIO | None):
    """rich's console for ``file`` (stderr when None), or None when rich is not installed."""
    try:
        from rich.console import Console
    except ImportError:
        return None
    return Console(file=file) if file is not None else Console(stderr=True)


@contextmanager
def _bar(console, description: str, total: int) -> Iterator[Callable[[int], None]]:
    from rich.progress import (
        BarColumn,
        MofNCompleteColumn,
        Progress,
        TextColumn,
        TimeElapsedColumn,
        TimeRemainingColumn,
    )

    columns = (
        TextColumn("{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        TimeRemainingColumn(),
    )
    with Progress(*columns, console=console, transient=True) as bar:
        task = bar.add_task(description, total=total)
        yield lambda steps=1: bar.advance(task, steps)


def _percent(done: int, total: int) -> str:
    return f"{100 * done // total}%" if total > 0 else "100%"


def _duration(seconds: float) -> str:
    """``42s``, ``1m10s``, ``2h05m``: short enough for a log line, exact enough to plan by."""
    seconds = round(seconds)
    if seconds < 60:
        return f"{seconds}s"
    if seconds < 3600:
        return f"{seconds // 60}m{seconds % 60:02d}s"
    return f"{seconds // 3600}h{seconds % 3600 // 60:02d}m"
