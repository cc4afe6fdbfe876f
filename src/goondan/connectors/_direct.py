"""The connector host's end of direct streams (see ``goondan.executors.process._direct_stream``):
a ``SOCK_SEQPACKET`` Unix socket in the abstract namespace where agent processes send the text
deltas of this connector's streamed events, without a hop through ``gdn run``.

Every datagram is handled where it is read (the loop's reader callback), like the supervisor
channel's records: a delta reaches the stream's writer (the webhook's SSE client) in the callback
that read it. Order against the reply: an agent process writes a turn's deltas and its end marker
into this socket's receive queue before its ``turn_done`` leaves, so when the turn's
``connector_reply`` arrives (after ``gdn run`` handled that ``turn_done``) they are already
readable here. :meth:`DeltaSocket.reply` reads everything queued first; a reply marked ``direct``
whose end marker has still not come is held until it does, until the connection that carried the
turn's deltas closes (the agent process died), or :data:`HOLD_SECONDS` pass.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import secrets
import socket
import struct

from ..executors.process._direct_stream import MAX_DATAGRAM, decode
from ._context import ConnectorContext, Reply

log = logging.getLogger("goondan.connectors")

HOLD_SECONDS = 10.0
_CREDS = struct.Struct("iII")  # struct ucred: pid_t pid, uid_t uid, gid_t gid


class DeltaSocket:
    """Listens for agent processes' direct streams and hands their deltas to ``ctx``."""

    def __init__(self, ctx: ConnectorContext, listener: socket.socket, address: str) -> None:
        self.ctx = ctx
        self.address = address  # as reported to gdn run: "@" for the abstract namespace's NUL
        self._loop = asyncio.get_running_loop()
        self._listener: socket.socket | None = listener
        self._conns: dict[int, socket.socket] = {}
        self._event_conn: dict[str, int] = {}  # event id -> the connection its deltas came on
        self._ended: set[str] = set()  # end markers of events whose reply has not come yet
        self._held: dict[str, tuple[Reply, asyncio.TimerHandle]] = {}
        self._buf = bytearray(MAX_DATAGRAM)
        self._view = memoryview(self._buf)
        self._uid = os.getuid()
        self._loop.add_reader(listener.fileno(), self._accept)

    @classmethod
    def open(cls, ctx: ConnectorContext) -> DeltaSocket | None:
        """A new socket with a name of its own, or ``None`` where there is none to have (the
        abstract namespace is Linux's): streamed events then take the path through ``gdn run``."""
        name = f"goondan-connector-{os.getpid()}-{secrets.token_hex(8)}"
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        try:
            sock.setblocking(False)
            sock.bind("\0" + name)
            sock.listen(4096)  # the kernel caps it at net.core.somaxconn; agents wait briefly when full
        except OSError as exc:
            sock.close()
            log.info("connector %s: no direct delta socket (%s); deltas come through gdn run", ctx.connection, exc)
            return None
        return cls(ctx, sock, "@" + name)

    # --- reading ---

    def _accept(self) -> None:
        listener = self._listener
        while listener is not None:
            try:
                conn, _ = listener.accept()
            except (BlockingIOError, InterruptedError):
                return
            except OSError as exc:
                log.warning("connector %s: accepting a delta connection failed: %s", self.ctx.connection, exc)
                return
            # anyone on the machine can name an abstract socket: take this user's processes only
            _pid, uid, _gid = _CREDS.unpack(conn.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, _CREDS.size))
            if uid != self._uid:
                conn.close()
                continue
            conn.setblocking(False)
            fd = conn.fileno()
            self._conns[fd] = conn
            self._loop.add_reader(fd, self._read, conn)
            self._read(conn)  # what it sent before we accepted it

    def _read(self, conn: socket.socket) -> None:
        fd = conn.fileno()
        view = self._view
        streams = self.ctx._streams
        while True:
            try:
                size = conn.recv_into(self._buf)
            except (BlockingIOError, InterruptedError):
                return
            except OSError:
                size = 0
            if not size:
                self._closed(fd, conn)
                return
            item = decode(view[:size])
            if item is None:
                log.warning("connector %s: skipped a datagram that is not a delta", self.ctx.connection)
                continue
            event_id, text, step = item
            if event_id not in streams:
                continue  # answered already (its stream broke), or not ours
            self._event_conn[event_id] = fd
            if text is None:
                held = self._held.pop(event_id, None)
                if held is None:
                    self._ended.add(event_id)
                else:
                    held[1].cancel()
                    self._finish(event_id, held[0])
            else:
                self.ctx._delta(event_id, text, step)

    def _closed(self, fd: int, conn: socket.socket) -> None:
        if self._conns.pop(fd, None) is None:
            return
        with contextlib.suppress(Exception):
            self._loop.remove_reader(fd)
        conn.close()
        # the agent process is gone (or gave up on us): nothing more comes for its events
        for event_id in [e for e, f in self._event_conn.items() if f == fd]:
            del self._event_conn[event_id]
            held = self._held.pop(event_id, None)
            if held is not None:
                held[1].cancel()
                self._finish(event_id, held[0])

    def drain(self) -> None:
        """Read every connection (and connection request) queued now."""
        self._accept()
        for conn in list(self._conns.values()):
            self._read(conn)

    # --- replies ---

    def reply(self, event_id: str, reply: Reply, direct: bool) -> None:
        """Hand over a reply once the deltas of its turn are (see the module docstring)."""
        if event_id in self.ctx._streams:
            self.drain()
            if (
                direct
                and event_id not in self._ended
                and event_id in self._event_conn
                and event_id in self.ctx._streams
            ):
                timer = self._loop.call_later(HOLD_SECONDS, self._timed_out, event_id)
                self._held[event_id] = (reply, timer)
                return
        self._finish(event_id, reply)

    def _timed_out(self, event_id: str) -> None:
        held = self._held.pop(event_id, None)
        if held is not None:
            log.warning("connector %s: event %s's stream did not end; replying anyway", self.ctx.connection, event_id)
            self._finish(event_id, held[0])

    def _finish(self, event_id: str, reply: Reply) -> None:
        self._ended.discard(event_id)
        self._event_conn.pop(event_id, None)
        self.ctx._resolve(event_id, reply)

    def close(self) -> None:
        for event_id, (reply, timer) in list(self._held.items()):
            timer.cancel()
            self._finish(event_id, reply)
        self._held.clear()
        for fd, conn in list(self._conns.items()):
            with contextlib.suppress(Exception):
                self._loop.remove_reader(fd)
            conn.close()
        self._conns.clear()
        if self._listener is not None:
            with contextlib.suppress(Exception):
                self._loop.remove_reader(self._listener.fileno())
            self._listener.close()
            self._listener = None


__all__ = ["HOLD_SECONDS", "DeltaSocket"]
