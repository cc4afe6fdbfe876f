"""uvicorn's h11 protocol with the guards a public webhook port needs that uvicorn leaves out.

uvicorn (with h11 parsing) serves the connectors' webhooks; this subclass adds, per connection:

- a **read deadline**: a request must arrive whole (head and body) within ``read_timeout`` seconds
  of its first byte (or of the connection opening), else ``408`` and the connection closes. uvicorn
  only times out idle keep-alive connections, so a client sending a header a byte a second would
  otherwise hold its connection forever;
- **statuses that say what was wrong** with an unreadable request (``431`` for a head over the
  size limit, ``414`` when the request line alone is, ``400`` for the rest) and one warning line in
  the log, where uvicorn answers ``400`` to everything;
- **lingering after a refusal**: the answer is written, the sending side shut, and what the client
  still sends is read and dropped for up to :data:`LINGER_SECONDS` / :data:`LINGER_BYTES`. Closing
  with unread input makes the kernel send a reset, which can destroy the answer before the client
  reads it (a client still uploading a too-large body would see "connection reset", not 413);
- **half-closed clients** (``curl`` and others shut their sending side after the request) still
  get their answer; uvicorn would close at once. A client that hangs up halfway through a request
  gets nothing and is not an error. Once a streamed answer has begun, the end of the client's side
  is its hang-up: the stream stops (its producer is cancelled) rather than writing to nobody.

Everything else (keep-alive, pipelining, ``Expect: 100-continue``, flow control, concurrency
limit) is uvicorn's.
"""

from __future__ import annotations

import asyncio
import http
import json
import logging
import socket
from collections.abc import Callable
from typing import Any

import h11
from uvicorn.protocols.http.h11_impl import H11Protocol, RequestResponseCycle

LINGER_SECONDS = 2.0
LINGER_BYTES = 4 << 20
_DONE_STATES = (h11.DONE, h11.MUST_CLOSE, h11.CLOSED, h11.ERROR)
log = logging.getLogger("goondan.connectors.http")
_uvicorn_log = logging.getLogger("goondan.connectors.http.server")
# uvicorn logs a bare "Invalid HTTP request received." before every refusal; ours names the status
_uvicorn_log.addFilter(lambda record: record.msg != "Invalid HTTP request received.")


class _RecordingConnection(h11.Connection):
    """An h11 connection that keeps the last parse error, so the refusal can name its status."""

    last_error: h11.RemoteProtocolError | None = None

    def next_event(self) -> Any:
        try:
            return super().next_event()
        except h11.RemoteProtocolError as exc:
            self.last_error = exc
            raise


REFUSAL_REASONS = {
    400: "bad_request",
    408: "request_timeout",
    413: "body_too_large",
    414: "target_too_long",
    431: "headers_too_large",
    505: "unsupported_version",
}


def refusal_body(status: int, detail: str) -> bytes:
    """What a refused request is answered with: JSON in the shape of the connectors' own errors
    (``{"ok": false, "reason": <code>, "error": <what was wrong>}``), so a client parses every
    error of a webhook port the same way, whichever layer refused it."""
    reason = REFUSAL_REASONS.get(status, "bad_request")
    return json.dumps({"ok": False, "reason": reason, "error": detail}).encode("utf-8")


def raw_response(status: int, detail: str) -> bytes:
    """A complete ``Connection: close`` response, written directly: the refusals happen where h11's
    own state machine may not allow a response (half a request line, a timed-out head)."""
    body = refusal_body(status, detail)
    phrase = http.HTTPStatus(status).phrase
    head = (
        f"HTTP/1.1 {status} {phrase}\r\ncontent-type: application/json\r\n"
        f"content-length: {len(body)}\r\nconnection: close\r\n\r\n"
    )
    return head.encode("latin-1") + body


class _LingeringTransport:
    """The transport as uvicorn sees it: a ``close()`` while the client is still sending its request
    (uvicorn closing after a ``Connection: close`` refusal such as 413) lingers instead."""

    def __init__(self, inner: asyncio.Transport, protocol: GuardedH11Protocol) -> None:
        self._inner = inner
        self._protocol = protocol

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)

    def close(self) -> None:
        if self._protocol.conn.their_state is h11.SEND_BODY and not self._inner.is_closing():
            self._protocol.linger()
        else:
            self._inner.close()


