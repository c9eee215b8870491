"""Serving a stream of queries on model replicas: schemes compared at equal resources.

Queries arrive singly; R replicas each hold the model once and serve a FIFO queue. A scheme
decides which tasks (calls of ``f``) a query becomes: none (load-balanced, no redundancy),
replication, hedged requests, a systematic code over groups of queries, or learned parity
models. :class:`SimulatedServer` runs any scheme on a virtual clock (discrete events), for
many replicas and long streams; its :class:`ServingRecord` holds every query's latency and
outcome, every replica's load, and the redundant work::

    import codedcomputing as cc
    from codedcomputing import serving

    service = cc.runtime.delays.Bimodal(base=1.0, p=0.01, slowdown=10.0)
    server = serving.SimulatedServer(15, service, seed=0)
    arrivals = serving.poisson_arrivals(10_000, 0.5, 15, service, rng=1)
    code = cc.BACC(10, 15, systematic=True)
    for scheme in (serving.NoRedundancy(), serving.Hedge(1.2), serving.Coded(code, tau=1.2)):
        print(server.run(scheme, arrivals).summary())

:class:`ThreadServer` runs the same scheme objects in real time on R replica threads
(``submit(x)`` returns a future of the answer), and :func:`drive` feeds it open-loop arrivals
from :func:`poisson_arrivals` or :func:`bursty_arrivals`; :class:`Interference` runs CPU-bound
background processes (pinned to chosen cores) that make replicas straggle for real.
:class:`RayServer` is the same server with its replicas as Ray actors (one per replica, the
model shipped once through the object store): a replica lost with its node loses no query
(its queries are decoded from their groups or re-dispatched). The serving core knows nothing
of Ray or HTTP: backends and endpoints sit on top.
"""

from .arrivals import bursty_arrivals, mean_service, poisson_arrivals
from .interference import Interference, can_pin
from .load import drive
from .ray_server import RayServer
from .records import OUTCOMES, ServingRecord
from .schemes import SCHEMES, Coded, Hedge, NoRedundancy, ParM, Replication, Scheme, make_scheme, parse_scheme
from .server import SimulatedServer
from .threads import Answer, QueryFailed, QueryTimeout, ReplicaLost, ThreadServer

__all__ = [
    "OUTCOMES",
    "SCHEMES",
    "Answer",
    "Coded",
    "Hedge",
    "Interference",
    "NoRedundancy",
    "ParM",
    "QueryFailed",
    "QueryTimeout",
    "RayServer",
    "ReplicaLost",
    "Replication",
    "Scheme",
    "ServingRecord",
    "SimulatedServer",
    "ThreadServer",
    "bursty_arrivals",
    "can_pin",
    "drive",
    "make_scheme",
    "mean_service",
    "parse_scheme",
    "poisson_arrivals",
]
