"""The IPC wire format between the orchestrator and agent processes (digest §2.3).

Every message is a JSON object ``{"type", "from", "to", "payload"}`` whose ``type`` is one of
``event``, ``shutdown`` or ``shutdown_ack``; ``payload`` is any JSON value.

Framing (agent connections, one ``SOCK_STREAM`` Unix socketpair per agent process): each message is
a 4-byte big-endian unsigned length ``n`` followed by ``n`` bytes of UTF-8 JSON (no trailing newline).
A stream socket delivers bytes in order, so messages are ordered per connection; there is no other
multiplexing. End of stream means the peer is gone.

A frame body is at most :data:`MAX_FRAME` bytes (64 MiB; ``GOONDAN_IPC_MAX_FRAME_BYTES`` lowers or
raises it). Senders refuse a larger message with :class:`FrameTooLarge` (the caller turns that into an
``E_IPC_FRAME_TOO_LARGE`` failure of the one request it belongs to). A reader that still meets one
skips its body and raises :class:`FrameTooLarge`, and so does a body that is not an IPC message
(:class:`IpcError`): the stream stays in step, so the channel keeps serving.

The fork-server control channel (host ↔ fork server) is a ``SOCK_SEQPACKET`` socketpair: one
datagram is one message (same JSON shape, no length prefix), and a spawn request carries the child's
end of its agent socketpair as ``SCM_RIGHTS`` ancillary data.

What travels inside ``event`` payloads is documented on :data:`EVENT_KINDS`.
"""

from __future__ import annotations

import asyncio
import os
import struct
from typing import Any

import orjson

from ...errors import GoondanError

MESSAGE_TYPES = ("event", "shutdown", "shutdown_ack")
ORCHESTRATOR = "orchestrator"
HEADER = struct.Struct(">I")
DEFAULT_MAX_FRAME = 64 * 1024 * 1024
MAX_FRAME_ENV = "GOONDAN_IPC_MAX_FRAME_BYTES"
_SKIP_CHUNK = 1 << 20


def _max_frame_from_env() -> int:
    raw = os.environ.get(MAX_FRAME_ENV, "").strip()
    if raw.isdigit() and 0 < int(raw) < 2**32:
        return int(raw)
    return DEFAULT_MAX_FRAME


# Read once per process; agent processes inherit the host's environment, so both ends agree.
MAX_FRAME = _max_frame_from_env()

# ``payload.kind`` of ``event`` messages. Orchestrator → agent: ``turn`` {ticket, event} (run one turn
# for an AgentEvent), ``response`` {event} / ``error_response`` {metadata{inReplyTo, errorCode,
# errorMessage}} (the answer to an inter-agent request, matched by correlation id), ``rpc_result``
# {rpcId, ok, value|error}, ``sync`` {id}. Agent → orchestrator: ``agent_ready`` {pid}, ``start_error``
# {error}, ``turn_accepted`` {ticket} (sent when the process takes the event, before the turn
# runs), ``turn_done`` {ticket, result}, ``request`` {event, target, instanceKey}, ``send`` {event,
# target, instanceKey}, ``rpc`` {rpcId, op, args}, ``runtime_event`` {record}, ``text_delta``
# {delta}, ``restart_request`` {reason}, ``sync_ack`` {id}, ``log`` {record} (a log record's fields,
# message formatted and traceback as text).
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
    "log",
)


class IpcError(Exception):
    """A frame that is not a valid IPC message."""


class FrameTooLarge(IpcError):
    """A message whose frame would exceed (or, read, did exceed) :data:`MAX_FRAME`."""

    def __init__(self, size: int, limit: int, kind: str | None = None) -> None:
        what = f"a {kind} message" if kind else "a message"
        super().__init__(f"{what} of {size} bytes exceeds the {limit} byte IPC frame limit")
        self.size = size
        self.limit = limit
        self.kind = kind


def frame_error(exc: FrameTooLarge) -> GoondanError:
    """The error a request gets when its event or its result cannot cross the process boundary."""
    return GoondanError(
        "E_IPC_FRAME_TOO_LARGE",
        f"{exc} and cannot cross the process boundary",
        suggestion=f"Return or send less data (limit {exc.limit} bytes; {MAX_FRAME_ENV} changes it), "
        "or write large results to a file and pass its path.",
    )


def message(type_: str, from_: str, to: str, payload: Any) -> dict[str, Any]:
    if type_ not in MESSAGE_TYPES:
        raise IpcError(f"unknown IPC message type {type_!r}")
    return {"type": type_, "from": from_, "to": to, "payload": payload}


def _kind(msg: dict[str, Any]) -> str:
    payload = msg.get("payload")
    kind = payload.get("kind") if isinstance(payload, dict) else None
    return str(kind) if kind else str(msg.get("type"))


def encode(msg: dict[str, Any]) -> bytes:
    body = orjson.dumps(msg)
    if len(body) > MAX_FRAME:
        raise FrameTooLarge(len(body), MAX_FRAME, _kind(msg))
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
    """The next message, or ``None`` at end of stream. An oversized frame is read past (never held
    in memory) and raises :class:`FrameTooLarge`; a body that is not a message raises
    :class:`IpcError`; either way the next call reads the next frame."""
    try:
        header = await reader.readexactly(HEADER.size)
    except asyncio.IncompleteReadError:
        return None
    (size,) = HEADER.unpack(header)
    if size > MAX_FRAME:
        left = size
        try:
            while left:
                chunk = await reader.read(min(left, _SKIP_CHUNK))
                if not chunk:
                    return None
                left -= len(chunk)
        except asyncio.IncompleteReadError:
            return None
        raise FrameTooLarge(size, MAX_FRAME)
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
        """Queue one message; ``False`` when the peer is gone. Raises ``TypeError`` for values
        that are not JSON and :class:`FrameTooLarge` for a message above the frame limit: nothing
        is written then, so the stream stays usable."""
        if self.closed or self.writer.is_closing():
            return False
        data = encode(msg)
        try:
            self.writer.write(data)
        except (ConnectionError, RuntimeError):
            self.closed = True
            return False
        return True

    async def recv(self) -> dict[str, Any] | None:
        """The next message or ``None`` when the peer is gone; :class:`IpcError` (incl.
        :class:`FrameTooLarge`) for one bad frame, after which the stream goes on."""
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
    "DEFAULT_MAX_FRAME",
    "EVENT_KINDS",
    "MAX_FRAME_ENV",
    "MESSAGE_TYPES",
    "ORCHESTRATOR",
    "Connection",
    "FrameTooLarge",
    "IpcError",
    "decode",
    "encode",
    "encode_packet",
    "frame_error",
    "message",
    "read_message",
]
