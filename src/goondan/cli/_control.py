"""The control channel of a running ``gdn run``: JSON-line requests over a Unix socket.

Requests: ``{"op": "hello"}`` (the run's identity), ``{"op": "status"}``, ``{"op": "restart", "agent":
NAME|null, "fresh": bool}`` and ``{"op": "request", "input": TEXT, "identity": IDENTITY, ...}``. Replies:
``{"ok": true, ...}`` or ``{"ok": false, "error": {"code", "message"}}``. Only the user who owns the
state root can reach the socket (it is created with mode 0600).

Why an identity: a request handed to a running ``gdn run`` is answered by *that* run's bundle. Sharing a
workspace (same Package name and swarm, or a registration left by an older version) is not enough to
prove it is the same bundle, so a ``request`` names the bundle it was meant for and the running side
refuses (``E_CONTROL_IDENTITY``) when it serves another one; the client then runs the request itself.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import socket
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

ControlHandler = Callable[[dict[str, Any]], Awaitable[dict[str, Any]]]


def run_identity(bundle: Any, swarm_name: str, swarm_instance_key: str) -> dict[str, str | None]:
    """What makes two ``gdn run`` invocations "the same bundle": its resolved directory, its Package
    name (``None`` without a Package) and the selected swarm with its instance key."""
    return {
        "bundle": str(Path(bundle.root).resolve()),
        "package": getattr(bundle, "package_name", None),
        "swarm": swarm_name,
        "swarmInstanceKey": swarm_instance_key,
    }


def identity_mismatch(expected: dict[str, Any], request: dict[str, Any]) -> dict[str, Any] | None:
    """The refusal for a request meant for another bundle (or naming none), else ``None``."""
    claimed = request.get("identity")
    if isinstance(claimed, dict) and claimed == expected:
        return None
    where = claimed.get("bundle") if isinstance(claimed, dict) else None
    return {
        "ok": False,
        "error": {
            "code": "E_CONTROL_IDENTITY",
            "message": f"this gdn run serves {expected['bundle']!r}, not {where!r}",
            "suggestion": "Run the request without the running session (it is not the same bundle).",
        },
    }


async def serve_control(path: Path, handler: ControlHandler) -> asyncio.Server:
    with contextlib.suppress(FileNotFoundError):
        path.unlink()
    from ..storage._atomic import ensure_private_dirs

    ensure_private_dirs(path.parent)

    async def on_client(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            line = await reader.readline()
            try:
                request = json.loads(line)
                if not isinstance(request, dict):
                    raise ValueError("not an object")
                reply = await handler(request)
            except ValueError as exc:
                reply = {"ok": False, "error": {"code": "E_CONTROL_REQUEST", "message": str(exc)}}
            except Exception as exc:
                error = exc.to_dict() if hasattr(exc, "to_dict") else {"code": "INTERNAL_ERROR", "message": str(exc)}
                reply = {"ok": False, "error": error}
            writer.write(json.dumps(reply, default=str).encode() + b"\n")
            await writer.drain()
        finally:
            writer.close()

    old_umask = os.umask(0o177)
    try:
        return await asyncio.start_unix_server(on_client, str(path))
    finally:
        os.umask(old_umask)


def control_request(path: str, payload: dict[str, Any], timeout: float = 60.0) -> dict[str, Any]:
    """Send one request to a running ``gdn run`` and return its reply (``OSError`` when unreachable)."""
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
        sock.settimeout(timeout)
        sock.connect(path)
        sock.sendall(json.dumps(payload).encode() + b"\n")
        chunks = []
        while True:
            chunk = sock.recv(65536)
            if not chunk:
                break
            chunks.append(chunk)
            if chunk.endswith(b"\n"):
                break
    reply = json.loads(b"".join(chunks) or b"{}")
    return reply if isinstance(reply, dict) else {"ok": False, "error": {"code": "E_CONTROL", "message": "bad reply"}}
