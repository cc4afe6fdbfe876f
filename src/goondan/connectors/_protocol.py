"""The wire protocol between ``gdn run`` (the supervisor) and a connector host process.

One JSON object per line over a Unix socketpair whose child end is passed to the host as ``--fd N``.
The connector keeps the process's own stdin/stdout/stderr (the ``cli`` connector reads the terminal).

supervisor → host
    ``{"type": "start", "entry", "connection", "connector", "config", "secrets"}`` (first message)
    ``{"type": "reply", "id", "text", "finishReason", "error"}``  the turn result of event ``id``
    ``{"type": "shutdown"}``
host → supervisor
    ``{"type": "started"}`` | ``{"type": "start_error", "error": {"code", "message"}}``
    ``{"type": "event", "id", "event": {name, message, properties, instanceKey}}``
    ``{"type": "stopped", "reason": "returned" | "shutdown" | "failed", "error"?}``
"""

from __future__ import annotations

import asyncio
import json
from typing import Any

MAX_LINE = 8 << 20


async def read_message(reader: asyncio.StreamReader) -> dict[str, Any] | None:
    """The next message, or None at end of stream. Malformed lines are skipped."""
    while True:
        line = await reader.readline()
        if not line:
            return None
        try:
            message = json.loads(line)
        except ValueError:
            continue
        if isinstance(message, dict) and isinstance(message.get("type"), str):
            return message


def encode(message: dict[str, Any]) -> bytes:
    return json.dumps(message, ensure_ascii=False, default=str).encode("utf-8") + b"\n"


__all__ = ["MAX_LINE", "encode", "read_message"]
