"""inter-agent-response-format: turn raw async inter-agent responses into text a model reads well
(docs/architecture.md#inter-agent-calls).

An async ``agents`` request delivers its answer as a **user** message whose metadata carries
``__goondanInterAgentResponse`` (the async-response marker) and whose content is the raw JSON payload. Before
each step (step middleware, before ``next()``) every such message that is valid and not yet
formatted is ``replace``d — same id, same position — by a message with the content::

    [inter-agent response] <from> -> <to> status=<status> requestId=<id>
    <the response text, or pretty JSON when it is structured | error(<code>): <message>>
    requestMetadata=<json>            (only with includeRequestMetadata and when present)

The original metadata is kept and ``__goondanInterAgentResponseFormatted: true`` added, so a message
is formatted once. Other messages are never touched. Config: ``includeRequestMetadata`` (false).
"""

from __future__ import annotations

import dataclasses
import json
from typing import Any

from goondan.types import ExtensionApi, StepContext, StepResult

EXTENSION_NAME = "inter-agent-response-format"
MARKER = "__goondanInterAgentResponse"
FORMATTED = "__goondanInterAgentResponseFormatted"
STATUSES = frozenset({"ok", "error", "timeout"})

CONFIG_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {"includeRequestMetadata": {"type": "boolean"}},
    "additionalProperties": False,
}


def valid_marker(marker: Any) -> bool:
    """The async-response marker: kind, version 1, request/agent ids, async true, a status and receivedAt."""
    if not isinstance(marker, dict):
        return False
    if marker.get("kind") != "inter_agent_response" or marker.get("version") != 1:
        return False
    if marker.get("async") is not True or marker.get("status") not in STATUSES:
        return False
    return all(
        isinstance(marker.get(key), str) and marker[key]
        for key in ("requestId", "fromAgentId", "toAgentId", "receivedAt")
    )


def _payload(content: Any) -> dict[str, Any]:
    """The response object in the message content: a JSON string (how this runtime stores it) or an
    ``inter_agent_response`` part (how other producers may)."""
    if isinstance(content, str):
        try:
            value = json.loads(content)
        except ValueError:
            return {"response": content}
        return value if isinstance(value, dict) else {"response": value}
    if isinstance(content, list):
        for part in content:
            if isinstance(part, dict) and part.get("type") == "inter_agent_response":
                return dict(part)
    return {}


def _as_text(value: Any) -> str:
    if isinstance(value, str):
        return value
    return json.dumps(value, ensure_ascii=False, indent=2, default=str)


def format_response(marker: dict[str, Any], content: Any, *, include_request_metadata: bool) -> str:
    payload = _payload(content)
    lines = [
        f"[inter-agent response] {marker['fromAgentId']} -> {marker['toAgentId']} "
        f"status={marker['status']} requestId={marker['requestId']}"
    ]
    if marker["status"] == "ok":
        lines.append(_as_text(payload.get("response", "")))
    else:
        raw_error = payload.get("error")
        error: dict[str, Any] = raw_error if isinstance(raw_error, dict) else {}
        code = marker.get("errorCode") or error.get("code") or "AGENT_REQUEST_ERROR"
        message = marker.get("errorMessage") or error.get("message") or "agent request failed"
        lines.append(f"error({code}): {message}")
    request_metadata = marker.get("requestMetadata")
    if include_request_metadata and request_metadata:
        lines.append("requestMetadata=" + json.dumps(request_metadata, ensure_ascii=False, sort_keys=True))
    return "\n".join(lines)


def register(api: ExtensionApi, config: dict[str, Any]) -> None:
    include_request_metadata = bool(config.get("includeRequestMetadata", False))

    async def step(ctx: StepContext) -> StepResult:
        pending = [
            m
            for m in ctx.conversation_state.next_messages
            if m.role == "user" and valid_marker(m.metadata.get(MARKER)) and m.metadata.get(FORMATTED) is not True
        ]
        for message in pending:
            text = format_response(
                message.metadata[MARKER],
                message.data.get("content"),
                include_request_metadata=include_request_metadata,
            )
            metadata = {**message.metadata, FORMATTED: True}
            # same id and createdAt: the message stays where (and when) it arrived
            formatted = dataclasses.replace(
                message,
                data={"role": "user", "content": text},
                metadata=metadata,
                source={"type": "extension", "extensionName": EXTENSION_NAME},
            )
            ctx.emit_message_event({"type": "replace", "targetId": message.id, "message": formatted})
        return await ctx.next()

    api.pipeline.register("step", step)
