"""Fixtures of the model tests: a private cache, and a stand-in for training."""

from __future__ import annotations

import pytest


@pytest.fixture
def cache(tmp_path, monkeypatch):
    monkeypatch.setenv("CODEDCOMPUTING_CACHE", str(tmp_path))
    return tmp_path


@pytest.fixture
def untrained(monkeypatch):
    """Training replaced by building the model from the recipe's seed (its initial weights,
    deterministic) with a made-up accuracy of 0.5: the cache's logic (keys, sidecars, damage,
    locks) is tested in the fast tier without training a network. Returns the list of recipes
    "trained", in order."""
    import torch

    from codedcomputing.models import training

    calls = []

    def seeded_build(build, recipe, description, progress):
        calls.append(recipe)
        from codedcomputing import datasets

        torch.manual_seed(recipe.seed)
        model = build(datasets.IMAGE_SIZES[recipe.dataset])
        model.eval()
        return model, 0.5

    monkeypatch.setattr(training, "_fit", seeded_build)
    return calls
