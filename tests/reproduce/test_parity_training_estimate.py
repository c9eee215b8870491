"""The reproduction's time estimate counts the learned parity models it will train."""

from __future__ import annotations

from codedcomputing import models
from codedcomputing.experiments import EXPERIMENTS, frontier
from codedcomputing.models import parity
from codedcomputing.reproduce.run import PARITY_TRAIN_S, reproduce


def _estimate(tmp_path, monkeypatch, cached: set[int]) -> str:
    from rich.console import Console

    def not_run(config, seed, *, progress=True):
        raise RuntimeError("not run in this test")

    def path(base, k, recipe=None, *, base_recipe=None):
        weights = tmp_path / "cache" / f"parity-{base}-k{k}.pt"
        if k in cached:
            weights.parent.mkdir(exist_ok=True)
            weights.touch()
            weights.with_suffix(".json").touch()
        return weights

    monkeypatch.setattr(EXPERIMENTS["frontier"], "run", not_run)
    monkeypatch.setattr(models, "is_cached", lambda name, recipe=None: True)
    monkeypatch.setattr(parity, "parity_path", path)
    console = Console(record=True, width=300)
    reproduce(tmp_path / "out", quick=True, only="frontier", progress=False, console=console)
    return console.export_text()


def test_frontier_uses_the_parity_models_of_its_levels():
    assert frontier.parity_models_used(frontier.QUICK) == [("lenet5", 2), ("lenet5", 4)]
    assert frontier.parity_models_used(frontier.Config(levels=(1.5, 2.0))) == [("lenet5", 2)]
    assert frontier.parity_models_used(frontier.Config(parity="deployed-model")) == []
    assert frontier.parity_models_used(frontier.Config(task="linear")) == []
    assert set(frontier.parity_models_used(frontier.Config(task="vit"))) <= set(PARITY_TRAIN_S)


def test_the_expected_time_adds_training_for_parity_models_not_cached(tmp_path, monkeypatch):
    said = _estimate(tmp_path, monkeypatch, cached={2})
    assert "plus about 5 min 20 s to train lenet5's parity model (k = 4) (not cached yet)" in said
    assert "(k = 2)" not in said
    assert "to train" not in _estimate(tmp_path, monkeypatch, cached={2, 4})
