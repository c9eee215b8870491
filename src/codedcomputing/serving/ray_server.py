"""Replicas as Ray actors: the thread server's frontend and schemes over a Ray cluster.

:class:`RayServer` is a :class:`~codedcomputing.serving.ThreadServer` whose replicas are Ray
actors, one per replica: the model goes into the object store once (``ray.put``) and each
actor receives it at its construction; another function (ParM's ``parity_f``) goes into the
object store once and to an actor with the first task of it that actor runs, which keeps it
(later tasks carry its key alone); the frontend, its timers, the schemes and the record
are the thread server's. Each replica keeps a local proxy thread and a FIFO queue: the proxy
sends one task at a time to its actor and waits for its result, so the actor's queue is the
replica's queue, the frontend can still cancel a task that has not started, and an injected
service draw is slept inside the actor, before ``f`` (a task in flight is on its node).

Node loss. A task whose actor died (its node lost: ``RayActorError``, ``ActorDiedError``,
``NodeDiedError``, ``ObjectLostError``, ``OwnerDiedError``) is lost with its replica
(:class:`~codedcomputing.serving.ReplicaLost`): the replica is dead from then on, the tasks
queued behind it are lost too, and the balancer never picks it again while a replica lives.
A lost task is a straggler: its query is answered by another path if one is left (a
replication copy, a hedge, its group's decode); the **re-dispatch rule**: a query with no
path left, one of whose tasks was lost, gets a new task of the same role and group on a live
replica (at most ``num_replicas`` times). ``record.outcome`` says how each query was answered
(``"decoded"`` among them), ``record.redispatched`` which were re-dispatched, ``lost_tasks``
and ``lost_replicas`` what was lost. With ``replace=True`` a lost replica gets a new actor
(``record.replaced``), else it stays dead. A task whose ``f`` raised is a failed task, as on
threads (no re-dispatch: the same input would fail again).

Ray: joins the cluster at ``address`` (``"auto"``, ``"ray://..."`` or ``host:port``), or uses
the Ray this process already runs, or starts a local one (``num_cpus``) and shuts it down at
:meth:`~RayServer.close`. Start Ray yourself to keep one session across several servers. Ray
is started (or joined) only from the main thread: :meth:`~RayServer.start` in another thread
(an HTTP app's lifespan runs it in a worker thread) raises ``RuntimeError`` unless Ray already
runs, since a process whose Ray started in a worker thread aborted at exit (SIGABRT) in 2 of 3
runs (Ray 2.60); call ``ray.init(...)`` in the main thread first (``coded serve --backend ray``
does).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Mapping, Sequence

import numpy as np

from .._validation import check_count, check_flag, check_number
from .threads import ReplicaLost, ThreadServer

__all__ = ["RayServer"]


def _ray():
    try:
        import ray
    except ImportError:
        raise ImportError(
            "RayServer needs Ray: pip install 'codedcomputing[ray]' (or pip install ray)"
        ) from None
    return ray


class _Replica:
    """A Ray actor holding one replica's model; serves one call at a time (FIFO).

    Other functions (ParM's parity model) are kept too: ``call(key, source, x, delay)`` runs the
    model (``key`` -1) or function ``key``; ``source`` is ``[ref]``, its object-store reference,
    left unresolved (a list keeps Ray from fetching it), which the actor fetches only when it does
    not hold ``key`` yet: the first call, or again after a fetch failed (``received`` counts the
    functions that crossed). No call depends on an earlier one having succeeded."""

    def __init__(self, f):
        self.f = f
        self.functions: dict = {}
        self.received = 0

    def call(self, key, source, x, delay):
        if key >= 0 and key not in self.functions:
            self.functions[key] = _ray().get(source[0])
            self.received += 1
        if delay > 0:
            time.sleep(delay)
        return np.asarray((self.f if key < 0 else self.functions[key])(x))

    def shipped(self) -> int:
        return self.received

    def node(self) -> str:
        return _ray().get_runtime_context().get_node_id()


def _lost_errors(ray) -> tuple:
    errors = ray.exceptions
    return tuple(
        getattr(errors, name)
        for name in ("RayActorError", "NodeDiedError", "ObjectLostError", "OwnerDiedError")
        if hasattr(errors, name)
    )


class _RayReplicas:
    """The Ray actor backend (the interface of :class:`~codedcomputing.serving.threads._ThreadReplicas`)."""

    def __init__(self, server: RayServer):
        self.server = server

    def start(self, run) -> None:
        ray = _ray()
        server = self.server
        self.halt = run.halt
        self.started_ray = False
        if not ray.is_initialized():
            if threading.current_thread() is not threading.main_thread():
                # a driver whose Ray started in another thread aborted (SIGABRT) at exit in 2 of 3
                # runs (Ray 2.60, from the HTTP app's lifespan): refused, with the fix
                raise RuntimeError(
                    f"RayServer.start would start Ray in thread {threading.current_thread().name!r}, "
                    "not the main thread (such a process may abort at exit): call ray.init() "
                    f"(address={server.address!r} to join a cluster) in the main thread before "
                    "starting the server, and ray.shutdown() after closing it"
                )
            ray.init(
                address="local" if server.address is None else server.address,
                num_cpus=server.num_cpus if server.address is None else None,
                include_dashboard=False,
                log_to_driver=False,
                configure_logging=False,
            )
            self.started_ray = True
        self.lost = _lost_errors(ray)
        self.remote = remote = ray.remote(max_restarts=0, max_task_retries=0)(_Replica)
        self.refs = refs = {}  # one object-store copy per distinct model
        for g in server.functions:
            if id(g) not in refs:
                refs[id(g)] = ray.put(g)
        self.lock = threading.Lock()
        self.extra: dict[int, tuple] = {}  # other functions (parity models): (fn, key, ref)
        self.actors = [
            remote.options(**server.actor_options[r]).remote(refs[id(g)])
            for r, g in enumerate(server.functions)
        ]
        try:
            server.nodes = ray.get([a.node.remote() for a in self.actors], timeout=server.ready_timeout)
        except Exception:
            self.close()
            raise

    def _function(self, fn) -> tuple:
        """``(key, [ref] or None)``: ``fn``'s key and its object-store copy (the actor fetches it
        once and keeps it)."""
        if fn is None:
            return -1, None
        entry = self.extra.get(id(fn))
        if entry is None or entry[0] is not fn:  # keeps fn alive: its id stays its own
            with self.lock:  # proxy threads of several replicas may meet a new fn at once
                entry = self.extra.get(id(fn))
                if entry is None or entry[0] is not fn:
                    entry = self.extra[id(fn)] = (fn, len(self.extra), _ray().put(fn))
        _, key, ref = entry
        return key, [ref]

    def call(self, replica, fn, x, delay):
        ray = _ray()
        key, source = self._function(fn)
        ref = self.actors[replica].call.remote(key, source, x, delay)
        while True:
            ready, _ = ray.wait([ref], timeout=self.server.poll_s)
            if ready:
                break
            if self.halt.is_set():
                raise RuntimeError("the server closed while the task ran")
        try:
            return ray.get(ref)
        except self.lost as err:
            raise ReplicaLost(type(err).__name__) from None
        except ray.exceptions.RayTaskError as err:
            cause = err.cause if isinstance(err.cause, BaseException) else err
            raise RuntimeError(f"{type(cause).__name__}: {cause}") from None

    def replace(self, replica) -> bool:
        server = self.server
        if not server.replace:
            return False
        ray = _ray()
        options = server.actor_options[replica] if server.replace_options is None else server.replace_options
        actor = self.remote.options(**options).remote(self.refs[id(server.functions[replica])])
        ref = actor.node.remote()
        deadline = time.monotonic() + server.ready_timeout
        node = None
        while not self.halt.is_set() and time.monotonic() < deadline:  # closing: give up
            if ray.wait([ref], timeout=server.poll_s)[0]:
                try:
                    node = ray.get(ref)
                except Exception:  # its node went too
                    pass
                break
        if node is None:
            try:
                ray.kill(actor, no_restart=True)
            except Exception:
                pass
            return False
        self.actors[replica] = actor
        server.nodes[replica] = node
        return True

    def close(self) -> None:
        ray = _ray()
        for actor in getattr(self, "actors", []):
            try:
                ray.kill(actor, no_restart=True)
            except Exception:  # already dead with its node
                pass
        self.actors = []
        if self.started_ray and ray.is_initialized():
            ray.shutdown()


class RayServer(ThreadServer):
    """R model replicas as Ray actors, each serving a FIFO queue, driven in real time by one scheme.

    Parameters
    ----------
    f, num_replicas, scheme, service, time_unit, balancer, cancel, seed
        As for :class:`~codedcomputing.serving.ThreadServer`; ``f`` (and ParM's ``parity_f``)
        must pickle (cloudpickle). The injected service draw is slept in the actor.
    query_timeout, output_shape, keep_record
        As for :class:`~codedcomputing.serving.ThreadServer`.
    address : str or None, default None
        The Ray cluster to join; None: the Ray this process runs, else a new local one.
    num_cpus : int or None, default None
        CPUs of a local Ray this server starts (None: all).
    actor_options : mapping, or sequence of R mappings, or None
        ``.options(...)`` of every replica's actor, or of replica r's (placement: ``resources``,
        ``scheduling_strategy``, ``num_cpus``); None: Ray's defaults.
    ready_timeout : float, default 120
        Seconds to wait at :meth:`start` for every actor to be up (it raises otherwise), and for
        a replacement.
    replace : bool, default False
        Replace a lost replica: once its queued tasks are reported lost, a new actor is built
        (``replace_options``, None: the replica's ``actor_options``, which may name the lost
        node) and serves the replica's queue; ``record.replaced`` lists them.
    replace_options : mapping or None
        The replacements' ``.options(...)``.
    poll_s : float, default 0.05
        How often a replica's proxy thread looks whether the server is closing while a task runs
        (results are seen at once).

    After :meth:`start`, ``nodes[r]`` is the Ray node id replica r's actor runs on.
    """

    def __init__(
        self,
        f,
        num_replicas: int,
        scheme,
        *,
        address: str | None = None,
        num_cpus: int | None = None,
        actor_options=None,
        ready_timeout: float = 120.0,
        replace: bool = False,
        replace_options=None,
        poll_s: float = 0.05,
        service=None,
        time_unit: float = 1.0,
        balancer: str = "p2c",
        cancel=True,
        seed=0,
        query_timeout: float | None = None,
        output_shape=None,
        keep_record: bool | int = False,
    ):
        super().__init__(
            f,
            num_replicas,
            scheme,
            service=service,
            time_unit=time_unit,
            balancer=balancer,
            cancel=cancel,
            seed=seed,
            query_timeout=query_timeout,
            output_shape=output_shape,
            keep_record=keep_record,
        )
        if address is not None and not isinstance(address, str):
            raise ValueError(f"address must be a Ray address string or None, got {address!r}")
        self.address = address
        self.num_cpus = None if num_cpus is None else check_count(num_cpus, "num_cpus", 1)
        if actor_options is None:
            options = [{}] * self.num_replicas
        elif isinstance(actor_options, Mapping):
            options = [dict(actor_options)] * self.num_replicas
        elif (
            isinstance(actor_options, Sequence)
            and len(actor_options) == self.num_replicas
            and all(isinstance(o, Mapping) for o in actor_options)
        ):
            options = [dict(o) for o in actor_options]
        else:
            raise ValueError(
                f"actor_options must be None, a mapping or {self.num_replicas} mappings, "
                f"got {actor_options!r}"
            )
        self.actor_options = options
        self.replace = check_flag(replace, "replace")
        if replace_options is not None and not isinstance(replace_options, Mapping):
            raise ValueError(f"replace_options must be None or a mapping, got {replace_options!r}")
        self.replace_options = None if replace_options is None else dict(replace_options)
        self.ready_timeout = check_number(ready_timeout, "ready_timeout", low=0.0, low_open=True)
        self.poll_s = check_number(poll_s, "poll_s", low=0.0, low_open=True)
        self.nodes: list[str] | None = None

    def _replicas(self):
        return _RayReplicas(self)

    def __repr__(self) -> str:
        return (
            f"RayServer({self.num_replicas} replicas, {self.scheme!r}, service={self.service!r}, "
            f"time_unit={self.time_unit:g}, balancer={self.balancer!r}, cancel={self.cancel}, "
            f"seed={self.seed}, address={self.address!r})"
        )
