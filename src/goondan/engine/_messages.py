"""The messages the turn loop itself appends (inbound user message, the model's assistant message,
tool results), built frozen from the start.

The conversation state stores frozen copies of whatever is emitted; building the runtime's own
messages out of :class:`FrozenDict`/:class:`FrozenList` lets it store them without a second copy.
Only values that come from outside (model tool-call arguments, tool outputs) are copied, once.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from .._ids import new_id, utc_now
from .._json import FrozenDict, FrozenList, freeze_json, to_frozen_json
from ..messages import Message
from ..results import ToolCall

_USER_SOURCE = FrozenDict({"type": "user"})
_NO_METADATA = FrozenDict()  # immutable, so every message without metadata can share it
# the id of the inbound event a user message was stored for: a redelivered event is not stored twice
EVENT_ID_KEY = "__goondanEventId"


def inbound_message(text: str | FrozenList, inbound: Mapping[str, Any], event_id: str | None = None) -> Message:
    """The user message of an inbound event (its text, or its frozen content parts); ``inbound``
    becomes ``metadata.__goondanInbound`` and the event's id ``metadata.__goondanEventId``."""
    metadata: dict[str, Any] = {"__goondanInbound": to_frozen_json(inbound)}
    if event_id is not None:
        metadata[EVENT_ID_KEY] = event_id
    return Message(
        new_id("msg"),
        FrozenDict({"role": "user", "content": text}),
        FrozenDict(metadata),
        utc_now(),
        _USER_SOURCE,
    )


def model_message(
    text: str | None, calls: Sequence[ToolCall], provider_meta: Mapping[str, Any], step_id: str
) -> Message:
    """The assistant message of one model response: its text, then one ``tool-call`` part per call
    (the same shape :func:`goondan.messages.assistant_message` builds)."""
    content: Any
    if calls:
        parts: list[Any] = []
        if text:
            parts.append(FrozenDict({"type": "text", "text": text}))
        for call in calls:
            part = {"type": "tool-call", "toolCallId": call.id, "toolName": call.name, "input": freeze_json(call.args)}
            meta = provider_meta.get(call.id)
            if meta:
                part["providerMetadata"] = freeze_json(meta)
            parts.append(FrozenDict(part))
        content = FrozenList(parts)
    else:
        content = text if text is not None else ""
    return Message(
        new_id("msg"),
        FrozenDict({"role": "assistant", "content": content}),
        _NO_METADATA,
        utc_now(),
        FrozenDict({"type": "assistant", "stepId": step_id}),
    )


def tool_result_message(call: ToolCall, output: Mapping[str, Any]) -> Message:
    """One ``role: tool`` message with the result of one tool call (docs/architecture.md#messages); ``output`` is the
    frozen output part (:func:`goondan.tools.stored_output_part`)."""
    part = FrozenDict({"type": "tool-result", "toolCallId": call.id, "toolName": call.name, "output": output})
    return Message(
        new_id("msg"),
        FrozenDict({"role": "tool", "content": FrozenList((part,))}),
        _NO_METADATA,
        utc_now(),
        FrozenDict({"type": "tool", "toolCallId": call.id, "toolName": call.name}),
    )
