"""Shared fixtures."""

from __future__ import annotations

import pytest

TRAINED = ("lenet5", "vit")


@pytest.fixture(scope="session")
def trained_models():
    """LeNet-5 and the ViT with their default recipes: the weights shipped with the package
    (``codedcomputing.models.shipped``), so nothing trains."""
    from codedcomputing import models

    return {name: models.load(name, progress=False) for name in TRAINED}


@pytest.fixture(autouse=True)
def no_training_outside_the_slow_tier(request, monkeypatch):
    """A test outside the ``slow`` tier that would train a network (a registry model or a
    parity model) fails at once, naming what it trained: the fast tier and a fresh clone's
    test run never wait on training (the default weights ship with the package)."""
    if request.node.get_closest_marker("slow"):
        return
    from codedcomputing.models import parity, training

    def refuse(what):
        def trained(*args, **kwargs):
            pytest.fail(f"this test trains {what}; training belongs in the slow tier (@pytest.mark.slow)")

        return trained

    monkeypatch.setattr(training, "_fit", refuse("a model"))
    monkeypatch.setattr(parity, "_train_parity", refuse("a parity model"))
