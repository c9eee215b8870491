"""Running coded computations on workers: clusters, injected delays and faults, the executor.

Layering: the runtime knows the :class:`~codedcomputing.codes.Code` interface (``encode``,
``decode``, ``complete``), never a specific code.
"""

from . import delays, faults
from .clusters import Call, Cluster, SimulatedCluster, ThreadCluster
from .executor import Answers, CodedExecutor, Report, Result
from .ray_cluster import RayCluster
from .record import Gathered, WorkerRecord

__all__ = [
    "Answers",
    "Call",
    "Cluster",
    "CodedExecutor",
    "Gathered",
    "RayCluster",
    "Report",
    "Result",
    "SimulatedCluster",
    "ThreadCluster",
    "WorkerRecord",
    "delays",
    "faults",
]
