"""Host side of the fork server (see ``_forkserver``): start it, ask it for agent processes, learn
their exit codes, kill them by pid. The control channel speaks the records of ``_ipc`` (``init``,
``spawn`` → ``ready``/``start_error``, ``spawned``, ``exited``) as datagrams."""

from __future__ import annotations

import array
import asyncio
import contextlib
import itertools
import logging
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable
from typing import Any

from ...errors import ConfigError, GoondanError
from ._ipc import (
    ORCHESTRATOR,
    Dispatcher,
    Exited,
    FrameChannel,
    Init,
    IpcError,
    Ready,
    Record,
    Spawn,
    Spawned,
    StartError,
    decode,
    encode_packet,
)

FORKSERVER = "forkserver"

log = logging.getLogger("goondan.executors.process")

ExitCallback = Callable[[int, int], None]


class ForkServer:
    def __init__(self, init: dict[str, Any], on_exit: ExitCallback) -> None:
        self._init = init
        self._on_exit = on_exit
        self._sock: socket.socket | None = None
        self._proc: subprocess.Popen[bytes] | None = None
        self._ready: asyncio.Future[None] | None = None
        self._spawns: dict[int, asyncio.Future[int]] = {}
        self._ids = itertools.count(1)
        self.children: set[int] = set()
        self.alive = False
        self.pid: int | None = None
        self._table = (
            Dispatcher("fork server channel", log)
            .on(Spawned, self._on_spawned)
            .on(Exited, self._on_exited)
            .on(Ready, self._on_ready)
            .on(StartError, self._on_init_error)
        )

    async def start(self, timeout: float = 60.0) -> None:
        loop = asyncio.get_running_loop()
        parent, child = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        try:
            # whatever the server itself prints (a bundle import's side effects) goes to the host's
            # stderr: the host's stdout carries answers only
            self._proc = subprocess.Popen(
                [sys.executable, "-m", "goondan.executors.process._forkserver", str(child.fileno())],
                pass_fds=[child.fileno()],
                stdin=subprocess.DEVNULL,
                stdout=2,
            )
        finally:
            child.close()
        self.pid = self._proc.pid
        parent.setblocking(False)
        self._sock = parent
        self._ready = loop.create_future()
        loop.add_reader(parent.fileno(), self._on_readable)
        self.alive = True
        try:
            init = Init.from_payload(self._init)
        except IpcError as exc:
            await self.close()
            raise GoondanError("E_FORKSERVER", f"bad fork server settings: {exc}") from None
        self._send(init)
        try:
            await asyncio.wait_for(asyncio.shield(self._ready), timeout)
        except BaseException:
            await self.close()
            raise

    def _send(self, record: Record, fds: list[int] | None = None) -> None:
        assert self._sock is not None
        data = encode_packet(record.message(ORCHESTRATOR, FORKSERVER))
        anc = [(socket.SOL_SOCKET, socket.SCM_RIGHTS, array.array("i", fds))] if fds else []
        deadline = time.monotonic() + 5.0
        while True:
            try:
                self._sock.sendmsg([data], anc)
                return
            except BlockingIOError:
                # the server is busy forking; its socket buffer drains within microseconds
                if time.monotonic() > deadline:
                    raise GoondanError("E_FORKSERVER_STUCK", "the fork server stopped reading requests") from None
                time.sleep(0.0005)

    def _on_readable(self) -> None:
        sock = self._sock
        if sock is None:
            return
        while True:
            try:
                data = sock.recv(1 << 20)
            except BlockingIOError:
                return
            except OSError:
                data = b""
            if not data:
                self._lost()
                return
            try:
                msg = decode(data)
            except IpcError as exc:
                log.error("fork server channel: skipped a datagram: %s", exc)
                continue
            self._table.dispatch(msg)

    def _on_spawned(self, rec: Spawned) -> None:
        fut = self._spawns.pop(rec.id, None)
        self.children.add(rec.pid)
        if fut is not None and not fut.done():
            fut.set_result(rec.pid)

    def _on_exited(self, rec: Exited) -> None:
        self.children.discard(rec.pid)
        self._on_exit(rec.pid, rec.code)

    def _on_ready(self, _rec: Ready) -> None:
        if self._ready and not self._ready.done():
            self._ready.set_result(None)

    def _on_init_error(self, rec: StartError) -> None:
        err = rec.error
        exc: GoondanError
        if err.get("class") == "ConfigError":
            exc = ConfigError(str(err.get("code")), str(err.get("message")))
        else:
            exc = GoondanError(str(err.get("code") or "E_FORKSERVER"), str(err.get("message")))
        if self._ready and not self._ready.done():
            self._ready.set_exception(exc)

    def _lost(self) -> None:
        """The fork server is gone; so are its children (parent-death signal)."""
        if not self.alive:
            return
        self.alive = False
        if self._sock is not None:
            with contextlib.suppress(Exception):
                asyncio.get_running_loop().remove_reader(self._sock.fileno())
        err = GoondanError("E_FORKSERVER_EXITED", "the fork server exited")
        for fut in self._spawns.values():
            if not fut.done():
                fut.set_exception(err)
        self._spawns.clear()
        if self._ready and not self._ready.done():
            self._ready.set_exception(err)
        for pid in list(self.children):
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
            self.children.discard(pid)
            self._on_exit(pid, -signal.SIGKILL)

    async def spawn(self, spec: dict[str, Any]) -> tuple[int, FrameChannel, int]:
        """A new agent process: its pid, its message stream and the read end of the pipe its fds 1
        and 2 write to (the caller drains and closes it)."""
        if not self.alive:
            raise GoondanError("E_FORKSERVER_EXITED", "the fork server is not running")
        mine, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
        out_r, out_w = os.pipe()
        spawn_id = next(self._ids)
        fut: asyncio.Future[int] = asyncio.get_running_loop().create_future()
        self._spawns[spawn_id] = fut
        try:
            self._send(Spawn(spawn_id, spec), [theirs.fileno(), out_w])
        except BaseException:
            self._spawns.pop(spawn_id, None)
            mine.close()
            os.close(out_r)
            raise
        finally:
            theirs.close()
            os.close(out_w)
        try:
            pid = await fut
        except BaseException:
            mine.close()
            os.close(out_r)
            raise
        return pid, await FrameChannel.open(mine), out_r

    def kill(self, pid: int, sig: int) -> None:
        if pid in self.children:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, sig)

    async def close(self, timeout: float = 10.0) -> None:
        """Stop the server; it SIGKILLs any child still alive."""
        sock, self._sock = self._sock, None
        if sock is not None:
            with contextlib.suppress(Exception):
                asyncio.get_running_loop().remove_reader(sock.fileno())
            sock.close()
        self.alive = False
        proc = self._proc
        if proc is None:
            return
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout
        while proc.poll() is None and loop.time() < deadline:
            await asyncio.sleep(0.005)
        if proc.poll() is None:
            proc.kill()
            await asyncio.to_thread(proc.wait)
        for pid in list(self.children):
            self.children.discard(pid)
            self._on_exit(pid, -signal.SIGKILL)


__all__ = ["ForkServer"]
