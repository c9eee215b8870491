"""Where trained weights and parsed datasets are cached, and how files get there."""

from __future__ import annotations

import os
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

__all__ = ["atomic_path", "cache_dir"]


def cache_dir() -> Path:
    """``$CODEDCOMPUTING_CACHE``, else ``$XDG_CACHE_HOME/codedcomputing``, else
    ``~/.cache/codedcomputing``."""
    if os.environ.get("CODEDCOMPUTING_CACHE"):
        return Path(os.environ["CODEDCOMPUTING_CACHE"])
    base = os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache"
    return Path(base) / "codedcomputing"


@contextmanager
def atomic_path(path: Path) -> Iterator[Path]:
    """A temporary path beside ``path`` (same suffix) to write to; renamed onto ``path`` when
    the block ends without error, removed otherwise. A reader never sees half a file, even
    when two processes cache the same thing at once."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    partial = path.with_name(f".{path.stem}.{os.getpid()}.{threading.get_ident()}.partial{path.suffix}")
    try:
        yield partial
        os.replace(partial, path)
    finally:
        partial.unlink(missing_ok=True)
