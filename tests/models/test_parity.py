"""Learned parity models (ParM): the encoders, the subtraction decoder, the evaluation, the
cache and the seeded training."""

from __future__ import annotations

import dataclasses
import json
import re

import numpy as np
import pytest
import torch

import codedcomputing as cc
from codedcomputing import datasets, models
from codedcomputing.models import parity

TINY_BASE = models.TrainingRecipe("digits", epochs=1, lr=2e-3, weight_decay=1e-4)
TINY = parity.ParityRecipe(epochs=1, groups_per_epoch=200, batch_size=50)


class Linear(torch.nn.Module):
    """A linear stand-in for a deployed model, ``F(x) = W vec(x)``, in float64: then
    ``F(x_1 + ... + x_k) = F(x_1) + ... + F(x_k)``, so ``F_P = F`` is an exact parity model."""

    def __init__(self, side: int, seed: int = 0):
        super().__init__()
        rng = np.random.default_rng(seed)
        self.weight = torch.as_tensor(rng.standard_normal((side * side, 10)))

    def forward(self, x):
        return x.double().flatten(1) @ self.weight


def test_the_subtraction_decoder_is_exact_for_a_linear_model():
    rng = np.random.default_rng(1)
    f = Linear(8)
    group = rng.random((3, 1, 8, 8))  # k = 3 queries
    with torch.no_grad():
        outputs = f(torch.as_tensor(group)).numpy()
        parity_output = f(torch.as_tensor(parity.encode(group, "addition")[None])).numpy()[0]
    for missing in range(3):
        others = np.delete(outputs, missing, axis=0)
        np.testing.assert_allclose(parity.reconstruct(parity_output, others), outputs[missing], atol=1e-10)
        decoded = parity.reconstruct(torch.as_tensor(parity_output), torch.as_tensor(others))
        assert isinstance(decoded, torch.Tensor)
        np.testing.assert_allclose(decoded.numpy(), outputs[missing], atol=1e-10)
    # a wrong parity output is not silently "exact": the error passes through one for one
    shifted = parity.reconstruct(parity_output + 1.0, np.delete(outputs, 0, axis=0))
    np.testing.assert_allclose(shifted - outputs[0], 1.0, atol=1e-10)


def test_the_evaluation_scores_an_exact_parity_model_perfectly_and_a_wrong_one_not():
    data = datasets.digits()
    images, labels = data.test_x[:120], data.test_y[:120]
    f = Linear(8)
    result = parity.evaluate_parity(f, f, images, labels, 4, encoder="addition", rng=3)
    assert result.groups.shape == (30, 4) and sorted(result.groups.ravel()) == list(range(120))
    summary = result.summary()
    assert summary["relative_accuracy"] == 1.0 and summary["parity_r2"] == pytest.approx(1.0, abs=1e-12)
    # with an exact parity, the decoded answer is right exactly when the deployed model is
    assert np.array_equal(result.label_correct, result.base_correct)
    truth = f(torch.as_tensor(images)).argmax(1).numpy() == labels
    assert summary["base_accuracy"] == pytest.approx(truth.mean())
    wrong = parity.evaluate_parity(f, Linear(8, seed=1), images, labels, 4, encoder="addition", rng=3)
    wrong = wrong.summary()
    assert wrong["relative_accuracy"] < 0.5 and wrong["parity_r2"] < 0.5


