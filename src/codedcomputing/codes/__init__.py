"""The codes: every one has ``encode(X) -> (N, ...)`` and ``decode(Y, alive) -> (K, ...)``."""

from .bacc import BACC
from .base import Code, Decoded
from .baselines import Replication, Uncoded
from .gcc import GCC
from .lcc import LCC
from .manifold import ManifoldGCC

__all__ = ["BACC", "CODES", "GCC", "LCC", "Code", "Decoded", "ManifoldGCC", "Replication", "Uncoded"]

# Name -> class, for the CLI and experiments.
CODES = {cls.name: cls for cls in (GCC, BACC, LCC, Uncoded, Replication, ManifoldGCC)}
