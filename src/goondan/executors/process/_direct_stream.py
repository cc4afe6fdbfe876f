"""Direct streams: a streamed connector turn's text deltas go from the agent process straight to the
connector host's delta socket, without crossing ``gdn run``.

Why: on the usual path a delta wakes three processes in a row (agent process -> ``gdn run`` ->
connector host -> the HTTP client); on a VM each wake of an idle vCPU costs an interrupt and cold
caches. Writing to the connector host from the agent process takes ``gdn run`` off the path of
every delta.

The connector host listens on a ``SOCK_SEQPACKET`` Unix socket in the abstract namespace (nothing on
disk to clean up after a SIGKILL) and reports its address in its ``ready`` record. For a streamed
event whose turn runs in a local agent process, ``gdn run`` attaches ``{address, id}`` (the
connector's event id) to that turn's ``turn`` frame instead of subscribing to the runtime's deltas.
The agent process then sends, on one cached connection per address:

- ``[id, text, step]`` per text delta of that turn (its trace id: a sub-agent's deltas run in
  another process and a later turn has another trace);
- ``[id]``, the end marker, when the turn is over, before its ``turn_done``.

A send never blocks the agent's loop: what the socket does not take waits in order and is written
when it is writable; before ``turn_done`` the process waits (at most :data:`FLUSH_SECONDS`) until
all of it, end marker included, is in the connector host's receive queue. So when the connector
host handles the turn's reply (which follows ``turn_done`` through ``gdn run``), every delta and the
end marker are already readable on its delta socket: it reads them first. A stream that could not
be written (no such socket, the host went away, the bound passed) is reported in ``turn_done``'s
result as ``directStream: "broken"``, and ``gdn run`` tells the connector not to wait for its end.

A direct stream that cannot be opened at the turn's start (connection refused, an address too
long, no permission, no file descriptor left) falls back to the usual route: the turn's deltas go
to ``gdn run`` as ``text_delta`` records marked ``directStream: "fallback"``, which the orchestrator
hands to that turn's connector only (:data:`FALLBACK_KEY`), and the turn reports its stream
``broken`` so that the connector does not wait for an end marker. The first such failure per
address is logged as a warning (later ones at info): the client still gets every delta, later.

A datagram is at most :data:`MAX_DATAGRAM` bytes (a longer delta is split into several, in order):
the kernel refuses a datagram larger than the socket's send buffer, and the reader's buffer is
that size.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import logging
import socket
import struct
from collections.abc import Callable
from typing import Any

import orjson

log = logging.getLogger("goondan.executors.process")

FLUSH_SECONDS = 5.0
CONNECT_WAIT_SECONDS = 1
_CONNECT_WAIT = struct.pack("ll", CONNECT_WAIT_SECONDS, 0)  # struct timeval for SO_SNDTIMEO
# bytes per datagram: far below the default Unix socket send buffer (about 208 KiB)
MAX_DATAGRAM = 64 * 1024
BROKEN = "broken"  # turn_done result["directStream"] of a turn whose direct stream broke
# the key (value "fallback") of a text delta an agent process sends through gdn run because the
# turn's direct stream could not be opened: it is for that turn's connector, not the host's listeners
FALLBACK_KEY = "directStream"


def encode_delta(event_id: str, text: str, step: int) -> bytes:
    return orjson.dumps([event_id, text, step])


def encode_end(event_id: str) -> bytes:
    return orjson.dumps([event_id])


def decode(data: bytes | bytearray | memoryview) -> tuple[str, str | None, int] | None:
    """``(id, text, step)`` for a delta, ``(id, None, 0)`` for an end marker, ``None`` for anything
    else (the socket accepts only this machine's user, but a bad datagram must not stop the reader)."""
    try:
        item = orjson.loads(data)
    except orjson.JSONDecodeError:
        return None
    if type(item) is not list or not item or type(item[0]) is not str:
        return None
    if len(item) == 1:
        return item[0], None, 0
    if len(item) == 3 and type(item[1]) is str and type(item[2]) is int:
        return item[0], item[1], item[2]
    return None


class _Link:
    """One connection to a connector host's delta socket: non-blocking sends, a backlog in order."""

    __slots__ = ("_idle", "_loop", "_queue", "address", "broken", "on_broken", "sock")

    def __init__(self, address: str, sock: socket.socket, loop: asyncio.AbstractEventLoop) -> None:
        self.address = address
        self.sock = sock
        self.broken = False
        self.on_broken: Callable[[_Link], None] | None = None
        self._loop = loop
        self._queue: collections.deque[bytes] = collections.deque()
        self._idle: list[asyncio.Future[None]] = []  # waiting for the backlog to be written
        # the connector host never writes here: readable means it closed (stopped or restarted)
        loop.add_reader(sock.fileno(), self._peer_closed)

    def _peer_closed(self) -> None:
        self._break(ConnectionResetError("the connector host closed the connection"))

    def send(self, data: bytes) -> bool:
        """Write one datagram now, or queue it behind the backlog; ``False`` once the link broke."""
        if self.broken:
            return False
        if self._queue:
            self._queue.append(data)
            return True
        try:
            self.sock.send(data, socket.MSG_NOSIGNAL)
        except BlockingIOError:
            self._queue.append(data)
            self._loop.add_writer(self.sock.fileno(), self._flush)
        except OSError as exc:
            self._break(exc)
            return False
        return True

    def _flush(self) -> None:
        queue = self._queue
        while queue:
            try:
                self.sock.send(queue[0], socket.MSG_NOSIGNAL)
            except BlockingIOError:
                return
            except OSError as exc:
                self._break(exc)
                return
            queue.popleft()
        self._loop.remove_writer(self.sock.fileno())
        self._wake()

    def _wake(self) -> None:
        for fut in self._idle:
            if not fut.done():
                fut.set_result(None)
        self._idle.clear()

    def _break(self, exc: BaseException | None) -> None:
        if self.broken:
            return
        self.broken = True
        log.info("direct stream to %r broke: %s", self.address, exc)
        with contextlib.suppress(Exception):
            self._loop.remove_reader(self.sock.fileno())
            if self._queue:
                self._loop.remove_writer(self.sock.fileno())
        self._queue.clear()
        self.sock.close()
        self._wake()
        if self.on_broken is not None:
            self.on_broken(self)

    async def flushed(self, timeout: float) -> bool:
        """Wait until the backlog is written; ``False`` when the link broke or the time ran out
        (the link is dropped then: what it still held would arrive after the turn's reply)."""
        if self._queue and not self.broken:
            fut = self._loop.create_future()
            self._idle.append(fut)
            try:
                await asyncio.wait_for(fut, timeout)
            except TimeoutError:
                self._break(TimeoutError(f"the connector did not read for {timeout:g}s"))
        return not self.broken


class _TurnStream:
    """The deltas of one turn going to one connector event."""

    __slots__ = ("event_id", "link", "ok")

    def __init__(self, event_id: str, link: _Link | None) -> None:
        self.event_id = event_id
        self.link = link
        self.ok = link is not None

    def delta(self, text: str, step: int) -> None:
        link = self.link
        if not self.ok or link is None:
            return
        data = encode_delta(self.event_id, text, step)
        if len(data) <= MAX_DATAGRAM or len(text) < 2:
            self.ok = link.send(data)
            return
        half = len(text) // 2  # a large delta (a local model's whole answer at once): in pieces
        self.delta(text[:half], step)
        self.delta(text[half:], step)


class DirectStreams:
    """An agent process's direct streams: links by address, and the turns streaming now by trace id.

    :meth:`listener` is a delta listener for the engine (it reads the list it was given by
    reference): the agent process puts it there while a turn streams directly, which is also what
    makes that turn's model call stream at all."""

    def __init__(self, fallback: Callable[[dict[str, Any]], None] | None = None) -> None:
        self._links: dict[str, _Link] = {}
        self.active: dict[str, _TurnStream] = {}
        self.on_change: Callable[[], None] | None = None  # the set of active streams went (non-)empty
        # sends a delta through gdn run (the agent process's text_delta record): the route of a
        # turn whose stream could not be opened; None: such a turn streams nothing
        self.fallback = fallback
        self._warned: set[str] = set()  # addresses whose failure was logged as a warning

    def listener(self, payload: Any) -> None:
        stream = self.active.get(payload.get("traceId"))
        if stream is not None:
            if stream.link is None:  # could not be opened: through gdn run, marked for its connector
                if self.fallback is not None:
                    self.fallback({**payload, FALLBACK_KEY: "fallback"})
                return
            step = payload.get("stepIndex")
            stream.delta(str(payload.get("delta", "")), step if type(step) is int else 0)

    def _link(self, address: str) -> _Link | None:
        link = self._links.get(address)
        if link is not None and not link.broken:
            return link
        self._links.pop(address, None)
        try:
            sock = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        except OSError as exc:  # no file descriptor left: this turn takes the usual route
            self._not_possible(address, exc)
            return None
        sock.setblocking(False)
        try:
            try:
                sock.connect(address)
            except BlockingIOError:
                # The host's accept backlog is full for a moment (many agent processes making their
                # first streamed turn at once): wait in the kernel for room, briefly, rather than
                # stream nothing. Python's own timeout does not wait on EAGAIN, SO_SNDTIMEO does.
                sock.setblocking(True)
                sock.setsockopt(socket.SOL_SOCKET, socket.SO_SNDTIMEO, _CONNECT_WAIT)
                sock.connect(address)
                sock.setblocking(False)
        except (OSError, ValueError) as exc:  # refused, no such socket, too long, no permission, no room
            sock.close()
            self._not_possible(address, exc)
            return None
        link = _Link(address, sock, asyncio.get_running_loop())
        link.on_broken = self._forget
        self._links[address] = link
        return link

    def _not_possible(self, address: str, exc: BaseException) -> None:
        route = "go through gdn run" if self.fallback is not None else "are not streamed"
        first = address not in self._warned
        self._warned.add(address)
        (log.warning if first else log.info)(
            "direct stream to the connector at %r cannot be opened (%s: %s): the turn's text deltas %s",
            address.replace("\0", "@"),
            type(exc).__name__,
            exc,
            route,
        )

    def _forget(self, link: _Link) -> None:
        """A broken link leaves the cache (its socket is closed): a restarted connector host has
        a new address, so a link to the old one would never be used again."""
        if self._links.get(link.address) is link:
            del self._links[link.address]

    def begin(self, target: Any, trace: Any) -> _TurnStream:
        """Start streaming the turn of ``trace`` to ``target`` (``{address, id}``). A target that
        cannot be reached gives a stream without a link: its deltas take the fallback route (see
        the module docstring) and its turn reports the stream broken."""
        address = target.get("address") if isinstance(target, dict) else None
        event_id = target.get("id") if isinstance(target, dict) else None
        if not isinstance(address, str) or not isinstance(event_id, str) or not isinstance(trace, str):
            return _TurnStream("", None)
        address = "\0" + address[1:] if address.startswith("@") else address
        stream = _TurnStream(event_id, self._link(address))
        if stream.ok or self.fallback is not None:
            was_empty = not self.active
            self.active[trace] = stream
            if was_empty and self.on_change is not None:
                self.on_change()
        return stream

    async def end(self, stream: _TurnStream, trace: Any) -> bool:
        """The turn is over: send the end marker and wait until everything is written. ``False``:
        the connector may miss some of the turn's deltas and must not wait for the end marker."""
        if self.active.get(trace) is stream:
            del self.active[trace]
            if not self.active and self.on_change is not None:
                self.on_change()
        link = stream.link
        if not stream.ok or link is None:
            return False
        if not link.send(encode_end(stream.event_id)):
            return False
        return await link.flushed(FLUSH_SECONDS)

    def close(self) -> None:
        for link in list(self._links.values()):
            link._break(None)
        self._links.clear()


__all__ = [
    "BROKEN",
    "CONNECT_WAIT_SECONDS",
    "FALLBACK_KEY",
    "FLUSH_SECONDS",
    "MAX_DATAGRAM",
    "DirectStreams",
    "decode",
    "encode_delta",
    "encode_end",
]
