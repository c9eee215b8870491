"""Experiment results as data: long-format CSV rows, summary statistics and progress bars."""

from __future__ import annotations

import csv
import tempfile
from collections.abc import Iterable, Sequence
from contextlib import contextmanager
from pathlib import Path

import numpy as np
from scipy import stats

__all__ = [
    "figure_dir",
    "mean_ci",
    "output_dir",
    "progress",
    "pyplot",
    "read_csv",
    "save_figure",
    "summarise",
    "write_csv",
]


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
    """Rows of a CSV written by :func:`write_csv`, with numeric fields parsed as numbers."""

    def parse(value: str):
        for kind in (int, float):
            try:
                return kind(value)
            except ValueError:
                pass
        return value

    with Path(path).open(newline="") as handle:
        return [{key: parse(value) for key, value in row.items()} for row in csv.DictReader(handle)]


def mean_ci(values: Iterable[float], level: float = 0.95) -> tuple[float, float, float]:
    """Mean and the ``level`` confidence interval of the mean (Student t), as (mean, low, high)."""
    x = np.asarray(list(values), dtype=np.float64)
    mean = float(x.mean())
    if x.size < 2:
        return mean, mean, mean
    half = float(stats.t.ppf(0.5 + level / 2, x.size - 1) * x.std(ddof=1) / np.sqrt(x.size))
    return mean, mean - half, mean + half


def summarise(rows: Sequence[dict], by: Sequence[str], value: str) -> dict[tuple, tuple[float, float, float]]:
    """``{group key: mean_ci(values)}`` over the rows grouped by the columns ``by``."""
    groups: dict[tuple, list[float]] = {}
    for row in rows:
        groups.setdefault(tuple(row[key] for key in by), []).append(float(row[value]))
    return {key: mean_ci(values) for key, values in groups.items()}


@contextmanager
def progress(description: str, total: int, enabled: bool = True):
    """A rich progress bar; yields a function to call once per finished step."""
    from rich.progress import Progress

    with Progress(disable=not enabled, transient=True) as bar:
        task = bar.add_task(description, total=total)
        yield lambda: bar.advance(task)


def pyplot():
    """matplotlib's pyplot on the file-only Agg backend (no display needed)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def output_dir(out_dir) -> Path:
    """``out_dir`` as a folder this process can write in, created if missing; otherwise a
    ``ValueError`` naming it. Experiments call it before any work, so that a bad ``--out``
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


def save_figure(fig, out_dir: Path, name: str) -> Path:
    """Lay out ``fig``, write it as ``out_dir/name.png`` and close it."""
    fig.tight_layout()
    path = Path(out_dir) / f"{name}.png"
    fig.savefig(path, dpi=120)
    pyplot().close(fig)
    return path
