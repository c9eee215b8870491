"""The training fault matrix: scheme x fault x number of faulty workers x backend -> outcome.

Setting: the least-squares problem of ``tests/training_problems.py`` with ``n = 6`` workers,
``s`` stragglers allowed (default 1), ``--steps`` steps; the faulty workers are ``0 .. c-1``
for ``c`` in ``1 .. s + 1``. Each cell runs on a helper thread under a time limit
(``--cell-timeout``), so that a hang is recorded as the cell's outcome and the matrix goes
on. Outcome classes:

- ``exact``: the losses equal fault-free DGD's (``MATCHES_DGD``: DGD, GC-FR, GC-CR; PGC-FR,
  exact too, decodes sums up to ``s`` steps stale, so it is judged as approximate here);
- ``approx``: an approximate scheme (or PGC-FR, stale by design) trained on at least
  what it waits for (``n - s`` messages, one per FR group), all losses finite;
- ``approx-flagged``: it trained on fewer, and every such step says so (``Step.degraded``);
- ``clear-error``: it raised ``TooManyStragglersError`` (or a ``RuntimeError`` naming the step);
- ``silent-wrong``: it finished, but a ``MATCHES_DGD`` scheme's losses differ from DGD's, a loss is
  NaN, or it trained on fewer messages than it waits for without saying so;
- ``hang``: not finished within the cell's time limit; ``crash``: any other exception.

Faults are injected two ways:

- ``problem`` (works on any version of the library): a :class:`FaultyProblem` whose
  gradient misbehaves when a faulty worker computes it (threads, Ray: the worker is found on
  the call stack, in ``WorkerState.work``) or, on the simulated clock, where no worker runs
  code of its own, for the faulty workers' own partitions (``0 .. c-1``, so every worker
  holding one is faulty: the same workers for DGD and IS-SGD, more for the others). Kinds:
  ``raise``, ``nan``, ``shape`` (one entry short), ``hang`` (the gradient blocks until the
  cell is over: a real hang, holding its thread);
- ``worker`` (versions with ``faults=``): the trainers' own injected worker faults
  (``faults={w: kind}``); on the simulated clock ``hang`` is a worker that never arrives.

Usage::

    python tests/drivers/fault_matrix_training.py [--backends threads,simulated] [--inject problem]
        [--s 1] [--steps 10] [--cell-timeout 10] [--step-timeout 0.5]

Run it against another checkout with ``PYTHONPATH=<checkout>/src``; the first line printed
names the copy of the library that ran.
"""

from __future__ import annotations

import argparse
import functools
import inspect
import sys
import threading
import warnings
from collections import Counter
from pathlib import Path

import numpy as np

import codedcomputing as cc
from codedcomputing.gradient_coding import SCHEMES, Problem, simulate, train_on_cluster
from codedcomputing.gradient_coding.codes import TooManyStragglersError

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from training_problems import least_squares  # lives in tests/, put on the path above

N = 6
KINDS = ("raise", "nan", "shape", "hang")
MATCHES_DGD = ("dgd", "gc-fr", "gc-cr")  # a cell of these is right when its losses are DGD's
HANG_S = 120.0  # a problem-injected hang's longest wait (it ends when its cell does)
BASE = least_squares(N)


class Cell:
    """What one cell needs to stop what it started: set when the cell is over."""

    def __init__(self):
        self.over = threading.Event()

    def __getstate__(self):  # shipped to a Ray actor: a hang there waits HANG_S
        return {}

    def __setstate__(self, state):
        self.over = threading.Event()


def _calling_worker():
    """The index of the worker computing this gradient (its ``WorkerState`` on the stack)."""
    frame = sys._getframe(2)
    while frame is not None:
        me = frame.f_locals.get("self")
        if type(me).__name__ == "WorkerState":
            return int(me.worker)
        frame = frame.f_back
    return None


class FaultyProblem(Problem):
    """``base`` whose gradient misbehaves (``kind``) for the ``faulty`` workers (``by="worker"``)
    or partitions (``by="partition"``); once ``cell.over`` is set every gradient raises, so a
    run left behind by a timed-out cell ends."""

    def __init__(self, base: Problem, faulty, kind: str, by: str, cell: Cell):
        self.base, self.faulty, self.kind, self.by, self.cell = base, set(faulty), kind, by, cell
        Problem.__init__(self, self._gradient, base.loss, base.initial, base.num_partitions)

    def _gradient(self, theta, partition):
        if self.cell.over.is_set():
            raise RuntimeError("the cell is over")
        who = _calling_worker() if self.by == "worker" else partition
        value = self.base.gradient(theta, partition)
        if who not in self.faulty:
            return value
        if self.kind == "raise":
            raise RuntimeError(f"injected: worker {who} raised")
        if self.kind == "nan":
            return value * np.nan
        if self.kind == "shape":
            return value[:-1]
        self.cell.over.wait(HANG_S)  # hang
        raise RuntimeError("the cell is over")


def has_faults_parameter() -> bool:
    return "faults" in inspect.signature(train_on_cluster).parameters


