"""Run an experiment, or redraw one from its CSV: the one place that writes files and prints.

Experiments only compute rows (``run``) and draw or summarise given rows (``plot``,
``headline``), so tests check the rows directly and ``coded plot`` redraws exactly what a
run drew.
"""

from __future__ import annotations

import sys
import warnings
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from . import (
    adversarial,
    frontier,
    gradient_coding,
    latency,
    manifold,
    polynomial,
    rates,
    serving,
    stragglers,
)
from .records import Headline, drawable, figure_dir, output_dir, read_table, write_csv

if TYPE_CHECKING:  # rich is the ``cli`` extra's; without it the headline prints as plain text
    from rich.console import Console
    from rich.table import Table

__all__ = ["EXPERIMENTS", "NotAnExperimentCSV", "experiment_of", "headline_table", "redraw", "run_experiment"]

EXPERIMENTS = {
    module.NAME: module
    for module in (
        stragglers,
        polynomial,
        rates,
        latency,
        manifold,
        adversarial,
        gradient_coding,
        frontier,
        serving,
    )
}


class NotAnExperimentCSV(ValueError):
    """A file given to :func:`redraw` that no experiment wrote, or whose rows no figure can be
    drawn from; the message names the file and says why, in one line."""


def run_experiment(
    name: str,
    out_dir,
    *,
    quick: bool = False,
    seed: int = 0,
    progress: bool = True,
    console: Console | None = None,
) -> list[Path]:
    """Run experiment ``name`` (its ``QUICK`` config with ``quick``), write its CSV, any
    tables derived from it (rates: the slopes) and its figures in ``out_dir``, and print its
    headline. Returns the paths written, the CSV first.

    ``out_dir`` is checked before any work, so that a bad one fails at once, not after the run.
    """
    module = EXPERIMENTS[name]
    out_dir = output_dir(out_dir)
    rows = module.run(module.QUICK if quick else module.Config(), seed, progress=progress)
    paths = [write_csv(rows, out_dir / f"{name}.csv")]
    derived = getattr(module, "derived", None)  # optional: rates and adversarial have derived tables
    if derived is not None:
        paths += [write_csv(table, out_dir / f"{stem}.csv") for stem, table in derived(rows).items()]
    paths += module.plot(rows, out_dir)
    _show(module.headline(rows), console)
    return paths


def experiment_of(rows: list[dict], source) -> str:
    """The name of the experiment that wrote ``rows`` (read from ``source``), or a
    :class:`NotAnExperimentCSV` saying why they are not an experiment's rows."""
    if not rows:
        raise NotAnExperimentCSV(f"{source} has no rows")
    if "experiment" not in rows[0]:
        raise NotAnExperimentCSV(
            f"{source} has no 'experiment' column: it was not written by `coded experiment`"
        )
    name = rows[0]["experiment"]
    if name not in EXPERIMENTS:
        known = ", ".join(EXPERIMENTS)
        raise NotAnExperimentCSV(f"{source} is from an unknown experiment {name!r} (known: {known})")
    missing = [column for column in EXPERIMENTS[name].COLUMNS if column not in rows[0]]
    if missing:
        raise NotAnExperimentCSV(f"{source} lacks the {name} columns {', '.join(missing)}")
    return name


