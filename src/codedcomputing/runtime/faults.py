"""Fault models: which workers misbehave on a call, and how.

Kinds of fault (:data:`KINDS`):

- ``"raise"``: the worker raises :class:`InjectedFault` instead of computing;
- ``"hang"``: the worker never answers (the cluster drops it when the call ends);
- ``"nan"``: the worker computes, then returns NaN of the right shape;
- ``"shape"``: the worker computes, then returns its result one entry short along the last
  axis (:func:`corrupt`);
- ``"garbage"``: the worker computes, then returns finite noise of the right shape and
  scale (a lying worker: nothing at the master can tell it from a true result, which is
  what the adversarially robust codes are for).

The first four are stragglers to the master: recorded in the run's report, never a
crash (a mis-shaped result is told apart by the output shape the caller declares, or else
by the shape most results share: :mod:`~codedcomputing.runtime.collect`). A model's
``sample(num_workers, rng)`` returns one call's faults as a dict ``{worker: kind}``
(workers without a fault are absent).

Colluding adversaries (:class:`Adversarial`, any attack of :mod:`codedcomputing.adversaries`)
see everything the master sees, the code and all returned results, so they act where those
meet: a :class:`~codedcomputing.CodedExecutor` on a cluster with ``faults=Adversarial(...)``
hands each call's gathered results to the attack before decoding, and the run's report
lists the corrupted workers in ``faults`` (``"adversary: <attack>"``). A bare
``cluster.gather`` has no code to attack and returns the honest results.
"""

from __future__ import annotations

from abc import ABC, abstractmethod

import numpy as np

from .. import _arraylib
from .._validation import check_choice, check_count, check_probability, check_rng, check_seed
from ..adversaries import Attack

__all__ = [
    "KINDS",
    "Adversarial",
    "FaultModel",
    "Fixed",
    "Independent",
    "InjectedFault",
    "corrupt",
]

KINDS = ("raise", "hang", "nan", "shape", "garbage")
CORRUPTING = ("nan", "shape", "garbage")  # the worker computes, then corrupt() replaces its result


class InjectedFault(RuntimeError):
    """Raised by a worker that a fault model told to fail."""


def _kind(kind, name: str) -> str:
    return check_choice(kind, f"{name} (a fault kind)", KINDS)


class FaultModel(ABC):
    """One call's faults: ``sample(num_workers, rng) -> {worker: kind}``."""

    def sample(self, num_workers: int, rng: np.random.Generator) -> dict[int, str]:
        return self._sample(check_count(num_workers, "num_workers", 1), check_rng(rng))

    @abstractmethod
    def _sample(self, num_workers: int, rng: np.random.Generator) -> dict[int, str]: ...


class Independent(FaultModel):
    """Each worker, on each call, independently suffers fault ``kind`` with probability ``rate``.

    ``rates`` maps kinds to probabilities, e.g. ``Independent({"raise": 0.05, "nan": 0.02})``;
    their sum must be at most 1 (a worker has at most one fault per call).
    """

    def __init__(self, rates: dict[str, float]):
        if not isinstance(rates, dict) or not rates:
            raise ValueError(f"rates must be a non-empty dict {{kind: probability}}, got {rates!r}")
        self.rates = {
            _kind(kind, "rates"): check_probability(p, f"rates[{kind!r}]") for kind, p in rates.items()
        }
        if sum(self.rates.values()) > 1 + 1e-12:
            raise ValueError(f"rates must sum to at most 1, got {sum(self.rates.values()):g}")

    def _sample(self, num_workers, rng):
        kinds = list(self.rates)
        edges = np.cumsum([self.rates[kind] for kind in kinds])
        u = rng.random(num_workers)
        which = np.searchsorted(edges, u, side="right")  # len(kinds) means no fault
        return {int(n): kinds[w] for n, w in enumerate(which) if w < len(kinds)}

    def __repr__(self) -> str:
        return f"Independent({self.rates})"


