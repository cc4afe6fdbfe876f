"""message-window: keep at most ``maxMessages`` messages by removing the oldest ones.

Before each turn runs (turn middleware, before ``next()``), the oldest ``len - maxMessages``
messages are marked for removal; then the tool-call integrity rule (``_integrity``) removes whatever
would be left broken — a tool result whose call was cut off, and any orphan result already present
even when the history is under the limit. So the window may drop a few more messages than the bare
count, never fewer, and never hands the model a history a provider would reject.

Every change is a ``remove`` message event, emitted oldest first, so the window is traceable in
``events.jsonl`` and recoverable. Config: ``maxMessages`` (integer >= 1, default 80).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from goondan.base.extensions._integrity import MessageLike, normalize
from goondan.types import ExtensionApi, TurnContext, TurnResult

EXTENSION_NAME = "message-window"
DEFAULT_MAX_MESSAGES = 80

CONFIG_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {"maxMessages": {"type": "integer", "minimum": 1}},
    "additionalProperties": False,
}


def window_removals(messages: Sequence[MessageLike], max_messages: int) -> list[str]:
    """Ids to remove (history order) so that at most ``max_messages`` messages remain and the
    remainder satisfies the tool-call integrity rule."""
    excess = max(0, len(messages) - max_messages)
    return normalize(messages, (m.id for m in messages[:excess]))


def register(api: ExtensionApi, config: dict[str, Any]) -> None:
    max_messages = int(config.get("maxMessages", DEFAULT_MAX_MESSAGES))

    async def turn(ctx: TurnContext) -> TurnResult:
        messages = list(ctx.conversation_state.next_messages)  # a snapshot: the view follows the events
        removals = window_removals(messages, max_messages)
        for message_id in removals:
            ctx.emit_message_event({"type": "remove", "targetId": message_id})
        if removals:
            api.logger.debug(
                "message-window removed %d message(s), %d remain (maxMessages=%d)",
                len(removals),
                len(messages) - len(removals),
                max_messages,
            )
        return await ctx.next()

    api.pipeline.register("turn", turn)
