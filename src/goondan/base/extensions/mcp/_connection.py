"""One live MCP session over the official SDK (``mcp.Client``), owned by a dedicated task.

Why a task: the SDK's transports live inside anyio task groups and cancel scopes, which must be
exited by the task that entered them; a session kept across turns (each turn may run in another
task) therefore gets an owner task that enters ``Client``, waits for ``close()``, and exits it.
Other tasks call the client's methods freely.

Why the read-stream watch: the SDK exposes no "connection closed" flag, but a server that dies ends
the transport's read stream (stdio: EOF on its stdout; http: the transport task fails). Marking the
connection ``dead`` at that moment lets the bridge reconnect *before* sending the next request,
which is safe because nothing was sent to the dead server.

stdio servers' stderr goes to a pipe read by a thread that logs it (debug) and keeps the last few
KB, so a server that fails to start is reported with what it printed.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import threading
from collections import deque
from contextlib import AsyncExitStack
from pathlib import Path
from typing import Any

from goondan.base.extensions.mcp._config import ServerConfig

_STDERR_TAIL = 4000
_CLOSE_TIMEOUT_S = 8.0


class ConnectFailed(Exception):
    """The server could not be reached or did not complete the MCP handshake."""

    def __init__(self, reason: str, stderr: str = "") -> None:
        super().__init__(reason)
        self.reason = reason
        self.stderr = stderr


def leaf_error(exc: BaseException) -> BaseException:
    """The first non-group exception inside ``exc`` (anyio task groups wrap failures)."""
    while isinstance(exc, BaseExceptionGroup) and exc.exceptions:
        exc = exc.exceptions[0]
    return exc


def describe_error(exc: BaseException) -> str:
    leaf = leaf_error(exc)
    text = str(leaf).strip()
    return f"{type(leaf).__name__}: {text}" if text else type(leaf).__name__


class _StderrTail:
    """A pipe for a server's stderr: a thread logs each line and keeps the tail."""

    def __init__(self, logger: logging.Logger, label: str) -> None:
        read_fd, write_fd = os.pipe()
        self.writer = os.fdopen(write_fd, "w")
        self._chunks: deque[bytes] = deque()
        self._size = 0
        self._lock = threading.Lock()
        self._thread = threading.Thread(target=self._pump, args=(read_fd, logger, label), daemon=True)
        self._thread.start()

    def _pump(self, fd: int, logger: logging.Logger, label: str) -> None:
        with os.fdopen(fd, "rb") as reader:
            for line in reader:
                with self._lock:
                    self._chunks.append(line)
                    self._size += len(line)
                    while self._size > _STDERR_TAIL and len(self._chunks) > 1:
                        self._size -= len(self._chunks.popleft())
                logger.debug("[%s stderr] %s", label, line.decode("utf-8", "replace").rstrip())

    def release_writer(self) -> None:
        """Drop our copy of the write end (the child keeps its own), so EOF follows the child's exit."""
        with contextlib.suppress(OSError):
            self.writer.close()

    def text(self, wait: float = 0.0) -> str:
        if wait:
            self._thread.join(wait)
        with self._lock:
            data = b"".join(self._chunks)
        return data.decode("utf-8", "replace").strip()[-_STDERR_TAIL:]


class _EofWatch:
    """A read stream that reports its end (the SDK's ReadStream protocol, delegating)."""

    def __init__(self, inner: Any, on_end: Any) -> None:
        self._inner = inner
        self._on_end = on_end

    async def receive(self) -> Any:
        import anyio

        try:
            return await self._inner.receive()
        except (anyio.EndOfStream, anyio.ClosedResourceError, anyio.BrokenResourceError):
            self._on_end()
            raise

    def __aiter__(self) -> _EofWatch:
        return self

    async def __anext__(self) -> Any:
        import anyio

        try:
            return await self.receive()
        except anyio.EndOfStream:
            raise StopAsyncIteration from None

    async def aclose(self) -> None:
        await self._inner.aclose()

    async def __aenter__(self) -> _EofWatch:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()


