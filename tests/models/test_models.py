"""Models, real datasets and the weight cache."""

from __future__ import annotations

import dataclasses
import os
import re
import subprocess
import sys

import numpy as np
import pytest
import torch
from typer.testing import CliRunner

import codedcomputing as cc
from codedcomputing import _progress, datasets, models
from codedcomputing.cli import app
from codedcomputing.models import training
from codedcomputing.models.lenet import LeNet5, LeNet5Config
from codedcomputing.models.vit import ViT, ViTConfig

TINY = models.TrainingRecipe("digits", epochs=1, lr=2e-3, weight_decay=1e-4)


@pytest.mark.parametrize(
    "model",
    [
        LeNet5(),
        LeNet5(LeNet5Config(image_size=8)),
        ViT(ViTConfig(patch_size=7)),
        ViT(ViTConfig(image_size=8, patch_size=2)),
    ],
    ids=["lenet5-28", "lenet5-8", "vit-28", "vit-8"],
)
def test_models_map_image_batches_to_logits(model):
    side = model.config.image_size
    for batch in (torch.zeros(5, 1, side, side), torch.zeros(5, side * side)):
        assert model(batch).shape == (5, 10)


@pytest.mark.parametrize(
    ("name", "train", "test", "side"), [("mnist", 4000, 1000, 28), ("digits", 1438, 359, 8)]
)
def test_datasets_are_stratified_deterministic_and_normalised(name, train, test, side):
    data = datasets.load(name)
    assert data.train_x.shape == (train, 1, side, side) and data.test_x.shape == (test, 1, side, side)
    assert data.train_x.dtype == np.float32 and 0.0 <= data.train_x.min() and data.train_x.max() <= 1.0
    test_counts = np.bincount(data.test_y, minlength=10)
    assert test_counts.max() - test_counts.min() <= 2  # every class in proportion
    again = datasets.load(name)
    assert np.array_equal(again.test_y, data.test_y) and np.array_equal(again.train_x, data.train_x)
    # train and test images are disjoint
    train_rows = {row.tobytes() for row in data.train_x.reshape(train, -1)}
    assert not any(row.tobytes() in train_rows for row in data.test_x.reshape(test, -1))


def test_unknown_names_are_rejected():
    with pytest.raises(ValueError, match="dataset"):
        datasets.load("cifar")
    with pytest.raises(ValueError, match="model"):
        models.load("resnet")


def test_cache_directory_can_be_overridden(cache):
    assert models.cache_dir() == cache
    assert models.weights_path("lenet5", TINY).parent == cache


def test_load_trains_once_then_reads_the_cache(cache, untrained, monkeypatch):
    assert not models.is_cached("lenet5", TINY)
    first = models.load("lenet5", TINY, progress=False)
    assert models.is_cached("lenet5", TINY) and not models.is_cached("vit", TINY)
    weights = models.weights_path("lenet5", TINY)
    assert weights.exists()
    state = torch.load(weights, weights_only=True)  # a plain state_dict: no pickled code
    assert set(state) == set(first.state_dict())

    def no_training(*args, **kwargs):
        raise AssertionError("load retrained although weights were cached")

    monkeypatch.setattr(models, "train", no_training)
    second = models.load("lenet5", TINY)
    x = torch.as_tensor(datasets.digits().test_x[:16])
    assert torch.equal(first(x), second(x))
    assert second.test_accuracy == first.test_accuracy


def _changed(value):
    return "mnist" if value == "digits" else value * 2 if isinstance(value, float) else value + 1


def test_the_cache_key_is_the_whole_recipe(cache):
    """A change to any field of the recipe (lr, weight decay, batch size, augmentation, ...)
    is another cache file: stale weights are never even looked at."""
    path = models.weights_path("lenet5", TINY)
    assert re.fullmatch(r"lenet5-digits-[0-9a-f]{12}\.pt", path.name), path.name
    assert models.weights_path("lenet5", dataclasses.replace(TINY)) == path  # equal recipe, same file
    assert models.weights_path("lenet5", dataclasses.replace(TINY, lr=1e-3)) != path
    changed = {
        field.name: models.weights_path(
            "lenet5", dataclasses.replace(TINY, **{field.name: _changed(getattr(TINY, field.name))})
        )
        for field in dataclasses.fields(TINY)
    }
    assert len(changed) >= 9 and len({path, *changed.values()}) == len(changed) + 1, changed
    assert models.weights_path("vit", TINY).name.startswith("vit-digits-")


def test_the_cache_key_is_the_same_in_every_process(cache):
    """Not Python's hash(), which is salted per process: another run, with another salt, must
    find the weights this one cached."""
    code = (
        "from codedcomputing import models\n"
        "print(models.weights_path('vit', models.TrainingRecipe('digits', 3, 1e-3, 5e-2, rotation=0.1)))"
    )
    recipe = models.TrainingRecipe("digits", 3, 1e-3, 5e-2, rotation=0.1)
    found = {
        subprocess.run(
            [sys.executable, "-c", code],
            env={**os.environ, "PYTHONHASHSEED": salt},
            capture_output=True,
            text=True,
            check=True,
        ).stdout.strip()
        for salt in ("1", "2")
    }
    assert found == {str(models.weights_path("vit", recipe))}


