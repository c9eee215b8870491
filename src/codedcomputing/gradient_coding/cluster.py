"""The same training schemes on a real cluster of the runtime (threads): stateful workers that
hold their partitions and, under pipelining, their stored gradients between steps.

Each worker is a :class:`WorkerState` created once (its partitions and its stored
gradients stay with it; only ``theta`` and the step travel per step). A step is one
``cluster.submit`` of a tiny per-worker input (the worker's index and the step) and one
``cluster.collect`` that waits for what the scheme needs (all ``n``, the fastest ``n - s``,
or the first arrival of every FR group), so stragglers of a step never hold up the next
step's dispatch: they finish in the background and, the step being closed, their work is
discarded (a pipelined worker then keeps its older stored gradient, as on the simulated
clock: its fresh gradient is kept only when its result arrived in time).

Time is real: each worker computes its partitions (``s + 1`` for GC, one for PGC) and then
sleeps its delay for the step, drawn from ``delays`` (any :mod:`codedcomputing.runtime.delays`
model, seeded), so the delay adds to the real compute as on the simulated clock (a
cluster's own ``delays`` would instead set each result's earliest arrival). Meant for a
:class:`~codedcomputing.ThreadCluster` with a thread per worker and some to spare (a
straggler's sleeping task holds its thread into the next step); a
:class:`~codedcomputing.SimulatedCluster` would charge every task the same ``compute_s``
whatever its load, so use :func:`~codedcomputing.gradient_coding.simulate` for the virtual
clock. On a :class:`~codedcomputing.RayCluster` each worker is a Ray actor that keeps its
state in its own process (:func:`_train_on_ray`).
"""

from __future__ import annotations

import threading
import time

import numpy as np

from ..runtime.clusters import Cluster
from ..runtime.delays import DelayModel
from ..runtime.ray_cluster import RayCluster, _ray
from .codes import CyclicRepetition, FractionalRepetition
from .training import Problem, Step, check_run, combine

__all__ = ["WorkerState", "train"]


class WorkerState:
    r"""One worker's state: its partitions, its scheme's coefficients over them, and (for
    pipelined schemes) the latest gradient of each partition with the step it was computed
    at. :meth:`work` runs one step; under pipelining its fresh gradients stay pending until
    the master :meth:`settle`\ s the step, keeping them only if the worker's result arrived
    in time (a late worker's work is lost, as on the simulated clock)."""

    def __init__(self, worker: int, partitions, coefficients, pipelined: bool):
        self.worker = worker
        self.partitions = [int(p) for p in partitions]
        self.coefficients = np.asarray(coefficients, dtype=np.float64)
        self.pipelined = pipelined
        self.stored: dict[int, np.ndarray] = {}
        self.stamps = np.zeros(len(self.partitions), dtype=np.int64)
        self.pending: dict[int, dict[int, np.ndarray]] = {}  # step -> slot -> fresh gradient
        self.closed = -1  # the last step settled: later work for it or earlier is dropped
        self.lock = threading.Lock()

    def work(self, problem: Problem, theta: np.ndarray, t: int) -> np.ndarray:
        """This step's message. GC, IS and DGD: the coefficient-weighted sum of fresh
        gradients over its partitions (DGD and IS-SGD hold one). PGC: recompute partition
        slot ``t mod (s + 1)`` (all of them at step 0) and send the sum of the stored ones
        with the fresh one in its slot."""
        if not self.pipelined:
            pairs = zip(self.coefficients, self.partitions, strict=True)
            return sum(c * problem.gradient(theta, j) for c, j in pairs)
        slots = range(len(self.partitions)) if t == 0 else [t % len(self.partitions)]
        fresh = {slot: problem.gradient(theta, self.partitions[slot]) for slot in slots}
        with self.lock:
            if t > self.closed:
                self.pending[t] = fresh
            current = dict(self.stored)
        current.update({self.partitions[slot]: g for slot, g in fresh.items()})
        return sum(current.values())

    def settle(self, t: int, arrived: bool) -> None:
        """End step ``t``: keep its pending gradients if the worker's result arrived."""
        with self.lock:
            fresh = self.pending.pop(t, None)
            if arrived and fresh is not None:
                for slot, gradient in fresh.items():
                    self.stored[self.partitions[slot]] = gradient
                    self.stamps[slot] = t
            self.closed = max(self.closed, t)
            for step in [k for k in self.pending if k <= self.closed]:
                del self.pending[step]


