"""The local Ray that the runtime's Ray tests share."""

from __future__ import annotations

import pytest


@pytest.fixture(scope="session")
def local_ray():
    """The ``ray`` module with a local Ray of 2 CPUs (no dashboard) started in this process, one
    for every runtime test module that asks for it (starting one costs 10-15 s on 2 busy cores);
    a Ray already running in this process is joined. Shut down at the end of the session. Tests
    that need their own Ray (another CPU count, several nodes) start it themselves."""
    ray = pytest.importorskip("ray")  # the README's install has the ray extra: this runs in CI
    if not ray.is_initialized():
        ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False, configure_logging=False)
    yield ray
    if ray.is_initialized():
        ray.shutdown()