class GuardedH11Protocol(H11Protocol):
    """See the module docstring; ``read_timeout`` comes from the server (``config.read_timeout``)."""

    read_timeout: float = 30.0

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.conn = _RecordingConnection(h11.SERVER, self.config.h11_max_incomplete_event_size or 16384)
        self.logger = _uvicorn_log
        self._deadline: asyncio.TimerHandle | None = None
        self._lingering = False
        self._drained = 0
        self._peer_eof = False

    # -- deadline ---------------------------------------------------------------------------------

    def _arm(self) -> None:
        if self._deadline is None and not self._lingering:
            self._deadline = self.loop.call_later(self.read_timeout, self._on_deadline)

    def _disarm(self) -> None:
        if self._deadline is not None:
            self._deadline.cancel()
            self._deadline = None

    def _on_deadline(self) -> None:
        self._deadline = None
        if self.transport.is_closing() or self._lingering:
            return
        if self.cycle is not None and self.cycle.response_started:
            self.transport.close()  # the answer went out; the client never finished its body
            return
        self.refuse(408, f"request not received within {self.read_timeout:g}s")

    # -- refusing ---------------------------------------------------------------------------------

    def _peer(self) -> str:
        return f"{self.client[0]}:{self.client[1]}" if self.client else "?"

    def refuse(self, status: int, detail: str) -> None:
        """Answer ``status``, log one line, then linger (see the module docstring)."""
        log.warning("refused a request from %s with %d: %s", self._peer(), status, detail)
        self._disarm()
        if self.cycle is not None:
            self.cycle.disconnected = True  # whatever the app still sends is dropped
            self.cycle.message_event.set()
        self.transport.write(raw_response(status, detail))
        self.linger()

    def linger(self) -> None:
        """Shut the sending side and drop what the client still sends, then close."""
        if self._lingering:
            return
        self._lingering = True
        self._disarm()
        try:
            if self._raw.can_write_eof():
                self._raw.write_eof()
            self._raw.resume_reading()
        except OSError:  # the client is already gone
            self._raw.close()
            return
        self.loop.call_later(LINGER_SECONDS, self._end_linger)

    def _end_linger(self) -> None:
        if not self._raw.is_closing():
            self._raw.close()

    def send_400_response(self, msg: str) -> None:
        """h11 could not parse the request: say why with the matching status."""
        error = self.conn.last_error if isinstance(self.conn, _RecordingConnection) else None
        status = error.error_status_hint if error is not None else 400
        detail = str(error) if error is not None else msg
        detail = detail if len(detail) <= 120 else detail[:117] + "..."  # it may quote the client's bytes
        if status == 431:
            pending = self.conn.trailing_data[0]
            if b"\n" not in pending:
                status, detail = 414, "request line over the size limit"
            else:
                detail = "request head over the size limit"
        self.refuse(status, detail)

    # -- asyncio.Protocol -------------------------------------------------------------------------

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        self._raw = transport
        sock = transport.get_extra_info("socket")
        if sock is not None and sock.family in (socket.AF_INET, socket.AF_INET6):
            # asyncio sets this only for sockets made with proto=IPPROTO_TCP; without it a response
            # written as head + body waits for the client's delayed ACK (40 ms a request)
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        super().connection_made(_LingeringTransport(transport, self))  # type: ignore[arg-type]
        self._arm()

    def data_received(self, data: bytes) -> None:
        if self._lingering:
            self._drained += len(data)
            if self._drained > LINGER_BYTES:
                self._raw.close()
            return
        if self.cycle is not None and self.cycle.response_complete and self.conn.their_state is h11.SEND_BODY:
            # answered early (413): uvicorn drops the rest of the body; bound how much
            self._drained += len(data)
            if self._drained > LINGER_BYTES:
                self.transport.close()
                return
        self._arm()
        super().data_received(data)
        if self.conn.their_state in _DONE_STATES:
            self._disarm()

    def eof_received(self) -> bool | None:  # type: ignore[override]
        """The client shut its sending side: answer a complete request, drop an incomplete one."""
        if self._lingering:
            self._raw.close()
            return None
        self._peer_eof = True
        whole_request = self.conn.their_state in (h11.DONE, h11.MUST_CLOSE)
        if whole_request and self.cycle is not None and not self.cycle.response_complete:
            if self.cycle.response_started:
                # a streamed answer (Server-Sent Events) is under way: a client that closes now is
                # gone, not waiting; closing ends the stream at once instead of at a failed write
                log.info("client %s hung up during a streamed answer", self._peer())
                self.transport.close()
                return None
            return True  # keep the sending side open for the answer; closed in on_response_complete
        if self.conn.their_state is not h11.IDLE or self.conn.trailing_data[0]:
            log.info("client %s hung up before sending a whole request", self._peer())
        self.transport.close()
        return None

    def on_response_complete(self) -> None:
        self._drained = 0
        super().on_response_complete()
        if self._peer_eof and not self.transport.is_closing():
            self.transport.close()

    def connection_lost(self, exc: Exception | None) -> None:
        self._disarm()
        super().connection_lost(exc)

    def shutdown(self) -> None:
        self._disarm()
        if self._lingering:
            self._raw.close()
            return
        super().shutdown()


