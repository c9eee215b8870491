"""The codes: every one has ``encode(X) -> (N, ...)`` and ``decode(Y, alive) -> (K, ...)``."""

from .approxifer import ApproxIFER
from .bacc import BACC
from .base import Code, Decoded
from .baselines import Replication, Uncoded
from .gcc import GCC
from .lcc import LCC
from .manifold import ManifoldGCC
from .robust import RobustGCC

__all__ = [
    "BACC",
    "CODES",
    "GCC",
    "LCC",
    "ApproxIFER",
    "Code",
    "Decoded",
    "ManifoldGCC",
    "Replication",
    "RobustGCC",
    "Uncoded",
]

# Name -> class, for the CLI and experiments.
CODES = {cls.name: cls for cls in (GCC, BACC, LCC, Uncoded, Replication, ManifoldGCC, RobustGCC, ApproxIFER)}
