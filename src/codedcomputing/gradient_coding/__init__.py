r"""Gradient coding for distributed training: codes that let the master recover the full
gradient without the stragglers (not :class:`~codedcomputing.Code`\ s: a worker sums
gradients over the partitions it holds).

- :class:`FractionalRepetition` and :class:`CyclicRepetition` (:mod:`.codes`): the encoding
  matrix ``B`` and the decoding weights ``a`` with ``a^T B_F = 1^T``;
- :func:`simulate` (:mod:`.training`): SGD with every scheme (DGD, GC-FR/CR, IS-SGD, IS-GC,
  PGC-FR/CR) on a virtual clock, reproducible step for step;
- :func:`train_on_cluster` (:mod:`.cluster`): the same schemes on a thread cluster or Ray,
  with stateful workers (each keeps its partitions and stored gradients between steps), real
  time and a deadline per step.

Faulty workers (a gradient that raises, returns NaN or the wrong shape, hangs) are
stragglers on both trainers; an exact scheme (:data:`EXACT_SCHEMES`) that cannot decode
raises :class:`TooManyStragglersError`, an approximate one takes a flagged degraded step
(``Step.degraded``): the table is in :mod:`.training`.
"""

from .cluster import train as train_on_cluster
from .codes import CyclicRepetition, FractionalRepetition, GradientCode, TooManyStragglersError
from .training import EXACT_SCHEMES, FAULT_KINDS, SCHEMES, Problem, Step, simulate

__all__ = [
    "EXACT_SCHEMES",
    "FAULT_KINDS",
    "SCHEMES",
    "CyclicRepetition",
    "FractionalRepetition",
    "GradientCode",
    "Problem",
    "Step",
    "TooManyStragglersError",
    "simulate",
    "train_on_cluster",
]
