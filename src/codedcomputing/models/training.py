"""How the registry's models are trained and scored: the recipe, AdamW with a one-cycle
schedule, random affine augmentation, all seeded by the recipe. The registry
(:mod:`codedcomputing.models`) picks the model and caches what :func:`fit` returns; this
module imports nothing of it, so the two import one way.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass

import numpy as np

from .. import datasets
from .._progress import progress as show_progress

__all__ = ["TRAINING_THREADS", "TrainingRecipe", "evaluate", "fit"]

# Training runs on this many torch threads, whatever the process's setting: the same recipe then
# gives the same weights bit for bit on one machine. With 2 threads instead of 1, LeNet-5's and
# the ViT's weights differed after one epoch (the kernels split their sums by thread), while one
# thread cost about 10% of the time here (LeNet-5, 2 epochs: 2.2 s against 2.0 s).
TRAINING_THREADS = 1


@contextmanager
def deterministic_threads() -> Iterator[None]:
    """Run the block on :data:`TRAINING_THREADS` torch threads, then restore the setting."""
    import torch

    before = torch.get_num_threads()
    torch.set_num_threads(TRAINING_THREADS)
    try:
        yield
    finally:
        torch.set_num_threads(before)


@dataclass(frozen=True)
class TrainingRecipe:
    """How a model is trained: AdamW with a one-cycle schedule and random affine augmentation
    (rotation, scale, shift), the whole recipe seeded. Every field is part of the weight
    cache's key (:func:`codedcomputing.models.weights_path`)."""

    dataset: str
    epochs: int
    lr: float
    weight_decay: float
    batch_size: int = 64
    rotation: float = 0.2  # radians, +-
    scale: float = 0.1  # +- relative
    shift: float = 0.12  # +- fraction of the half-width
    seed: int = 0


def _augment(x, recipe: TrainingRecipe, generator):
    """A random rotation, scale and shift of each image in the batch ``x``, within the
    recipe's bounds, drawn from ``generator``."""
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


def fit(build: Callable, recipe: TrainingRecipe, *, description: str = "training", progress: bool = True):
    """Train the model ``build(image_size)`` from scratch with ``recipe`` on its dataset.

    Returns ``(model, test_accuracy)``. Deterministic for a given recipe on one machine, bit for
    bit, whatever the load and torch's thread count (the model is built after seeding, so its
    initial weights are the recipe's too; training runs on :data:`TRAINING_THREADS`). ``progress``
    shows one step per epoch, as ``description`` (:func:`codedcomputing._progress.progress`):
    a bar on a terminal, a line every few seconds on stderr otherwise.
    """
    with deterministic_threads():
        return _fit(build, recipe, description, progress)


def _fit(build: Callable, recipe: TrainingRecipe, description: str, progress: bool):
    import torch
    import torch.nn.functional as F

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
    with show_progress(description, recipe.epochs, enabled=progress) as advance:
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
            advance()
    model.eval()
    return model, evaluate(model, data.test_x, data.test_y)