def body_writer(send: Any) -> Callable[[bytes], bool] | None:
    """A synchronous ``write(chunk) -> bool`` for the body of the response ``send`` (an ASGI send of
    this server) is answering, or ``None`` when ``send`` is not one of ours.

    It does what uvicorn's ``send`` of a body chunk does (h11 frames it, the transport takes it), minus
    the coroutine: a producer woken by a plain callback (a delta record read off the connector
    channel) writes from that callback, instead of waking a task that would write one loop iteration
    later. It writes only when uvicorn's own send would write at once, and returns ``False`` when
    that send would wait or drop the chunk: head not out yet, answer complete, client gone, or flow
    control paused (the client reads slowly; the producer keeps the chunk and sends it through the
    response's iterator, whose send waits, so a slow client still holds back the producer)."""
    cycle = getattr(send, "__self__", None)
    if not isinstance(cycle, RequestResponseCycle):
        return None
    # the socket's own transport: the lingering wrapper only changes close(), and each attribute
    # looked up through it costs a __getattr__ call
    transport: asyncio.Transport = getattr(cycle.transport, "_inner", cycle.transport)
    conn = cycle.conn
    flow = cycle.flow
    head = cycle.scope["method"] == "HEAD"

    def write(chunk: bytes) -> bool:
        if (
            head
            or not chunk  # h11 would drop it; chunked framing must never write an empty chunk
            or cycle.disconnected
            or flow.write_paused
            or not cycle.response_started
            or cycle.response_complete
            or conn.our_state is not h11.SEND_BODY
            or transport.is_closing()
        ):
            return False
        framing = _FRAMING.get(type(getattr(conn, "_writer", None)))
        if framing is None:  # an h11 whose writers we do not know: let it frame the chunk
            output = conn.send(h11.Data(data=chunk))
            if output:
                transport.write(output)
        else:
            transport.write(framing(chunk))
        return True

    return write


def _chunked(data: bytes) -> bytes:
    return b"%x\r\n%b\r\n" % (len(data), data)


def _unframed(data: bytes) -> bytes:
    return data


def _h11_framing() -> dict[type, Callable[[bytes], bytes]]:
    """What h11's body writers do to a non-empty chunk, done here in one step: h11's ``send`` runs
    its state machine for every chunk, the largest cost left in writing one delta (~30 µs measured
    on the first delta after an idle pause). Only writers whose output is pinned by a test are listed;
    any other writer (or an h11 without these names) goes through ``send``."""
    try:
        from h11._writers import ChunkedWriter, Http10Writer
    except ImportError:
        return {}
    return {ChunkedWriter: _chunked, Http10Writer: _unframed}


_FRAMING = _h11_framing()


__all__ = [
    "LINGER_BYTES",
    "LINGER_SECONDS",
    "REFUSAL_REASONS",
    "GuardedH11Protocol",
    "body_writer",
    "raw_response",
    "refusal_body",
]
