"""Sessions to one MCP server with the attach policy and the reconnect rule.

Attach: ``stateful`` keeps one session open and reuses it; ``stateless``
opens a session for each use and closes it afterwards. Scope ``agent`` gives every agent instance
its own bridge; scope ``instance`` shares one bridge among all agent instances in this process that
use the same extension name with the same connection config (inline isolation: the whole swarm
instance; process isolation: one per process, i.e. per agent instance).

The reconnect rule (what a dead server does to tool calls):

1. A session already known dead before a use — the server exited, was killed, or its HTTP
   connection failed — is replaced by a new one and the use proceeds on it. Transparent and safe:
   nothing had been sent to the dead server.
2. A session that dies *during* a use fails that use with :class:`ConnectionLost`
   (``E_MCP_CONNECTION_LOST``): the request may or may not have run, so it is never repeated
   behind the model's back. Exception: an HTTP endpoint that refused the connection never received
   the request, so the use is retried once on a new session.
3. A server that cannot be (re)started fails the use with :class:`Unavailable`
   (``E_MCP_UNAVAILABLE``, naming the command line and the server's stderr); the next use tries again.

Change notifications ("the tool list changed") from any of the bridge's sessions are passed on to
the watchers (one per agent instance using the bridge), held weakly so a dropped agent instance
can still be collected and release the bridge.
"""

from __future__ import annotations

import asyncio
import logging
import weakref
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any, TypeVar

from goondan.base.extensions.mcp._config import ServerConfig
from goondan.base.extensions.mcp._connection import ConnectFailed, Connection, describe_error, leaf_error

T = TypeVar("T")

CONNECTION_CLOSED = -32000
REQUEST_TIMEOUT = -32001  # the SDK (2.x) reports its own request timeout as an MCPError with this code


class BridgeError(Exception):
    code = "E_MCP_ERROR"

    def __init__(self, message: str, suggestion: str | None = None) -> None:
        super().__init__(message)
        self.suggestion = suggestion


class Unavailable(BridgeError):
    code = "E_MCP_UNAVAILABLE"


class ConnectionLost(BridgeError):
    code = "E_MCP_CONNECTION_LOST"


class CallTimeout(BridgeError):
    code = "E_MCP_TIMEOUT"


class RequestRejected(BridgeError):
    code = "E_MCP_REQUEST_FAILED"


class BadResponse(BridgeError):
    code = "E_MCP_BAD_RESPONSE"


def _schema_problems(exc: Any) -> str:
    """A pydantic ``ValidationError`` as ``field.path: message`` lines, the first three."""
    problems = [".".join(str(part) for part in err.get("loc", ())) + f": {err.get('msg', '')}" for err in exc.errors()]
    more = f" (+{len(problems) - 3} more)" if len(problems) > 3 else ""
    return "; ".join(problems[:3]) + more


def _is_connection_loss(exc: BaseException) -> bool:
    from mcp.shared.exceptions import MCPError

    leaf = leaf_error(exc)
    if isinstance(leaf, MCPError):
        return getattr(leaf, "code", None) == CONNECTION_CLOSED
    return not isinstance(leaf, TimeoutError | ValueError | TypeError)


def _timed_out(exc: BaseException) -> bool:
    """The request ran past ``callMs``: a ``TimeoutError``, or what the 2.x SDK raises instead (an
    ``MCPError`` with code -32001). Not a rejection: the server may still be working on it."""
    leaf = leaf_error(exc)
    if isinstance(leaf, TimeoutError):
        return True
    return type(leaf).__name__ == "MCPError" and getattr(leaf, "code", None) == REQUEST_TIMEOUT


def _refused(exc: BaseException | None) -> bool:
    if exc is None:
        return False
    leaf = leaf_error(exc)
    return isinstance(leaf, ConnectionRefusedError) or type(leaf).__name__ == "ConnectError"


