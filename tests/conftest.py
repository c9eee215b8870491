"""Shared fixtures."""

from __future__ import annotations

import os

import pytest


@pytest.fixture(scope="session")
def trained_models(request):
    """LeNet-5 and the ViT trained with their default recipes, in a weight cache kept in
    pytest's cache folder: trained on the first run (about 4 minutes on 2 cores), reused by
    later runs in the same checkout."""
    from codedcomputing import models

    cache = request.config.cache.mkdir("trained-models")
    previous = os.environ.get("CODEDCOMPUTING_CACHE")
    os.environ["CODEDCOMPUTING_CACHE"] = str(cache)
    try:
        yield {name: models.load(name, progress=False) for name in ("lenet5", "vit")}
    finally:
        if previous is None:
            os.environ.pop("CODEDCOMPUTING_CACHE", None)
        else:
            os.environ["CODEDCOMPUTING_CACHE"] = previous
