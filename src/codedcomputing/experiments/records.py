"""Experiment results as data and figures: long-format CSV rows, bootstrap bands, headline
tables, and the drawing conventions every figure shares (scheme styles, the floor for exact
schemes on a log axis, the caption that says what a band is)."""

from __future__ import annotations

import csv
import math
import tempfile
from collections import Counter
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import NamedTuple

import numpy as np
from scipy import stats

from .._validation import number_or_text

__all__ = [
    "COUNT",
    "EXACT_MSE",
    "FLOOR_NOTE",
    "FRACTION",
    "LEVEL",
    "NONNEGATIVE",
    "POSITIVE",
    "RESAMPLES",
    "SIZE",
    "TEXT",
    "Cell",
    "Headline",
    "Interval",
    "band_note",
    "draw_band",
    "drawable",
    "exact_floor",
    "figure_dir",
    "figure_text",
    "floor_if_exact",
    "grouped",
    "interval",
    "log_scale",
    "means",
    "output_dir",
    "pyplot",
    "read_csv",
    "read_table",
    "save_figure",
    "scheme_style",
    "show_floor",
    "summarise",
    "twins",
    "write_csv",
]

LEVEL = 0.95
RESAMPLES = 2000  # between bootstrap seeds the band's ends move by ~1-2% of its width (measured)
EXACT_MSE = 1e-10  # an MSE below this is rounding: the scheme was exact
FLOOR_NOTE = f"'exact': MSE below {EXACT_MSE:.0e} (rounding), drawn on the shaded floor"

# One look per scheme in every figure. Schemes that often coincide (GCC tuned to lambda = 0 is
# GCC natural) differ in line style and marker too, so the one drawn on top does not hide the other.
SCHEME_STYLES = {
    "gcc": {"color": "C0", "ls": "-", "marker": "o"},
    "gcc-natural": {"color": "C1", "ls": ":", "marker": "s", "mfc": "none", "ms": 7},
    "bacc": {"color": "C2", "ls": "-", "marker": "^"},
    "lcc": {"color": "C3", "ls": "--", "marker": "D"},
    "replication": {"color": "C4", "ls": "-.", "marker": "v"},
    "uncoded": {"color": "C5", "ls": "--", "marker": "x"},
}


