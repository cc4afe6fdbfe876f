"""The engine: one agent instance's turn/step loop, the pipeline wiring, the agents hub and the swarm
context. It runs turns and knows nothing about processes: executors (``goondan.executors``) decide
where an instance lives and carry events to it; the engine never imports them."""

from ._agents import AgentRequestResult, AgentSendResult, AgentsHub
from ._instance import AgentInstance
from ._swarm import SwarmContext

__all__ = ["AgentInstance", "AgentRequestResult", "AgentSendResult", "AgentsHub", "SwarmContext"]
