"""The papers' experiments, reproducible from the CLI (``coded experiment NAME --out DIR``).

Each experiment module has a ``Config`` dataclass and a ``QUICK`` one; ``run(config, seed,
*, progress=True)``, which returns the rows of its long-format CSV (dicts: one per setting,
scheme and trial); ``plot(rows, out_dir)``, which draws its figures from rows and returns
their paths; and ``headline(rows)``, a few-line summary table. :mod:`.driver` writes the
CSV and figures and prints the headline (``run_experiment``), or redraws them from a CSV
(``redraw``, ``coded plot CSV``).
"""

from __future__ import annotations

from .driver import EXPERIMENTS, NotAnExperimentCSV, redraw, run_experiment

__all__ = ["EXPERIMENTS", "NotAnExperimentCSV", "redraw", "run_experiment"]