class _WatchedTransport:
    """The SDK transport for ``cfg`` (stdio or streamable HTTP), with the read stream watched."""

    def __init__(self, connection: Connection) -> None:
        self._connection = connection
        self._stack = AsyncExitStack()

    async def __aenter__(self) -> tuple[Any, Any]:
        conn = self._connection
        cfg = conn.cfg
        try:
            if cfg.transport == "stdio":
                from mcp.client.stdio import StdioServerParameters, stdio_client

                argv = cfg.argv()
                cwd = cfg.resolved_cwd(conn.base)
                params = StdioServerParameters(command=argv[0], args=argv[1:], env=cfg.env or None, cwd=cwd)
                assert conn.stderr is not None
                read, write = await self._stack.enter_async_context(stdio_client(params, errlog=conn.stderr.writer))
            else:
                import httpx2
                from mcp.client.streamable_http import streamable_http_client

                http = await self._stack.enter_async_context(
                    httpx2.AsyncClient(headers=cfg.headers, timeout=httpx2.Timeout(30.0, read=300.0))
                )
                assert cfg.endpoint is not None
                read, write = await self._stack.enter_async_context(
                    streamable_http_client(cfg.endpoint, http_client=http)
                )
        except BaseException:
            await self._stack.aclose()
            raise
        return _EofWatch(read, conn.mark_dead), write

    async def __aexit__(self, *exc: Any) -> bool | None:
        self._connection.mark_dead()
        return await self._stack.__aexit__(*exc)


class Connection:
    """An open session to one server. ``dead`` once the server is gone or ``close()`` ran."""

    def __init__(self, cfg: ServerConfig, base: Path | None, logger: logging.Logger, label: str) -> None:
        self.cfg = cfg
        self.base = base
        self.logger = logger
        self.label = label
        self.client: Any = None
        self.dead = False
        self.failure: BaseException | None = None
        self.stderr = _StderrTail(logger, label) if cfg.transport == "stdio" else None
        self._ready = asyncio.Event()
        self._stop = asyncio.Event()
        self._task: asyncio.Task[None] | None = None

    def mark_dead(self) -> None:
        """The server is gone: flag it for the bridge and let the owner task wind the session down."""
        self.dead = True
        self._stop.set()

    async def open(self) -> None:
        """Start the owner task and wait for the handshake; raises :class:`ConnectFailed`."""
        self._task = asyncio.get_running_loop().create_task(self._own(), name=f"mcp-session:{self.label}")
        try:
            await asyncio.wait_for(self._ready.wait(), self.cfg.connect_timeout_s)
        except TimeoutError:
            await self.close()
            raise ConnectFailed(
                f"no MCP handshake within {int(self.cfg.connect_timeout_s * 1000)} ms", self._stderr_text(0.2)
            ) from None
        if self.client is None:
            failure = self.failure
            await self.close()
            reason = describe_error(failure) if failure is not None else "the session ended during the handshake"
            raise ConnectFailed(reason, self._stderr_text(1.0))

    def _stderr_text(self, wait: float) -> str:
        return self.stderr.text(wait) if self.stderr is not None else ""

    async def _own(self) -> None:
        from mcp import Client
        from mcp.types import Implementation

        try:
            client = Client(
                _WatchedTransport(self),
                read_timeout_seconds=self.cfg.call_timeout_s,
                client_info=Implementation(name="goondan", version="0.1.0"),
            )
            try:
                async with client:
                    if self.stderr is not None:
                        self.stderr.release_writer()
                    self.client = client
                    self._ready.set()
                    await self._stop.wait()
            finally:
                if self.stderr is not None:
                    self.stderr.release_writer()
        except asyncio.CancelledError:
            pass  # close() during the handshake; the SDK has already stopped the server
        except BaseException as exc:
            self.failure = exc
            self.logger.debug("MCP session %s ended: %s", self.label, describe_error(exc))
        finally:
            self.dead = True
            self.client = None
            self._ready.set()

    async def wait_ended(self, timeout: float) -> None:
        """Give the owner task up to ``timeout`` to notice the end (to learn ``failure``)."""
        task = self._task
        if task is not None and not task.done():
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(asyncio.shield(task), timeout)

    async def close(self) -> None:
        self.dead = True
        self._stop.set()
        task = self._task
        if task is None or task.done():
            return
        if self.client is None:
            task.cancel()
        try:
            await asyncio.wait_for(asyncio.shield(task), _CLOSE_TIMEOUT_S)
        except TimeoutError:
            task.cancel()
            self.logger.warning("MCP session %s did not close within %.0f s", self.label, _CLOSE_TIMEOUT_S)
