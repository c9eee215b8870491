"""Training a shipped entry again from its recipe, to check the shipped file or to write it
(``coded train NAME``, ``coded train NAME --ship``)."""

from __future__ import annotations

import json
import time
from dataclasses import dataclass

from ..cache import atomic_path
from . import _sidecar, train
from . import parity as parity_models
from .shipped import SHIPPED, provenance, read_sidecar, sha256, shipped_paths

__all__ = ["ShippedComparison", "retrain"]


@dataclass(frozen=True)
class ShippedComparison:
    """A shipped entry trained again from its recipe: ``equal`` when every tensor equals the
    shipped one bit for bit; the test accuracies (for a parity model, its degraded-mode
    relative accuracy on the test split) of the shipped and the retrained weights."""

    name: str
    equal: bool
    shipped_accuracy: float | None
    trained_accuracy: float
    seconds: float

    @property
    def measure(self) -> str:
        """What the accuracies are: test accuracy, or a parity model's degraded-mode agreement."""
        return "test accuracy" if SHIPPED[self.name][1] is None else "degraded-mode agreement"

    def summary(self) -> str:
        if self.shipped_accuracy is None:
            return f"{self.name}: nothing shipped to compare with; {self.measure} {self.trained_accuracy:.2%}"
        if self.equal:
            return (
                f"{self.name}: bit for bit equal to the shipped weights "
                f"({self.measure} {self.trained_accuracy:.2%}; trained in {self.seconds:.0f} s)"
            )
        points = 100 * (self.trained_accuracy - self.shipped_accuracy)
        return (
            f"{self.name}: differs from the shipped weights: {self.measure} {self.trained_accuracy:.2%} "
            f"against the shipped {self.shipped_accuracy:.2%} ({points:+.2f} points; "
            f"trained in {self.seconds:.0f} s)"
        )


def _accuracy(name: str, sidecar: dict) -> float:
    _, k = SHIPPED[name]
    return float(sidecar["validation"]["relative_accuracy"] if k else sidecar["test_accuracy"])


def retrain(
    name: str, *, progress: bool = True, ship: bool = False, command: str | None = None
) -> ShippedComparison:
    """Train shipped entry ``name`` again from its default recipe (a parity model over the
    shipped deployed model) and compare it with the shipped file bit for bit. With ``ship``,
    write the result as the shipped entry, with its provenance: ``command`` (default
    ``coded train NAME --ship``) and the checkout's commit."""
    import torch

    base, k = SHIPPED[name]
    old = read_sidecar(name)
    start = time.perf_counter()
    if k is None:
        model, accuracy = train(base, progress=progress)
        sidecar = _sidecar(base, None, model, accuracy)
    else:
        model, _ = parity_models.train_parity(base, k, progress=progress)
        sidecar = parity_models._sidecar_for(base, k, None, None, model, time.perf_counter() - start)
    seconds = time.perf_counter() - start
    trained_accuracy = _accuracy(name, sidecar)
    state = model.state_dict()
    equal = False
    if old is not None:
        shipped = torch.load(shipped_paths(name)[0], weights_only=True)
        equal = set(shipped) == set(state) and all(
            shipped[key].dtype == state[key].dtype
            and shipped[key].shape == state[key].shape
            and shipped[key].numpy().tobytes() == state[key].numpy().tobytes()
            for key in state
        )
    if ship:
        weights, meta = shipped_paths(name)
        with atomic_path(weights) as partial:
            torch.save(state, partial)
        command = command or f"coded train {name} --ship"
        info = {**sidecar, "sha256": sha256(weights), "provenance": provenance(command, seconds)}
        with atomic_path(meta) as partial:
            partial.write_text(json.dumps(info, indent=2) + "\n")
    return ShippedComparison(
        name=name,
        equal=equal,
        shipped_accuracy=None if old is None else _accuracy(name, old),
        trained_accuracy=trained_accuracy,
        seconds=seconds,
    )