def write_csv(rows: Sequence[dict], path: Path) -> Path:
    """Write ``rows`` (dicts with the same keys, in order) as a CSV file; return its path."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("w", newline="") as handle:
        writer = csv.DictWriter(handle, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows(rows)
    return path


def read_csv(path: Path) -> list[dict]:
    """Rows of a CSV written by :func:`write_csv`, with numeric fields parsed as numbers.

    A file that is not such a CSV (not UTF-8 text, or a line with more or fewer fields than
    the header) raises a ``ValueError`` saying so, rather than returning ragged rows."""
    rows, ragged = read_table(path)
    if ragged:
        line, count, expected = ragged[0]
        raise ValueError(f"line {line} has {count} fields where the header has {expected}")
    return rows


def read_table(path: Path) -> tuple[list[dict], list[tuple[int, int, int]]]:
    """The rows of a CSV as :func:`read_csv` parses them, and ``(line, fields, header's
    fields)`` for each line whose number of fields is not the header's (left out of the rows:
    a file cut short ends in one). Raises ``ValueError`` for a file that is not UTF-8 CSV text."""

    rows, ragged = [], []
    try:
        with Path(path).open(newline="", encoding="utf-8") as handle:
            reader = csv.reader(handle)
            header = next(reader, [])
            for fields in reader:
                if not fields:
                    continue
                if len(fields) != len(header):
                    ragged.append((reader.line_num, len(fields), len(header)))
                    continue
                rows.append({key: number_or_text(value) for key, value in zip(header, fields, strict=True)})
    except UnicodeDecodeError:
        raise ValueError("it is not UTF-8 text") from None
    except csv.Error as err:
        raise ValueError(f"it is not a CSV ({err})") from None
    return rows, ragged


@dataclass(frozen=True)
class Cell:
    """What a figure needs of a column's cells: ``kind`` "text", "integer", "number", "flag"
    (True or False) or "any" (not empty); numbers within ``low`` and ``high`` (``low`` itself
    excluded when ``above``); with ``optional`` the cell may also be empty.

    An experiment's ``CELLS`` maps each column its plot and headline read to its ``Cell``, and
    its ``COLUMNS`` are those columns: ``coded plot`` leaves out the rows with a cell that is
    not so, and refuses a CSV without one of the columns."""

    kind: str
    low: float = -math.inf
    high: float = math.inf
    above: bool = False
    optional: bool = False

    def problem(self, value) -> str:
        """ "" when ``value`` is such a cell, else what it is instead ("empty", "NaN", "text",
        "negative", "0", "infinite", ...)."""
        if value == "":
            return "" if self.optional else "empty"
        number = isinstance(value, (int, float)) and not isinstance(value, bool)
        if number and math.isnan(value):
            return "NaN"
        if self.kind == "any":
            return ""
        if self.kind == "text":
            return "" if isinstance(value, str) else "a number"
        if self.kind == "flag":
            return "" if value in ("True", "False") or isinstance(value, bool) else "not True or False"
        if not number:
            return "text"
        if math.isinf(value):
            return "infinite"
        if self.kind == "integer" and value != int(value):
            return "not a whole number"
        if value < self.low or (self.above and value == self.low) or value > self.high:
            if value < 0 <= self.low:
                return "negative"
            return "zero" if value == 0 else f"{value:g}, out of range"
        return ""


# the cells most columns need: text (a scheme), a count (S, a trial), a size (K, N), a number
# >= 0 (an MSE, seconds), one > 0 (on a log axis), one in [0, 1] (a relative accuracy)
TEXT, COUNT, SIZE = Cell("text"), Cell("integer", low=0), Cell("integer", low=1)
NONNEGATIVE, POSITIVE, FRACTION = (
    Cell("number", low=0),
    Cell("number", low=0, above=True),
    Cell("number", 0, 1),
)


def drawable(rows: Sequence[dict], cells: dict[str, Cell], check=None) -> tuple[list[dict], Counter]:
    """The rows whose cells in the columns of ``cells`` are what each needs (and in which
    ``check(row)``, an experiment's test across columns, finds nothing wrong: it returns why
    not, or ""), and how many rows were left out for each reason ("mse NaN", "p empty")."""
    kept, left_out = [], Counter()
    for row in rows:
        why = next(
            (
                f"{column} {problem}"
                for column, cell in cells.items()
                if (problem := cell.problem(row[column]))
            ),
            "",
        )
        if not why and check is not None:
            why = check(row)
        if why:
            left_out[why] += 1
        else:
            kept.append(row)
    return kept, left_out


class Interval(NamedTuple):
    """A statistic with the ends of its confidence interval."""

    estimate: float
    low: float
    high: float


def interval(
    values: Iterable[float],
    *,
    statistic: Callable = np.mean,
    level: float = LEVEL,
    resamples: int = RESAMPLES,
    seed: int = 0,
) -> Interval:
    """``statistic`` of ``values`` (default: the mean) and its ``level`` percentile-bootstrap
    interval, seeded so that a figure redraws identically.

    Why the bootstrap: MSE over trials is heavy-tailed, so a Student-t interval runs below
    zero and needed a clipping floor on a log axis. A resampled mean lies within the data's
    range, so the band of a positive value stays positive and that of a bounded one (relative
    accuracy, in [0, 1]) stays within its bounds. ``statistic`` takes an ``axis`` argument
    (``np.mean``, ``functools.partial(np.percentile, q=99)``). Constant values, or fewer
    than two, give a zero-width interval.
    """
    x = np.asarray(list(values), dtype=np.float64)
    estimate = float(statistic(x))
    if x.size < 2 or np.all(x == x[0]):
        return Interval(estimate, estimate, estimate)
    result = stats.bootstrap(
        (x,),
        statistic,
        n_resamples=resamples,
        confidence_level=level,
        method="percentile",
        vectorized=True,
        random_state=np.random.default_rng(seed),  # `rng=` only exists from scipy 1.15
    )
    low, high = result.confidence_interval
    return Interval(estimate, float(low), float(high))


def grouped(rows: Sequence[dict], by: Sequence[str], value: str) -> dict[tuple, np.ndarray]:
    """``{group key: the values of column value}`` over the rows grouped by the columns
    ``by``, groups in the order they first appear."""
    groups: dict[tuple, list[float]] = {}
    for row in rows:
        groups.setdefault(tuple(row[key] for key in by), []).append(float(row[value]))
    return {key: np.asarray(values) for key, values in groups.items()}


def means(rows: Sequence[dict], by: Sequence[str], value: str) -> dict[tuple, float]:
    """``{group key: mean}``, as :func:`grouped` groups them (no interval: cheap)."""
    return {key: float(values.mean()) for key, values in grouped(rows, by, value).items()}


def summarise(rows: Sequence[dict], by: Sequence[str], value: str, **options) -> dict[tuple, Interval]:
    """``{group key: interval(values)}`` over the rows grouped by the columns ``by``;
    ``options`` go to :func:`interval`."""
    return {key: interval(values, **options) for key, values in grouped(rows, by, value).items()}


def band_note(trials, *, statistic: str = "mean", what: str = "bands", unit: str = "trials") -> str:
    """The caption line that says what a figure's bands are."""
    band = f"{LEVEL:.0%} bootstrap interval of the {statistic}"
    return f"{what}: {band} over {trials} {unit} ({RESAMPLES} resamples)"


