"""The agent runtime: instances, the turn/step loop, inter-agent routing."""

from ._agents import AgentRequestResult, AgentSendResult
from ._instance import AgentInstance
from ._runtime import Runtime, run

__all__ = ["AgentInstance", "AgentRequestResult", "AgentSendResult", "Runtime", "run"]
