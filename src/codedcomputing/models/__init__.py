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
import warnings
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np

from .. import datasets
from ..cache import atomic_path, cache_dir
from ..errors import DamagedCacheWarning

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
    when nothing is cached or ``retrain``. The test accuracy is in ``model.test_accuracy``.

    A cached entry is checked before it is used: the JSON sidecar's schema and bounds (the
    model's name, the recipe it was trained with, the dataset's image size, an accuracy in
    [0, 1]) first, then the weights (a state dict of exactly this model's tensors, all
    finite, loaded with ``weights_only=True``). An entry that fails, a damaged file or one
    from another recipe, is a cache miss: a :class:`~codedcomputing.errors.DamagedCacheWarning`
    names the file and what was wrong, and the model is retrained and cached anew (the
    recipes are seeded, so this gives the weights the entry should have held).
    """
    import torch

    _check_name(name)
    build, default = MODELS[name]
    recipe = recipe or default
    weights, meta = _paths(name, recipe)
    if weights.exists() and meta.exists() and not retrain:
        try:
            return _cached(name, recipe, build, weights, meta)
        except _DamagedEntry as err:
            warnings.warn(
                f"{err.path}: {err}; retraining {name} (or run `coded models train {name} --retrain`)",
                DamagedCacheWarning,
                stacklevel=2,
            )
    model, accuracy = train(name, recipe, progress=progress)
    with atomic_path(weights) as partial:
        torch.save(model.state_dict(), partial)
    sidecar = {
        "model": name,
        "recipe": asdict(recipe),
        "image_size": model.config.image_size,
        "test_accuracy": accuracy,
    }
    with atomic_path(meta) as partial:
        partial.write_text(json.dumps(sidecar, indent=2))
    model.test_accuracy = accuracy
    return model


class _DamagedEntry(Exception):
    def __init__(self, path: Path, reason: str):
        super().__init__(reason)
        self.path = path


def _cached(name: str, recipe: TrainingRecipe, build, weights: Path, meta: Path):
    """The cached model, or :class:`_DamagedEntry` saying which file failed which check."""
    import torch

    try:
        info = json.loads(meta.read_text())
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as err:
        raise _DamagedEntry(meta, f"unreadable sidecar ({type(err).__name__}: {err})") from None
    expected = {"model": name, "recipe": asdict(recipe), "image_size": datasets.IMAGE_SIZES[recipe.dataset]}
    keys = sorted({*expected, "test_accuracy"})
    if not isinstance(info, dict) or sorted(info) != keys:
        got = sorted(info) if isinstance(info, dict) else type(info).__name__
        raise _DamagedEntry(meta, f"the sidecar must hold the keys {keys}, got {got}")
    for key, value in expected.items():
        if info[key] != value:
            raise _DamagedEntry(meta, f"the sidecar's {key} is {info[key]!r}, expected {value!r}")
    accuracy = info["test_accuracy"]
    if isinstance(accuracy, bool) or not isinstance(accuracy, (int, float)) or not 0.0 <= accuracy <= 1.0:
        raise _DamagedEntry(meta, f"the sidecar's test_accuracy must be a number in [0, 1], got {accuracy!r}")
    model = build(info["image_size"])
    try:
        state = torch.load(weights, weights_only=True)
    except Exception as err:  # truncated, empty, random bytes, pickled code: all refused
        raise _DamagedEntry(weights, f"unreadable weights ({type(err).__name__}: {err})"[:300]) from None
    own = model.state_dict()
    if not isinstance(state, dict) or set(state) != set(own):
        raise _DamagedEntry(weights, f"not a state dict of {name}'s {len(own)} tensors")
    for key, tensor in state.items():
        if not isinstance(tensor, torch.Tensor) or tensor.shape != own[key].shape:
            shape = tuple(tensor.shape) if isinstance(tensor, torch.Tensor) else type(tensor).__name__
            raise _DamagedEntry(weights, f"{key} has shape {shape}, expected {tuple(own[key].shape)}")
        if tensor.is_floating_point() and not bool(tensor.isfinite().all()):
            raise _DamagedEntry(weights, f"{key} holds NaN or inf")
    model.load_state_dict(state)
    model.eval()
    model.test_accuracy = float(accuracy)
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
