"""The papers' experiments, reproducible from the CLI (``coded experiment NAME --out DIR``).

Each experiment module has ``run(out_dir, quick=..., seed=..., show_progress=...)``, which
writes a long-format CSV (one row per setting, scheme and trial) and draws its figures from
that CSV, and ``plot(csv_path, out_dir)``, which redraws them (``coded plot CSV``).
"""

from __future__ import annotations

from . import latency, polynomial, rates, stragglers

EXPERIMENTS = {module.NAME: module for module in (stragglers, polynomial, rates, latency)}

__all__ = ["EXPERIMENTS"]
