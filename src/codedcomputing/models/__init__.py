"""Models for coded inference: LeNet-5 and a small ViT, trained on real digits. ::

    model = cc.models.load("lenet5")      # the weights shipped with the package: nothing trains
    logits = model(images)                # a torch module: any batch of (B, 1, 28, 28)
    f = cc.models.numpy_function("lenet5")  # the same as a numpy batch function, for the codes

The default recipes' weights ship with the package (:mod:`.shipped`: LeNet-5, the ViT and
LeNet-5's ParM parity models for k = 2 and 4, each with its recipe, SHA-256, test accuracy and
the commit and command that trained it). Other recipes train on first use; their weights are
cached as ``state_dict`` files loaded with ``weights_only=True`` (no pickled
code runs on load) in ``$CODEDCOMPUTING_CACHE``, else ``$XDG_CACHE_HOME/codedcomputing``,
else ``~/.cache/codedcomputing``, one file per model and recipe (:func:`weights_path`).
This module is the registry and the cache; the recipe and the training loop are in
:mod:`.training`; learned parity models for the registry's models (ParM) are in
:mod:`.parity`, cached and checked the same way.
"""

from __future__ import annotations

import hashlib
import json
import warnings
from collections.abc import Callable
from dataclasses import asdict
from pathlib import Path

import numpy as np

from .. import datasets
from .._validation import check_choice
from ..cache import atomic_path, cache_dir, entry_lock
from ..errors import DamagedCacheWarning
from . import shipped
from .training import TrainingRecipe, evaluate, fit

__all__ = [
    "MODELS",
    "TrainingRecipe",
    "evaluate",
    "is_cached",
    "is_shipped",
    "load",
    "numpy_function",
    "train",
    "weights_path",
]


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
    check_choice(name, "model", sorted(MODELS))


def train(name: str, recipe: TrainingRecipe | None = None, *, progress: bool = True):
    """Train model ``name`` from scratch with ``recipe`` (default: the model's own), showing
    one progress step per epoch (see :func:`.training.fit`).

    Returns ``(model, test_accuracy)``. Deterministic for a given recipe on one machine.
    """
    _check_name(name)
    build, default = MODELS[name]
    recipe = recipe or default
    return fit(build, recipe, description=f"training {name} on {recipe.dataset}", progress=progress)


def weights_path(name: str, recipe: TrainingRecipe) -> Path:
    """Where ``load`` caches the weights of ``name`` trained with ``recipe``:
    ``{name}-{dataset}-{key}.pt``, the key the first 12 hex digits of the SHA-256 of the
    whole recipe as canonical JSON. Any change to the recipe (learning rate, augmentation,
    batch size, ...) is another file, never stale weights; the key is the same in every
    process and on every machine (no ``hash()``, which Python salts per process)."""
    canonical = json.dumps(asdict(recipe), sort_keys=True, separators=(",", ":"))
    key = hashlib.sha256(canonical.encode()).hexdigest()[:12]
    return cache_dir() / f"{name}-{recipe.dataset}-{key}.pt"


def is_cached(name: str, recipe: TrainingRecipe | None = None) -> bool:
    """Whether :func:`load` has ``name`` (with ``recipe``, default its own) without training:
    shipped with the package for that recipe, or its weights and sidecar in the cache
    (:func:`load` still checks them, and retrains an entry that fails)."""
    if is_shipped(name, recipe):
        return True
    weights, meta = _paths(name, recipe or MODELS[name][1])
    return weights.exists() and meta.exists()


def is_shipped(name: str, recipe: TrainingRecipe | None = None) -> bool:
    """Whether :func:`load` reads ``name`` (with ``recipe``, default its own) from the weights
    shipped with the package: only the default recipe's weights ship."""
    _check_name(name)
    default = MODELS[name][1]
    return (recipe or default) == default and all(path.exists() for path in shipped.shipped_paths(name))


def _paths(name: str, recipe: TrainingRecipe) -> tuple[Path, Path]:
    weights = weights_path(name, recipe)
    return weights, weights.with_suffix(".json")


