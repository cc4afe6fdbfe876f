"""The supervisor side of connectors: one host process per Connection, events routed into the runtime.

Events enter the swarm only through the public Runtime API (``rt.request``), with the connector's
``properties`` in the event metadata so that agents and extensions see them in
``ctx.runtime.inbound.event_metadata``. The reply goes back to the host that sent the event.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import socket
import sys
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..errors import GoondanError
from ._context import check_event, message_text
from ._protocol import MAX_LINE, encode, read_message
from ._routing import Rule, route_event, rules_from_ingress, stringify_properties

START_TIMEOUT_SECONDS = 15.0
STOP_GRACE_SECONDS = 3.0
# A connector process that dies without reporting (killed, crashed interpreter) is started again after
# RESPAWN_INITIAL_SECONDS, doubling per consecutive crash up to RESPAWN_MAX_SECONDS; after MAX_CRASHES
# crashes in a row (each within STABLE_SECONDS of its start) the connection is given up.
RESPAWN_INITIAL_SECONDS = 1.0
RESPAWN_MAX_SECONDS = 60.0
MAX_CRASHES = 5
STABLE_SECONDS = 30.0
log = logging.getLogger("goondan.connectors")


@dataclass(frozen=True)
class ConnectionPlan:
    """Everything needed to run one Connection: resolved entry, config, secrets and routing rules."""

    name: str
    connector: str
    entry: Path
    config: Mapping[str, str]
    secrets: Mapping[str, str]
    rules: tuple[Rule, ...]
    events: tuple[str, ...] = ()


def _swarm_of(bundle: Any, connection: Any) -> str | None:
    spec = connection.spec
    if spec.swarm_ref is not None:
        return str(bundle.resolve_ref(spec.swarm_ref, connection, "Swarm").name)
    try:
        return str(bundle.select_swarm(None).name)
    except GoondanError:
        return None


def plan_connections(bundle: Any, swarm: Any, env: Mapping[str, str]) -> list[ConnectionPlan]:
    """The local Connections bound to ``swarm``, with ValueSources resolved from ``env``."""
    from ..bundle import resolve_value_source

    plans: list[ConnectionPlan] = []
    for res in bundle.of_kind("Connection"):
        if _swarm_of(bundle, res) != swarm.name:
            continue
        spec = res.spec
        connector = bundle.resolve_ref(spec.connector_ref, res, "Connector")
        values: dict[str, dict[str, str]] = {"config": {}, "secrets": {}}
        for section in ("config", "secrets"):
            for key, source in getattr(spec, section).items():
                value = resolve_value_source(source, env, required=True, path=f"{res.key} spec.{section}.{key}")
                values[section][key] = value or ""

        def agent_name(ref: Any, _res: Any = res) -> str:
            return str(bundle.resolve_ref(ref, _res, "Agent").name)

        plans.append(
            ConnectionPlan(
                name=res.name,
                connector=connector.name,
                entry=connector.entry_path(),
                config=values["config"],
                secrets=values["secrets"],
                rules=tuple(rules_from_ingress(spec.ingress, agent_name)),
                events=tuple(e.name for e in connector.spec.events),
            )
        )
    return plans


@dataclass
class _Child:
    process: asyncio.subprocess.Process
    reader: asyncio.StreamReader
    writer: asyncio.StreamWriter
    stopped: asyncio.Event = field(default_factory=asyncio.Event)
    stop_reason: str | None = None


class ConnectorProcess:
    """One Connection's host process and the loop that turns its events into turns."""

    def __init__(
        self,
        plan: ConnectionPlan,
        runtime: Any,
        *,
        entry_agent: str,
        log_level: str = "WARNING",
        on_event: Callable[[dict[str, Any]], None] | None = None,
    ) -> None:
        self.plan = plan
        self.runtime = runtime
        self.entry_agent = entry_agent
        self.log_level = log_level
        self.on_event = on_event
        self._child: _Child | None = None
        self._reader_task: asyncio.Task[None] | None = None
        self._turns: set[asyncio.Task[None]] = set()
        self._done = asyncio.Event()
        self._stopping = False
        self._gave_up = False
        self._crashes = 0
        self._started_at = 0.0
        self._respawn_task: asyncio.Task[None] | None = None
        self.restarts = 0

    @property
    def pid(self) -> int | None:
        return self._child.process.pid if self._child else None

    @property
    def stop_reason(self) -> str | None:
        if self._gave_up:
            return "failed"
        return self._child.stop_reason if self._child else None

    @property
    def stopped(self) -> asyncio.Event:
        """Set when this connection is finished for good (not while a crashed process is respawned)."""
        return self._done

    async def start(self, timeout: float = START_TIMEOUT_SECONDS) -> None:
        parent_sock, child_sock = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            process = await asyncio.create_subprocess_exec(
                sys.executable,
                "-m",
                "goondan.connectors.host",
                "--fd",
                str(child_sock.fileno()),
                "--log-level",
                self.log_level,
                pass_fds=(child_sock.fileno(),),
                env={**os.environ},
            )
        finally:
            child_sock.close()
        reader, writer = await asyncio.open_unix_connection(sock=parent_sock, limit=MAX_LINE)
        self._child = child = _Child(process, reader, writer)
        writer.write(
            encode(
                {
                    "type": "start",
                    "entry": str(self.plan.entry),
                    "connection": self.plan.name,
                    "connector": self.plan.connector,
                    "config": dict(self.plan.config),
                    "secrets": dict(self.plan.secrets),
                }
            )
        )
        await writer.drain()
        try:
            first = await asyncio.wait_for(read_message(reader), timeout)
        except TimeoutError:
            await self._kill()
            raise GoondanError(
                "E_CONNECTOR_START_TIMEOUT",
                f"connector of Connection/{self.plan.name} did not start within {timeout:.0f}s",
            ) from None
        if first is None or first["type"] != "started":
            err = (first or {}).get("error") or {}
            await self._kill()
            raise GoondanError(
                str(err.get("code") or "E_CONNECTOR_START"),
                f"Connection/{self.plan.name} ({self.plan.connector}): "
                f"{err.get('message') or 'the connector process exited during start'}",
                suggestion="Check the connector's config and secrets in the Connection, and its entry module.",
            )
        self._started_at = asyncio.get_running_loop().time()
        self._reader_task = asyncio.create_task(self._read_loop(child))

    async def _read_loop(self, child: _Child) -> None:
        try:
            while True:
                message = await read_message(child.reader)
                if message is None:
                    child.stop_reason = child.stop_reason or "exited"
                    break
                if message["type"] == "event":
                    task = asyncio.create_task(self._handle(child, message))
                    self._turns.add(task)
                    task.add_done_callback(self._turns.discard)
                elif message["type"] == "stopped":
                    child.stop_reason = str(message.get("reason") or "returned")
                    if message.get("error"):
                        log.error("Connection/%s stopped: %s", self.plan.name, message["error"].get("message"))
                    if self._turns:
                        await asyncio.wait(set(self._turns))
                    break
        finally:
            child.stopped.set()
            if self._stopping or child.stop_reason != "exited":
                self._done.set()
            else:
                self._respawn_task = asyncio.create_task(self._respawn(child))

    async def _respawn(self, crashed: _Child) -> None:
        code: int | None = await crashed.process.wait()
        loop = asyncio.get_running_loop()
        while not self._stopping:
            if loop.time() - self._started_at > STABLE_SECONDS:
                self._crashes = 0
            self._crashes += 1
            if self._crashes > MAX_CRASHES:
                log.error("Connection/%s: connector crashed %d times in a row; giving up", self.plan.name, MAX_CRASHES)
                self._gave_up = True
                break
            delay = min(RESPAWN_INITIAL_SECONDS * 2 ** (self._crashes - 1), RESPAWN_MAX_SECONDS)
            log.warning(
                "Connection/%s: connector process exited unexpectedly (code %s); restarting in %.0fs",
                self.plan.name,
                code,
                delay,
            )
            await asyncio.sleep(delay)
            if self._stopping:
                break
            try:
                await self.start()
            except GoondanError as exc:
                log.error("Connection/%s: restart failed: %s", self.plan.name, exc.message)
                self._started_at = loop.time()
                code = None
                continue
            self.restarts += 1
            return
        self._done.set()

    async def _handle(self, child: _Child, message: dict[str, Any]) -> None:
        event_id = str(message.get("id"))
        reply: dict[str, Any] = {"type": "reply", "id": event_id}
        try:
            event = check_event(message.get("event"))
            if self.plan.events and event["name"] not in self.plan.events:
                log.warning(
                    "Connection/%s: event %r is not declared by Connector/%s",
                    self.plan.name,
                    event["name"],
                    self.plan.connector,
                )
            properties = stringify_properties(event["properties"])
            decision = route_event(
                self.plan.rules,
                event_name=event["name"],
                properties=properties,
                event_instance_key=event["instanceKey"],
                entry_agent=self.entry_agent,
            )
            if self.on_event is not None:
                self.on_event({"connection": self.plan.name, "event": event, "route": decision})
            result = await self.runtime.request(
                message_text(event["message"]),
                agent=decision.agent,
                instance_key=decision.instance_key,
                metadata={
                    "connector": self.plan.connector,
                    "connection": self.plan.name,
                    "event": event["name"],
                    "properties": properties,
                },
                source={"kind": "connector", "name": self.plan.connector},
            )
            reply.update(text=result.text, finishReason=result.finish_reason, error=result.error)
        except Exception as exc:
            log.error("Connection/%s: event %s failed: %s", self.plan.name, event_id, exc)
            error = (
                exc.to_dict() if isinstance(exc, GoondanError) else {"code": "E_CONNECTOR_EVENT", "message": str(exc)}
            )
            reply.update(text=None, finishReason="error", error=error)
        if not child.writer.is_closing():
            with contextlib.suppress(ConnectionError):
                child.writer.write(encode(reply))
                await child.writer.drain()

    async def stop(self, grace: float = STOP_GRACE_SECONDS) -> None:
        self._stopping = True
        if self._respawn_task is not None and not self._respawn_task.done():
            self._respawn_task.cancel()
        try:
            await self._stop_child(grace)
        finally:
            self._done.set()

    async def _stop_child(self, grace: float) -> None:
        child = self._child
        if child is None:
            return
        if child.process.returncode is None and not child.writer.is_closing():
            with contextlib.suppress(ConnectionError):
                child.writer.write(encode({"type": "shutdown"}))
                await child.writer.drain()
        try:
            await asyncio.wait_for(child.process.wait(), grace)
        except TimeoutError:
            await self._kill()
        if self._reader_task is not None:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(asyncio.shield(self._reader_task), grace)
        child.writer.close()

    async def _kill(self) -> None:
        child = self._child
        if child is None:
            return
        if child.process.returncode is None:
            with contextlib.suppress(ProcessLookupError):
                child.process.kill()
            await child.process.wait()
        child.writer.close()
        child.stopped.set()


