"""codedcomputing: straggler- and adversary-resilient approximate coded computing.

For ten inputs ``X`` (shape ``(10, ...)``) and any batch function ``f``::

    import codedcomputing as cc
    code = cc.GCC(num_inputs=10, num_workers=50)
    coded = code.encode(X)                  # (50, ...) coded inputs, one per worker
    alive = cc.stragglers.random(50, 5, rng=0)
    est = code.decode(f(coded[alive]), alive)   # (10, ...) estimates of f(x_k)
"""

import importlib as _importlib

from . import (
    adversaries,
    errors,
    metrics,
    points,
    spline,
    stragglers,
    tuning,
)
from ._version import __version__
from .codes import (
    BACC,
    CODES,
    GCC,
    LCC,
    ApproxIFER,
    Code,
    Decoded,
    ManifoldGCC,
    Replication,
    RobustGCC,
    Uncoded,
)
from .errors import InsufficientResultsError, MissingResultsError, NonFiniteResultWarning
from .runtime import (
    CodedExecutor,
    RayCluster,
    SimulatedCluster,
    ThreadCluster,
    delays,
    faults,
)

__all__ = [
    "BACC",
    "CODES",
    "GCC",
    "LCC",
    "ApproxIFER",
    "Code",
    "CodedExecutor",
    "Decoded",
    "InsufficientResultsError",
    "ManifoldGCC",
    "MissingResultsError",
    "NonFiniteResultWarning",
    "RayCluster",
    "Replication",
    "RobustGCC",
    "SimulatedCluster",
    "ThreadCluster",
    "Uncoded",
    "__version__",
    "adversaries",
    "datasets",
    "delays",
    "errors",
    "faults",
    "gradient_coding",
    "metrics",
    "models",
    "points",
    "spline",
    "stragglers",
    "tuning",
]

# Submodules beyond the codes and the runtime load at first use (PEP 562), so that
# ``import codedcomputing`` loads numpy, scipy and the core only: ``cc.models.load`` imports
# codedcomputing.models then. ``cache`` is not in ``__all__`` (it has no API page) but is
# an attribute as before.
_LAZY = ("cache", "datasets", "gradient_coding", "models")


def __getattr__(name: str):
    if name in _LAZY:
        return _importlib.import_module(f".{name}", __name__)  # the import binds it here too
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_LAZY))