@dataclass(frozen=True)
class Headline:
    """A few lines that summarise an experiment's result: printed after a run and by
    ``coded plot``. Cells are numbers or text; numbers are rounded only when shown."""

    title: str
    columns: tuple[str, ...]
    rows: list[tuple] = field(default_factory=list)
    note: str = ""

    def column(self, name: str) -> list:
        """The cells of column ``name``, row by row."""
        index = self.columns.index(name)
        return [row[index] for row in self.rows]


def pyplot():
    """matplotlib's pyplot on the file-only Agg backend (no display needed)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def scheme_style(scheme: str) -> dict:
    """The line style, marker and colour of ``scheme`` (see ``SCHEME_STYLES``), as a copy."""
    return dict(SCHEME_STYLES.get(scheme, {"ls": "-", "marker": "o"}))


def draw_band(ax, x, intervals: Sequence[Interval], label: str, style: dict, *, floor: float | None = None):
    """A curve of estimates with its band; returns the line. With a ``floor`` (a log MSE
    axis), estimates below :data:`EXACT_MSE` are drawn at the floor without a band (see
    :func:`show_floor`), a band's low end below it stops at it, and a segment between the
    floor and a real value is drawn faint: its slope means nothing."""
    x = np.asarray(x, dtype=float)
    estimate, low, high = (np.array([v[i] for v in intervals], dtype=float) for i in range(3))
    exact = estimate < EXACT_MSE if floor is not None else np.zeros(x.size, dtype=bool)
    y = np.where(exact, floor if floor is not None else 0.0, estimate)
    if floor is not None:  # a band that reaches exact values (resamples of exact trials) ends on the floor
        low = np.maximum(low, floor)
    style = {"ms": 4} | style
    line = ax.plot(x, np.where(exact, np.nan, y), label=label, **style)[0]
    if exact.any():
        ax.plot(x, np.where(exact, y, np.nan), **(style | {"color": line.get_color()}))
        for i in np.flatnonzero(exact[1:] != exact[:-1]):  # floor <-> value: faint, no marker
            ax.plot(x[i : i + 2], y[i : i + 2], color=line.get_color(), ls=style.get("ls", "-"), alpha=0.35)
    ax.fill_between(
        x,
        np.where(exact, np.nan, low),
        np.where(exact, np.nan, high),
        color=line.get_color(),
        alpha=0.15,
        lw=0,
    )
    return line


def curves_over_s(rows: Sequence[dict], schemes: Sequence[str], value: str) -> dict[str, list]:
    """``{scheme: [(S, Interval), ...]}`` sorted by S, for the schemes of ``schemes`` that
    have rows (the bootstrap summary of ``value`` per scheme and number of stragglers)."""
    summary = summarise(rows, ("scheme", "num_stragglers"), value)
    curves = {
        scheme: sorted((s, v) for (name, s), v in summary.items() if name == scheme) for scheme in schemes
    }
    return {scheme: points for scheme, points in curves.items() if points}


def twins(curves: dict[str, Sequence[float]], rtol: float = 0.02) -> dict[str, str]:
    """``{name: legend note}`` for each curve that lies within ``rtol`` of an earlier one at
    every point, e.g. ``"same as gcc"`` or ``"within 1% of gcc"``: drawn over each other, a
    reader should not have to guess where one of them went."""
    found: dict[str, str] = {}
    names = list(curves)
    for i, name in enumerate(names):
        for other in names[:i]:
            a, b = np.asarray(curves[name], float), np.asarray(curves[other], float)
            if a.shape != b.shape or not a.size:
                continue
            scale = np.maximum(np.abs(a), np.abs(b))
            gap = float(np.max(np.divide(np.abs(a - b), scale, out=np.zeros_like(a), where=scale > 0)))
            if gap <= rtol:
                found[name] = f"same as {other}" if gap < 1e-9 else f"within {max(gap, 0.001):.1%} of {other}"
                break
    return found


def log_scale(ax) -> None:
    """A log y axis on ``ax`` when a line drawn on it has a positive value; otherwise (a panel
    whose every value is missing, from a CSV read back with rows left out) the axis stays
    linear, rather than failing to draw."""
    values = [np.asarray(line.get_ydata(), dtype=float).ravel() for line in ax.get_lines()]
    if any(np.any(np.isfinite(v) & (v > 0)) for v in values):
        ax.set_yscale("log")


def exact_floor(values: Iterable[float]) -> float:
    """The floor at which to draw exact schemes: a decade below the lowest inexact value
    (``values``: every estimate and band end of the figure's inexact points)."""
    inexact = [v for v in values if v >= EXACT_MSE]
    lowest = min(inexact) if inexact else 1.0
    return float(10.0 ** (np.floor(np.log10(lowest)) - 1))


def floor_if_exact(values: Iterable[float]) -> float | None:
    """:func:`exact_floor` of ``values`` when one of them is exact (below :data:`EXACT_MSE`);
    None, no floor, when none is."""
    values = list(values)
    return exact_floor(values) if values and min(values) < EXACT_MSE else None


def show_floor(ax, floor: float) -> None:
    """Mark the floor of a log MSE axis where exact schemes are drawn (a shaded strip, the
    tick "exact", no ticks below), so that their ~1e-12 rounding error does not stretch the
    axis that compares the approximate ones. Call it after drawing the curves; the figure's
    caption adds :data:`FLOOR_NOTE`."""
    ax.set_yscale("log")
    top = ax.get_ylim()[1]
    ax.set_ylim(floor / 3, top)
    ax.axhspan(floor / 3, floor * 2, color="0.92", lw=0, zorder=0)
    decades = [t for t in ax.get_yticks() if floor * 5 <= t <= top]
    ax.set_yticks([floor, *decades], ["exact", *(f"$10^{{{round(np.log10(t))}}}$" for t in decades)])
    ax.set_yticks([t for t in ax.get_yticks(minor=True) if floor * 2 < t <= top], minor=True)
    ax.set_ylim(floor / 3, top)


def output_dir(out_dir) -> Path:
    """``out_dir`` as a folder this process can write in, created if missing; otherwise a
    ``ValueError`` naming it. The driver calls it before any work, so that a bad ``--out``
    fails at once rather than after the whole run."""
    folder = Path(out_dir)
    if folder.exists() and not folder.is_dir():
        raise ValueError(f"out_dir {folder} exists and is not a directory")
    try:
        folder.mkdir(parents=True, exist_ok=True)
        with tempfile.TemporaryFile(dir=folder):
            pass
    except OSError as err:
        reason = err.strerror or err
        raise ValueError(f"out_dir {folder} is not a folder that can be written: {reason}") from None
    return folder


def figure_dir(csv_path: Path, out_dir: Path | None) -> Path:
    """``out_dir``, or the CSV's folder when it is None, checked by :func:`output_dir`."""
    return output_dir(out_dir if out_dir is not None else Path(csv_path).parent)


def save_figure(fig, out_dir: Path, name: str, caption: str = "") -> Path:
    """Lay out ``fig`` with ``caption`` (what its bands are) under it, write it as
    ``out_dir/name.png`` and close it. The PNG carries its suptitle and caption as its
    ``Title`` and ``Description`` text (:func:`figure_text`), for reports."""
    if caption:
        fig.text(0.5, 0.01, caption, ha="center", va="bottom", fontsize=8, color="0.25")
        fig.tight_layout(rect=(0, 0.3 / fig.get_figheight(), 1, 1))  # room for the caption line
    else:
        fig.tight_layout()
    path = Path(out_dir) / f"{name}.png"
    title = fig.get_suptitle()
    fig.savefig(path, dpi=120, metadata={"Title": title, "Description": caption})
    pyplot().close(fig)
    return path


def figure_text(path: Path) -> dict[str, str]:
    """``{"Title": ..., "Description": ...}`` that :func:`save_figure` wrote into a PNG
    (empty strings where it holds none)."""
    from PIL import Image

    with Image.open(path) as image:
        text = dict(getattr(image, "text", {}) or {})
    return {key: str(text.get(key, "")) for key in ("Title", "Description")}
