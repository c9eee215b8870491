"""Experiment runs that several test files check: each run once per session."""

from __future__ import annotations

import copy

import pytest


@pytest.fixture(scope="session")
def _stragglers_quick_rows(trained_models):
    from codedcomputing.experiments import stragglers

    return stragglers.run(stragglers.QUICK, 0, progress=False)


@pytest.fixture
def stragglers_rows(_stragglers_quick_rows):
    """The stragglers experiment's quick rows (seed 0), run once; each test gets its own copy."""
    return copy.deepcopy(_stragglers_quick_rows)
