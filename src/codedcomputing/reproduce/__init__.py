"""Reproduce every published claim with one command (``coded reproduce``): run the
experiments, check each paper's claims against the rows they wrote, and write a report.

:func:`reproduce` runs (or reuses) the experiments and writes ``report.md`` and
``report.html``, and with ``docs`` the same as Sphinx pages (the repository's
``docs/results``); :mod:`.claims` holds the papers and their claims, each read from an
experiment's rows; :mod:`.report` renders the report; :mod:`.pages` writes the pages;
:mod:`.provenance` gives the commit and the code and data hashes each experiment's manifest
records, which decide whether a finished experiment is reused.
"""

from __future__ import annotations

from .claims import CLAIMS, PAPERS, Claim, Paper, claims_of
from .run import EXPECTED_S, Part, Reproduction, reproduce

__all__ = [
    "CLAIMS",
    "EXPECTED_S",
    "PAPERS",
    "Claim",
    "Paper",
    "Part",
    "Reproduction",
    "claims_of",
    "reproduce",
]