def test_a_changed_recipe_trains_anew_and_the_sidecar_still_guards(cache, untrained, monkeypatch):
    models.load("lenet5", TINY, progress=False)
    other = dataclasses.replace(TINY, lr=1e-3)
    trained, real_train = [], models.train

    def counting_train(name, recipe=None, **kwargs):
        trained.append(recipe)
        return real_train(name, recipe, **kwargs)

    monkeypatch.setattr(models, "train", counting_train)
    models.load("lenet5", other, progress=False)
    assert trained == [other]
    models.load("lenet5", TINY)
    assert trained == [other]  # the first entry is still there, untouched
    # should two recipes ever share a file, the sidecar's recipe tells them apart
    for source, target in zip(
        (models.weights_path("lenet5", TINY), models.weights_path("lenet5", TINY).with_suffix(".json")),
        (models.weights_path("lenet5", other), models.weights_path("lenet5", other).with_suffix(".json")),
        strict=True,
    ):
        target.write_bytes(source.read_bytes())
    with pytest.warns(cc.errors.DamagedCacheWarning, match="recipe"):
        models.load("lenet5", other, progress=False)
    assert trained == [other, other]


@pytest.mark.slow
def test_training_shows_one_progress_step_per_epoch_on_stderr(cache, capsys, monkeypatch):
    """Not a terminal (pytest's capture): plain lines, so that a CI log shows training move."""
    monkeypatch.delenv("FORCE_COLOR", raising=False)
    monkeypatch.delenv("TTY_COMPATIBLE", raising=False)
    recipe = dataclasses.replace(TINY, epochs=3)
    models.train("lenet5", recipe)
    lines = capsys.readouterr().err.splitlines()
    assert lines[0] == "training lenet5 on digits: 0/3 (0%), started"
    assert re.fullmatch(r"training lenet5 on digits: 3/3 \(100%\), done in \d+s", lines[-1]), lines

    def every_step(*args, **kwargs):  # a line at every step, to count the steps
        return _progress.progress(*args, **kwargs, interval_s=0.0)

    monkeypatch.setattr(training, "show_progress", every_step)
    models.train("lenet5", recipe)
    steps = [line.split(": ")[1].split(" ")[0] for line in capsys.readouterr().err.splitlines()]
    assert steps == ["0/3", "1/3", "2/3", "3/3"]
    models.train("lenet5", recipe, progress=False)
    assert capsys.readouterr() == ("", "")


@pytest.mark.slow
def test_training_is_reproducible_and_learns(cache):
    recipe = dataclasses.replace(TINY, epochs=6)
    model_a, accuracy_a = models.train("lenet5", recipe, progress=False)
    model_b, accuracy_b = models.train("lenet5", recipe, progress=False)
    assert accuracy_a == accuracy_b
    for a, b in zip(model_a.state_dict().values(), model_b.state_dict().values(), strict=True):
        assert torch.equal(a, b)
    assert accuracy_a > 0.5  # chance is 0.1
    data = datasets.digits()
    assert models.evaluate(model_a, data.test_x, data.test_y) == accuracy_a


def test_trained_model_is_a_function_for_coded_inference(trained_models):
    """The shipped model serves as f: GCC decodes its logits from coded digit images."""
    model = trained_models["lenet5"]
    data = datasets.mnist()
    x = torch.as_tensor(data.test_x[:10])
    code = cc.GCC(10, 50)
    alive = cc.stragglers.random(50, 5, 0)
    with torch.no_grad():
        est = code.decode(model(code.encode(x))[alive], alive)
        truth = model(x)
    assert est.shape == truth.shape
    assert cc.metrics.relative_accuracy(est, truth) >= 0.8


def test_numpy_function_matches_the_module_and_takes_any_float_array():
    model = LeNet5(LeNet5Config(image_size=8)).eval()
    f = models.numpy_function(model)
    x = np.random.default_rng(0).normal(size=(4, 1, 8, 8))  # float64, as a code may produce
    with torch.no_grad():
        expected = model(torch.as_tensor(x, dtype=torch.float32)).numpy()
    out = f(x)
    assert isinstance(out, np.ndarray) and out.dtype == np.float32
    np.testing.assert_array_equal(out, expected)
    np.testing.assert_array_equal(
        f(x[:, :, ::-1, :]),
        model(torch.as_tensor(x[:, :, ::-1, :].copy(), dtype=torch.float32)).detach().numpy(),
    )
    with pytest.raises(ValueError, match="resnet"):
        models.numpy_function("resnet")


@pytest.mark.slow
def test_cli_trains_and_reports_accuracy(cache):
    result = CliRunner().invoke(
        app, ["models", "train", "lenet5", "--dataset", "digits", "--epochs", "1"], env={"COLUMNS": "200"}
    )
    assert result.exit_code == 0, result.output
    assert "held-out accuracy" in result.output and "digits" in result.output
    assert list(cache.glob("lenet5-digits-*.pt"))
    bad = CliRunner().invoke(app, ["models", "train", "resnet"])
    assert bad.exit_code == 2 and "lenet5" in bad.output  # names the choices


@pytest.mark.slow
@pytest.mark.parametrize(("name", "goal"), [("lenet5", 0.97), ("vit", 0.95)])
def test_default_recipes_reach_their_accuracy_goals(trained_models, name, goal):
    """The default recipes (MNIST, 4,000 training images) reach the held-out accuracy goals."""
    assert trained_models[name].test_accuracy >= goal
