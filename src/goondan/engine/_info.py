"""``ctx.runtime``: what a turn knows about its agent, swarm, inbound event and caller, with
snake_case attributes. Read-only value objects."""

from __future__ import annotations

from typing import Any

# defined with the other public types (goondan.types re-exports them)
from .._api_types import AgentInfo, CallInfo, InboundInfo, PromptInfo, RuntimeInfo, SwarmInfo


def call_info(event: dict[str, Any]) -> CallInfo | None:
    meta = event.get("metadata") or {}
    stack = meta.get("__goondanAgentCallStack")
    caller = meta.get("callerAgent")
    reply_to = event.get("replyTo")
    if not caller and not stack and not reply_to:
        return None
    return CallInfo(
        caller_agent=caller if isinstance(caller, str) else None,
        caller_instance_key=meta.get("callerInstanceKey") if isinstance(meta.get("callerInstanceKey"), str) else None,
        caller_turn_id=meta.get("callerTurnId") if isinstance(meta.get("callerTurnId"), str) else None,
        call_source=meta.get("callSource") if isinstance(meta.get("callSource"), str) else None,
        call_stack=tuple(str(s) for s in stack) if isinstance(stack, list) else (),
        reply_to=dict(reply_to) if isinstance(reply_to, dict) else None,
    )


def inbound_info(event: dict[str, Any]) -> InboundInfo:
    source = event.get("source") or {}
    meta = event.get("metadata")
    return InboundInfo(
        event_id=str(event.get("id", "")),
        event_type=str(event.get("type", "")),
        source_kind=str(source.get("kind", "")),
        source_name=str(source.get("name", "")),
        created_at=str(event.get("createdAt", "")),
        instance_key=event.get("instanceKey") if isinstance(event.get("instanceKey"), str) else None,
        event_metadata=dict(meta) if isinstance(meta, dict) and meta else None,
    )


__all__ = [
    "AgentInfo",
    "CallInfo",
    "InboundInfo",
    "PromptInfo",
    "RuntimeInfo",
    "SwarmInfo",
    "call_info",
    "inbound_info",
]