def load(name: str, recipe: TrainingRecipe | None = None, *, progress: bool = True, retrain: bool = False):
    """Model ``name`` with trained weights. The test accuracy is in ``model.test_accuracy``.

    With the default recipe the weights that ship with the package are used
    (:mod:`.shipped`; nothing trains). Another recipe, or a default one whose shipped files are
    missing, is read from the cache, training (and caching) it first when nothing is cached or
    ``retrain``. Two processes (or threads) that need the same entry at once are serialised by
    a lock on the entry (:func:`~codedcomputing.cache.entry_lock`): the second waits, then reads
    what the first cached, so one entry is trained once and its file is never overwritten by a
    concurrent trainer.

    A cached entry is checked before it is used: the JSON sidecar's schema and bounds (the
    model's name, the recipe it was trained with, the dataset's image size, an accuracy in
    [0, 1]) first, then the weights (a state dict of exactly this model's tensors, all
    finite, loaded with ``weights_only=True``). An entry that fails, a damaged file or one
    from another recipe, is a cache miss: a :class:`~codedcomputing.errors.DamagedCacheWarning`
    names the file and what was wrong, and the model is retrained and cached anew (the
    recipes are seeded, so this gives the weights the entry should have held). A shipped file
    that fails its checks (its SHA-256, its sidecar) warns the same way and falls back to the
    cache.
    """
    import torch

    _check_name(name)
    build, default = MODELS[name]
    recipe = recipe or default
    if recipe == default and not retrain:
        model = _shipped_model(name, recipe, build)
        if model is not None:
            return model
    weights, meta = _paths(name, recipe)
    if not retrain:
        model = _cached_or_warn(name, recipe, build, weights, meta)
        if model is not None:
            return model
    with entry_lock(weights):
        if not retrain:  # another process may have trained it while this one waited
            model = _cached_or_warn(name, recipe, build, weights, meta)
            if model is not None:
                return model
        model, accuracy = train(name, recipe, progress=progress)
        with atomic_path(weights) as partial:
            torch.save(model.state_dict(), partial)
        with atomic_path(meta) as partial:
            partial.write_text(json.dumps(_sidecar(name, recipe, model, accuracy), indent=2))
    model.test_accuracy = accuracy
    return model


def _sidecar(name: str, recipe: TrainingRecipe | None, model, accuracy: float) -> dict:
    """What the cache's JSON sidecar holds for ``model`` (``name`` trained with ``recipe``,
    default its own)."""
    return {
        "model": name,
        "recipe": asdict(recipe or MODELS[name][1]),
        "image_size": model.config.image_size,
        "test_accuracy": accuracy,
    }


def _cached_or_warn(name: str, recipe: TrainingRecipe, build, weights: Path, meta: Path):
    """The cached model, or None (with a warning when the entry is there but damaged)."""
    if not (weights.exists() and meta.exists()):
        return None
    try:
        return _cached(name, recipe, build, weights, meta)
    except _DamagedEntry as err:
        warnings.warn(
            f"{err.path}: {err}; retraining {name} (or run `coded models train {name} --retrain`)",
            DamagedCacheWarning,
            stacklevel=3,
        )
        return None


def _shipped_model(name: str, recipe: TrainingRecipe, build):
    """The shipped model ``name`` when it was trained with ``recipe``; None when nothing is
    shipped for it (or, with a warning, when the shipped files fail their checks)."""
    weights, meta = shipped.shipped_paths(name)
    try:
        info = shipped.read_sidecar(name)
        if info is None:
            return None
        return _cached(name, recipe, build, weights, meta, extra_keys=("sha256", "provenance"))
    except (ValueError, _DamagedEntry) as err:
        warnings.warn(f"shipped weights of {name}: {err}; using the cache", DamagedCacheWarning, stacklevel=3)
        return None


class _DamagedEntry(Exception):
    def __init__(self, path: Path, reason: str):
        super().__init__(reason)
        self.path = path


def _cached(name: str, recipe: TrainingRecipe, build, weights: Path, meta: Path, extra_keys=()):
    """The cached model, or :class:`_DamagedEntry` saying which file failed which check."""
    expected = {"model": name, "recipe": asdict(recipe), "image_size": datasets.IMAGE_SIZES[recipe.dataset]}
    info = _checked_sidecar(meta, expected, ("test_accuracy", *extra_keys))
    accuracy = info["test_accuracy"]
    if isinstance(accuracy, bool) or not isinstance(accuracy, (int, float)) or not 0.0 <= accuracy <= 1.0:
        raise _DamagedEntry(meta, f"the sidecar's test_accuracy must be a number in [0, 1], got {accuracy!r}")
    model = _checked_weights(build(info["image_size"]), weights, name)
    model.test_accuracy = float(accuracy)
    return model


def _checked_sidecar(meta: Path, expected: dict, other_keys) -> dict:
    """The JSON sidecar ``meta``, holding exactly the keys of ``expected`` (with those values)
    and ``other_keys`` (checked by the caller), or :class:`_DamagedEntry`."""
    try:
        info = json.loads(meta.read_text())
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as err:
        raise _DamagedEntry(meta, f"unreadable sidecar ({type(err).__name__}: {err})") from None
    keys = sorted({*expected, *other_keys})
    if not isinstance(info, dict) or sorted(info) != keys:
        got = sorted(info) if isinstance(info, dict) else type(info).__name__
        raise _DamagedEntry(meta, f"the sidecar must hold the keys {keys}, got {got}")
    for key, value in expected.items():
        if info[key] != value:
            raise _DamagedEntry(meta, f"the sidecar's {key} is {info[key]!r}, expected {value!r}")
    return info


def _checked_weights(model, weights: Path, name: str):
    """``model`` (in eval mode) with the state dict in ``weights`` loaded, once it is checked to
    be exactly the model's tensors, all finite (``weights_only=True``: no pickled code runs);
    else :class:`_DamagedEntry`."""
    import torch

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
