"""Learned parity models (ParM: Kosaian, Rashmi and Venkataraman, SOSP 2019), the learned
baseline for coded inference. ::

    from codedcomputing.models import parity
    net = parity.load_parity("lenet5", k=2)       # shipped for LeNet-5, k = 2 and 4; others train once
    P = parity.encode(group, net.encoder)         # (k, 1, 28, 28) queries -> (1, 28, 28) parity query
    missing = parity.reconstruct(net(P[None])[0], others)   # F(x_j) ~ F_P(P) - sum of the others

For a deployed model ``F`` and ``k`` queries ``x_1..x_k``, the *encoder* makes one parity
query ``P = E(x_1, ..., x_k)``, a parity network ``F_P`` (the deployed model's own
architecture, trained from scratch) computes ``F_P(P)`` on one extra worker, and a missing
output is decoded by subtraction::

    F(x_j) ~ F_P(P) - sum_{i != j} F(x_i),     F_P = argmin E || F_P(P) - sum_i F(x_i) ||^2

The loss is the mean squared error against the deployed model's *outputs* (its logits), not
the labels: the parity model learns to reproduce what the deployed model would answer. One
parity per group of ``k`` tolerates one missing output per group at ``(k + 1) / k`` times the
work. Two encoders (:func:`encode`): ``"concatenation"``, the default (the paper's image
encoder: each query shrunk and tiled into one image of the same size), and ``"addition"``
(``P = x_1 + ... + x_k``, the paper's general encoder, full resolution for any ``k``).
Concatenation measured better on LeNet-5/MNIST for k = 2 and 4: tiled digits stay apart,
summed ones overlap (``docs/parity.rst``).

Training (:func:`train_parity`) draws fresh random groups of ``k`` *training* images every
epoch, augments each image with the deployed model's own recipe's random affine transform,
and targets the sum of the deployed model's logits on exactly those augmented images, so
the parity model sees a new sum at every step. AdamW with a one-cycle schedule, all seeded
by the :class:`ParityRecipe`. :func:`load_parity` caches the weights beside the registry's
models, with a JSON sidecar holding the training seconds and the validation figures of
:func:`evaluate_parity` on the test split; a damaged entry is retrained with a
:class:`~codedcomputing.errors.DamagedCacheWarning`, as for :func:`codedcomputing.models.load`.
"""

from __future__ import annotations

import hashlib
import json
import math
import time
import warnings
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np

from .. import datasets
from .._progress import progress as show_progress
from .._validation import check_choice, check_count, check_flag, check_number, check_rng
from ..cache import atomic_path, cache_dir, entry_lock
from ..errors import DamagedCacheWarning
from . import MODELS, TrainingRecipe, _checked_sidecar, _checked_weights, _DamagedEntry, shipped
from . import load as load_model
from .training import _augment, deterministic_threads

__all__ = [
    "ENCODERS",
    "RECIPES",
    "ParityEvaluation",
    "ParityRecipe",
    "encode",
    "evaluate_parity",
    "is_cached",
    "load_parity",
    "parity_function",
    "parity_path",
    "reconstruct",
    "train_parity",
]

ENCODERS = ("addition", "concatenation")


@dataclass(frozen=True)
class ParityRecipe:
    """How a parity model is trained: ``epochs`` of ``groups_per_epoch`` random groups of
    ``k`` training images (``batch_size`` groups a step), AdamW with a one-cycle schedule
    peaking at ``lr``, the images augmented with the deployed model's recipe when
    ``augment``, all seeded by ``seed``. Every field is part of the cache key
    (:func:`parity_path`)."""

    encoder: str = "concatenation"
    epochs: int = 30
    groups_per_epoch: int = 4000
    lr: float = 2e-3
    weight_decay: float = 1e-4
    batch_size: int = 64
    augment: bool = True
    seed: int = 0


