"""``coded`` and ``python -m codedcomputing``: the command line, which needs the ``cli`` extra.

Without typer or rich installed it prints one line saying how to install them, instead of a
traceback.
"""

from __future__ import annotations

import sys

__all__ = ["main"]

# What the cli extra installs (click comes with typer).
CLI_PACKAGES = ("typer", "rich", "click")
INSTALL_HINT = "the coded command needs the cli extra: pip install 'codedcomputing[cli]'"


def main() -> None:
    """Run the ``coded`` command line (:mod:`codedcomputing.cli`) on ``sys.argv``."""
    try:
        from .cli import app
    except ModuleNotFoundError as error:
        if (error.name or "").partition(".")[0] not in CLI_PACKAGES:
            raise
        sys.exit(f"{INSTALL_HINT} ({error.name} is not installed)")
    app()


if __name__ == "__main__":
    main()
