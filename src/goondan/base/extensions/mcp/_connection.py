"""One live MCP session over the official SDK (``mcp.Client``), owned by a dedicated task.

Why a task: the SDK's transports live inside anyio task groups and cancel scopes, which must be
exited by the task that entered them; a session kept across turns (each turn may run in another
task) therefore gets an owner task that enters ``Client``, waits for ``close()``, and exits it.
Other tasks call the client's methods freely.

Why the read-stream watch: the SDK exposes no "connection closed" flag, but a server that dies ends
the transport's read stream (stdio: EOF on its stdout; http: the transport task fails). Marking the
connection ``dead`` at that moment lets the bridge reconnect *before* sending the next request,
which is safe because nothing was sent to the dead server.

stdio servers' stderr goes to a pipe read by a thread that logs it (INFO: ``gdn run -v`` shows it) and
keeps the last few KB, so a server that fails to start is reported with what it printed.

Why two change feeds: a server says its tools, resources or prompts changed in the way its protocol
era allows. Handshake-era servers (before 2026-07-28) send ``notifications/*/list_changed`` on the
connection, which reach the client's ``message_handler``; 2026-07-28 servers send them only on a
``subscriptions/listen`` stream the client opened. A stateful connection therefore opens that
stream (when the server advertises ``listChanged`` for something the extension exposes) *before*
it reports ready, so the first listing cannot miss a change, and reopens it after an abrupt drop
(over HTTP also when an idle stream reaches the HTTP client's read timeout), reporting every
watched kind as changed because the stream has no replay. A server that ends the stream on purpose
is not asked again.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import threading
from collections import deque
from collections.abc import Callable
from contextlib import AsyncExitStack
from pathlib import Path
from typing import Any

from goondan.base.extensions.mcp._config import ServerConfig

_STDERR_TAIL = 4000
_CLOSE_TIMEOUT_S = 8.0
_RELISTEN_MAX_DELAY_S = 30.0
_ACK_WAIT_S = 5.0

# what the extension can show of a server -> the notification saying it changed
CHANGE_NOTIFICATIONS = {
    "notifications/tools/list_changed": "tools",
    "notifications/resources/list_changed": "resources",
    "notifications/prompts/list_changed": "prompts",
}


class _StdoutNoise(logging.Filter):
    """A stdio server that prints a banner or a debug line to stdout (where only MCP messages may
    go) made the SDK log an ERROR with a pydantic traceback on the user's terminal for each such
    line, though the session goes on. That record becomes one warning per distinct line, without
    the traceback, saying what the server should do instead."""

    _MAX_SEEN = 100

    def __init__(self) -> None:
        super().__init__()
        self.seen: set[str] = set()

    def filter(self, record: logging.LogRecord) -> bool:
        if not str(record.msg).startswith("Failed to parse JSONRPC message"):
            return True
        exc = record.exc_info[1] if record.exc_info else None
        errors = getattr(exc, "errors", None)
        line = ""
        with contextlib.suppress(Exception):
            line = str(errors()[0].get("input", "")) if callable(errors) else ""
        if line in self.seen:
            return False
        if len(self.seen) < self._MAX_SEEN:
            self.seen.add(line)
        record.msg = (
            "an MCP server wrote a line to stdout that is not an MCP message (ignored): %r; "
            "a stdio server must log to stderr"
        )
        record.args = (line[:200],)
        record.exc_info = None
        record.exc_text = None
        record.levelno = logging.WARNING
        record.levelname = "WARNING"
        return True


_STDOUT_NOISE = _StdoutNoise()
logging.getLogger("mcp.client.stdio").addFilter(_STDOUT_NOISE)


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
                # INFO, so `gdn run -v` shows what the server printed: the traceback of a tool that
                # raised (the SDK sends the model only "Error executing tool NAME")
                logger.info("[%s stderr] %s", label, line.decode("utf-8", "replace").rstrip())

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

    def __init__(
        self,
        cfg: ServerConfig,
        base: Path | None,
        logger: logging.Logger,
        label: str,
        on_change: Callable[[str], None] | None = None,
    ) -> None:
        self.cfg = cfg
        self.base = base
        self.logger = logger
        self.label = label
        self.client: Any = None
        self.dead = False
        self.failure: BaseException | None = None
        self.stderr = _StderrTail(logger, label) if cfg.transport == "stdio" else None
        self._on_change = on_change
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
                message_handler=self._on_message,
            )
            try:
                async with client:
                    if self.stderr is not None:
                        self.stderr.release_writer()
                    listener = self._start_listening(client)
                    try:
                        if listener is not None:
                            await self._wait_acknowledged(*listener)
                        self.client = client
                        self._ready.set()
                        await self._stop.wait()
                    finally:
                        if listener is not None:
                            listener[0].cancel()
                            await asyncio.wait([listener[0]], timeout=_CLOSE_TIMEOUT_S)
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

    def _changed(self, kind: str) -> None:
        if self._on_change is not None:
            self._on_change(kind)

    async def _on_message(self, message: Any) -> None:
        """The SDK's ``message_handler``: server notifications (and transport faults, which the
        read-stream watch already handles). Runs in an SDK task, so it only records the change."""
        kind = CHANGE_NOTIFICATIONS.get(getattr(message, "method", None) or "")
        if kind is not None:
            self._changed(kind)

    def _watched_kinds(self, client: Any) -> tuple[str, ...]:
        caps = client.server_capabilities
        exposed = {"tools": self.cfg.tools, "resources": self.cfg.resources, "prompts": self.cfg.prompts}
        return tuple(
            kind
            for kind, wanted in exposed.items()
            if wanted and getattr(getattr(caps, kind, None), "list_changed", None) is True
        )

    def _start_listening(self, client: Any) -> tuple[asyncio.Task[None], asyncio.Event] | None:
        """On a 2026-07-28 connection, a task keeping the change stream open (and the event set
        once the server acknowledged it). Handshake-era connections need none: their
        notifications arrive through ``_on_message``."""
        from mcp_types.version import MODERN_PROTOCOL_VERSIONS

        kinds = self._watched_kinds(client)
        if not kinds or self._on_change is None or not self.cfg.stateful:
            return None
        if client.protocol_version not in MODERN_PROTOCOL_VERSIONS:
            return None
        acked = asyncio.Event()
        task = asyncio.get_running_loop().create_task(
            self._listen(client, kinds, acked), name=f"mcp-listen:{self.label}"
        )
        return task, acked

    async def _wait_acknowledged(self, task: asyncio.Task[None], acked: asyncio.Event) -> None:
        """Report ready only once the change stream is open, so nothing changes unseen between
        the handshake and the first listing; a server slow to acknowledge delays the connect by
        at most a few seconds, and its stream then opens in the background."""
        waiter = asyncio.get_running_loop().create_task(acked.wait())
        try:
            timeout = min(_ACK_WAIT_S, self.cfg.connect_timeout_s / 2)
            await asyncio.wait([waiter, task], timeout=timeout, return_when=asyncio.FIRST_COMPLETED)
        finally:
            waiter.cancel()

    async def _listen(self, client: Any, kinds: tuple[str, ...], acked: asyncio.Event) -> None:
        from mcp.client.subscriptions import (
            ListenNotSupportedError,
            PromptsListChanged,
            ResourcesListChanged,
            ToolsListChanged,
        )
        from mcp.shared.exceptions import MCPError
        from mcp_types import CONNECTION_CLOSED

        events = {ToolsListChanged: "tools", ResourcesListChanged: "resources", PromptsListChanged: "prompts"}
        delay = 1.0
        reopened = False
        while not self.dead:
            try:
                async with client.listen(
                    tools_list_changed="tools" in kinds,
                    resources_list_changed="resources" in kinds,
                    prompts_list_changed="prompts" in kinds,
                ) as subscription:
                    acked.set()
                    if reopened:  # no replay: whatever changed while the stream was down is refetched
                        for kind in kinds:
                            self._changed(kind)
                    delay = 1.0
                    async for event in subscription:
                        changed = events.get(type(event))
                        if changed is not None:
                            self._changed(changed)
                return  # the server ended the subscription on purpose
            except ListenNotSupportedError:
                return
            except MCPError as exc:
                acked.set()
                if exc.code != CONNECTION_CLOSED:
                    if not self.dead:
                        self.logger.warning(
                            "MCP server %s refused to send change notifications (%s); its %s are re-listed "
                            "only after a reconnect",
                            self.label,
                            describe_error(exc),
                            "/".join(kinds),
                        )
                    return
            except Exception as exc:  # the stream dropped (SubscriptionLost, transport errors): reopen
                acked.set()
                self.logger.debug("MCP change stream of %s dropped: %s", self.label, describe_error(exc))
            if self.dead:
                return
            reopened = True
            await asyncio.sleep(delay)
            delay = min(delay * 2, _RELISTEN_MAX_DELAY_S)

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
