"""The Ray executor (``executor="ray"``, extra ``goondan-runtime[ray]``): each agent instance is a named Ray
actor placed by Ray, supervised by the process executor's orchestrator on the head; see
``_executor`` and docs/cluster.md. Importing this package does not import ray."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from ._executor import RayExecutor


def __getattr__(name: str) -> object:
    if name == "RayExecutor":
        from ._executor import RayExecutor

        return RayExecutor
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = ["RayExecutor"]
