"""Cancelling from a chat: a connector message ``/cancel`` routed to an agent
instance cancels that instance's running turn (``Runtime.cancel``) instead of starting a turn. The
cancelled turn answers its own message as usual (finish reason ``cancelled``); the command gets a
short reply saying whether there was a turn to cancel. Routing decides the instance, so one
conversation never cancels another's turn. A bare ``cancel`` stays a message for the agent (it may
be about something else entirely)."""

from __future__ import annotations

import dataclasses
import re
from typing import Any

_COMMAND = re.compile(r"^\s*/cancel\s*$", re.I)

CANCELLED_TEXT = "Cancelling the running turn."
NOTHING_TEXT = "No turn is running."


@dataclasses.dataclass(frozen=True)
class CommandReply:
    """What the connector gets back for a command (the fields of a turn result it reads)."""

    text: str
    finish_reason: str = "text_response"
    error: dict[str, Any] | None = None


def is_cancel_command(text: Any) -> bool:
    return isinstance(text, str) and _COMMAND.match(text) is not None


async def cancel_command(runtime: Any, agent: str, instance_key: str) -> CommandReply:
    cancelled = await runtime.cancel(agent, instance_key)
    return CommandReply(CANCELLED_TEXT if cancelled else NOTHING_TEXT)


__all__ = ["CommandReply", "cancel_command", "is_cancel_command"]
