"""Models, real datasets and the weight cache."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
import torch
from typer.testing import CliRunner

import codedcomputing as cc
from codedcomputing import datasets, models
from codedcomputing.cli import app
from codedcomputing.models.lenet import LeNet5, LeNet5Config
from codedcomputing.models.vit import ViT, ViTConfig

TINY = models.TrainingRecipe("digits", epochs=1, lr=2e-3, weight_decay=1e-4)


@pytest.fixture
def cache(tmp_path, monkeypatch):
    monkeypatch.setenv("CODEDCOMPUTING_CACHE", str(tmp_path))
    return tmp_path


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


def test_load_trains_once_then_reads_the_cache(cache, monkeypatch):
    first = models.load("lenet5", TINY, progress=False)
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


def test_trained_model_is_a_function_for_coded_inference(cache):
    """The cached model serves as f: GCC decodes its logits from coded digit images."""
    model = models.load("lenet5", dataclasses.replace(TINY, epochs=3), progress=False)
    data = datasets.digits()
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
