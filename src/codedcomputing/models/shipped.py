"""The default weights that ship inside the package, so that nothing trains on first use.

Each shipped entry is a ``state_dict`` file ``weights/NAME.pt`` and a JSON sidecar
``weights/NAME.json`` beside it: the sidecar the cache would hold for the same weights (the
recipe, the image size, the test accuracy, and for a parity model its validation figures),
plus ``sha256``, the SHA-256 of the ``.pt`` file, and ``provenance``: the commit and command
that trained it, whether the tree was dirty, the torch version, the torch threads training ran
on, and the training's wall seconds.

:func:`codedcomputing.models.load` and :func:`codedcomputing.models.parity.load_parity` read
a shipped entry when asked for the default recipe (any other recipe trains and caches as
before). :func:`codedcomputing.models.retrain.retrain` trains an entry again from its recipe
and says whether the result equals the shipped file bit for bit (``coded train NAME``);
``coded train NAME --ship`` writes it (how the shipped files were made).
"""

from __future__ import annotations

import hashlib
import json
import subprocess
import time
from pathlib import Path

__all__ = ["SHIPPED", "provenance", "read_sidecar", "sha256", "shipped_paths"]

WEIGHTS_DIR = Path(__file__).parent / "weights"

# shipped name -> (base model, k) where k is the group size of a ParM parity model, else None
SHIPPED: dict[str, tuple[str, int | None]] = {
    "lenet5": ("lenet5", None),
    "vit": ("vit", None),
    "parity-lenet5-k2": ("lenet5", 2),
    "parity-lenet5-k4": ("lenet5", 4),
}


def shipped_paths(name: str) -> tuple[Path, Path]:
    """The weights and sidecar files of shipped entry ``name`` (which may not exist)."""
    return WEIGHTS_DIR / f"{name}.pt", WEIGHTS_DIR / f"{name}.json"


def sha256(path: Path) -> str:
    """The SHA-256 of the file at ``path``, in hex."""
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def read_sidecar(name: str) -> dict | None:
    """The shipped sidecar of ``name`` as a dict, or None when the entry is not shipped (both
    files must be there). Raises ``ValueError`` naming the file when the sidecar cannot be read
    or the weights' SHA-256 differs from the one it records (a damaged installation)."""
    weights, meta = shipped_paths(name)
    if not (weights.exists() and meta.exists()):
        return None
    try:
        info = json.loads(meta.read_text())
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as err:
        raise ValueError(f"{meta}: unreadable shipped sidecar ({type(err).__name__}: {err})") from None
    if not isinstance(info, dict) or not isinstance(info.get("provenance"), dict):
        raise ValueError(f"{meta}: a shipped sidecar must be an object with a provenance")
    if sha256(weights) != info.get("sha256"):
        raise ValueError(f"{weights}: its SHA-256 is not the one its sidecar records")
    return info


def provenance(command: str, seconds: float) -> dict:
    """Where trained weights came from: the commit of the checkout that holds this package
    (``"not a git checkout"`` for an installed package), whether its tree had changes, the
    ``command``, the torch version, the torch threads training used, and ``seconds``."""
    import torch

    from .training import TRAINING_THREADS

    source = Path(__file__).resolve().parent

    def git(*args: str) -> str | None:
        try:
            done = subprocess.run(
                ["git", "-C", str(source), *args], capture_output=True, text=True, timeout=30, check=True
            )
        except (OSError, subprocess.SubprocessError):
            return None
        return done.stdout.strip()

    commit = git("rev-parse", "HEAD")
    status = git("status", "--porcelain", "--untracked-files=no") if commit else None
    return {
        "commit": commit or "not a git checkout",
        "dirty": bool(status) if commit else None,
        "command": command,
        "torch": torch.__version__,
        "torch_threads": TRAINING_THREADS,
        "training_seconds": round(float(seconds), 1),
        "trained": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
    }
