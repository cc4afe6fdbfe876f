"""Built-in ``cli`` connector: one event per stdin line, replies printed to stdout.

A plain line becomes ``stdin_message`` with instance key ``cli:<lineIndex>`` (a new conversation per
line unless a Connection route pins the key). A JSON object line may set ``name``/``event``,
``text``/``message``, ``instanceKey`` and primitive ``properties``. Blank lines are skipped. Lines are
handled one at a time so replies come out in input order.
"""

from __future__ import annotations

import asyncio
import json
import os
import stat
import sys
from typing import Any


async def _lines() -> Any:
    loop = asyncio.get_running_loop()
    mode = os.fstat(sys.stdin.fileno()).st_mode
    if stat.S_ISREG(mode):
        for line in sys.stdin:
            yield line
        return
    reader = asyncio.StreamReader()
    await loop.connect_read_pipe(lambda: asyncio.StreamReaderProtocol(reader), sys.stdin)
    while True:
        raw = await reader.readline()
        if not raw:
            return
        yield raw.decode("utf-8", "replace")


def _event(line: str, index: int) -> dict[str, Any]:
    event: dict[str, Any] = {
        "name": "stdin_message",
        "message": {"type": "text", "text": line},
        "properties": {"line": index},
        "instanceKey": f"cli:{index}",
    }
    if line.startswith("{"):
        try:
            data = json.loads(line)
        except ValueError:
            return event
        if isinstance(data, dict):
            name = data.get("name") or data.get("event")
            text = data.get("text", data.get("message"))
            if isinstance(name, str) and name:
                event["name"] = name
            if isinstance(text, str):
                event["message"] = {"type": "text", "text": text}
            if isinstance(data.get("instanceKey"), str) and data["instanceKey"].strip():
                event["instanceKey"] = data["instanceKey"]
            props = data.get("properties")
            if isinstance(props, dict):
                event["properties"] = {str(k): v for k, v in props.items() if isinstance(v, str | int | float | bool)}
    return event


async def run(ctx: Any) -> None:
    ctx.ready()
    prefix = ctx.config.get("replyPrefix", "")
    index = 0
    async for raw in _lines():
        line = raw.strip()
        if not line:
            continue
        reply = await ctx.emit(_event(line, index))
        index += 1
        if reply.ok and reply.text is not None:
            sys.stdout.write(prefix + reply.text + "\n")
        elif not reply.ok:
            err = reply.error or {}
            sys.stderr.write(f"[{err.get('code', 'E_TURN_FAILED')}] {err.get('message', 'turn failed')}\n")
        sys.stdout.flush()