def run_cell(backend, scheme, kind, count, s, steps, inject, step_timeout, cell_timeout, ray_cluster):
    """``(outcome, detail)`` of one cell."""
    cell = Cell()
    faulty = list(range(count))
    base = BASE  # one object: on Ray its actors serve every worker-fault cell
    kwargs = {"lr": 0.05}
    if inject == "worker":
        problem = base
        kwargs["faults"] = dict.fromkeys(faulty, kind)
    else:
        by = "partition" if backend == "simulated" else "worker"
        problem = FaultyProblem(base, faulty, kind, by, cell)
    new = has_faults_parameter()
    outcome: dict = {}

    def target():
        try:
            with warnings.catch_warnings(record=True):
                warnings.simplefilter("always")
                if backend == "simulated":
                    outcome["history"] = simulate(scheme, problem, s, steps, **kwargs)  # no deadline
                elif backend == "threads":
                    extra = {"step_timeout_s": step_timeout} if new else {}
                    with cc.ThreadCluster(8, seed=0) as threads:
                        history = train_on_cluster(scheme, problem, s, steps, threads, **kwargs, **extra)
                    outcome["history"] = history
                else:
                    extra = {"step_timeout_s": step_timeout} if new else {}
                    history = train_on_cluster(scheme, problem, s, steps, ray_cluster, **kwargs, **extra)
                    outcome["history"] = history
        except BaseException as err:  # the cell's outcome, whatever it is
            outcome["error"] = err

    worker = threading.Thread(target=target, daemon=True)
    worker.start()
    worker.join(cell_timeout)
    cell.over.set()  # hung gradients end, and a run left behind fails at its next gradient
    if worker.is_alive():
        return "hang", f"not done after {cell_timeout:g} s"
    if "error" in outcome:
        err = outcome["error"]
        if isinstance(err, TooManyStragglersError) or (
            isinstance(err, RuntimeError) and str(err).startswith("step ")
        ):
            return "clear-error", f"{type(err).__name__}: {err}"[:160]
        return "crash", f"{type(err).__name__}: {err}"[:160]
    return classify(outcome["history"], backend, scheme, count, s, steps, inject), ""


def affected(backend, scheme, count, s, inject) -> int:
    """How many workers' messages the faults spoil (at step 1, where every PGC worker computes
    all its partitions): the faulty ones, or, for partition faults on the simulated clock,
    every worker holding a faulty partition."""
    faulty = set(range(count))
    if inject == "worker" or backend != "simulated" or scheme in ("dgd", "is-sgd"):
        return count
    if scheme in ("gc-fr", "pgc-fr"):
        groups = {p // (s + 1) for p in faulty}
        return sum(1 for i in range(N) if i // (s + 1) in groups)
    return sum(1 for i in range(N) if faulty & {(i + k) % N for k in range(s + 1)})


@functools.cache
def dgd_losses(s: int, steps: int) -> list[float]:
    """Fault-free DGD's losses: what the cells of :data:`MATCHES_DGD` must give."""
    return [step.loss for step in simulate("dgd", least_squares(N), s, steps, lr=0.05)]


def classify(history, backend, scheme, count, s, steps, inject) -> str:
    losses = np.array([step.loss for step in history])
    if not np.all(np.isfinite(losses)):
        return "silent-wrong"
    spoiled = affected(backend, scheme, count, s, inject)
    if scheme in MATCHES_DGD:
        same = np.allclose(losses, dgd_losses(s, steps), rtol=1e-9, atol=0)
        return "exact" if same else "silent-wrong"
    flagged = [getattr(step, "degraded", False) for step in history[1:]]
    if scheme == "pgc-fr":
        short = spoiled >= s + 1  # the first group has no usable member
    else:
        short = N - spoiled < N - s
    if short:
        return "approx-flagged" if any(flagged) else "silent-wrong"
    return "approx"


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--backends", default="threads,simulated")
    parser.add_argument("--inject", default="problem", choices=("problem", "worker"))
    parser.add_argument("--schemes", default=",".join(SCHEMES))
    parser.add_argument("--kinds", default=",".join(KINDS))
    parser.add_argument("--s", type=int, default=1)
    parser.add_argument("--steps", type=int, default=10)
    parser.add_argument("--cell-timeout", type=float, default=10.0)
    parser.add_argument("--step-timeout", type=float, default=0.5, help="step_timeout_s where supported")
    args = parser.parse_args(argv)
    backends = [b for b in args.backends.split(",") if b]
    if args.inject == "worker" and not has_faults_parameter():
        raise SystemExit("--inject worker needs a library whose trainers take faults=")
    print(f"codedcomputing from {Path(cc.__file__).resolve().parent}", flush=True)
    setting = f"inject={args.inject} n={N} s={args.s} steps={args.steps} cell timeout {args.cell_timeout:g} s"
    print(setting, flush=True)
    ray_cluster = None
    if "ray" in backends:
        import ray

        import training_problems

        ray_cluster = cc.RayCluster(num_cpus=2)
        ray.cloudpickle.register_pickle_by_value(training_problems)
        ray.cloudpickle.register_pickle_by_value(sys.modules[__name__])
    counts = list(range(1, args.s + 2))
    schemes = args.schemes.split(",")
    kinds = args.kinds.split(",")
    totals: Counter = Counter()
    width = 16
    try:
        for backend in backends:
            head = f"{'backend':<10} {'fault':<6} {'faulty':<7}" + "".join(f" {x:<{width}}" for x in schemes)
            print(flush=True)
            print(head, flush=True)
            print("-" * len(head), flush=True)
            for kind in kinds:
                for count in counts:
                    row = f"{backend:<10} {kind:<6} {count:<7}"
                    for scheme in schemes:
                        outcome, detail = run_cell(
                            backend,
                            scheme,
                            kind,
                            count,
                            args.s,
                            args.steps,
                            args.inject,
                            args.step_timeout,
                            args.cell_timeout,
                            ray_cluster,
                        )
                        totals[outcome] += 1
                        row += f" {outcome:<{width}}"
                        if outcome == "crash":
                            print(f"  crash {backend} {scheme} {kind} {count}: {detail}", flush=True)
                    print(row, flush=True)
    finally:
        if ray_cluster is not None:
            ray_cluster.close()
    print(flush=True)
    print("totals: " + ", ".join(f"{k} {v}" for k, v in sorted(totals.items())), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
