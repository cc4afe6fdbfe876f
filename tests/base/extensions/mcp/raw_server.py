"""A handshake-era MCP server speaking raw JSON-RPC over stdio, without any SDK, the way small
hand-written servers do — including their mistakes: after ``spoil`` (or from the start, with
``--odd``) it lists a tool ``odd`` whose input schema is not an object, which the MCP schema
forbids (the SDK's own server would refuse to send it)."""

from __future__ import annotations

import json
import sys
from typing import Any

FINE = {"name": "fine", "description": "Works.", "inputSchema": {"type": "object", "properties": {}}}
SPOIL = {"name": "spoil", "description": "List 'odd' from now on.", "inputSchema": {"type": "object"}}
ODD = {"name": "odd", "description": "Takes a list.", "inputSchema": {"type": "array", "items": {"type": "string"}}}
# with --bad-schema: an object schema that is no JSON Schema (a misspelt type), which the MCP schema allows
BAD = {"name": "bad", "description": "Typo.", "inputSchema": {"type": "object", "properties": {"n": {"type": "numbr"}}}}
TOOLS = [FINE, SPOIL, *([ODD] if "--odd" in sys.argv else []), *([BAD] if "--bad-schema" in sys.argv else [])]


def send(message: dict[str, Any]) -> None:
    sys.stdout.write(json.dumps({"jsonrpc": "2.0", **message}) + "\n")
    sys.stdout.flush()


def answer(request: dict[str, Any]) -> dict[str, Any]:
    method = request.get("method")
    if method == "initialize":
        return {
            "protocolVersion": "2025-06-18",
            "capabilities": {"tools": {"listChanged": True}},
            "serverInfo": {"name": "raw", "version": "1"},
        }
    if method == "tools/list":
        return {"tools": TOOLS}
    if method == "tools/call":
        name = request["params"]["name"]
        if name == "spoil":
            TOOLS.append(ODD)
            send({"method": "notifications/tools/list_changed"})
        return {"content": [{"type": "text", "text": f"{name} ok"}]}
    if method == "ping":
        return {}
    raise LookupError(method)


for line in sys.stdin:
    request = json.loads(line)
    if "id" not in request:
        continue  # a notification
    try:
        send({"id": request["id"], "result": answer(request)})
    except LookupError:
        send({"id": request["id"], "error": {"code": -32601, "message": "Method not found"}})