def redraw(
    csv_path, out_dir=None, *, console: Console | None = None, warn: Callable[[str], None] | None = None
) -> list[Path]:
    """Redraw the figures of the experiment whose CSV is ``csv_path`` in ``out_dir`` (default:
    beside the CSV), print its headline and return the figures' paths.

    Rows a figure cannot use (a cell that is not what its column needs: the experiment's
    ``CELLS``; a line with too few or too many fields, as a file cut short ends) are left out,
    and ``warn`` (default: print to stderr) is given one line saying how many and why. A file
    that is not an experiment's CSV, or that leaves nothing to draw, raises
    :class:`NotAnExperimentCSV`, which says so in one line."""
    try:
        rows, ragged = read_table(csv_path)
    except ValueError as err:
        raise NotAnExperimentCSV(f"{csv_path} is not an experiment's CSV: {err}") from None
    if ragged and not rows:
        line, count, expected = ragged[0]
        raise NotAnExperimentCSV(
            f"{csv_path} is not an experiment's CSV: line {line} has {count} fields where the header "
            f"has {expected}"
        )
    module = EXPERIMENTS[experiment_of(rows, csv_path)]
    usable, left_out = drawable(rows, module.CELLS, getattr(module, "row_problem", None))
    if ragged:
        left_out["a line with too few or too many fields"] += len(ragged)
    total = len(rows) + len(ragged)
    if not usable:
        raise NotAnExperimentCSV(f"{csv_path}: none of its {total} rows can be drawn: {_reasons(left_out)}")
    if left_out:
        line = f"{csv_path}: left out {left_out.total()} of {total} rows: {_reasons(left_out)}"
        (warn or (lambda text: print(text, file=sys.stderr)))(line)
    folder = figure_dir(csv_path, out_dir)
    try:
        with warnings.catch_warnings():  # groups the left-out rows emptied: NaN means, drawn as gaps,
            warnings.simplefilter("ignore", RuntimeWarning)  # and panels without a curve to label
            warnings.filterwarnings("ignore", "No artists with labels found", UserWarning)
            figures = module.plot(usable, folder)
            headline = module.headline(usable)
    except Exception as err:  # rows unlike any a run writes: one line, not a traceback
        raise NotAnExperimentCSV(
            f"{csv_path}: its figures cannot be drawn from its {len(usable)} usable rows "
            f"({type(err).__name__}: {err})"
        ) from err
    _show(headline, console)
    return figures


def _reasons(left_out) -> str:
    """``"mse NaN (2 rows), trial empty (1 row)"``: the most frequent first, at most four."""
    common = left_out.most_common()
    shown = [f"{why} ({count} row{'s' if count > 1 else ''})" for why, count in common[:4]]
    return ", ".join(shown) + (f" and {len(common) - 4} more reasons" if len(common) > 4 else "")


def headline_table(headline: Headline) -> Table:
    """``headline`` as a rich table: numbers to 3 significant digits, text as it is."""
    from rich.table import Table

    table = Table(title=headline.title, caption=headline.note or None)
    for i, column in enumerate(headline.columns):
        numeric = any(isinstance(row[i], (int, float)) for row in headline.rows)
        table.add_column(column, justify="right" if numeric else "left")
    for row in headline.rows:
        table.add_row(*(_cell(value) for value in row))
    return table


def _cell(value) -> str:
    """Three significant digits; plain notation from 1e-3 to 1e5 (latencies in ms, ratios)."""
    if not isinstance(value, float):
        return str(value)
    if value == 0 or not 1e-3 <= abs(value) < 1e5:
        return f"{value:.3g}"
    return f"{value:.{max(0, 2 - int(np.floor(np.log10(abs(value)))))}f}"


def _show(headline: Headline, console: Console | None) -> None:
    """Print ``headline``; off a terminal at least 100 columns wide, so that a log or a
    pipe gets the table whole rather than wrapped at 80."""
    try:
        from rich.console import Console
    except ImportError:  # the core install: no rich, so a plain table
        print(_plain_table(headline), flush=True)
        return
    console = console or Console()
    if not console.is_terminal and console.width < 100:
        console = Console(width=100, file=console.file)
    console.print(headline_table(headline))


def _plain_table(headline: Headline) -> str:
    """``headline`` as aligned plain text, for an install without rich."""
    rows = [list(headline.columns)] + [[_cell(value) for value in row] for row in headline.rows]
    widths = [max(len(row[i]) for row in rows) for i in range(len(headline.columns))]
    lines = [headline.title]
    lines += ["  ".join(cell.ljust(width) for cell, width in zip(row, widths, strict=True)) for row in rows]
    return "\n".join(lines + ([headline.note] if headline.note else []))