class Bridge:
    """Uses of one MCP server under the attach policy and the reconnect rule."""

    def __init__(self, cfg: ServerConfig, base: Path | None, logger: logging.Logger, label: str) -> None:
        self.cfg = cfg
        self.base = base
        self.logger = logger
        self.label = label
        self.users = 0
        self.generation = 0  # bumped on every new session; listings are refreshed per generation
        self._conn: Connection | None = None
        self._lock = asyncio.Lock()
        self._watchers: list[weakref.WeakMethod[Callable[[str], None]]] = []

    def watch(self, callback: Callable[[str], None]) -> None:
        """Call ``callback(kind)`` ("tools", "resources", "prompts") when the server says that list
        changed. ``callback`` is a bound method, held weakly."""
        self._watchers.append(weakref.WeakMethod(callback))

    def unwatch(self, callback: Callable[[str], None]) -> None:
        self._watchers = [ref for ref in self._watchers if ref() not in (None, callback)]

    def _changed(self, kind: str) -> None:
        alive = []
        for ref in self._watchers:
            callback = ref()
            if callback is not None:
                alive.append(ref)
                callback(kind)
        self._watchers = alive

    def where(self) -> str:
        return self.cfg.describe(self.base)

    async def _connect(self) -> Connection:
        conn = Connection(self.cfg, self.base, self.logger, self.label, on_change=self._changed)
        try:
            await conn.open()
        except ConnectFailed as exc:
            if self.cfg.transport == "http":  # nothing of ours to start: a server to reach
                raise Unavailable(
                    f"MCP server '{self.label}' ({self.where()}) could not be reached: {exc.reason}",
                    "Check that the server is running and that the URL is its MCP endpoint (often ending in "
                    "/mcp), e.g. with curl; else fix spec.config.transport.endpoint of the extension.",
                ) from None
            raise Unavailable(
                f"MCP server '{self.label}' ({self.where()}) could not be started: {exc.reason}"
                + (f"; stderr: {exc.stderr}" if exc.stderr else ""),
                "Run the command by hand to see why it fails, or fix spec.config.transport of the extension.",
            ) from None
        self.generation += 1
        self.logger.info("MCP server %s connected (%s)", self.label, self.where())
        return conn

    async def _session(self) -> Connection:
        async with self._lock:
            conn = self._conn
            if conn is not None and not conn.dead:
                return conn
            if conn is not None:
                self.logger.warning("MCP server %s is gone; starting a new session (%s)", self.label, self.where())
                await conn.close()
                self._conn = None
            self._conn = await self._connect()
            return self._conn

    async def use(self, what: str, fn: Callable[[Any], Awaitable[T]]) -> T:
        """Run ``fn(client)`` under the attach policy and the reconnect rule (module docstring)."""
        if not self.cfg.stateful:
            conn = await self._connect()
            try:
                return await self._run(conn, what, fn)
            finally:
                await conn.close()
        for attempt in (1, 2):
            conn = await self._session()
            try:
                return await self._run(conn, what, fn)
            except ConnectionLost:
                await conn.wait_ended(1.0)
                if attempt == 1 and _refused(conn.failure):
                    continue  # the request never reached the server
                raise
        raise AssertionError("unreachable")

    async def _run(self, conn: Connection, what: str, fn: Callable[[Any], Awaitable[T]]) -> T:
        try:
            return await fn(conn.client)
        except BridgeError:
            raise
        except Exception as exc:
            if _timed_out(exc):
                raise CallTimeout(
                    f"MCP server '{self.label}' did not answer {what} within {int(self.cfg.call_timeout_s * 1000)} ms",
                    "Raise spec.config.timeouts.callMs, or check the server.",
                ) from None
            if not _is_connection_loss(exc):
                from pydantic import ValidationError

                leaf = leaf_error(exc)
                if isinstance(leaf, ValidationError):  # the answer does not fit the protocol's schema
                    raise BadResponse(
                        f"MCP server '{self.label}' answered {what} with an invalid result: {_schema_problems(leaf)}",
                        "The server breaks the MCP schema here; update it or report this to its authors.",
                    ) from None
                if type(leaf).__name__ == "MCPError":
                    raise RequestRejected(
                        f"MCP server '{self.label}' rejected {what}: {leaf} (code {getattr(leaf, 'code', '?')})",
                        "Check the name and arguments against what the server lists.",
                    ) from None
                raise
            conn.mark_dead()
            raise ConnectionLost(
                f"MCP server '{self.label}' ({self.where()}) closed the connection during {what}: "
                f"{describe_error(exc)}. The call may not have completed; the server is restarted on the next call.",
                "Check whether the operation took effect before repeating it.",
            ) from None

    async def close(self) -> None:
        async with self._lock:
            conn, self._conn = self._conn, None
        if conn is not None:
            await conn.close()


# --- scope ``instance``: bridges shared inside one event loop ------------------------------------

# keyed by the loop object itself (weakly): a loop id can be reused by the next loop, and a bridge's
# lock and session belong to the loop that created them
_shared: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, dict[tuple[str, str], Bridge]] = (
    weakref.WeakKeyDictionary()
)


def acquire(name: str, cfg: ServerConfig, base: Path | None, logger: logging.Logger) -> Bridge:
    """The bridge for this extension: shared by fingerprint for scope ``instance``, own otherwise."""
    if cfg.scope != "instance" or not cfg.stateful:
        bridge = Bridge(cfg, base, logger, name)
        bridge.users = 1
        return bridge
    per_loop = _shared.setdefault(asyncio.get_running_loop(), {})
    key = (name, cfg.fingerprint(base))
    shared = per_loop.get(key)
    if shared is None:
        shared = per_loop[key] = Bridge(cfg, base, logger, name)
    shared.users += 1
    return shared


async def release(bridge: Bridge) -> None:
    """One user is done; the last one closes the session."""
    bridge.users -= 1
    if bridge.users > 0:
        return
    per_loop = _shared.get(asyncio.get_running_loop(), {})
    for key, value in list(per_loop.items()):
        if value is bridge:
            del per_loop[key]
    await bridge.close()


class Holder:
    """The bridge an extension instance uses, kept apart from that instance so a finalizer can
    reach the bridge without keeping the instance alive."""

    __slots__ = ("bridge",)

    def __init__(self) -> None:
        self.bridge: Bridge | None = None


_releasing: set[asyncio.Task[None]] = set()


def _release_later(loop: asyncio.AbstractEventLoop, holder: Holder) -> None:
    bridge, holder.bridge = holder.bridge, None
    if bridge is None or loop.is_closed():
        return

    def start() -> None:
        task = loop.create_task(release(bridge))
        _releasing.add(task)
        task.add_done_callback(_releasing.discard)

    try:
        loop.call_soon_threadsafe(start)
    except RuntimeError:  # the loop closed meanwhile; its shutdown ended the session
        pass


def release_when_collected(owner: object, holder: Holder) -> None:
    """Release ``holder``'s bridge once ``owner`` (the agent instance's extension state) is garbage.

    The extension API has no shutdown hook yet, and an agent instance that is closed and dropped
    must not leave its server process running until the event loop ends.
    """
    weakref.finalize(owner, _release_later, asyncio.get_running_loop(), holder)


__all__ = [
    "BadResponse",
    "Bridge",
    "BridgeError",
    "CallTimeout",
    "ConnectionLost",
    "Holder",
    "RequestRejected",
    "Unavailable",
    "acquire",
    "describe_error",
    "release_when_collected",
]
