"""Static proof, for the type checker only, that the runtime's inter-agent call objects satisfy the
public protocols of :mod:`goondan.types` (``ctx.agents`` and a tool's ``ctx.runtime`` are built
lazily and typed ``Any`` internally, so nothing else would notice a drift). Never imported."""

from __future__ import annotations

from ._api_types import AgentsApi, ToolRuntimeApi
from .engine._agents import MiddlewareAgents, ToolRuntime


def _middleware_agents(value: MiddlewareAgents) -> AgentsApi:
    return value


def _tool_runtime(value: ToolRuntime) -> ToolRuntimeApi:
    return value
