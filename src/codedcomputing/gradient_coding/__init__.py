r"""Gradient coding for distributed training: codes that let the master recover the full
gradient without the stragglers (not :class:`~codedcomputing.Code`\ s: a worker sums
gradients over the partitions it holds).

- :class:`FractionalRepetition` and :class:`CyclicRepetition` (:mod:`.codes`): the encoding
  matrix ``B`` and the decoding weights ``a`` with ``a^T B_F = 1^T``.
"""

from .codes import CODES, CyclicRepetition, FractionalRepetition, GradientCode, TooManyStragglersError

__all__ = ["CODES", "CyclicRepetition", "FractionalRepetition", "GradientCode", "TooManyStragglersError"]