def train(
    scheme: str,
    problem: Problem,
    num_stragglers: int,
    steps: int,
    cluster: Cluster,
    *,
    lr: float = 0.1,
    delays: DelayModel | None = None,
    seed=0,
    code_seed: int = 0,
) -> list[Step]:
    """Run ``scheme`` (one of :data:`~codedcomputing.gradient_coding.SCHEMES`) for ``steps``
    steps on ``cluster``, one worker per partition of ``problem``, each worker sleeping a
    delay from ``delays`` (seeded by ``seed``) after its compute; return the steps (step 0,
    the start, first), with real seconds."""
    scheme, n, s, steps, lr, rng = check_run(scheme, problem, num_stragglers, steps, lr, delays, seed)
    if delays is not None:
        delays.reset()  # a model with memory starts afresh
    if not isinstance(cluster, Cluster):
        raise ValueError(f"cluster must be a codedcomputing cluster (ThreadCluster, ...), got {cluster!r}")
    fr = FractionalRepetition(n, s) if scheme in ("gc-fr", "pgc-fr") else None
    cr = CyclicRepetition(n, s, code_seed) if scheme == "gc-cr" else None
    workers = []
    for i in range(n):
        if scheme in ("dgd", "is-sgd"):
            parts, coefficients = [i], [1.0]
        elif fr is not None:
            parts = fr.partitions(i)
            coefficients = fr.encoding_matrix[i, parts]
        else:
            parts = (i + np.arange(s + 1)) % n
            coefficients = cr.encoding_matrix[i, parts] if cr is not None else np.ones(s + 1)
        workers.append(WorkerState(i, parts, coefficients, scheme.startswith("pgc")))
    if scheme == "dgd":
        wait_for = n
    elif fr is not None:
        wait_for = lambda alive: len({fr.group(i) for i in alive}) == fr.num_groups  # noqa: E731
    else:
        wait_for = n - s
    if isinstance(cluster, RayCluster):
        return _train_on_ray(scheme, problem, workers, wait_for, s, steps, lr, delays, rng, fr, cr, cluster)
    theta = problem.initial.copy()
    history = [Step(0, 0.0, 0.0, float(problem.loss(theta)))]
    wall = 0.0
    for t in range(steps):
        delay = np.zeros(n) if delays is None else np.asarray(delays.sample(n, rng), dtype=np.float64)

        def task(row, theta=theta, t=t, delay=delay):
            worker = workers[int(np.asarray(row).ravel()[0])]
            message = worker.work(problem, theta, t)
            time.sleep(float(delay[worker.worker]))  # a slow worker, after its compute
            return message[None]

        call = cluster.submit(task, np.arange(n, dtype=np.float64)[:, None])
        gathered = cluster.collect(call, wait_for)
        arrived = set(int(i) for i in gathered.alive)
        for worker in workers:  # the step closes: late workers' work is dropped
            worker.settle(t, worker.worker in arrived)
        if gathered.results is None:
            summary = gathered.workers.failure_summary()
            raise RuntimeError(f"step {t + 1}: no usable result arrived; {summary}")
        alive = [int(i) for i in gathered.alive]
        messages = np.asarray(gathered.results, dtype=np.float64).reshape(len(alive), -1)
        estimate, used = combine(scheme, messages, alive, n, s, fr, cr)
        theta = theta - lr * estimate
        wall += gathered.wall_s
        ages = None
        if scheme.startswith("pgc"):
            ages = np.stack([t - w.stamps for w in workers])
        history.append(Step(t + 1, wall, gathered.wall_s, float(problem.loss(theta)), tuple(used), ages))
    return history


_actor_class = None


