"""Result types returned through the middleware chains. All are dataclasses so that
middleware can derive a changed result with ``dataclasses.replace``."""

from __future__ import annotations

import dataclasses
from typing import Any, Literal

from .messages import Message

FinishReason = Literal["text_response", "max_steps", "error"]


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
class TurnResult:
    turn_id: str
    response_message: Message | None = None
    finish_reason: FinishReason = "text_response"
    error: dict[str, Any] | None = None
    text: str | None = None
    # the parsed final answer of an agent with ``spec.output.schema`` (validated); None otherwise
    output: Any = None

    def to_dict(self) -> dict[str, Any]:
        return {
            "turnId": self.turn_id,
            "finishReason": self.finish_reason,
            "text": self.text,
            "responseMessage": self.response_message.to_record() if self.response_message else None,
            "error": self.error,
            "output": self.output,
        }


__all__ = ["FinishReason", "StepResult", "ToolCall", "ToolCallResult", "TurnResult"]
