"""The Ray cluster the gradient-coding tests on Ray share within a module."""

from __future__ import annotations

import pytest

import codedcomputing as cc
import training_problems


@pytest.fixture(scope="module")
def ray_cluster():
    """A :class:`~codedcomputing.RayCluster` on a local Ray of 2 CPUs whose processes listen
    on 127.0.0.1 only, shipping ``training_problems`` by value (Ray's workers cannot import
    ``tests/``). Afterwards the cluster is closed and the Ray this fixture started is shut
    down; a Ray already running in this process (an earlier test's) is joined and left as
    it was."""
    ray = pytest.importorskip("ray")  # the README's install has the ray extra: this runs in CI
    from ray._private import ray_constants

    started = False
    with pytest.MonkeyPatch.context() as patch:
        if not ray.is_initialized():
            # ray.init turns a loopback address into this machine's outward IP (and its
            # processes listen on every interface) unless it takes the machine for a
            # single-node one.
            patch.setattr(ray_constants, "ENABLE_RAY_CLUSTER", False)
            ray.init(
                num_cpus=2,
                _node_ip_address="127.0.0.1",
                include_dashboard=False,
                log_to_driver=False,
                configure_logging=False,
            )
            started = True
        cluster = None
        try:
            cluster = cc.RayCluster(seed=0)  # joins the Ray above
            ray.cloudpickle.register_pickle_by_value(training_problems)
            yield cluster
        finally:
            try:
                ray.cloudpickle.unregister_pickle_by_value(training_problems)
            except ValueError:  # never registered
                pass
            if cluster is not None:
                cluster.close()
            if started and ray.is_initialized():
                ray.shutdown()
