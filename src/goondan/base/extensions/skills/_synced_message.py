"""Keeping one extension-owned system message in the conversation equal to a wanted text.

Used by ``skills`` (catalog + open skills) and ``mcp`` (resources/prompts context). The message is
identified by a metadata marker carrying a hash of its text, and remembered by id in extension
state, so it is:

- appended once when missing (also after compaction or a window removed it),
- replaced in place (same id) when the wanted text changes, so a history never carries two
  generations of the same block,
- removed when there is nothing to show,
- left alone when unchanged — no message event at all, so nothing is written per step.
"""

from __future__ import annotations

import hashlib
from typing import Any

from goondan.messages import system_message
from goondan.types import StepContext, TurnContext


def text_hash(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


def _owned(message: Any, marker: str, extension: str) -> bool:
    mark = message.metadata.get(marker)
    return isinstance(mark, dict) and mark.get("extension") == extension


def _find(conversation: Any, marker: str, extension: str, remembered_id: Any) -> Any | None:
    """The remembered message, else any message this extension marked (state may be older than the
    conversation after a crash)."""
    if isinstance(remembered_id, str) and conversation.has_message(remembered_id):
        for message in conversation.next_messages:
            if message.id == remembered_id and _owned(message, marker, extension):
                return message
    for message in conversation.next_messages:
        if _owned(message, marker, extension):
            return message
    return None


def sync_system_message(
    ctx: TurnContext | StepContext, *, marker: str, extension: str, text: str | None, remembered_id: Any
) -> str | None:
    """Make the conversation hold exactly one ``marker`` message with ``text`` (none if ``text`` is
    empty) through ``ctx.emit_message_event``. Returns the id to remember."""
    conversation = ctx.conversation_state
    current = _find(conversation, marker, extension, remembered_id)
    if not text:
        if current is not None:
            ctx.emit_message_event({"type": "remove", "targetId": current.id})
        return None
    digest = text_hash(text)
    if current is not None and current.metadata.get(marker, {}).get("hash") == digest:
        return str(current.id)
    message = system_message(
        text,
        {marker: {"hash": digest, "extension": extension}},
        source={"type": "extension", "extensionName": extension},
        id=current.id if current is not None else None,
    )
    if current is not None:
        ctx.emit_message_event({"type": "replace", "targetId": current.id, "message": message})
    else:
        ctx.emit_message_event({"type": "append", "message": message})
    return str(message.id)
