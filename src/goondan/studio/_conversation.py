"""A page of a conversation as a person reads it.

Stored messages are the model's view: an assistant message with tool-call parts, then one tool
message per call with its result. A person wants the result under the call, so each row of a page
carries its tool calls with their results (looked up a little beyond the page, since a result may
sit on the next one), and a tool message whose call is on screen says so (``foldedInto``) for the
page to show it collapsed. System messages name what added them (``source.extensionName``), and
compaction summaries (``metadata["compaction.summary"]``) are marked. Every row keeps its stored
record for the raw view.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ..messages import Message

#: How far beyond a page results and calls are looked up (a step's results follow its call at once;
#: a step with more parallel calls than this shows the rest unfolded).
LOOK_AROUND = 64


def _parts(content: object) -> list[dict[str, Any]]:
    if isinstance(content, str):
        return [{"type": "text", "text": content}] if content else []
    if isinstance(content, list):
        return [p for p in content if isinstance(p, dict)]
    return []


def _label(message: Message) -> str | None:
    """Who added a message, when it was not the model or the person talking to it."""
    source = message.source if isinstance(message.source, dict) else {}
    if source.get("type") == "extension":
        return f"extension {source.get('extensionName', '?')}"
    if message.role == "system":
        return "runtime" if source.get("type") == "system" else None
    if message.role == "user" and source.get("type") == "system":
        return "runtime"  # a corrective message of the retry loop
    inbound = message.metadata.get("__goondanInbound") if isinstance(message.metadata, dict) else None
    if message.role == "user" and isinstance(inbound, dict) and inbound.get("sourceKind") == "agent":
        return f"from agent {inbound.get('sourceName', '?')}"
    return None


def _result(part: dict[str, Any], index: int) -> dict[str, Any]:
    output = part.get("output")
    status = "error" if isinstance(output, dict) and output.get("type") == "error-json" else "ok"
    value = output.get("value") if isinstance(output, dict) else output
    return {"index": index, "status": status, "value": value}


def conversation_rows(window: Sequence[Message], window_start: int, offset: int, limit: int) -> list[dict[str, Any]]:
    """Rows for messages ``[offset, offset + limit)`` given the messages ``window`` that starts at
    ``window_start`` and reaches :data:`LOOK_AROUND` messages beyond the page on both sides."""
    results: dict[str, dict[str, Any]] = {}
    calls: dict[str, int] = {}
    for i, message in enumerate(window):
        index = window_start + i
        for part in _parts(message.data.get("content")):
            if part.get("type") == "tool-result" and isinstance(part.get("toolCallId"), str):
                results.setdefault(part["toolCallId"], _result(part, index))
            elif part.get("type") == "tool-call" and isinstance(part.get("toolCallId"), str):
                calls.setdefault(part["toolCallId"], index)
    rows: list[dict[str, Any]] = []
    first = offset - window_start
    for i, message in enumerate(window[first : first + limit]):
        index = offset + i
        blocks: list[dict[str, Any]] = []
        folded_into: int | None = None
        for part in _parts(message.data.get("content")):
            kind = part.get("type")
            if kind == "text":
                blocks.append({"type": "text", "text": str(part.get("text", ""))})
            elif kind == "tool-call":
                call_id = part.get("toolCallId")
                blocks.append(
                    {
                        "type": "tool-call",
                        "toolCallId": call_id,
                        "toolName": part.get("toolName"),
                        "input": part.get("input"),
                        "result": results.get(call_id) if isinstance(call_id, str) else None,
                    }
                )
            elif kind == "tool-result":
                call_id = part.get("toolCallId")
                at = calls.get(call_id) if isinstance(call_id, str) else None
                if at is not None and at < index:
                    folded_into = at
                blocks.append(
                    {
                        "type": "tool-result",
                        "toolCallId": call_id,
                        "toolName": part.get("toolName"),
                        **_result(part, index),
                    }
                )
            else:
                name = part.get("name") or part.get("mediaType") or ""
                blocks.append({"type": "media", "text": f"[{kind}] {name}".rstrip()})
        metadata = message.metadata if isinstance(message.metadata, dict) else {}
        rows.append(
            {
                "index": index,
                "id": message.id,
                "role": message.role,
                "label": _label(message),
                "compaction": bool(metadata.get("compaction.summary")),
                "createdAt": message.to_record()["createdAt"],
                "blocks": blocks,
                "foldedInto": folded_into,
                "record": message.to_record(),
            }
        )
    return rows


__all__ = ["LOOK_AROUND", "conversation_rows"]
