"""One local Ray for the whole test session (``ray_session`` fixture): a Ray start costs seconds and
about a gigabyte, so every test of the shared executor suite that runs against ``executor="ray"``
shares it. Tests that need a cluster of their own (several nodes, a node killed) start it in a
child Python, where it cannot disturb this one."""

from __future__ import annotations

import os
from collections.abc import Iterator
from typing import Any

import pytest

__all__ = ["ray_session"]


@pytest.fixture(scope="session")
def ray_session() -> Iterator[Any]:
    """``ray`` connected to a local two-CPU Ray, shut down at the end of the session."""
    os.environ["RAY_USAGE_STATS_ENABLED"] = "0"
    import ray

    if not ray.is_initialized():
        # "local": a Ray of its own even when another cluster runs on this machine (a benchmark, a
        # failover test's child), which ray.init() would otherwise join
        ray.init(address="local", num_cpus=2, include_dashboard=False, log_to_driver=False, configure_logging=False)
    yield ray
    ray.shutdown()
