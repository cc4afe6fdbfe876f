"""Process isolation: the orchestrator, the pre-warmed fork server and agent processes
(``Runtime(isolation="process")``; docs/architecture.md#where-processes-are-spawned).
The IPC framing is documented in ``_ipc``."""

from ._clock import Clock, ManualClock, RealClock
from ._ipc import MESSAGE_TYPES
from ._orchestrator import STATUSES, InstanceHandle, Orchestrator, ReconcilePlan, backoff_ms

__all__ = [
    "MESSAGE_TYPES",
    "STATUSES",
    "Clock",
    "InstanceHandle",
    "ManualClock",
    "Orchestrator",
    "RealClock",
    "ReconcilePlan",
    "backoff_ms",
]