def test_the_addition_encoder_sums_and_the_concatenation_encoder_tiles_shrunk_queries():
    rng = np.random.default_rng(2)
    queries = rng.random((5, 4, 1, 28, 28)).astype(np.float32)
    np.testing.assert_allclose(parity.encode(queries, "addition"), queries.sum(1), rtol=1e-6)
    tiled = parity.encode(queries, "concatenation")
    assert tiled.shape == (5, 1, 28, 28)
    # k = 4: a 2 x 2 grid of 14 x 14 cells, each the 2 x 2 block means of its query
    blocks = queries.reshape(5, 4, 1, 14, 2, 14, 2).mean((4, 6))
    np.testing.assert_allclose(tiled[:, :, :14, 14:], blocks[:, 1], rtol=1e-5)
    np.testing.assert_allclose(tiled[:, :, 14:, :14], blocks[:, 2], rtol=1e-5)
    # k = 2: side by side, each query's columns averaged in pairs
    pair = parity.encode(queries[:, :2], "concatenation")
    np.testing.assert_allclose(pair[:, :, :, 14:], queries[:, 1].reshape(5, 1, 28, 14, 2).mean(-1), rtol=1e-5)
    as_torch = parity.encode(torch.as_tensor(queries), "concatenation")
    assert isinstance(as_torch, torch.Tensor) and np.allclose(as_torch.numpy(), tiled)


@pytest.mark.parametrize("k", [1, 0, -2, 2.0, "2", True, None])
def test_a_bad_k_is_refused_naming_it(cache, k):
    for call in (
        lambda: parity.load_parity("lenet5", k),
        lambda: parity.train_parity("lenet5", k),
        lambda: parity.parity_path("lenet5", k),
    ):
        with pytest.raises(ValueError, match=r"\bk\b"):
            call()
    assert not list(cache.iterdir())  # refused before anything was trained


def test_bad_names_and_recipes_are_refused_naming_the_parameter(cache):
    with pytest.raises(ValueError, match="base"):
        parity.load_parity("resnet", 2)
    with pytest.raises(ValueError, match="encoder"):
        parity.load_parity("lenet5", 2, parity.ParityRecipe(encoder="xor"))
    with pytest.raises(ValueError, match="encoder"):
        parity.encode(np.zeros((2, 1, 8, 8)), "xor")
    with pytest.raises(ValueError, match="recipe"):
        parity.load_parity("lenet5", 2, TINY_BASE)
    with pytest.raises(ValueError, match="base_recipe"):
        parity.load_parity("lenet5", 2, base_recipe=TINY)
    for field, value in [("epochs", 0), ("batch_size", 2.0), ("lr", -1e-3), ("augment", "yes"), ("seed", -1)]:
        with pytest.raises(ValueError, match=f"recipe.{field}"):
            parity.load_parity("lenet5", 2, dataclasses.replace(TINY, **{field: value}))
    with pytest.raises(ValueError, match="other_outputs"):
        parity.reconstruct(np.zeros(10), np.zeros((1, 9)))
    with pytest.raises(ValueError, match="queries"):
        parity.encode(np.zeros((8, 8)))
    assert not list(cache.iterdir())


def test_the_cache_key_is_base_k_and_both_recipes(cache):
    path = parity.parity_path("lenet5", 2, TINY, base_recipe=TINY_BASE)
    assert path.parent == cache and re.fullmatch(r"parity-lenet5-k2-[0-9a-f]{12}\.pt", path.name)
    assert parity.parity_path("lenet5", 2, dataclasses.replace(TINY), base_recipe=TINY_BASE) == path
    others = {
        parity.parity_path("lenet5", 4, TINY, base_recipe=TINY_BASE),
        parity.parity_path("vit", 2, TINY, base_recipe=TINY_BASE),
        parity.parity_path("lenet5", 2, TINY),
        parity.parity_path("lenet5", 2, TINY, base_recipe=dataclasses.replace(TINY_BASE, seed=1)),
        *(
            parity.parity_path("lenet5", 2, dataclasses.replace(TINY, **{f.name: v}), base_recipe=TINY_BASE)
            for f, v in zip(
                dataclasses.fields(TINY), ["addition", 2, 201, 1e-3, 0.0, 51, False, 1], strict=True
            )
        ),
    }
    assert path not in others and len(others) == 12


