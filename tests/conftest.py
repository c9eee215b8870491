"""Shared fixtures."""

from __future__ import annotations

import re

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


# The slow tests of a module that may start Ray (a local cluster, a cluster_utils.Cluster, or a
# Ray backend of the library) run on one xdist worker: with `-n 2 --dist loadgroup` two Ray
# clusters never run at once on a 2-core machine (each holds ~700 MB and its own processes).
# Ray tests are all in the slow tier; the match is loose on purpose (a module that only names
# Ray is grouped too, which costs a little parallelism, never correctness).
_USES_RAY = re.compile(r"import ray\b|\bray\.init\(|ray_session|cluster_utils|RayServer|RayCluster|\"ray\"")


def pytest_collection_modifyitems(config, items):
    sources: dict[str, bool] = {}
    for item in items:
        path = str(item.path)
        if path not in sources:
            try:
                sources[path] = bool(_USES_RAY.search(item.path.read_text()))
            except OSError:
                sources[path] = False
        if sources[path] and item.get_closest_marker("slow"):
            item.add_marker(pytest.mark.xdist_group("ray"))