class Fixed(FaultModel):
    """The same workers fail the same way on every call: ``Fixed({3: "hang", 7: "raise"})``.

    Workers beyond the cluster's ``num_workers`` are ignored on that call.
    """

    def __init__(self, faults: dict[int, str]):
        if not isinstance(faults, dict):
            raise ValueError(f"faults must be a dict {{worker: kind}}, got {faults!r}")
        checked = {}
        for worker, kind in faults.items():
            if isinstance(worker, bool) or not isinstance(worker, (int, np.integer)) or worker < 0:
                raise ValueError(f"faults: worker indices must be integers >= 0, got {worker!r}")
            checked[int(worker)] = _kind(kind, f"faults[{worker}]")
        self.faults = checked

    def _sample(self, num_workers, rng):
        return {n: kind for n, kind in self.faults.items() if n < num_workers}

    def __repr__(self) -> str:
        return f"Fixed({self.faults})"


class Adversarial(FaultModel):
    """Colluding adversarial workers: ``attack`` (an :class:`~codedcomputing.adversaries.Attack`)
    corrupts each call's returned results, knowing the code and who returned (module
    docstring). ``Adversarial(cc.adversaries.Greedy(10, bound=100.0))``.

    It injects nothing on the workers themselves (``sample`` is empty); the executor calls
    :meth:`corrupt` with the cluster's generator, so runs are reproducible from the
    cluster's seed.
    """

    def __init__(self, attack: Attack):
        if not isinstance(attack, Attack):
            raise ValueError(f"attack must be a codedcomputing.adversaries attack, got {attack!r}")
        self.attack = attack

    def _sample(self, num_workers, rng):
        return {}

    def corrupt(self, code, results, alive, rng):
        """The attack on one call (``results[i]`` from worker ``alive[i]``): a
        :class:`~codedcomputing.adversaries.Corruption`."""
        return self.attack._corrupt_checked(code, results, alive, rng, "results")

    def __repr__(self) -> str:
        return f"Adversarial({self.attack!r})"


def corrupt(result, kind: str, seed: int):
    """``result`` replaced as fault ``kind`` (``"nan"``, ``"shape"`` or ``"garbage"``) dictates.

    NaN and garbage keep the result's shape. Garbage is normal noise with the result's own
    scale (its RMS, or 1 if that is 0), drawn from ``seed`` (an int >= 0). ``"shape"`` drops
    the last entry along the last axis (a number becomes an empty vector; a result whose
    last axis is empty gets one zero entry there instead), so the shape always changes.
    Numpy arrays and torch tensors keep their type and device, and their dtype (NaN and
    garbage make integers float64). ``result`` must be numeric (an array, a tensor or a
    number).
    """
    kind = check_choice(kind, "kind", CORRUPTING)
    check_seed(seed, "seed")
    if not _arraylib.is_torch(result):
        try:
            array = np.asarray(result)
        except (TypeError, ValueError) as err:  # ragged nesting
            raise ValueError(f"result must be numeric: {err}") from None
        if array.dtype == object or not (np.issubdtype(array.dtype, np.number) or array.dtype == bool):
            raise ValueError(f"result must be numeric, got dtype {array.dtype}")
    if kind == "shape":
        return _misshaped(result)
    if _arraylib.is_torch(result):  # never import torch for numpy results
        import torch

        if kind == "nan":
            return torch.full_like(result, float("nan"))
        scale = float(result.double().pow(2).mean().sqrt()) or 1.0
        noise = np.random.default_rng(seed).normal(0.0, scale, tuple(result.shape))
        return torch.as_tensor(noise, dtype=result.dtype, device=result.device)
    result = np.asarray(result)
    if kind == "nan":
        return np.full(result.shape, np.nan, dtype=result.dtype if result.dtype.kind in "fc" else np.float64)
    scale = float(np.sqrt(np.mean(np.square(result, dtype=np.float64)))) or 1.0
    return (
        np.random.default_rng(seed)
        .normal(0.0, scale, result.shape)
        .astype(result.dtype if result.dtype.kind in "fc" else np.float64)
    )


def _misshaped(result):
    """``result`` one entry short along its last axis (:func:`corrupt`'s ``"shape"``)."""
    if _arraylib.is_torch(result):
        import torch

        if result.ndim == 0:
            return result.reshape(1)[:0].clone()
        if result.shape[-1] == 0:
            return torch.cat([result, result.new_zeros((*result.shape[:-1], 1))], dim=-1)
        return result[..., :-1].clone()
    array = np.asarray(result)
    if array.ndim == 0:
        return array.reshape(1)[:0].copy()
    if array.shape[-1] == 0:
        return np.concatenate([array, np.zeros((*array.shape[:-1], 1), dtype=array.dtype)], axis=-1)
    return array[..., :-1].copy()
