"""The supervisor side of connectors: one host process per Connection, events routed into the runtime.

Events enter the swarm only through the public Runtime API (``rt.request``), with the connector's
``properties`` in the event metadata so that agents and extensions see them in
``ctx.runtime.inbound.event_metadata``. The reply goes back to the host that sent the event.

Streamed replies: an event the host sent with ``stream`` (``ctx.stream``) gets its turn's text
deltas ahead of the reply. The turn is given a trace id of its own, which every delta of it
carries, so deltas of other turns (another request on the same conversation, an agent it calls)
are never mixed in.

Where the agents run in processes on this machine (the process executor), the deltas go straight
from the agent process to the host's delta socket (``executors/process/_direct_stream``,
``connectors/_direct``): the supervisor registers the host's address and the event id with the
executor for that turn (its trace id, agent and instance key) and does not subscribe, so a delta
wakes neither this process nor, unless someone else here listens, the ``text_delta`` forwarding.
The reply says ``direct``: the host then reads the turn's end marker before handing it over.

Elsewhere (inline, Ray actors, a host without a delta socket) the deltas come through
``Runtime.on_text_delta`` and go to the host as ``connector_delta`` records. The supervisor then
subscribes on a connection's first such event (agent processes are told before that turn is
dispatched) and stays subscribed while the connection lives: until then no model call streams and
no delta crosses a process; after it, subscribing and unsubscribing per request would send every
agent process two ``forward`` frames per streamed request.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
import signal
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .._ids import new_trace_id
from ..errors import GoondanError
from ..executors.process._clock import Clock, RealClock
from ..executors.process._ipc import (
    Connection,
    ConnectorDelta,
    ConnectorEvent,
    ConnectorReply,
    ConnectorStart,
    ConnectorStopped,
    Dispatcher,
    FrameTooLarge,
    IpcError,
    Ready,
    Record,
    Shutdown,
    ShutdownAck,
    StartError,
    decode_record,
    frame_error,
)
from ..executors.process._supervisor import BackoffPolicy, CrashBackoff, ExecSpawner, graceful_stop
from ._approval_reply import decide, parse_decision, reply_text
from ._cancel_command import cancel_command, is_cancel_command
from ._context import check_event, request_input
from ._protocol import HOST_MODULE, SUPERVISOR
from ._routing import Rule, route_event, rules_from_ingress, stringify_properties

START_TIMEOUT_SECONDS = 15.0
STOP_GRACE_SECONDS = 3.0
# A connector process that dies (killed, crashed interpreter, or its run() raised) is started again
# after RESPAWN_INITIAL_SECONDS, doubling per consecutive crash up to RESPAWN_MAX_SECONDS; after
# MAX_CRASHES crashes in a row (each within STABLE_SECONDS of its start) the connection is given up.
RESPAWN_INITIAL_SECONDS = 1.0
RESPAWN_MAX_SECONDS = 60.0
MAX_CRASHES = 5
STABLE_SECONDS = 30.0
CONNECTOR_BACKOFF = BackoffPolicy(
    initial_ms=RESPAWN_INITIAL_SECONDS * 1000,
    max_ms=RESPAWN_MAX_SECONDS * 1000,
    stable_ms=STABLE_SECONDS * 1000,
    give_up_after=MAX_CRASHES,
)
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


@dataclass(frozen=True, slots=True)
class _Streamed:
    """A turn a streamed event waits on: whose deltas to forward, and where."""

    agent: str
    instance_key: str
    event_id: str
    child: _Child


@dataclass
class _Child:
    pid: int
    conn: Connection
    exited: asyncio.Future[int]
    acked: asyncio.Future[None]
    stopped: asyncio.Event = field(default_factory=asyncio.Event)
    stop_reason: str | None = None
    error: dict[str, Any] | None = None
    deltas: str = ""  # the address of its delta socket (direct streams), from its ready record


class ConnectorProcess:
    """One Connection's host process and the loop that turns its events into turns.

    Supervised with the shared supervisor code (spawn, crash backoff, graceful shutdown): a host
    that exits on its own, or whose ``run(ctx)`` raises, is started again after
    :data:`CONNECTOR_BACKOFF`'s delay, and the raise is logged with its traceback. A ``run(ctx)``
    that raises the same error again right after its restart is given up (a rejected token or a
    bug fails the same way every time; a transient failure does not), as is a host that crashes
    :data:`MAX_CRASHES` times in a row. A ``run(ctx)`` that returns (``cli`` at end of input) ends
    the connection."""

    def __init__(
        self,
        plan: ConnectionPlan,
        runtime: Any,
        *,
        entry_agent: str,
        log_level: str = "WARNING",
        on_event: Callable[[dict[str, Any]], None] | None = None,
        clock: Clock | None = None,
        backoff: BackoffPolicy | None = None,
    ) -> None:
        self.plan = plan
        self.runtime = runtime
        self.entry_agent = entry_agent
        self.log_level = log_level
        self.on_event = on_event
        self.clock: Clock = clock or RealClock()
        self._backoff = CrashBackoff(backoff or CONNECTOR_BACKOFF, self.clock)
        self._spawner = ExecSpawner(self._on_exit)
        self._exits: dict[int, asyncio.Future[int]] = {}
        self._child: _Child | None = None
        self._reader_task: asyncio.Task[None] | None = None
        self._turns: set[asyncio.Task[None]] = set()
        self._done = asyncio.Event()
        self._stopping = False
        self._gave_up = False
        self._respawn_task: asyncio.Task[None] | None = None
        self.restarts = 0
        self.delays: list[float] = []  # the restart delays so far, ms
        self.exit_code: int | None = None
        self._last_failure: str | None = None
        self._streams: dict[str, _Streamed] = {}  # by the turn's trace id
        self._off_deltas: Callable[[], None] | None = None

    @property
    def name(self) -> str:
        return f"Connection/{self.plan.name}"

    @property
    def pid(self) -> int | None:
        return self._child.pid if self._child else None

    @property
    def stop_reason(self) -> str | None:
        if self._gave_up:
            return "failed"
        return self._child.stop_reason if self._child else None

    @property
    def stopped(self) -> asyncio.Event:
        """Set when this connection is finished for good (not while a crashed process is respawned)."""
        return self._done

    def _on_exit(self, pid: int, code: int) -> None:
        fut = self._exits.pop(pid, None)
        if fut is not None and not fut.done():
            fut.set_result(code)

    async def start(self, timeout: float = START_TIMEOUT_SECONDS) -> None:
        loop = asyncio.get_running_loop()
        pid, conn = await self._spawner.spawn(HOST_MODULE, ["--log-level", self.log_level])
        exited: asyncio.Future[int] = loop.create_future()
        if pid in self._spawner.children:
            self._exits[pid] = exited
        else:  # gone before we looked
            exited.set_result(-1)
        self._child = child = _Child(pid, conn, exited, loop.create_future())
        start = ConnectorStart(
            str(self.plan.entry), self.plan.name, self.plan.connector, dict(self.plan.config), dict(self.plan.secrets)
        )
        conn.send_record(start, SUPERVISOR, self.plan.name)
        try:
            first = await asyncio.wait_for(self._first(child), timeout)
        except TimeoutError:
            await self._kill(child)
            raise GoondanError(
                "E_CONNECTOR_START_TIMEOUT",
                f"connector of Connection/{self.plan.name} did not start within {timeout:.0f}s",
            ) from None
        if not isinstance(first, Ready):
            err = first.error if isinstance(first, StartError) else {}
            await self._kill(child)
            raise GoondanError(
                str(err.get("code") or "E_CONNECTOR_START"),
                f"Connection/{self.plan.name} ({self.plan.connector}): "
                f"{err.get('message') or 'the connector process exited during start'}",
                suggestion=str(
                    err.get("suggestion")
                    or "Check the connector's config and secrets in the Connection, and its entry module."
                ),
            )
        child.deltas = first.deltas
        self._backoff.started()
        self._reader_task = asyncio.create_task(self._read_loop(child))

    async def _first(self, child: _Child) -> Record | None:
        """``ready`` or ``start_error`` (other messages before them are logged and skipped)."""
        while True:
            try:
                msg = await child.conn.recv()
                if msg is None:
                    return None
                record = decode_record(msg)
            except IpcError as exc:
                log.error("%s: skipped a message during start: %s", self.name, exc)
                continue
            if isinstance(record, Ready | StartError):
                return record
            log.error("%s: skipped a %s message during start", self.name, record.KIND)

    def _table(self, child: _Child) -> Dispatcher:
        """What the supervisor answers to on one host's stream; anything else is logged and skipped."""

        def on_event(rec: ConnectorEvent) -> None:
            task = asyncio.create_task(self._handle(child, rec))
            self._turns.add(task)
            task.add_done_callback(self._turns.discard)

        def on_stopped(rec: ConnectorStopped) -> None:
            child.stop_reason, child.error = rec.reason, rec.error

        def on_ack(_rec: ShutdownAck) -> None:
            if not child.acked.done():
                child.acked.set_result(None)

        return (
            Dispatcher(self.name, log)
            .on(ConnectorEvent, on_event)
            .on(ConnectorStopped, on_stopped)
            .on(ShutdownAck, on_ack)
        )

    async def _read_loop(self, child: _Child) -> None:
        table = self._table(child)
        try:
            while True:
                try:
                    msg = await child.conn.recv()
                except IpcError as exc:
                    log.error("%s: skipped a frame: %s", self.name, exc)
                    continue
                if msg is None:
                    break
                table.dispatch(msg)
            if child.stop_reason is not None and self._turns:
                await asyncio.wait(set(self._turns))
            child.stop_reason = child.stop_reason or "exited"
            self.exit_code = await child.exited
        finally:
            child.conn.close()
            child.stopped.set()
            if self._stopping or child.stop_reason not in ("exited", "failed"):
                self._done.set()
            else:
                self._respawn_task = asyncio.create_task(self._respawn(child))

    async def _respawn(self, crashed: _Child) -> None:
        """Start a crashed host again after the backoff delay; give up after too many in a row."""
        reason, error, code = crashed.stop_reason, crashed.error, self.exit_code
        while not self._stopping:
            delay = self._backoff.crashed()
            failure = str((error or {}).get("message")) if reason == "failed" else None
            if self._backoff.crashes == 1:
                self._last_failure = None  # a new run of crashes
            if failure is not None and failure == self._last_failure:
                # the same error twice in a row is not transient: restarting again would only repeat it
                log.error(
                    "%s: the connector's run() raised %s again after a restart; giving up\n%s",
                    self.name,
                    failure,
                    str((error or {}).get("traceback") or "").rstrip(),
                )
                self._gave_up = True
                break
            self._last_failure = failure
            if delay is None:
                log.error("%s: connector crashed %d times in a row; giving up", self.name, self._backoff.crashes - 1)
                self._gave_up = True
                break
            self.delays.append(delay)
            if reason == "failed":
                log.error(
                    "%s: the connector's run() raised %s; restarting in %.1fs\n%s",
                    self.name,
                    (error or {}).get("message", "an error"),
                    delay / 1000,
                    str((error or {}).get("traceback") or "").rstrip(),
                )
            else:
                log.warning(
                    "%s: connector process exited unexpectedly (code %s); restarting in %.1fs",
                    self.name,
                    code,
                    delay / 1000,
                )
            await self.clock.sleep_ms(delay)
            if self._stopping:
                break
            try:
                await self.start()
            except GoondanError as exc:
                log.error("%s: restart failed: %s", self.name, exc.message)
                self._backoff.started()
                reason, code = "exited", None
                continue
            self.restarts += 1
            return
        self._done.set()

    def _listen_deltas(self) -> None:
        if self._off_deltas is None:
            self._off_deltas = self.runtime.on_text_delta(self._on_delta)

    def _on_delta(self, payload: Mapping[str, Any]) -> None:
        """Forward a delta of a turn a streamed event waits on (called for every turn's deltas)."""
        target = self._streams.get(str(payload.get("traceId")))
        if target is None or payload.get("agentName") != target.agent:
            return
        if payload.get("instanceKey") != target.instance_key:
            return
        self._send_delta(target.child, target.event_id, payload)

    def _send_delta(self, child: _Child, event_id: str, payload: Mapping[str, Any]) -> None:
        step = payload.get("stepIndex")
        delta = ConnectorDelta(event_id, str(payload.get("delta", "")), step if isinstance(step, int) else 0)
        with contextlib.suppress(IpcError):  # the host is gone, or a delta too large: the reply still follows
            child.conn.send_record(delta, SUPERVISOR, self.plan.name)

    def _direct(self, child: _Child, trace: str, agent: str, key: str, event_id: str) -> Any:
        """Have the turn of ``trace`` on ``agent@key`` send its deltas straight to the connector host
        (the executor's target, see ``_direct_stream``), or ``None`` where that is not possible: no
        delta socket, or an executor whose agents do not run in processes on this machine."""
        if not child.deltas:
            return None
        register = getattr(getattr(self.runtime, "executor", None), "_stream_direct", None)
        if register is None:
            return None
        # where the deltas go if the agent process cannot open the stream: the usual route
        fallback = functools.partial(self._send_delta, child, event_id)
        return register(trace, agent, key, child.deltas, event_id, fallback)

    async def _handle(self, child: _Child, message: ConnectorEvent) -> None:
        event_id = message.id
        trace: str | None = None  # a turn whose deltas this supervisor forwards (self._streams)
        direct: Any = None  # the executor's target of a direct stream
        try:
            event = check_event(message.event)
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
            parsed = parse_decision(event["message"].get("text")) if not event.get("attachments") else None
            if parsed is not None:  # "approve ID" / "deny ID note": a decision, not a new turn
                by = f"connector:{self.plan.connector}"
                on_trace: Callable[[str], None] | None = None
                if message.stream:
                    # the resumed turn runs under the paused turn's trace id: its deltas go to this
                    # stream, unless another streamed decision of the same turn already has them
                    streamed = _Streamed(decision.agent, decision.instance_key, event_id, child)

                    def on_trace(paused: str) -> None:
                        nonlocal trace, direct
                        if paused in self._streams:
                            return
                        direct = self._direct(child, paused, decision.agent, decision.instance_key, event_id)
                        if direct is not None:
                            return
                        self._listen_deltas()
                        self._streams[paused] = streamed
                        trace = paused

                result = await decide(self.runtime, decision.agent, decision.instance_key, parsed, by, on_trace)
            elif not event.get("attachments") and is_cancel_command(event["message"].get("text")):
                result = await cancel_command(self.runtime, decision.agent, decision.instance_key)
            else:
                turn_trace: str | None = None
                if message.stream:
                    turn_trace = new_trace_id()
                    direct = self._direct(child, turn_trace, decision.agent, decision.instance_key, event_id)
                    if direct is None:
                        self._listen_deltas()
                        trace = turn_trace
                        self._streams[trace] = _Streamed(decision.agent, decision.instance_key, event_id, child)
                result = await self.runtime.request(
                    request_input(event),
                    agent=decision.agent,
                    instance_key=decision.instance_key,
                    metadata={
                        "connector": self.plan.connector,
                        "connection": self.plan.name,
                        "event": event["name"],
                        "properties": properties,
                    },
                    trace_id=turn_trace,
                    source={"kind": "connector", "name": self.plan.connector},
                )
            reply = ConnectorReply(event_id, reply_text(result), result.finish_reason, result.error)
        except Exception as exc:
            # A turn stopped because the runtime is shutting down (Ctrl+C, gdn run stopping) is what the
            # user asked for: the client still gets the error reply, the terminal no ERROR line.
            closing = isinstance(exc, GoondanError) and exc.code == "E_RUNTIME_CLOSED"
            (log.info if closing else log.error)("Connection/%s: event %s failed: %s", self.plan.name, event_id, exc)
            error = (
                exc.to_dict() if isinstance(exc, GoondanError) else {"code": "E_CONNECTOR_EVENT", "message": str(exc)}
            )
            reply = ConnectorReply(event_id, None, "error", error)
        finally:
            if trace is not None:
                self._streams.pop(trace, None)
            if direct is not None:
                self.runtime.executor._stream_done(direct)
        if direct is not None:
            # the connector waits for the end of the turn's deltas only if they all went out
            reply.direct = direct.used and not direct.broken
        try:
            child.conn.send_record(reply, SUPERVISOR, self.plan.name)
        except FrameTooLarge as exc:  # nothing was sent: the connector gets the error instead
            error = frame_error(exc).to_dict()
            child.conn.send_record(ConnectorReply(event_id, None, "error", error), SUPERVISOR, self.plan.name)
        with contextlib.suppress(ConnectionError):
            await child.conn.writer.drain()

    async def stop(self, grace: float = STOP_GRACE_SECONDS) -> None:
        self._stopping = True
        if self._off_deltas is not None:
            self._off_deltas()
            self._off_deltas = None
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
        await graceful_stop(
            name=self.name,
            send_shutdown=lambda: child.conn.send_record(
                Shutdown("shutdown", int(grace * 1000)), SUPERVISOR, self.plan.name
            ),
            acked=child.acked,
            exited=child.exited,
            kill=lambda sig: self._spawner.kill(child.pid, sig),
            grace_ms=grace * 1000,
            clock=RealClock(),
        )
        if self._reader_task is not None:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(asyncio.shield(self._reader_task), grace)
        child.conn.close()

    async def _kill(self, child: _Child) -> None:
        self._spawner.kill(child.pid, signal.SIGKILL)
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(asyncio.shield(child.exited), 10)
        child.conn.close()
        child.stopped.set()


def _refuse_shared_ports(plans: list[ConnectionPlan]) -> None:
    """``E_CONNECTOR_CONFIG`` when two Connections of the swarm set the same ``config.port`` on one
    address (a Connection copied and renamed): the second one's start failed with 'port in use',
    whose suggestion ('another program or another gdn run') pointed away from the bundle itself.
    Only ports the config states are compared (each connector has its own default); 0 is any port."""
    every = ("0.0.0.0", "::", "")  # every interface: it takes the port on any address
    seen: list[tuple[str, str, str]] = []
    for plan in plans:
        port = str(plan.config.get("port", "")).strip()
        if not port or port == "0":
            continue
        host = str(plan.config.get("host", "127.0.0.1")).strip()
        for other_host, other_port, other in seen:
            if other_port == port and (host == other_host or host in every or other_host in every):
                raise GoondanError(
                    "E_CONNECTOR_CONFIG",
                    f"Connection/{plan.name} and Connection/{other} both listen on port {port} ({host})",
                    suggestion=f"Give Connection/{plan.name} another config.port: one port serves one Connection.",
                )
        seen.append((host, port, plan.name))


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
        _refuse_shared_ports(self.plans)
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
