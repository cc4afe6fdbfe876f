"""Messages, message events and the helpers extensions use to build them (docs/architecture.md#messages).

A :class:`Message` wraps one core-message dict (``data``: ``{"role", "content"}``) with a stable id,
free-form ``metadata`` and its ``source``. On disk (``base.jsonl``) and in ``events.jsonl`` a message is
the JSON object ``{id, data, metadata, createdAt, source}``.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import Any, Literal, TypedDict

from ._ids import iso, new_id, parse_iso, utc_now
from ._json import copy_json, json_problem
from .errors import GoondanError

ROLES = frozenset({"system", "user", "assistant", "tool"})
SOURCE_TYPES = frozenset({"user", "assistant", "tool", "system", "extension"})
EVENT_TYPES = frozenset({"append", "replace", "remove", "truncate"})


@dataclasses.dataclass(slots=True)
class Message:
    """One conversation message. ``dataclasses.replace`` works on it."""

    id: str
    data: dict[str, Any]
    metadata: dict[str, Any] = dataclasses.field(default_factory=dict)
    created_at: datetime = dataclasses.field(default_factory=utc_now)
    source: dict[str, Any] = dataclasses.field(default_factory=lambda: {"type": "system"})

    @property
    def role(self) -> str:
        return str(self.data.get("role", ""))

    @property
    def text(self) -> str:
        """The concatenated text of the message (string content, or its text parts)."""
        return content_text(self.data.get("content"))

    def copy(self) -> Message:
        """A deep copy: changing the copy never changes this message."""
        return Message(
            self.id,
            copy_json(self.data),
            copy_json(self.metadata),
            self.created_at,
            copy_json(self.source),
        )

    def to_record(self) -> dict[str, Any]:
        """The on-disk JSON object ``{id, data, metadata, createdAt, source}``."""
        return {
            "id": self.id,
            "data": self.data,
            "metadata": self.metadata,
            "createdAt": iso(self.created_at),
            "source": self.source,
        }

    @classmethod
    def from_record(cls, record: Any) -> Message:
        """Parse an on-disk record; raises :class:`GoondanError` (``E_MESSAGE_INVALID``) if malformed."""
        problem = message_record_problem(record)
        if problem is not None:
            raise GoondanError("E_MESSAGE_INVALID", problem)
        created = record.get("createdAt")
        try:
            created_at = parse_iso(created) if isinstance(created, str) else utc_now()
        except ValueError as exc:
            raise GoondanError("E_MESSAGE_INVALID", f"message createdAt is not ISO-8601: {created!r}") from exc
        return cls(
            record["id"],
            record["data"],
            record.get("metadata") or {},
            created_at,
            record.get("source") or {"type": "system"},
        )


def message_record_problem(record: Any) -> str | None:
    if not isinstance(record, dict):
        return "a message must be a JSON object"
    mid = record.get("id")
    if not isinstance(mid, str) or not mid:
        return "message.id must be a non-empty string"
    data = record.get("data")
    problem = core_message_problem(data)
    if problem:
        return f"message {mid}: {problem}"
    meta = record.get("metadata", {})
    if meta is not None and not isinstance(meta, dict):
        return f"message {mid}: metadata must be an object"
    source = record.get("source", {"type": "system"})
    if not isinstance(source, dict) or source.get("type") not in SOURCE_TYPES:
        return f"message {mid}: source.type must be one of {sorted(SOURCE_TYPES)}"
    return None


def core_message_problem(data: Any) -> str | None:
    if not isinstance(data, dict):
        return "data must be an object {role, content}"
    role = data.get("role")
    if role not in ROLES:
        return f"data.role must be one of {sorted(ROLES)}, got {role!r}"
    content = data.get("content")
    if isinstance(content, str):
        return None
    if not isinstance(content, list):
        return "data.content must be a string or a list of parts"
    for i, part in enumerate(content):
        if not isinstance(part, dict) or not isinstance(part.get("type"), str):
            return f"data.content[{i}] must be an object with a string 'type'"
    return None


def content_text(content: Any) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(str(p.get("text", "")) for p in content if isinstance(p, dict) and p.get("type") == "text")
    return ""


def _new_message(
    role: str,
    content: str | list[dict[str, Any]],
    metadata: Mapping[str, Any] | None,
    source: dict[str, Any],
    message_id: str | None,
) -> Message:
    return Message(
        message_id or new_id("msg"),
        {"role": role, "content": content},
        dict(metadata) if metadata else {},
        utc_now(),
        source,
    )


def system_message(
    text: str,
    metadata: Mapping[str, Any] | None = None,
    *,
    source: dict[str, Any] | None = None,
    id: str | None = None,
) -> Message:
    """A new system message with a fresh id. Extensions usually pass
    ``source={"type": "extension", "extensionName": "..."}``."""
    return _new_message("system", text, metadata, source or {"type": "system"}, id)


def user_message(
    content: str | list[dict[str, Any]],
    metadata: Mapping[str, Any] | None = None,
    *,
    source: dict[str, Any] | None = None,
    id: str | None = None,
) -> Message:
    return _new_message("user", content, metadata, source or {"type": "user"}, id)


def assistant_message(
    content: str | list[dict[str, Any]] | None = None,
    metadata: Mapping[str, Any] | None = None,
    *,
    tool_calls: Sequence[Mapping[str, Any]] = (),
    source: dict[str, Any] | None = None,
    id: str | None = None,
) -> Message:
    """An assistant message. ``tool_calls`` items are ``{"id", "name", "args"}`` and become
    ``tool-call`` parts after the text."""
    if tool_calls:
        parts: list[dict[str, Any]] = []
        if isinstance(content, str) and content:
            parts.append({"type": "text", "text": content})
        elif isinstance(content, list):
            parts.extend(content)
        for call in tool_calls:
            part = {
                "type": "tool-call",
                "toolCallId": call["id"],
                "toolName": call["name"],
                "input": call.get("args", {}),
            }
            if call.get("providerMetadata"):
                part["providerMetadata"] = call["providerMetadata"]
            parts.append(part)
        body: str | list[dict[str, Any]] = parts
    else:
        body = content if content is not None else ""
    return _new_message("assistant", body, metadata, source or {"type": "assistant"}, id)


def tool_message(
    tool_call_id: str,
    tool_name: str,
    output: dict[str, Any],
    metadata: Mapping[str, Any] | None = None,
    *,
    id: str | None = None,
) -> Message:
    """One ``role: tool`` message holding the result of one tool call (docs/architecture.md#messages)."""
    part = {"type": "tool-result", "toolCallId": tool_call_id, "toolName": tool_name, "output": output}
    return _new_message(
        "tool",
        [part],
        metadata,
        {"type": "tool", "toolCallId": tool_call_id, "toolName": tool_name},
        id,
    )


# --- message events -------------------------------------------------------------------------


class MessageRecord(TypedDict):
    """A message as stored JSON (``Message.to_record()``); events may carry one instead of a Message."""

    id: str
    data: dict[str, Any]
    metadata: dict[str, Any]
    createdAt: str
    source: dict[str, Any]


class AppendEvent(TypedDict):
    type: Literal["append"]
    message: Message | MessageRecord


class ReplaceEvent(TypedDict):
    type: Literal["replace"]
    targetId: str
    message: Message | MessageRecord


class RemoveEvent(TypedDict):
    type: Literal["remove"]
    targetId: str


class TruncateEvent(TypedDict):
    type: Literal["truncate"]


# What ``ctx.emit_message_event`` takes: exactly one of these four shapes (checked at run time too).
MessageEvent = AppendEvent | ReplaceEvent | RemoveEvent | TruncateEvent


def append_event(message: Message) -> AppendEvent:
    return {"type": "append", "message": message}


def replace_event(target_id: str, message: Message) -> ReplaceEvent:
    return {"type": "replace", "targetId": target_id, "message": message}


def remove_event(target_id: str) -> RemoveEvent:
    return {"type": "remove", "targetId": target_id}


def truncate_event() -> TruncateEvent:
    return {"type": "truncate"}


_EVENT_KEYS = {
    "append": frozenset({"type", "message"}),
    "replace": frozenset({"type", "targetId", "message"}),
    "remove": frozenset({"type", "targetId"}),
    "truncate": frozenset({"type"}),
}


def check_message_event(event: Any, *, copy: bool = True, trusted: bool = False) -> dict[str, Any]:
    """Validate an event emitted by user code and return a normalized private copy whose
    ``message`` (if any) is a :class:`Message` that the caller no longer aliases.

    Raises :class:`GoondanError` ``E_MESSAGE_EVENT_INVALID`` for anything that is not exactly one of
    the four event shapes. ``copy=False`` leaves the copying to the caller (the conversation state
    freezes a copy anyway); ``trusted=True`` skips the deep JSON scan for messages the runtime built.
    """
    if not isinstance(event, dict):
        raise _bad_event(f"a message event must be a dict, got {type(event).__name__}")
    etype = event.get("type")
    keys = _EVENT_KEYS.get(etype) if isinstance(etype, str) else None
    if keys is None:
        raise _bad_event(f"unknown message event type {etype!r}; expected append, replace, remove or truncate")
    extra = set(event) - keys
    missing = keys - set(event)
    if missing:
        raise _bad_event(f"{etype} event is missing {sorted(missing)}")
    if extra:
        raise _bad_event(f"{etype} event has unexpected keys {sorted(extra)}")
    if "targetId" in keys:
        tid = event["targetId"]
        if not isinstance(tid, str) or not tid:
            raise _bad_event(f"{etype} event targetId must be a non-empty string")
    if "message" not in keys:
        return dict(event)
    msg = event["message"]
    if isinstance(msg, Message):
        if not trusted:
            record_problem = _message_object_problem(msg)
            if record_problem:
                raise _bad_event(record_problem)
        copied = msg.copy() if copy else msg
    elif isinstance(msg, dict):
        problem = message_record_problem(msg)
        if problem:
            raise _bad_event(problem)
        copied = Message.from_record(copy_json(msg) if copy else msg)
    else:
        raise _bad_event(f"{etype} event message must be a Message, got {type(msg).__name__}")
    out = dict(event)
    out["message"] = copied
    return out


def _message_object_problem(msg: Message) -> str | None:
    if not isinstance(msg.id, str) or not msg.id:
        return "message.id must be a non-empty string"
    problem = core_message_problem(msg.data)
    if problem:
        return f"message {msg.id}: {problem}"
    if not isinstance(msg.metadata, dict):
        return f"message {msg.id}: metadata must be a dict"
    if not isinstance(msg.source, dict) or msg.source.get("type") not in SOURCE_TYPES:
        return f"message {msg.id}: source.type must be one of {sorted(SOURCE_TYPES)}"
    if not isinstance(msg.created_at, datetime) or msg.created_at.tzinfo is None:
        return f"message {msg.id}: created_at must be an aware datetime"
    json_issue = json_problem(msg.data, "data") or json_problem(msg.metadata, "metadata")
    if json_issue:
        return f"message {msg.id}: {json_issue}"
    return None


def _bad_event(message: str) -> GoondanError:
    return GoondanError(
        "E_MESSAGE_EVENT_INVALID",
        message,
        suggestion=(
            "Emit {'type': 'append', 'message': m}, {'type': 'replace', 'targetId': id, 'message': m}, "
            "{'type': 'remove', 'targetId': id} or {'type': 'truncate'}; build messages with "
            "goondan.messages.system_message/user_message/assistant_message."
        ),
    )


def event_to_record(event: Mapping[str, Any]) -> dict[str, Any]:
    """A checked event as the JSON object stored in ``events.jsonl``."""
    msg = event.get("message")
    if isinstance(msg, Message):
        out = dict(event)
        out["message"] = msg.to_record()
        return out
    return dict(event)


def event_from_record(record: Any) -> dict[str, Any]:
    """Parse one ``events.jsonl`` line (already JSON-decoded)."""
    if not isinstance(record, dict):
        raise GoondanError("E_MESSAGE_EVENT_INVALID", "an event record must be a JSON object")
    etype = record.get("type")
    keys = _EVENT_KEYS.get(etype) if isinstance(etype, str) else None
    if keys is None or set(record) != keys:
        raise GoondanError("E_MESSAGE_EVENT_INVALID", f"not a message event record: {record!r}"[:300])
    if "message" in keys:
        out = dict(record)
        out["message"] = Message.from_record(record["message"])
        return out
    return dict(record)


__all__ = [
    "AppendEvent",
    "Message",
    "MessageEvent",
    "MessageRecord",
    "RemoveEvent",
    "ReplaceEvent",
    "TruncateEvent",
    "append_event",
    "assistant_message",
    "check_message_event",
    "content_text",
    "remove_event",
    "replace_event",
    "system_message",
    "tool_message",
    "truncate_event",
    "user_message",
]
