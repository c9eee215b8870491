"""Shared fixtures."""

from __future__ import annotations

import contextlib
import sys

import pytest

TRAINED = ("lenet5", "vit")


@pytest.fixture(scope="session")
def trained_models(request):
    """LeNet-5 and the ViT trained with their default recipes, from the package's own weight
    cache (``codedcomputing.cache.cache_dir()``, which honours ``$CODEDCOMPUTING_CACHE``): the
    one the experiments and ``coded`` use, so the models are trained once for all of them
    (about 4 minutes on 2 cores), not once for the tests and again for the first experiment.

    Training shows its progress on the real terminal or CI log, so that a first run does not
    look hung: a bar on a terminal, a line every few seconds otherwise.
    """
    from codedcomputing import models
    from codedcomputing.cache import cache_dir

    # pytest captures output, and its default --capture=fd points file descriptor 2 itself at a
    # temporary file, so writing to sys.__stderr__ would be captured too. Suspending capture
    # for the training (what capsys.disabled() does; capsys itself is per test, this fixture is
    # per session) lets the progress helper write to the real stderr and decide for itself
    # whether that is a terminal. Without the capture plugin (-p no:capture) nothing is captured.
    capture = request.config.pluginmanager.getplugin("capturemanager")
    missing = [name for name in TRAINED if not models.weights_path(name, models.MODELS[name][1]).exists()]
    with capture.global_and_fixture_disabled() if capture else contextlib.nullcontext():
        if missing:  # off the line pytest is writing test names on, and say where weights go
            sys.stderr.write(f"\ntraining {' and '.join(missing)} for the tests into {cache_dir()}\n")
            sys.stderr.flush()
        return {name: models.load(name, progress=True) for name in TRAINED}
