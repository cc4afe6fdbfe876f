"""The engine: one agent instance's turn/step loop, the pipeline wiring, the agents hub and the swarm
context. It runs turns and knows nothing about processes: executors (``goondan.executors``) decide
where an instance lives and carry events to it; the engine never imports them (an import contract in
``pyproject.toml`` checks it)."""

from . import _approvals as approvals
from ._agents import (
    UNANSWERED,
    AgentLimits,
    AgentRequestResult,
    AgentSendResult,
    AgentsHub,
    HubBackend,
    SpawnLimiter,
    SpawnRegistry,
    delivery_failed,
    request_failed,
    request_unanswered,
)
from ._instance import AgentInstance, RuntimeEventListener, flush_all_runtime_events
from ._swarm import SwarmContext

__all__ = [
    "UNANSWERED",
    "AgentInstance",
    "AgentLimits",
    "AgentRequestResult",
    "AgentSendResult",
    "AgentsHub",
    "HubBackend",
    "RuntimeEventListener",
    "SpawnLimiter",
    "SpawnRegistry",
    "SwarmContext",
    "approvals",
    "delivery_failed",
    "flush_all_runtime_events",
    "request_failed",
    "request_unanswered",
]