@pytest.mark.slow
def test_load_parity_trains_once_then_reads_the_cache(cache, monkeypatch):
    assert not parity.is_cached("lenet5", 2, TINY, base_recipe=TINY_BASE)
    first = parity.load_parity("lenet5", 2, TINY, base_recipe=TINY_BASE, progress=False)
    assert parity.is_cached("lenet5", 2, TINY, base_recipe=TINY_BASE)
    assert not parity.is_cached("lenet5", 4, TINY, base_recipe=TINY_BASE)
    assert first.k == 2 and first.encoder == "concatenation" and first.training_seconds > 0
    assert set(first.validation) == set(parity.VALIDATION)
    assert 0.0 <= first.validation["relative_accuracy"] <= 1.0
    meta = json.loads(
        parity.parity_path("lenet5", 2, TINY, base_recipe=TINY_BASE).with_suffix(".json").read_text()
    )
    assert meta["training_seconds"] == first.training_seconds and meta["validation"] == first.validation

    def no_training(*args, **kwargs):
        raise AssertionError("load_parity retrained although the parity model was cached")

    monkeypatch.setattr(parity, "train_parity", no_training)
    second = parity.load_parity("lenet5", 2, TINY, base_recipe=TINY_BASE)
    groups = datasets.digits().test_x[:16].reshape(8, 2, 1, 8, 8)
    x = torch.as_tensor(parity.encode(groups))
    assert torch.equal(first(x), second(x)) and not second.training
    np.testing.assert_array_equal(parity.parity_function(second)(groups), first(x).detach().numpy())
    with pytest.raises(ValueError, match="groups"):
        parity.parity_function(second)(groups.reshape(4, 4, 1, 8, 8))
    assert second.training_seconds == first.training_seconds and second.validation == first.validation


def _spoil_sidecar(change):
    def spoil(weights, meta):
        meta.write_text(json.dumps(change(json.loads(meta.read_text()))))

    return spoil


DAMAGE = {
    "weights-truncated": (lambda w, m: w.write_bytes(w.read_bytes()[:100]), ".pt"),
    "sidecar-bad-seconds": (_spoil_sidecar(lambda i: {**i, "training_seconds": -1}), "training_seconds"),
    "sidecar-bad-figure": (
        _spoil_sidecar(lambda i: {**i, "validation": {**i["validation"], "accuracy": "high"}}),
        "accuracy",
    ),
    "sidecar-other-k": (_spoil_sidecar(lambda i: {**i, "k": 4}), "k"),
}


@pytest.mark.slow
@pytest.mark.parametrize("damage", sorted(DAMAGE))
def test_a_damaged_parity_entry_is_retrained_with_a_warning(cache, damage):
    first = parity.load_parity("lenet5", 2, TINY, base_recipe=TINY_BASE, progress=False)
    weights = parity.parity_path("lenet5", 2, TINY, base_recipe=TINY_BASE)
    spoil, needle = DAMAGE[damage]
    spoil(weights, weights.with_suffix(".json"))
    with pytest.warns(cc.errors.DamagedCacheWarning, match=needle) as caught:
        again = parity.load_parity("lenet5", 2, TINY, base_recipe=TINY_BASE, progress=False)
    assert str(cache) in str(caught[0].message) and "retrain" in str(caught[0].message)
    x = torch.as_tensor(datasets.digits().test_x[:8])
    assert torch.equal(first(x), again(x)) and again.validation == first.validation


@pytest.mark.slow
def test_seeded_training_is_deterministic(cache):
    one, _ = parity.train_parity("lenet5", 4, TINY, base_recipe=TINY_BASE, progress=False)
    two, _ = parity.train_parity("lenet5", 4, TINY, base_recipe=TINY_BASE, progress=False)
    other, _ = parity.train_parity(
        "lenet5", 4, dataclasses.replace(TINY, seed=1), base_recipe=TINY_BASE, progress=False
    )
    for key, tensor in one.state_dict().items():
        assert torch.equal(tensor, two.state_dict()[key]), key
    assert any(not torch.equal(t, other.state_dict()[key]) for key, t in one.state_dict().items())


def test_every_registry_model_has_a_default_parity_recipe():
    assert set(parity.RECIPES) == set(models.MODELS)
    for recipe in parity.RECIPES.values():
        assert recipe.encoder in parity.ENCODERS and recipe.epochs >= 1