# base model -> its default parity recipe: the deployed model's own optimiser settings, and
# the concatenation encoder, which measured better than addition on LeNet-5 for k = 2 and 4
# (docs/parity.rst, benchmarks/studies/bench_parity.py).
RECIPES: dict[str, ParityRecipe] = {
    "lenet5": ParityRecipe(encoder="concatenation", epochs=100, lr=2e-3, weight_decay=1e-4),
    "vit": ParityRecipe(encoder="concatenation", epochs=30, lr=1e-3, weight_decay=5e-2),
}


def _checked(base, k, recipe, base_recipe) -> tuple[int, ParityRecipe, TrainingRecipe]:
    check_choice(base, "base", sorted(MODELS))
    k = check_count(k, "k", minimum=2, maximum=64)
    recipe = RECIPES[base] if recipe is None else recipe
    if not isinstance(recipe, ParityRecipe):
        raise ValueError(f"recipe must be a ParityRecipe, got {recipe!r}")
    check_choice(recipe.encoder, "recipe.encoder", ENCODERS)
    for field in ("epochs", "groups_per_epoch", "batch_size"):
        check_count(getattr(recipe, field), f"recipe.{field}", minimum=1)
    check_number(recipe.lr, "recipe.lr", low=0.0, low_open=True)
    check_number(recipe.weight_decay, "recipe.weight_decay", low=0.0)
    check_flag(recipe.augment, "recipe.augment")
    check_count(recipe.seed, "recipe.seed")
    base_recipe = MODELS[base][1] if base_recipe is None else base_recipe
    if not isinstance(base_recipe, TrainingRecipe):
        raise ValueError(f"base_recipe must be a TrainingRecipe, got {base_recipe!r}")
    return k, recipe, base_recipe


