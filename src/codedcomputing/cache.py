"""Where trained weights and parsed datasets are cached, and how files get there safely."""

from __future__ import annotations

import os
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

__all__ = ["atomic_path", "cache_dir", "entry_lock"]


def cache_dir() -> Path:
    """``$CODEDCOMPUTING_CACHE``, else ``$XDG_CACHE_HOME/codedcomputing``, else
    ``~/.cache/codedcomputing``."""
    if os.environ.get("CODEDCOMPUTING_CACHE"):
        return Path(os.environ["CODEDCOMPUTING_CACHE"])
    base = os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache"
    return Path(base) / "codedcomputing"


def _fsync(path: Path, *, directory: bool = False) -> None:
    flags = os.O_RDONLY | (getattr(os, "O_DIRECTORY", 0) if directory else 0)
    try:
        descriptor = os.open(path, flags)
    except OSError:  # a directory cannot be opened on some systems (Windows): nothing to sync
        return
    try:
        os.fsync(descriptor)
    except OSError:
        pass
    finally:
        os.close(descriptor)


@contextmanager
def atomic_path(path: Path) -> Iterator[Path]:
    """A temporary path beside ``path`` (same suffix) to write to; when the block ends without
    error its file is flushed to disk (fsync), renamed onto ``path`` and the folder synced, so
    a reader, or a run after a crash, sees the whole old file or the whole new one, never half
    of one. On error the temporary file is removed."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    partial = path.with_name(f".{path.stem}.{os.getpid()}.{threading.get_ident()}.partial{path.suffix}")
    try:
        yield partial
        _fsync(partial)
        os.replace(partial, path)
        _fsync(path.parent, directory=True)
    finally:
        partial.unlink(missing_ok=True)


_THREAD_LOCKS: dict[str, threading.Lock] = {}
_THREAD_LOCKS_GUARD = threading.Lock()


@contextmanager
def entry_lock(path: Path) -> Iterator[None]:
    """Hold the lock of cache entry ``path`` for the block: an exclusive ``flock`` on
    ``path`` + ``.lock`` between processes, and a lock per entry between the threads of this
    one (``flock`` is per open file, so threads need their own). Two trainers of one entry thus
    run one after the other, and the second finds the first's weights instead of writing its
    own over them. Blocks until the lock is free. Where ``fcntl`` is missing (Windows), only
    the threads of one process are serialised."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    lock_file = path.with_name(path.name + ".lock")
    with _THREAD_LOCKS_GUARD:
        thread_lock = _THREAD_LOCKS.setdefault(str(lock_file), threading.Lock())
    with thread_lock:
        try:
            import fcntl
        except ImportError:  # pragma: no cover - Windows
            yield
            return
        with open(lock_file, "a") as handle:
            fcntl.flock(handle, fcntl.LOCK_EX)
            try:
                yield
            finally:
                fcntl.flock(handle, fcntl.LOCK_UN)
