"""The weights that ship with the package, the determinism of training, and the cache's lock."""

from __future__ import annotations

import dataclasses
import json
import os
import re
import subprocess
import sys
import textwrap

import pytest
import torch

import codedcomputing as cc
from codedcomputing import datasets, models
from codedcomputing.models import parity, retrain, shipped, training

TINY = models.TrainingRecipe("digits", epochs=2, lr=2e-3, weight_decay=1e-4)


@pytest.mark.parametrize("name", sorted(shipped.SHIPPED))
def test_every_shipped_entry_is_whole_and_says_where_it_came_from(name):
    weights, meta = shipped.shipped_paths(name)
    info = json.loads(meta.read_text())
    assert shipped.sha256(weights) == info["sha256"]
    assert shipped.read_sidecar(name) == info
    origin = info["provenance"]
    assert re.fullmatch(r"[0-9a-f]{40}", origin["commit"]) and origin["dirty"] is False
    assert f"'{name}'" in origin["command"] or f" {name} " in origin["command"]
    assert origin["torch_threads"] == training.TRAINING_THREADS and origin["training_seconds"] > 0
    base, k = shipped.SHIPPED[name]
    if k is None:  # the default recipe's weights, so that load uses them
        assert info["recipe"] == dataclasses.asdict(models.MODELS[base][1])
    else:
        assert info["recipe"] == dataclasses.asdict(parity.RECIPES[base]) and info["k"] == k
        assert info["base_recipe"] == dataclasses.asdict(models.MODELS[base][1])


@pytest.mark.parametrize("name", ["lenet5", pytest.param("vit", marks=pytest.mark.slow)])
def test_load_uses_the_shipped_weights_and_their_accuracy_is_what_the_sidecar_says(name, cache):
    model = models.load(name, progress=False)  # the guard in conftest fails any training
    assert models.is_cached(name) and not any(cache.iterdir())  # nothing written to the cache
    info = shipped.read_sidecar(name)
    data = datasets.mnist()
    assert models.evaluate(model, data.test_x, data.test_y) == info["test_accuracy"] == model.test_accuracy
    assert model.test_accuracy >= {"lenet5": 0.97, "vit": 0.95}[name]


@pytest.mark.slow  # scores each parity model on the 1,000 test digits: 2-5 s
@pytest.mark.parametrize("k", [2, 4])
def test_load_parity_uses_the_shipped_parity_models_and_their_figures_hold(k, cache):
    net = parity.load_parity("lenet5", k, progress=False)
    assert parity.is_cached("lenet5", k) and not any(cache.iterdir())
    info = shipped.read_sidecar(f"parity-lenet5-k{k}")
    assert net.k == k and net.validation == info["validation"]
    data = datasets.mnist()
    again = parity.evaluate_parity(
        models.load("lenet5"), net, data.test_x, data.test_y, k, encoder=net.encoder, rng=0
    ).summary()
    assert again == pytest.approx(info["validation"], abs=1e-12)
    assert info["validation"]["relative_accuracy"] > {2: 0.9, 4: 0.7}[k]


def test_another_recipe_does_not_use_the_shipped_weights(cache, untrained):
    other = dataclasses.replace(models.MODELS["lenet5"][1], seed=1)
    assert not models.is_cached("lenet5", other)
    models.load("lenet5", other, progress=False)
    assert untrained == [other] and models.weights_path("lenet5", other).exists()


