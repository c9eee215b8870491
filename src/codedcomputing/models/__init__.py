"""Models for coded inference: LeNet-5 and a small ViT, trained on real digits and cached.

    model = cc.models.load("lenet5")      # trains on first use (progress bar), then cached
    logits = model(images)                # a torch module: any batch of (B, 1, 28, 28)
    f = cc.models.numpy_function("lenet5")  # the same as a numpy batch function, for the codes

Weights are cached as ``state_dict`` files loaded with ``weights_only=True`` (no pickled
code runs on load) in ``$CODEDCOMPUTING_CACHE``, else ``$XDG_CACHE_HOME/codedcomputing``,
else ``~/.cache/codedcomputing``.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np

from .. import datasets
from ..cache import cache_dir

__all__ = [
    "MODELS",
    "TrainingRecipe",
    "cache_dir",
    "evaluate",
    "load",
    "numpy_function",
    "train",
    "weights_path",
]


@dataclass(frozen=True)
class TrainingRecipe:
    """How a model is trained: AdamW with a one-cycle schedule and random affine augmentation
    (rotation, scale, shift), the whole recipe seeded."""

    dataset: str
    epochs: int
    lr: float
    weight_decay: float
    batch_size: int = 64
    rotation: float = 0.2  # radians, +-
    scale: float = 0.1  # +- relative
    shift: float = 0.12  # +- fraction of the half-width
    seed: int = 0


def _lenet5(image_size: int):
    from .lenet import LeNet5, LeNet5Config

    return LeNet5(LeNet5Config(image_size=image_size))


def _vit(image_size: int):
    from .vit import ViT, ViTConfig

    return ViT(ViTConfig(image_size=image_size, patch_size=7 if image_size == 28 else 2))


# name -> (constructor taking the image side, default recipe)
MODELS: dict[str, tuple[Callable, TrainingRecipe]] = {
    "lenet5": (_lenet5, TrainingRecipe("mnist", epochs=30, lr=2e-3, weight_decay=1e-4)),
    "vit": (_vit, TrainingRecipe("mnist", epochs=40, lr=1e-3, weight_decay=5e-2)),
}


def _check_name(name: str) -> None:
    if name not in MODELS:
        raise ValueError(f"model must be one of {sorted(MODELS)}, got {name!r}")


def weights_path(name: str, recipe: TrainingRecipe) -> Path:
    """Where ``load`` caches the weights of ``name`` trained with ``recipe``."""
    return cache_dir() / f"{name}-{recipe.dataset}-seed{recipe.seed}-e{recipe.epochs}.pt"


def _paths(name: str, recipe: TrainingRecipe) -> tuple[Path, Path]:
    weights = weights_path(name, recipe)
    return weights, weights.with_suffix(".json")


def _augment(x, recipe: TrainingRecipe, generator):
    import torch
    import torch.nn.functional as F

    b = x.shape[0]

    def uniform(*shape):
        return (torch.rand(*shape, generator=generator) - 0.5) * 2

    angle, scale = uniform(b) * recipe.rotation, 1 + uniform(b) * recipe.scale
    shift = uniform(b, 2) * recipe.shift
    cos, sin = torch.cos(angle) * scale, torch.sin(angle) * scale
    theta = torch.stack(
        [torch.stack([cos, -sin, shift[:, 0]], 1), torch.stack([sin, cos, shift[:, 1]], 1)], 1
    )
    grid = F.affine_grid(theta, list(x.shape), align_corners=False)
    return F.grid_sample(x, grid, align_corners=False)


def evaluate(model, images: np.ndarray, labels: np.ndarray, batch_size: int = 500) -> float:
    """Top-1 accuracy of ``model`` on ``(images, labels)``."""
    import torch

    model.eval()
    correct = 0
    with torch.no_grad():
        for start in range(0, len(images), batch_size):
            logits = model(torch.as_tensor(images[start : start + batch_size]))
            correct += int((logits.argmax(1).numpy() == labels[start : start + batch_size]).sum())
    return correct / len(images)


def train(name: str, recipe: TrainingRecipe | None = None, *, progress: bool = True):
    """Train model ``name`` from scratch with ``recipe`` (default: the model's own).

    Returns ``(model, test_accuracy)``. Deterministic for a given recipe on one machine.
    """
    import torch
    import torch.nn.functional as F

    _check_name(name)
    build, default = MODELS[name]
    recipe = recipe or default
    data = datasets.load(recipe.dataset)
    torch.manual_seed(recipe.seed)
    generator = torch.Generator().manual_seed(recipe.seed)
    model = build(data.image_size)
    x, y = torch.as_tensor(data.train_x), torch.as_tensor(data.train_y)
    steps_per_epoch = -(-len(x) // recipe.batch_size)
    optimizer = torch.optim.AdamW(model.parameters(), lr=recipe.lr, weight_decay=recipe.weight_decay)
    schedule = torch.optim.lr_scheduler.OneCycleLR(
        optimizer, max_lr=recipe.lr, total_steps=recipe.epochs * steps_per_epoch
    )
    from rich.progress import Progress

    with Progress(disable=not progress, transient=True) as bar:
        task = bar.add_task(f"training {name} on {recipe.dataset}", total=recipe.epochs)
        for _ in range(recipe.epochs):
            model.train()
            order = torch.randperm(len(x), generator=generator)
            for start in range(0, len(x), recipe.batch_size):
                batch = order[start : start + recipe.batch_size]
                loss = F.cross_entropy(model(_augment(x[batch], recipe, generator)), y[batch])
                optimizer.zero_grad()
                loss.backward()
                optimizer.step()
                schedule.step()
            bar.advance(task)
    model.eval()
    return model, evaluate(model, data.test_x, data.test_y)


def load(name: str, recipe: TrainingRecipe | None = None, *, progress: bool = True, retrain: bool = False):
    """Model ``name`` with trained weights from the cache, training (and caching) it first
    when nothing is cached or ``retrain``. The test accuracy is in ``model.test_accuracy``."""
    import torch

    _check_name(name)
    build, default = MODELS[name]
    recipe = recipe or default
    weights, meta = _paths(name, recipe)
    if weights.exists() and meta.exists() and not retrain:
        info = json.loads(meta.read_text())
        model = build(info["image_size"])
        model.load_state_dict(torch.load(weights, weights_only=True))
        model.eval()
        model.test_accuracy = info["test_accuracy"]
        return model
    model, accuracy = train(name, recipe, progress=progress)
    weights.parent.mkdir(parents=True, exist_ok=True)
    torch.save(model.state_dict(), weights)
    meta.write_text(
        json.dumps(
            {
                "model": name,
                "recipe": asdict(recipe),
                "image_size": model.config.image_size,
                "test_accuracy": accuracy,
            },
            indent=2,
        )
    )
    model.test_accuracy = accuracy
    return model


def numpy_function(model, *, progress: bool = True) -> Callable[[np.ndarray], np.ndarray]:
    """``model`` (a name in :data:`MODELS`, loaded with :func:`load`, or a torch module) as a
    numpy batch function: images ``(B, 1, 28, 28)`` as float32 in, logits ``(B, 10)`` out,
    without autograd."""
    import torch

    if isinstance(model, str):
        model = load(model, progress=progress)

    def f(x: np.ndarray) -> np.ndarray:
        with torch.no_grad():
            return model(torch.as_tensor(np.ascontiguousarray(x, dtype=np.float32))).numpy()

    return f
