"""Damaged cache files are rebuilt, with a warning naming the file."""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch

import codedcomputing as cc
from codedcomputing import datasets, models

TINY = models.TrainingRecipe("digits", epochs=1, lr=2e-3, weight_decay=1e-4)


def _damage_weights(kind: str):
    def damage(weights, meta):
        if kind == "truncated":
            weights.write_bytes(weights.read_bytes()[: weights.stat().st_size // 2])
        elif kind == "empty":
            weights.write_bytes(b"")
        elif kind == "random":
            weights.write_bytes(np.random.default_rng(0).bytes(4096))
        elif kind == "nan":
            state = torch.load(weights, weights_only=True)
            next(iter(state.values())).fill_(float("nan"))
            torch.save(state, weights)

    return damage


def _damage_sidecar(change):
    def damage(weights, meta):
        info = json.loads(meta.read_text())
        meta.write_text(json.dumps(change(info)))

    return damage


DAMAGE = {
    "weights-truncated": (_damage_weights("truncated"), ".pt"),
    "weights-empty": (_damage_weights("empty"), ".pt"),
    "weights-random-bytes": (_damage_weights("random"), ".pt"),
    "weights-nan": (_damage_weights("nan"), "NaN"),
    "sidecar-a-list": (_damage_sidecar(lambda info: [info]), "keys"),
    "sidecar-missing-key": (_damage_sidecar(lambda info: {k: info[k] for k in ("model", "recipe")}), "keys"),
    "sidecar-huge-image": (_damage_sidecar(lambda info: {**info, "image_size": 10**6}), "image_size"),
    "sidecar-accuracy-text": (_damage_sidecar(lambda info: {**info, "test_accuracy": "high"}), "accuracy"),
    "sidecar-not-json": (lambda weights, meta: meta.write_text("{"), "sidecar"),
}


@pytest.mark.parametrize("damage", sorted(DAMAGE))
def test_a_damaged_model_cache_entry_is_retrained_with_a_warning(tmp_path, monkeypatch, untrained, damage):
    monkeypatch.setenv("CODEDCOMPUTING_CACHE", str(tmp_path))
    first = models.load("lenet5", TINY, progress=False)
    weights = models.weights_path("lenet5", TINY)
    meta = weights.with_suffix(".json")
    spoil, needle = DAMAGE[damage]
    spoil(weights, meta)
    with pytest.warns(cc.errors.DamagedCacheWarning, match=needle) as caught:
        again = models.load("lenet5", TINY, progress=False)
    assert str(tmp_path) in str(caught[0].message) and "retrain" in str(caught[0].message)
    x = torch.as_tensor(datasets.digits().test_x[:8])
    assert torch.equal(first(x), again(x)) and again.test_accuracy == first.test_accuracy
    assert models.load("lenet5", TINY) is not None  # the entry is whole again: no warning
    assert untrained == [TINY, TINY]
    assert not list(tmp_path.glob(".*partial*"))


def test_a_damaged_data_cache_is_parsed_again(tmp_path, monkeypatch):
    monkeypatch.setenv("CODEDCOMPUTING_CACHE", str(tmp_path))
    calls = []

    def loader():
        calls.append(1)
        return np.arange(12).reshape(3, 4), np.array([0, 1, 2])

    images, _ = datasets._parsed("toy", loader)
    (tmp_path / "toy-data.npz").write_bytes(b"not a zip file")
    with pytest.warns(cc.errors.DamagedCacheWarning, match="toy-data.npz"):
        again, _ = datasets._parsed("toy", loader)
    np.testing.assert_array_equal(again, images)
    assert len(calls) == 2
    datasets._parsed("toy", loader)
    assert len(calls) == 2  # read from the rebuilt file