class ConnectorSupervisor:
    """All connectors of a swarm: start them together, wait until they stop, restart or stop them."""

    def __init__(self, runtime: Any, plans: list[ConnectionPlan], *, entry_agent: str, log_level: str = "WARNING"):
        self.runtime = runtime
        self.plans = plans
        self.entry_agent = entry_agent
        self.log_level = log_level
        self.processes: list[ConnectorProcess] = []
        self._settled = asyncio.Event()  # cleared while a restart replaces the processes
        self._settled.set()

    async def start(self) -> None:
        for plan in self.plans:
            proc = ConnectorProcess(plan, self.runtime, entry_agent=self.entry_agent, log_level=self.log_level)
            try:
                await proc.start()
            except BaseException:
                await self.stop()
                raise
            self.processes.append(proc)

    async def wait(self) -> None:
        """Return when every connector has stopped by itself (e.g. ``cli`` at end of input).

        Processes stopped by :meth:`restart` do not count: the wait continues with their replacements.
        """
        while True:
            await self._settled.wait()
            current = list(self.processes)
            if current:
                await asyncio.gather(*(p.stopped.wait() for p in current))
            if self._settled.is_set() and current == self.processes:
                return

    async def stop(self) -> None:
        await asyncio.gather(*(p.stop() for p in self.processes), return_exceptions=True)

    def failed(self) -> list[str]:
        """Connections whose connector crashed or raised (rather than finishing or being stopped)."""
        return [p.plan.name for p in self.processes if p.stop_reason in ("failed", "exited")]

    async def restart(self) -> None:
        self._settled.clear()
        try:
            old = self.processes
            self.processes = []
            await asyncio.gather(*(p.stop() for p in old), return_exceptions=True)
            await self.start()
        finally:
            self._settled.set()


__all__ = ["ConnectionPlan", "ConnectorProcess", "ConnectorSupervisor", "plan_connections"]