def encode(queries, encoder: str = "concatenation"):
    """The parity query of each group: ``queries`` ``(..., k, C, H, W)`` (numpy or torch) ->
    ``(..., C, H, W)`` of the same kind (float32 for integer images).

    ``"addition"``: ``P = x_1 + ... + x_k``. ``"concatenation"``: the ``k`` images tiled in
    a grid of ``r = floor(sqrt(k))`` rows and ``ceil(k / r)`` columns, each shrunk to its cell
    by area averaging (``H // r`` by ``W // columns``), the rest of the image zero.
    """
    import torch
    import torch.nn.functional as F

    check_choice(encoder, "encoder", ENCODERS)
    is_numpy = not isinstance(queries, torch.Tensor)
    x = torch.as_tensor(np.asarray(queries)) if is_numpy else queries
    if not x.is_floating_point():
        x = x.float()
    if x.ndim < 4 or x.shape[-4] < 1:
        raise ValueError(f"queries must have shape (..., k, C, H, W), got {tuple(x.shape)}")
    if encoder == "addition":
        parity = x.sum(dim=-4)
    else:
        *lead, k, channels, height, width = x.shape
        rows = math.isqrt(k)
        columns = -(-k // rows)
        cell_h, cell_w = height // rows, width // columns
        flat = x.reshape(-1, channels, height, width)
        cells = F.interpolate(flat, size=(cell_h, cell_w), mode="area")
        cells = cells.reshape(-1, k, channels, cell_h, cell_w)
        parity = x.new_zeros(cells.shape[0], channels, height, width)
        for i in range(k):
            row, column = divmod(i, columns)
            top, left = row * cell_h, column * cell_w
            parity[:, :, top : top + cell_h, left : left + cell_w] = cells[:, i]
        parity = parity.reshape(*lead, channels, height, width)
    return parity.numpy() if is_numpy else parity


def parity_function(parity) -> Callable[[np.ndarray], np.ndarray]:
    """A parity model from :func:`load_parity` as a numpy batch function over groups: queries
    ``(G, k, C, H, W)`` in, ``F_P(encode(group))`` ``(G, num_classes)`` float32 out, encoded
    with the model's own ``encoder``, without autograd."""
    import torch

    def f(groups: np.ndarray) -> np.ndarray:
        groups = np.asarray(groups, dtype=np.float32)
        if groups.ndim != 5 or groups.shape[1] != parity.k:
            raise ValueError(f"groups must have shape (G, {parity.k}, C, H, W), got {groups.shape}")
        with torch.no_grad():
            return parity(torch.as_tensor(encode(groups, parity.encoder))).numpy()

    return f


def reconstruct(parity_output, other_outputs):
    """The decoded output of a group's missing query: ``parity_output - sum(other_outputs)``.

    ``parity_output`` ``(..., C)`` is ``F_P(P)``; ``other_outputs`` ``(..., k - 1, C)`` the
    deployed model's outputs on the group's other queries (numpy or torch, both the same).
    Exact whenever ``F_P(P) = sum_i F(x_i)``, e.g. for a linear ``F`` with ``F_P = F`` and
    the addition encoder.
    """
    if other_outputs.ndim < 2 or other_outputs.shape[-1] != parity_output.shape[-1]:
        raise ValueError(
            f"other_outputs must have shape (..., k - 1, {parity_output.shape[-1]}), "
            f"got {tuple(other_outputs.shape)}"
        )
    return parity_output - other_outputs.sum(-2)


def parity_path(
    base: str, k: int, recipe: ParityRecipe | None = None, *, base_recipe: TrainingRecipe | None = None
) -> Path:
    """Where :func:`load_parity` caches the parity model of ``base`` for groups of ``k``:
    ``parity-{base}-k{k}-{key}.pt`` in :func:`codedcomputing.cache.cache_dir`, the key the
    first 12 hex digits of the SHA-256 of the parity recipe, ``k`` and the deployed model's
    recipe as canonical JSON (another deployed model is another parity model)."""
    k, recipe, base_recipe = _checked(base, k, recipe, base_recipe)
    canonical = json.dumps(_identity(base, k, recipe, base_recipe), sort_keys=True, separators=(",", ":"))
    key = hashlib.sha256(canonical.encode()).hexdigest()[:12]
    return cache_dir() / f"parity-{base}-k{k}-{key}.pt"


def is_cached(
    base: str, k: int, recipe: ParityRecipe | None = None, *, base_recipe: TrainingRecipe | None = None
) -> bool:
    """Whether :func:`load_parity` has this parity model without training: shipped with the
    package (the default recipes), or its weights and sidecar in the cache
    (:func:`load_parity` still checks them, and retrains an entry that fails)."""
    k, recipe, base_recipe = _checked(base, k, recipe, base_recipe)
    if _is_shipped_default(base, k, recipe, base_recipe) and all(
        path.exists() for path in shipped.shipped_paths(f"parity-{base}-k{k}")
    ):
        return True
    weights = parity_path(base, k, recipe, base_recipe=base_recipe)
    return weights.exists() and weights.with_suffix(".json").exists()


def _is_shipped_default(base: str, k: int, recipe: ParityRecipe, base_recipe: TrainingRecipe) -> bool:
    defaults = (RECIPES[base], MODELS[base][1])
    return f"parity-{base}-k{k}" in shipped.SHIPPED and (recipe, base_recipe) == defaults


def _identity(base: str, k: int, recipe: ParityRecipe, base_recipe: TrainingRecipe) -> dict:
    return {
        "model": "parity",
        "base": base,
        "k": k,
        "recipe": asdict(recipe),
        "base_recipe": asdict(base_recipe),
    }


def train_parity(
    base: str,
    k: int,
    recipe: ParityRecipe | None = None,
    *,
    base_recipe: TrainingRecipe | None = None,
    progress: bool = True,
):
    """Train the parity model of ``base`` (the registry's deployed model, loaded or trained
    with ``base_recipe``, default its own) for groups of ``k`` from scratch with ``recipe``.

    Minimises ``mean || F_P(E(x_1..x_k)) - sum_i F(x_i) ||^2`` over random groups of the
    dataset's *training* images (see the module's docstring). Returns ``(parity_model,
    training_seconds)``; the weights are deterministic for given recipes on one machine (bit for
    bit, on :data:`~codedcomputing.models.training.TRAINING_THREADS` torch threads).
    """

    k, recipe, base_recipe = _checked(base, k, recipe, base_recipe)
    deployed = load_model(base, base_recipe, progress=progress)
    deployed.eval()
    with deterministic_threads():
        return _train_parity(base, k, recipe, base_recipe, deployed, progress)


def _train_parity(base, k, recipe, base_recipe, deployed, progress):
    import torch
    import torch.nn.functional as F

    data = datasets.load(base_recipe.dataset)
    start = time.perf_counter()
    torch.manual_seed(recipe.seed)
    generator = torch.Generator().manual_seed(recipe.seed)
    parity = MODELS[base][0](data.image_size)
    x = torch.as_tensor(data.train_x)
    steps_per_epoch = -(-recipe.groups_per_epoch // recipe.batch_size)
    optimizer = torch.optim.AdamW(parity.parameters(), lr=recipe.lr, weight_decay=recipe.weight_decay)
    schedule = torch.optim.lr_scheduler.OneCycleLR(
        optimizer, max_lr=recipe.lr, total_steps=recipe.epochs * steps_per_epoch
    )
    with show_progress(
        f"training the k={k} parity model of {base}", recipe.epochs, enabled=progress
    ) as advance:
        for _ in range(recipe.epochs):
            parity.train()
            groups = _random_groups(len(x), recipe.groups_per_epoch, k, generator)
            for first in range(0, len(groups), recipe.batch_size):
                members = x[groups[first : first + recipe.batch_size].reshape(-1)]
                if recipe.augment:
                    members = _augment(members, base_recipe, generator)
                queries = members.reshape(-1, k, *members.shape[1:])
                with torch.no_grad():
                    target = deployed(members).reshape(len(queries), k, -1).sum(1)
                loss = F.mse_loss(parity(encode(queries, recipe.encoder)), target)
                optimizer.zero_grad()
                loss.backward()
                optimizer.step()
                schedule.step()
            advance()
    parity.eval()
    return parity, time.perf_counter() - start


def _random_groups(num_images: int, num_groups: int, k: int, generator):
    """``(num_groups, k)`` training-image indices: consecutive permutations of all images cut
    into groups, so that a group's images are distinct (but at a permutation's seam)."""
    import torch

    passes = -(-num_groups * k // num_images)
    order = torch.cat([torch.randperm(num_images, generator=generator) for _ in range(passes)])
    return order[: num_groups * k].reshape(num_groups, k)


@dataclass(frozen=True)
class ParityEvaluation:
    """Degraded mode on ``groups`` (``(G, k)`` image indices), each query of each group
    missing in turn and decoded by :func:`reconstruct`: ``label_correct[g, j]`` whether the
    decoded argmax is the label, ``base_agrees[g, j]`` whether it is the deployed model's own
    argmax (relative accuracy), ``base_correct[g, j]`` whether the deployed model itself is
    right. The parity output alone: ``parity_r2``, ``1 - sum ||F_P(P) - T||^2 / sum ||T -
    mean(T)||^2`` over the groups with ``T = sum_i F(x_i)``, and ``parity_top_in_group[g]``,
    whether ``argmax F_P(P)`` is one of the group's deployed-model answers."""

    groups: np.ndarray
    label_correct: np.ndarray
    base_agrees: np.ndarray
    base_correct: np.ndarray
    parity_r2: float
    parity_top_in_group: np.ndarray

    def summary(self) -> dict[str, float]:
        """The means: ``accuracy`` (decoded vs labels), ``relative_accuracy`` (decoded vs the
        deployed model), ``base_accuracy``, ``parity_r2`` and ``parity_top_in_group``."""
        return {
            "accuracy": float(self.label_correct.mean()),
            "relative_accuracy": float(self.base_agrees.mean()),
            "base_accuracy": float(self.base_correct.mean()),
            "parity_r2": float(self.parity_r2),
            "parity_top_in_group": float(self.parity_top_in_group.mean()),
        }


def evaluate_parity(
    deployed, parity, images, labels, k: int, *, encoder: str = "concatenation", rng=0, batch_size: int = 500
) -> ParityEvaluation:
    """Degraded-mode figures of ``parity`` (a torch module, ``F_P``) for ``deployed`` (``F``)
    on ``images`` ``(n, C, H, W)`` with ``labels`` ``(n,)``: the images in a random order drawn
    from ``rng`` (a seed or Generator) are cut into ``n // k`` groups of ``k`` and every
    query of every group is decoded as if it alone were missing (see
    :class:`ParityEvaluation`)."""
    import torch

    k = check_count(k, "k", minimum=2, maximum=64)
    check_choice(encoder, "encoder", ENCODERS)
    images = np.asarray(images, dtype=np.float32)
    labels = np.asarray(labels)
    if images.ndim != 4 or labels.shape != images.shape[:1]:
        raise ValueError(
            f"images must be (n, C, H, W) with labels (n,), got {images.shape} and {labels.shape}"
        )
    if len(images) < k:
        raise ValueError(f"images must hold at least k = {k} images, got {len(images)}")
    order = check_rng(rng).permutation(len(images))
    groups = order[: len(images) // k * k].reshape(-1, k)

    def outputs(model, x):
        model.eval()
        with torch.no_grad():
            return np.concatenate(
                [model(torch.as_tensor(x[i : i + batch_size])).numpy() for i in range(0, len(x), batch_size)]
            ).astype(np.float64)

    base_out = outputs(deployed, images)[groups]  # (G, k, C)
    parity_out = outputs(parity, encode(images[groups], encoder))  # (G, C)
    others = np.array([[i for i in range(k) if i != j] for j in range(k)])  # (k, k - 1)
    decoded = reconstruct(parity_out[:, None, :], base_out[:, others, :])  # (G, k, C)
    target = base_out.sum(1)
    base_top = base_out.argmax(-1)
    return ParityEvaluation(
        groups=groups,
        label_correct=decoded.argmax(-1) == labels[groups],
        base_agrees=decoded.argmax(-1) == base_top,
        base_correct=base_top == labels[groups],
        parity_r2=float(1 - ((parity_out - target) ** 2).sum() / ((target - target.mean(0)) ** 2).sum()),
        parity_top_in_group=(parity_out.argmax(-1)[:, None] == base_top).any(1),
    )


VALIDATION = ("accuracy", "relative_accuracy", "base_accuracy", "parity_r2", "parity_top_in_group")


def load_parity(
    base: str,
    k: int,
    recipe: ParityRecipe | None = None,
    *,
    base_recipe: TrainingRecipe | None = None,
    progress: bool = True,
    retrain: bool = False,
):
    """The parity model of ``base`` for groups of ``k`` (a torch module in eval mode): the one
    shipped with the package for the default recipes (LeNet-5, k = 2 and 4), else from the
    cache, training (:func:`train_parity`) and caching it first when nothing is cached or
    ``retrain`` (concurrent trainers of one entry are serialised by a lock on it, as in
    :func:`codedcomputing.models.load`). ``recipe`` defaults to the base model's in
    :data:`RECIPES`, ``base_recipe`` to the deployed model's own
    (:data:`codedcomputing.models.MODELS`).

    The module carries ``k``, ``encoder``, ``training_seconds`` (the training's wall time,
    as measured when it was trained) and ``validation``: :meth:`ParityEvaluation.summary` on
    the dataset's test split (seeded by the recipe), as stored in the JSON sidecar. A cached
    entry whose sidecar or weights fail their checks is retrained with a
    :class:`~codedcomputing.errors.DamagedCacheWarning` naming the file.
    """
    import torch

    k, recipe, base_recipe = _checked(base, k, recipe, base_recipe)
    if not retrain and _is_shipped_default(base, k, recipe, base_recipe):
        parity = _shipped_parity(f"parity-{base}-k{k}", base, k, recipe, base_recipe)
        if parity is not None:
            return parity
    weights = parity_path(base, k, recipe, base_recipe=base_recipe)
    meta = weights.with_suffix(".json")
    if not retrain:
        parity = _cached_or_warn(base, k, recipe, base_recipe, weights, meta)
        if parity is not None:
            return parity
    with entry_lock(weights):
        if not retrain:  # another process may have trained it while this one waited
            parity = _cached_or_warn(base, k, recipe, base_recipe, weights, meta)
            if parity is not None:
                return parity
        parity, seconds = train_parity(base, k, recipe, base_recipe=base_recipe, progress=progress)
        sidecar = _sidecar_for(base, k, recipe, base_recipe, parity, seconds)
        with atomic_path(weights) as partial:
            torch.save(parity.state_dict(), partial)
        with atomic_path(meta) as partial:
            partial.write_text(json.dumps(sidecar, indent=2))
    return _labelled(parity, k, recipe, seconds, sidecar["validation"])


def _sidecar_for(base: str, k: int, recipe, base_recipe, parity, seconds: float) -> dict:
    """The JSON sidecar of a freshly trained parity model: its identity, the image size, the
    training's seconds and its validation figures on the test split (seeded by the recipe)."""
    k, recipe, base_recipe = _checked(base, k, recipe, base_recipe)
    data = datasets.load(base_recipe.dataset)
    deployed = load_model(base, base_recipe, progress=False)
    validation = evaluate_parity(
        deployed, parity, data.test_x, data.test_y, k, encoder=recipe.encoder, rng=recipe.seed
    ).summary()
    return {
        **_identity(base, k, recipe, base_recipe),
        "image_size": data.image_size,
        "training_seconds": seconds,
        "validation": validation,
    }


def _cached_or_warn(base, k, recipe, base_recipe, weights: Path, meta: Path):
    """The cached parity model, or None (with a warning when the entry is there but damaged)."""
    if not (weights.exists() and meta.exists()):
        return None
    try:
        return _cached_parity(base, k, recipe, base_recipe, weights, meta)
    except _DamagedEntry as err:
        warnings.warn(f"{err.path}: {err}; retraining the parity model", DamagedCacheWarning, stacklevel=3)
        return None


def _shipped_parity(name: str, base: str, k: int, recipe, base_recipe):
    """The shipped parity model ``name``; None when it is not shipped (or, with a warning, when
    its files fail their checks)."""
    weights, meta = shipped.shipped_paths(name)
    try:
        if shipped.read_sidecar(name) is None:
            return None
        extra = ("sha256", "provenance")
        return _cached_parity(base, k, recipe, base_recipe, weights, meta, extra_keys=extra)
    except (ValueError, _DamagedEntry) as err:
        warnings.warn(f"shipped weights of {name}: {err}; using the cache", DamagedCacheWarning, stacklevel=3)
        return None


def _labelled(parity, k: int, recipe: ParityRecipe, seconds: float, validation: dict):
    parity.k, parity.encoder = k, recipe.encoder
    parity.training_seconds, parity.validation = float(seconds), dict(validation)
    return parity


def _cached_parity(base: str, k: int, recipe, base_recipe, weights: Path, meta: Path, extra_keys=()):
    """The cached parity model, or :class:`_DamagedEntry` saying which file failed which check."""
    expected = {
        **_identity(base, k, recipe, base_recipe),
        "image_size": datasets.IMAGE_SIZES[base_recipe.dataset],
    }
    info = _checked_sidecar(meta, expected, ("training_seconds", "validation", *extra_keys))
    seconds, validation = info["training_seconds"], info["validation"]
    if not _is_number(seconds) or not 0 <= seconds < math.inf:
        raise _DamagedEntry(meta, f"the sidecar's training_seconds must be a number >= 0, got {seconds!r}")
    if not isinstance(validation, dict) or sorted(validation) != sorted(VALIDATION):
        raise _DamagedEntry(meta, f"the sidecar's validation must hold the keys {sorted(VALIDATION)}")
    for key, value in validation.items():
        low = -math.inf if key == "parity_r2" else 0.0
        if not _is_number(value) or not low <= value <= 1.0:
            raise _DamagedEntry(meta, f"the sidecar's validation {key} must be a number <= 1, got {value!r}")
    parity = _checked_weights(MODELS[base][0](info["image_size"]), weights, f"the parity model of {base}")
    return _labelled(parity, k, recipe, seconds, validation)


def _is_number(value) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)