def test_damaged_shipped_weights_warn_and_fall_back_to_the_cache(cache, untrained, tmp_path, monkeypatch):
    folder = tmp_path / "weights"
    folder.mkdir()
    for path in shipped.shipped_paths("lenet5"):
        (folder / path.name).write_bytes(path.read_bytes())
    damaged = bytearray((folder / "lenet5.pt").read_bytes())
    damaged[len(damaged) // 2] ^= 0xFF
    (folder / "lenet5.pt").write_bytes(bytes(damaged))
    monkeypatch.setattr(shipped, "WEIGHTS_DIR", folder)
    with pytest.warns(cc.errors.DamagedCacheWarning, match="SHA-256"):
        models.load("lenet5", progress=False)
    assert untrained == [models.MODELS["lenet5"][1]]  # trained (here: stood in) and cached


def test_the_split_is_shuffled_so_that_any_slice_holds_every_class():
    """The packages' own order is sorted by class: a slice of an unshuffled split holds one
    digit. The order is the split's seed's, so another seed gives another order."""
    for load in (datasets.mnist, datasets.digits):
        data = load()
        for part in (data.test_y, data.train_y):
            assert set(part[:100].tolist()) == set(range(10))
            assert (part[:-1] == part[1:]).mean() < 0.2  # no runs of one class
        assert not (load(seed=1).test_y[:50] == data.test_y[:50]).all()


@pytest.mark.slow
def test_training_gives_the_same_bits_whatever_torchs_thread_count(cache):
    before = torch.get_num_threads()
    states = []
    try:
        for threads in (1, 2):
            torch.set_num_threads(threads)
            model, _ = models.train("lenet5", TINY, progress=False)
            states.append(model.state_dict())
            assert torch.get_num_threads() == threads  # restored after training
    finally:
        torch.set_num_threads(before)
    for key, tensor in states[0].items():
        assert tensor.numpy().tobytes() == states[1][key].numpy().tobytes(), key


@pytest.mark.slow
def test_two_processes_training_one_entry_train_it_once(cache):
    """Started together, both want the same uncached entry: the lock makes one train and the
    other wait and read what the first cached; both end with the same weights."""
    script = textwrap.dedent(
        """
        import hashlib, sys
        from codedcomputing import models
        real = models.train
        def train(*args, **kwargs):
            print("trained", flush=True)
            return real(*args, **kwargs)
        models.train = train
        recipe = models.TrainingRecipe("digits", epochs=4, lr=2e-3, weight_decay=1e-4)
        model = models.load("lenet5", recipe, progress=False)
        print(hashlib.sha256(b"".join(t.numpy().tobytes() for t in model.state_dict().values())).hexdigest())
        """
    )
    env = {**os.environ, "CODEDCOMPUTING_CACHE": str(cache)}
    workers = [
        subprocess.Popen([sys.executable, "-c", script], env=env, stdout=subprocess.PIPE, text=True)
        for _ in range(2)
    ]
    outputs = [worker.communicate(timeout=600)[0].split() for worker in workers]
    assert [worker.returncode for worker in workers] == [0, 0]
    assert sum(out.count("trained") for out in outputs) == 1, outputs
    assert outputs[0][-1] == outputs[1][-1]
    assert not list(cache.glob(".*partial*"))


@pytest.mark.slow
def test_the_default_recipe_reproduces_the_shipped_accuracy():
    """LeNet-5 retrained from its default recipe: within 0.5 point of the shipped weights'
    test accuracy (bit for bit on the machine that trained them; another CPU may round
    otherwise)."""
    comparison = retrain.retrain("lenet5", progress=False)
    assert comparison.shipped_accuracy is not None
    assert abs(comparison.trained_accuracy - comparison.shipped_accuracy) <= 0.005, comparison.summary()
    assert ("bit for bit equal" in comparison.summary()) == comparison.equal


def test_the_cli_names_every_shipped_entry():
    from codedcomputing.cli import SHIPPED_NAMES

    assert SHIPPED_NAMES == tuple(shipped.SHIPPED)


@pytest.mark.slow
def test_coded_train_says_whether_the_retrained_weights_equal_the_shipped_ones(cache):
    from typer.testing import CliRunner

    from codedcomputing.cli import app

    result = CliRunner().invoke(app, ["train", "lenet5"], env={"COLUMNS": "200"})
    assert result.exit_code == 0, result.output
    assert re.search(
        r"lenet5: (bit for bit equal to the shipped weights|differs from the shipped)", result.output
    )
    assert CliRunner().invoke(app, ["train", "resnet"]).exit_code == 2
