"""The IPC wire format between the orchestrator and agent processes (digest §2.3).

Every message is a JSON object ``{"type", "from", "to", "payload"}`` whose ``type`` is one of
``event``, ``shutdown`` or ``shutdown_ack``; ``payload`` is any JSON value.

Framing (agent connections, one ``SOCK_STREAM`` Unix socketpair per agent process): each message is
a 4-byte big-endian unsigned length ``n`` followed by ``n`` bytes of UTF-8 JSON (no trailing newline).
A stream socket delivers bytes in order, so messages are ordered per connection; there is no other
multiplexing. End of stream means the peer is gone.

The fork-server control channel (host ↔ fork server) is a ``SOCK_SEQPACKET`` socketpair: one
datagram is one message (same JSON shape, no length prefix), and a spawn request carries the child's
end of its agent socketpair as ``SCM_RIGHTS`` ancillary data.

What travels inside ``event`` payloads is documented on :data:`EVENT_KINDS`.
"""

from __future__ import annotations

import asyncio
import struct
from typing import Any

import orjson

MESSAGE_TYPES = ("event", "shutdown", "shutdown_ack")
ORCHESTRATOR = "orchestrator"
HEADER = struct.Struct(">I")
MAX_FRAME = 64 * 1024 * 1024

# ``payload.kind`` of ``event`` messages. Orchestrator → agent: ``turn`` {ticket, event} (run one turn
# for an AgentEvent), ``response`` {event} / ``error_response`` {metadata{inReplyTo, errorCode,
# errorMessage}} (the answer to an inter-agent request, matched by correlation id), ``rpc_result``
# {rpcId, ok, value|error}, ``sync`` {id}. Agent → orchestrator: ``agent_ready`` {pid}, ``start_error``
# {error}, ``turn_accepted`` {ticket} (sent when the process takes the event, before the turn
# runs), ``turn_done`` {ticket, result}, ``request`` {event, target, instanceKey}, ``send`` {event,
# target, instanceKey}, ``rpc`` {rpcId, op, args}, ``runtime_event`` {record}, ``text_delta``
# {delta}, ``restart_request`` {reason}, ``sync_ack`` {id}.
EVENT_KINDS = (
    "turn",
    "response",
    "error_response",
    "rpc_result",
    "sync",
    "agent_ready",
    "start_error",
    "turn_accepted",
    "turn_done",
    "request",
    "send",
    "rpc",
    "runtime_event",
    "text_delta",
    "restart_request",
    "sync_ack",
)


class IpcError(Exception):
    """A frame that is not a valid IPC message."""


def message(type_: str, from_: str, to: str, payload: Any) -> dict[str, Any]:
    if type_ not in MESSAGE_TYPES:
        raise IpcError(f"unknown IPC message type {type_!r}")
    return {"type": type_, "from": from_, "to": to, "payload": payload}


def encode(msg: dict[str, Any]) -> bytes:
    body = orjson.dumps(msg)
    return HEADER.pack(len(body)) + body


def decode(body: bytes) -> dict[str, Any]:
    try:
        msg = orjson.loads(body)
    except orjson.JSONDecodeError as exc:
        raise IpcError(f"frame is not JSON: {exc}") from exc
    if not isinstance(msg, dict) or msg.get("type") not in MESSAGE_TYPES:
        raise IpcError("frame is not an IPC message {type: event|shutdown|shutdown_ack, from, to, payload}")
    return msg


async def read_message(reader: asyncio.StreamReader) -> dict[str, Any] | None:
    """The next message, or ``None`` at end of stream."""
    try:
        header = await reader.readexactly(HEADER.size)
    except asyncio.IncompleteReadError:
        return None
    (size,) = HEADER.unpack(header)
    if size > MAX_FRAME:
        raise IpcError(f"frame of {size} bytes exceeds the {MAX_FRAME} byte limit")
    try:
        body = await reader.readexactly(size)
    except asyncio.IncompleteReadError:
        return None
    return decode(body)


class Connection:
    """One ordered message stream over an asyncio stream pair. ``send`` never blocks: frames are
    queued on the transport (a peer that stops reading is a dead peer and gets killed)."""

    __slots__ = ("closed", "reader", "writer")

    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.reader = reader
        self.writer = writer
        self.closed = False

    def send(self, msg: dict[str, Any]) -> bool:
        if self.closed or self.writer.is_closing():
            return False
        data = encode(msg)  # TypeError (orjson.JSONEncodeError) for values that are not JSON
        try:
            self.writer.write(data)
        except (ConnectionError, RuntimeError):
            self.closed = True
            return False
        return True

    async def recv(self) -> dict[str, Any] | None:
        try:
            return await read_message(self.reader)
        except (ConnectionError, OSError):
            return None

    def close(self) -> None:
        if not self.closed:
            self.closed = True
            try:
                self.writer.close()
            except Exception:
                pass


def encode_packet(msg: dict[str, Any]) -> bytes:
    """A control-channel datagram (no length prefix: SOCK_SEQPACKET keeps message boundaries)."""
    return orjson.dumps(msg)


__all__ = [
    "EVENT_KINDS",
    "MESSAGE_TYPES",
    "ORCHESTRATOR",
    "Connection",
    "IpcError",
    "decode",
    "encode",
    "encode_packet",
    "message",
    "read_message",
]
