"""Result types returned through the middleware chains. All are dataclasses so that
middleware can derive a changed result with ``dataclasses.replace``."""

from __future__ import annotations

import dataclasses
from typing import Any, Literal

from .messages import Message

FinishReason = Literal["text_response", "max_steps", "error", "awaiting_approval", "cancelled"]


@dataclasses.dataclass(slots=True)
class ToolCall:
    id: str
    name: str
    args: dict[str, Any]


@dataclasses.dataclass(slots=True)
class ToolCallResult:
    tool_call_id: str
    tool_name: str
    output: Any = None
    status: Literal["ok", "error"] = "ok"
    error: dict[str, Any] | None = None

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "toolCallId": self.tool_call_id,
            "toolName": self.tool_name,
            "status": self.status,
            "output": self.output,
        }
        if self.error is not None:
            out["error"] = self.error
        return out


@dataclasses.dataclass(slots=True)
class StepResult:
    status: Literal["completed", "failed"] = "completed"
    should_continue: bool = False
    tool_calls: list[ToolCall] = dataclasses.field(default_factory=list)
    tool_results: list[ToolCallResult] = dataclasses.field(default_factory=list)
    metadata: dict[str, Any] = dataclasses.field(default_factory=dict)

    @property
    def has_tool_calls(self) -> bool:
        return bool(self.tool_calls)


@dataclasses.dataclass(slots=True)
class PendingApproval:
    """A tool call waiting for a person's decision (``TurnResult.pending_approvals``,
    ``Runtime.pending_approvals``). Nothing runs while it waits: it lives in the instance's store."""

    approval_id: str
    tool_call_id: str
    tool_name: str
    args: dict[str, Any]
    agent_name: str
    instance_key: str
    reason: str | None = None
    requested_at: str | None = None
    expires_at: str | None = None

    def to_dict(self) -> dict[str, Any]:
        return {
            "approvalId": self.approval_id,
            "toolCallId": self.tool_call_id,
            "toolName": self.tool_name,
            "args": self.args,
            "agentName": self.agent_name,
            "instanceKey": self.instance_key,
            "reason": self.reason,
            "requestedAt": self.requested_at,
            "expiresAt": self.expires_at,
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> PendingApproval:
        def text(key: str) -> str | None:
            value = data.get(key)
            return value if isinstance(value, str) else None

        args = data.get("args")
        return cls(
            approval_id=str(data.get("approvalId", "")),
            tool_call_id=str(data.get("toolCallId", "")),
            tool_name=str(data.get("toolName", "")),
            args=args if isinstance(args, dict) else {},
            agent_name=str(data.get("agentName", "")),
            instance_key=str(data.get("instanceKey", "")),
            reason=text("reason"),
            requested_at=text("requestedAt"),
            expires_at=text("expiresAt"),
        )


@dataclasses.dataclass(slots=True)
class TurnResult:
    turn_id: str
    response_message: Message | None = None
    finish_reason: FinishReason = "text_response"
    error: dict[str, Any] | None = None
    text: str | None = None
    # the parsed final answer of an agent with ``spec.output.schema`` (validated); None otherwise
    output: Any = None
    # the tool calls this turn waits on (finish_reason "awaiting_approval"); empty otherwise
    pending_approvals: list[PendingApproval] = dataclasses.field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return {
            "turnId": self.turn_id,
            "finishReason": self.finish_reason,
            "text": self.text,
            "responseMessage": self.response_message.to_record() if self.response_message else None,
            "error": self.error,
            "output": self.output,
            "pendingApprovals": [p.to_dict() for p in self.pending_approvals],
        }


__all__ = ["FinishReason", "PendingApproval", "StepResult", "ToolCall", "ToolCallResult", "TurnResult"]