def _worker_actor():
    """The Ray actor class of a worker (built on first use: Ray is imported only then). A
    threaded actor (``max_concurrency``), so that a straggler's sleeping step does not hold
    up its next one (each step's delays are independent, as on threads); ``num_cpus=0``, so
    that n actors fit a small node (their compute shares its CPUs)."""
    global _actor_class
    if _actor_class is None:
        ray = _ray()

        @ray.remote(max_concurrency=4, num_cpus=0)
        class GradientWorker:
            def __init__(self, problem):
                self.problem = problem
                self.state = None

            def reset(self, worker, partitions, coefficients, pipelined):
                self.state = WorkerState(worker, partitions, coefficients, pipelined)

            def work(self, theta, t, delay):
                message = self.state.work(self.problem, theta, t)
                time.sleep(delay)
                return message

            def settle(self, t, arrived):
                self.state.settle(t, arrived)

            def ages(self, t):
                return t - self.state.stamps

        _actor_class = GradientWorker
    return _actor_class


def _actors(cluster: RayCluster, problem: Problem, n: int) -> list:
    """``n`` worker actors holding ``problem``, created on first use for this cluster and
    problem and kept for later runs (starting a worker process costs about a second; the
    problem is shipped to each actor once, through the object store)."""
    ray = _ray()
    pools = cluster.__dict__.setdefault("_gradient_workers", {})
    held, actors = pools.get(id(problem), (None, []))
    if held is not problem:  # a new problem (or a reused id): fresh actors
        actors = []
    if len(actors) < n:
        shared = ray.put(problem)
        cls = _worker_actor()
        actors = actors + [cls.remote(shared) for _ in range(n - len(actors))]
        pools[id(problem)] = (problem, actors)  # keeps the problem alive, so its id is not reused
    return actors[:n]


def _train_on_ray(
    scheme, problem, workers, wait_for, s, steps, lr, delays, rng, fr, cr, cluster
) -> list[Step]:
    """:func:`train` on Ray: one actor per worker holds its state (the actors and the shipped
    problem are kept on the cluster for its later runs, :func:`_actors`; each run resets
    their states, and the clock starts once every actor is ready); a step sends ``theta``
    (put once) and waits for the first arrivals, one ``ray.wait`` at a time, in arrival
    order. Late calls finish in their actor and are dropped at the step's close
    (``settle``); nothing is cancelled."""
    ray = _ray()
    n = len(workers)
    actors = _actors(cluster, problem, n)
    ray.get(
        [
            a.reset.remote(w.worker, w.partitions, w.coefficients, w.pipelined)
            for a, w in zip(actors, workers, strict=True)
        ]
    )
    ready = wait_for if callable(wait_for) else (lambda alive, k=wait_for: len(alive) >= k)
    theta = problem.initial.copy()
    history = [Step(0, 0.0, 0.0, float(problem.loss(theta)))]
    wall = 0.0
    for t in range(steps):
        delay = np.zeros(n) if delays is None else np.asarray(delays.sample(n, rng), dtype=np.float64)
        start = time.perf_counter()
        theta_ref = ray.put(theta)
        owner = {actor.work.remote(theta_ref, t, float(delay[i])): i for i, actor in enumerate(actors)}
        waiting, alive, messages = list(owner), [], []
        while waiting and not ready(alive):
            (done,), waiting = ray.wait(waiting, num_returns=1)
            try:
                messages.append(np.asarray(ray.get(done), dtype=np.float64).ravel())
                alive.append(owner[done])
            except Exception:  # a failed worker is a straggler
                continue
        step_s = time.perf_counter() - start
        settled = [actor.settle.remote(t, i in alive) for i, actor in enumerate(actors)]
        if not ready(alive):
            raise RuntimeError(f"step {t + 1}: too few workers answered ({len(alive)} of {n})")
        estimate, used = combine(scheme, np.stack(messages), alive, n, s, fr, cr)
        theta = theta - lr * estimate
        wall += step_s
        ages = None
        if scheme.startswith("pgc"):  # read after this step's settle (a threaded actor may reorder)
            ray.get(settled)
            ages = np.stack(ray.get([a.ages.remote(t) for a in actors]))
        history.append(Step(t + 1, wall, step_s, float(problem.loss(theta)), tuple(used), ages))
    return history
