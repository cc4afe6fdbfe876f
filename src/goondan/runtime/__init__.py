"""The programmatic runtime facade: ``Runtime`` and ``run``."""

from ..engine import AgentInstance, AgentRequestResult, AgentSendResult
from ._runtime import Runtime, run

__all__ = ["AgentInstance", "AgentRequestResult", "AgentSendResult", "Runtime", "run"]
