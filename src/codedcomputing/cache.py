"""Where trained weights and parsed datasets are cached."""

from __future__ import annotations

import os
from pathlib import Path

__all__ = ["cache_dir"]


def cache_dir() -> Path:
    """``$CODEDCOMPUTING_CACHE``, else ``$XDG_CACHE_HOME/codedcomputing``, else
    ``~/.cache/codedcomputing``."""
    if os.environ.get("CODEDCOMPUTING_CACHE"):
        return Path(os.environ["CODEDCOMPUTING_CACHE"])
    base = os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache"
    return Path(base) / "codedcomputing"
