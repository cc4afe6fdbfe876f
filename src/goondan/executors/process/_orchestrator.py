"""The orchestrator: supervises one process per agent instance, routes events to
them, brokers inter-agent calls and knows nothing about turns beyond "one at a time".

- Per instance a FIFO queue lives here; an event is handed to the process only when the previous
  turn is done, so turns never overlap within an instance, while instances run in parallel. Events
  queued while a process restarts or drains are served by the next process: nothing is dropped.
- Status per instance: ``spawning → idle ⇄ processing → draining → terminated``; a non-zero exit
  outside a shutdown is ``crashed``, and after ``crash_threshold`` consecutive crashes
  ``crashLoopBackOff`` with backoff ``min(initial·2^(crashes−threshold−1), max)`` and one structured
  log line. A completed turn or a clean exit resets the count.
- ``close()`` stops every process gracefully (each finishes its turn within the grace period);
  ``close(interrupt=True)`` (Ctrl+C) has them cancel their turn instead, SIGKILLing a process that
  does not stop within ``INTERRUPT_GRACE_MS + INTERRUPT_EXIT_MS``.
- ``cancel()`` tells the process to cancel its running turn. A turn that has not ended
  ``cancel_grace_ms`` later (a synchronous tool blocking the process's event loop cannot even read
  the message) has its process SIGKILLed: the turn's request resolves ``cancelled``, a fresh process
  starts at once and answers the calls left without a result ``E_TOOL_CANCELLED`` (the history on
  disk is valid before the request resolves), and the events queued behind the turn run there.
- A queued event counts as taken by a process only once it answers ``turn_accepted``, which it does
  when the turn's user message is on disk: a process that dies before that leaves the event to the
  next one.
- ``reconcile()`` (every ``reconcile_interval_ms``) evicts instances idle for the swarm's
  ``policy.lifecycle.ttlSeconds`` (graceful shutdown, history kept; the next event respawns them) and
  respawns crashed ones once their backoff has passed.
- Inter-agent requests: a target on the caller's call stack (``__goondanAgentCallStack``, which
  agent processes extend on every hop, tool or middleware) that waits on the caller (past the stack's
  ``__goondanAgentCallWaitsFrom``, set after a send or an async request) is answered at once with
  ``CIRCULAR_CALL_DETECTED``; otherwise the target is spawned on demand and its final text comes back
  as a ``response`` event with ``metadata.inReplyTo`` = the request's correlation id.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import json
import logging
import os
import signal
from collections import deque
from collections.abc import Callable
from pathlib import Path
from typing import Any

from ..._ids import new_id, now_iso
from ...engine._agents import (
    UNANSWERED,
    AgentLimits,
    SpawnLimiter,
    SpawnRegistry,
    WaitGraph,
    agent_not_found,
    check_call_depth,
    delivery_failed,
    request_failed,
    request_unanswered,
    send_failed,
    waiting_cycle,
    waiting_from,
)
from ...errors import AgentRequestError, ExtensionError, GoondanError
from ._accept import AcceptSlots, HostSlot
from ._clock import Clock, RealClock
from ._direct_stream import FALLBACK_KEY
from ._ipc import (
    ORCHESTRATOR,
    AgentReady,
    CancelTurn,
    Dispatcher,
    ErrorResponse,
    Forward,
    FrameTooLarge,
    IpcError,
    Log,
    MessageChannel,
    Response,
    RestartRequest,
    Rpc,
    RpcResult,
    RuntimeEvent,
    Send,
    Shutdown,
    ShutdownAck,
    StartError,
    Sync,
    SyncAck,
    TextDelta,
    Turn,
    TurnAccepted,
    TurnDone,
    frame_error,
)
from ._ipc import Request as RequestMsg
from ._output import OutputSink
from ._supervisor import EXIT_MS, BackoffPolicy, graceful_stop

log = logging.getLogger("goondan.executors.process")


def _exited_mid_turn(name: str, code: int) -> GoondanError:
    """The error of a turn whose agent process ended under it (a tool or model that called
    os._exit, a signal, the OOM killer): how it ended, in the words of a shell."""
    how = f"killed by {_signal_name(-code)}" if code < 0 else f"exit code {code}"
    return GoondanError("E_AGENT_PROCESS_EXITED", f"the process of {name} exited mid-turn ({how})")


def _signal_name(number: int) -> str:
    try:
        return signal.Signals(number).name
    except ValueError:
        return f"signal {number}"


STATUSES = ("spawning", "idle", "processing", "draining", "terminated", "crashed", "crashLoopBackOff")
SHUTDOWN_REASONS = ("restart", "config_change", "orchestrator_shutdown", "idle_timeout", "interrupt")
# An interrupt (Ctrl+C) does not wait for the turn: the process is told to cancel it and gets this
# long to acknowledge, then this long again to exit, before it is SIGKILLed.
INTERRUPT_GRACE_MS = 1000
INTERRUPT_EXIT_MS = EXIT_MS
# A cancelled turn stops within milliseconds wherever it awaits (a model stream, an async tool, a
# tool's subprocess); one still running this long after the cancel is stuck in code that ignores it,
# and its process is killed. Long enough for a tool's own clean-up on cancellation (closing a
# connection, a rollback), short enough for an operator waiting on ``/cancel``; the same order as
# the bound of gdn run's Ctrl+C (cli/_interrupt.py).
CANCEL_GRACE_MS = 3000
# What the request of a turn whose process was killed on cancel resolves with (a TurnResult dict).
_KILLED_ON_CANCEL = {"turnId": "", "finishReason": "cancelled", "text": None, "responseMessage": None, "error": None}


def backoff_ms(crashes: int, threshold: int, initial_ms: int, max_ms: int) -> int:
    """The crashLoopBackOff delay: the shared supervisor's policy with the orchestrator's settings."""
    return int(BackoffPolicy(initial_ms, max_ms, threshold).delay_ms(max(crashes, threshold + 1)))


def error_from_dict(err: dict[str, Any]) -> GoondanError:
    code = str(err.get("code") or "E_AGENT_START")
    msg = str(err.get("message") or "the agent process failed to start")
    if err.get("class") == "ExtensionError" or code.startswith("E_EXT"):
        return ExtensionError(code, msg, extension_name=err.get("extensionName"), suggestion=err.get("suggestion"))
    return GoondanError(code, msg, suggestion=err.get("suggestion"))


@dataclasses.dataclass(slots=True)
class _Work:
    """One queued turn. ``ticket`` names it on the wire; ``accepted`` turns true when the agent
    process reports it took the event (``turn_accepted``). A process that dies before that never
    started the turn, so the event goes to the next process instead of failing."""

    event: dict[str, Any]
    future: asyncio.Future[dict[str, Any]]
    ticket: str = ""
    accepted: bool = False
    stream: dict[str, Any] | None = None  # where its deltas go directly (Turn.stream)


class InstanceHandle:
    """One ``agent:instanceKey`` as the orchestrator tracks it."""

    def __init__(self, agent: str, key: str) -> None:
        self.agent = agent
        self.key = key
        self.status = "terminated"
        self.pid: int | None = None
        self.conn: MessageChannel | None = None
        self.consecutive_crashes = 0
        self.next_spawn_allowed_at = 0.0
        self.queue: deque[_Work] = deque()
        self.current: _Work | None = None
        self.last_active = 0.0
        self.spawn_task: asyncio.Task[None] | None = None
        self.stop_task: asyncio.Task[None] | None = None
        self.ready: asyncio.Future[None] | None = None
        self.exited: asyncio.Future[int] | None = None
        self.acked: asyncio.Future[None] | None = None
        self.outstanding = 0  # inter-agent requests this instance is waiting for
        self.syncs: dict[str, asyncio.Future[None]] = {}
        self.spawner: Any = None
        self.interrupted = False  # told to cancel its turn: a turn cut short fails as interrupted
        self.steering = False  # its agent takes messages into a running turn (Agent.spec.steering)
        self.steered: dict[str, _Work] = {}  # turns sent while ``current`` runs, by ticket
        self.output: OutputSink | None = None
        # what its process was told to send (runtime events, text deltas): see Orchestrator.forwarding
        self.forwarding = (True, True)
        self.accept_slot: HostSlot | None = None  # where its process marks accepted turns (_accept)
        # its process reported why it could not start (``start_error``): the exit that follows is
        # that process giving up on purpose (``return 3``), not a crash
        self.start_failed = False
        # cancel escalation (Orchestrator.cancel): the cancelled turn whose process is being killed;
        # requests that resolve ``cancelled`` once the next process repaired the history; whether
        # that next process must answer the calls left without a result as cancelled
        self.killing: _Work | None = None
        self.killed_turns: list[_Work] = []
        self.killed_on_cancel = False

    @property
    def name(self) -> str:
        return f"{self.agent}:{self.key}"

    @property
    def alive(self) -> bool:
        return self.pid is not None or self.spawn_task is not None

    def snapshot(self) -> dict[str, Any]:
        return {
            "agentName": self.agent,
            "instanceKey": self.key,
            "pid": self.pid,
            "status": self.status,
            "consecutiveCrashes": self.consecutive_crashes,
            "nextSpawnAllowedAt": self.next_spawn_allowed_at,
            "queued": len(self.queue) + (1 if self.current else 0),
        }


@dataclasses.dataclass
class ReconcilePlan:
    to_spawn: list[str] = dataclasses.field(default_factory=list)
    to_terminate: list[str] = dataclasses.field(default_factory=list)
    to_respawn: list[dict[str, Any]] = dataclasses.field(default_factory=list)


Listener = Callable[[dict[str, Any]], Any]


class Orchestrator:
    def __init__(
        self,
        *,
        spawner_factory: Callable[[Callable[[int, int], None]], Any],
        swarm_name: str,
        agent_names: frozenset[str],
        clock: Clock | None = None,
        crash_threshold: int = 5,
        backoff_initial_ms: int = 1000,
        backoff_max_ms: int = 300000,
        grace_period_ms: int = 30000,
        ttl_ms: float | None = None,
        reconcile_interval_ms: float = 5000,
        listeners: list[Listener] | None = None,
        delta_listeners: list[Listener] | None = None,
        on_restart_request: Callable[[InstanceHandle, str], Any] | None = None,
        on_process_gone: Callable[[InstanceHandle], None] | None = None,
        limits: AgentLimits | None = None,
        output_path: Callable[[str, str], Path | None] | None = None,
        cancel_grace_ms: float | None = CANCEL_GRACE_MS,
    ) -> None:
        self._spawner_factory = spawner_factory
        self.spawner: Any = None
        self._old_spawners: list[Any] = []
        self.swarm_name = swarm_name
        self.agent_names = agent_names
        self.clock: Clock = clock or RealClock()
        self.crash_threshold = crash_threshold
        self.backoff_initial_ms = backoff_initial_ms
        self.backoff_max_ms = backoff_max_ms
        # crashLoopBackOff: the shared supervisor's policy; a completed turn or a clean exit resets it
        self.backoff = BackoffPolicy(backoff_initial_ms, backoff_max_ms, crash_threshold)
        self.grace_period_ms = grace_period_ms
        # how long a cancelled turn gets before its process is killed; None or 0: never killed
        self.cancel_grace_ms = cancel_grace_ms
        self.ttl_ms = ttl_ms
        self.reconcile_interval_ms = reconcile_interval_ms
        self.listeners = listeners if listeners is not None else []
        self.delta_listeners = delta_listeners if delta_listeners is not None else []
        # trace id -> where the deltas of a turn whose direct stream could not be opened go (its
        # connector; the executor fills it while such a turn may run, see ``_direct_stream``)
        self.direct_fallbacks: dict[str, Callable[[dict[str, Any]], None]] = {}
        self._on_restart_request = on_restart_request
        self._on_process_gone = on_process_gone
        self.handles: dict[tuple[str, str], InstanceHandle] = {}
        self._by_pid: dict[int, InstanceHandle] = {}
        self._pid_by_conn: dict[int, int] = {}
        self._exit_codes: dict[int, int] = {}
        self._eof_pids: set[int] = set()
        self.pending_requests: dict[str, dict[str, Any]] = {}
        self.waits = WaitGraph()  # synchronous requests under way, caller -> target (cycle check)
        self.registry = SpawnRegistry()
        self._output_path = output_path
        self._sinks: set[OutputSink] = set()
        self.limiter = SpawnLimiter(limits or AgentLimits(), clock=lambda: self.clock.now_ms() / 1000)
        self._tasks: set[asyncio.Task[Any]] = set()
        self._reconciler: asyncio.Task[None] | None = None
        self.closing = False
        self.turns_dispatched = 0
        self._slots = AcceptSlots()
        self._loop: asyncio.AbstractEventLoop | None = None

    # --- start / stop ----------------------------------------------------------------------------

    async def start(self) -> None:
        self._loop = asyncio.get_running_loop()
        self.spawner = self._spawner_factory(self._on_exit)
        await self.spawner.start()
        if self.reconcile_interval_ms > 0:
            self._reconciler = asyncio.get_running_loop().create_task(self._reconcile_loop())

    async def replace_spawner(self) -> None:
        """Start a fresh fork server (e.g. after the bundle changed); later spawns use it."""
        new = self._spawner_factory(self._on_exit)
        await new.start()
        old, self.spawner = self.spawner, new
        if old is not None:
            self._old_spawners.append(old)
        await self._retire_spawners()

    async def _retire_spawners(self) -> None:
        for old in list(self._old_spawners):
            if not old.children:
                self._old_spawners.remove(old)
                await old.close()

    async def close(self, *, interrupt: bool = False) -> None:
        """Stop every agent process. Gracefully by default: each finishes its current turn within
        the grace period. ``interrupt=True`` (Ctrl+C) cancels running turns instead and returns
        within about ``INTERRUPT_GRACE_MS + INTERRUPT_EXIT_MS``; a close that is itself cancelled
        while waiting for turns switches to that, so a second interruption is never ignored."""
        self.closing = True
        if self._reconciler is not None:
            self._reconciler.cancel()
            with contextlib.suppress(BaseException):
                await self._reconciler
        try:
            if interrupt:
                await self.interrupt_all()
            else:
                try:
                    await asyncio.gather(
                        *(self.stop(h, "orchestrator_shutdown") for h in list(self.handles.values()) if h.alive),
                        return_exceptions=True,
                    )
                except asyncio.CancelledError:
                    await self.interrupt_all()
                    raise
        finally:
            await self._release()

    async def interrupt_all(self) -> None:
        """Tell every agent process to cancel its turn and exit; SIGKILL the ones that do not within
        the interrupt bounds (a turn blocking its event loop cannot even read the message)."""
        await asyncio.gather(
            *(self._interrupt(h) for h in list(self.handles.values()) if h.alive), return_exceptions=True
        )

    async def _interrupt(self, h: InstanceHandle) -> None:
        h.interrupted = True
        if h.stop_task is None:
            h.stop_task = asyncio.get_running_loop().create_task(self._stop(h, "interrupt", INTERRUPT_GRACE_MS))
        bound = (INTERRUPT_GRACE_MS + INTERRUPT_EXIT_MS) / 1000
        try:
            await asyncio.wait_for(asyncio.shield(h.stop_task), bound)
        except TimeoutError:
            # a graceful stop already under way waits for the turn: an interrupt does not
            pid, exited = h.pid, h.exited
            if pid is not None and h.spawner is not None:
                # the interrupt's own outcome, not a fault: said with -v (see graceful_stop)
                log.info("%s did not stop its turn within %.1f s of the interrupt: SIGKILL", h.name, bound)
                h.spawner.kill(pid, signal.SIGKILL)
            if exited is not None:
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(asyncio.shield(exited), 5)

    def kill_now(self) -> list[InstanceHandle]:
        """SIGKILL every agent process, synchronously: for a host that must end this instant (a
        second Ctrl+C). Returns the handles whose process was killed."""
        killed = []
        for h in list(self.handles.values()):
            if h.pid is not None and h.spawner is not None:
                h.spawner.kill(h.pid, signal.SIGKILL)
                killed.append(h)
        self._slots.close()  # the host ends now: nothing of it may stay on /dev/shm
        return killed

    async def _release(self) -> None:
        err = GoondanError("E_RUNTIME_CLOSED", "the runtime is closing")
        for h in self.handles.values():
            self._fail_queue(h, err)
        for sp in [*self._old_spawners, self.spawner]:
            if sp is not None:
                await sp.close()
        for sink in list(self._sinks):
            sink.drain()
            sink.close()
        self._sinks.clear()
        self._slots.close()
        for task in list(self._tasks):
            task.cancel()

    def _track(self, coro: Any) -> asyncio.Task[Any]:
        task = asyncio.get_running_loop().create_task(coro)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)
        return task

    # --- handles ---------------------------------------------------------------------------------

    def handle(self, agent: str, key: str) -> InstanceHandle:
        h = self.handles.get((agent, key))
        if h is None:
            h = InstanceHandle(agent, key)
            self.handles[(agent, key)] = h
        return h

    def cancel(self, agent: str, key: str) -> bool:
        """Tell the instance's process to cancel its running turn; False when none runs. The turn's
        own ``turn_done`` (finish reason "cancelled") resolves the request that waits for it.

        The record names the dispatched turn's ticket: a turn the process got but has not started
        yet (a short window) starts cancelled instead of the cancel finding nothing. Only the
        dispatched turn is cancelled: events still queued here run afterwards as usual.

        A turn still running ``cancel_grace_ms`` later has its process killed (:meth:`_escalate`).
        Returns at once: the escalation runs on this loop's timer."""
        h = self.handles.get((agent, key))
        if h is None or h.current is None or h.conn is None:
            return False
        if h.killing is not None:  # already cancelled and being killed: its request resolves soon
            return True
        work, pid = h.current, h.pid
        try:
            sent = bool(h.conn.send_record(CancelTurn("api", work.ticket), ORCHESTRATOR, h.agent))
        except IpcError:
            return False
        grace = self.cancel_grace_ms
        if sent and grace and pid is not None:
            loop = self._loop if self._loop is not None else asyncio.get_running_loop()
            loop.call_later(grace / 1000, self._escalate, h, work, pid)
        return sent

    def _escalate(self, h: InstanceHandle, work: _Work, pid: int) -> None:
        """``cancel_grace_ms`` after a cancel: if that turn still runs in that process, the process
        is stuck (a synchronous tool, a loop that never awaits) and is SIGKILLed. The exit
        (:meth:`_finish_exit`) resolves the turn ``cancelled`` once a fresh process has answered
        its calls; events queued behind it run in that process."""
        if h.current is not work or h.pid != pid or h.spawner is None or h.killing is not None:
            return  # the turn ended (cancelled, or finished meanwhile), or its process is gone
        if self.closing or h.interrupted or h.stop_task is not None:
            return  # a close or an interrupt (Ctrl+C) under way stops this process on its own terms
        log.warning(
            "%s: the cancelled turn did not stop within %.1f s (code that ignores cancellation, such "
            "as a synchronous tool, blocks it): its process %d is killed",
            h.name,
            (self.cancel_grace_ms or 0) / 1000,
            pid,
        )
        h.killing = work
        if h.status == "processing":
            h.status = "draining"  # nothing more is dispatched to it (_pump); its exit is not a crash
        h.spawner.kill(pid, signal.SIGKILL)

    def status(self, agent: str, key: str) -> str | None:
        h = self.handles.get((agent, key))
        return h.status if h else None

    @property
    def forwarding(self) -> tuple[bool, bool]:
        """Whether agent processes should send their runtime events and text deltas: only while a
        listener in this process reads them. Without one, a turn's burst of records (8 in a turn
        with one tool call) would be encoded, written, read, decoded and dropped here."""
        return bool(self.listeners), bool(self.delta_listeners)

    def listeners_changed(self) -> None:
        """A listener came or went: tell every running process what to send from now on. The
        ``forward`` record goes ahead of any turn dispatched after the change, so a listener that
        subscribes before a request sees all of that turn's records. A listener may subscribe from
        another thread: the records are then sent from this loop's thread, where the streams live."""
        loop = self._loop
        if loop is None or loop.is_closed():
            return
        try:
            here = asyncio.get_running_loop() is loop
        except RuntimeError:
            here = False
        if not here:
            loop.call_soon_threadsafe(self.listeners_changed)
            return
        for h in list(self.handles.values()):
            self._forward(h)

    def _forward(self, h: InstanceHandle) -> None:
        want = self.forwarding
        if h.forwarding == want or h.conn is None:
            return
        if h.conn.send_record(Forward(*want), ORCHESTRATOR, h.agent):
            h.forwarding = want

    def _admit(self, target: str, key: str) -> None:
        """An agent asks for ``target@key``: a new instance must pass the swarm's spawn limits."""
        h = self.handles.get((target, key))
        if h is not None and h.alive:
            return
        self.limiter.admit(target, key, sum(1 for x in self.handles.values() if x.alive))

    def _spawn(self, h: InstanceHandle) -> None:
        if h.alive or self.closing:
            return
        h.status = "spawning"
        h.ready = asyncio.get_running_loop().create_future()
        h.spawn_task = self._track(self._do_spawn(h, h.ready))

    async def _do_spawn(self, h: InstanceHandle, ready: asyncio.Future[None]) -> None:
        spawner = self.spawner
        spec = {
            "agent": h.agent,
            "instanceKey": h.key,
            # what it sends at start; a change of listeners while it runs is a ``forward`` record
            "events": self.forwarding[0],
            "deltas": self.forwarding[1],
            # the process logs at the host's level and sends its records here (``log`` events)
            "logLevel": logging.getLogger("goondan").getEffectiveLevel(),
        }
        slot = self._slots.create()
        if slot is not None:
            spec["acceptSlot"] = slot.path
        if h.killed_on_cancel:
            spec["killedOnCancel"] = True
        try:
            spawned = await spawner.spawn(spec)
        except BaseException as exc:
            if slot is not None:
                slot.close()
            h.spawn_task = None
            h.status = "crashed"
            h.consecutive_crashes += 1
            err = exc if isinstance(exc, GoondanError) else GoondanError("E_SPAWN_FAILED", str(exc))
            if not ready.done():
                ready.set_exception(err)
                ready.exception()
            self._fail_queue(h, err)
            return
        pid, conn = spawned[0], spawned[1]
        if len(spawned) > 2:
            path = self._output_path(h.agent, h.key) if self._output_path is not None else None
            sink = OutputSink(spawned[2], path, h.name)
            sink.start()
            self._sinks.add(sink)
            sink.on_close = self._sinks.discard
            h.output = sink
        h.pid = pid
        h.conn = conn
        h.accept_slot = slot
        h.interrupted = False
        h.start_failed = False
        self._pid_by_conn[id(conn)] = pid
        h.spawner = spawner
        h.exited = asyncio.get_running_loop().create_future()
        h.acked = None
        self._by_pid[pid] = h
        h.forwarding = (bool(spec["events"]), bool(spec["deltas"]))
        h.spawn_task = None
        self._forward(h)  # listeners that changed while it was being forked
        self._track(self._read_loop(h, conn, ready))

    # --- messages from agent processes ---------------------------------------------------------------

    async def _read_loop(self, h: InstanceHandle, conn: MessageChannel, ready: asyncio.Future[None]) -> None:
        table = self._table(h, conn, ready)

        def bad_frame(exc: IpcError) -> None:
            if isinstance(exc, FrameTooLarge):
                self._on_oversized(h, exc)
            else:
                log.error("%s sent a frame that is not an IPC message (skipped): %s", h.name, exc)

        # each message is handled where it is read (see FrameChannel); this task wakes at the end
        await conn.serve(table.dispatch, bad_frame)
        conn.close()
        # The exit code comes from the fork server on another channel and may arrive before this
        # stream's last messages (turn_done, shutdown_ack) were read: an exit is handled only once
        # both the code is known and this stream is drained.
        pid = self._pid_by_conn.pop(id(conn), None)
        if pid is not None:
            code = self._exit_codes.pop(pid, None)
            if code is None:
                self._eof_pids.add(pid)
            else:
                self._finish_exit(h, pid, code)

    def _table(self, h: InstanceHandle, conn: MessageChannel, ready: asyncio.Future[None]) -> Dispatcher:
        """What the orchestrator answers to on one agent process's stream (see ``_ipc`` for every
        message); anything else is logged and skipped by the dispatcher."""
        return (
            Dispatcher(f"orchestrator <- {h.name}", log)
            .on(ShutdownAck, lambda rec: self._on_shutdown_ack(h, rec))
            .on(RuntimeEvent, lambda rec: self._emit(self.listeners, rec.record))
            .on(TurnAccepted, lambda rec: self._on_turn_accepted(h, rec))
            .on(TurnDone, lambda rec: self._on_turn_done(h, rec))
            .on(AgentReady, lambda rec: self._on_agent_ready(h, ready, rec.steering))
            .on(StartError, lambda rec: self._on_start_error(h, ready, rec))
            .on(RequestMsg, lambda rec: self._route_request(h, rec))
            .on(Send, self._route_send)
            .on(Rpc, lambda rec: self._track(self._rpc(h, conn, rec)))
            .on(Log, lambda rec: self._log_record(h, rec.record))
            .on(TextDelta, self._on_delta)
            .on(RestartRequest, lambda rec: self._on_restart_request_msg(h, rec))
            .on(SyncAck, lambda rec: self._on_sync_ack(h, rec))
        )

    def _on_shutdown_ack(self, h: InstanceHandle, rec: ShutdownAck) -> None:
        if rec.instance_key in (None, h.key) and h.acked is not None and not h.acked.done():
            h.acked.set_result(None)

    def _on_turn_accepted(self, h: InstanceHandle, rec: TurnAccepted) -> None:
        if h.current is not None and h.current.ticket == rec.ticket:
            h.current.accepted = True
        elif rec.ticket in h.steered:  # a steered message is in the running turn's history now
            h.steered[rec.ticket].accepted = True

    def _on_turn_done(self, h: InstanceHandle, rec: TurnDone) -> None:
        steered = h.steered.pop(rec.ticket, None)
        if steered is not None:
            if not steered.future.done():
                steered.future.set_result(rec.result)
            return
        if h.current is None or h.current.ticket != rec.ticket:
            return  # the answer to a turn already failed here (e.g. its frame was too large)
        work, h.current = h.current, None
        if not work.future.done():
            work.future.set_result(rec.result)
        if rec.result.get("finishReason") != "error":
            h.consecutive_crashes = 0
        h.last_active = self.clock.now_ms()
        if h.status == "processing":
            h.status = "idle"
        self._pump(h)

    def _on_agent_ready(self, h: InstanceHandle, ready: asyncio.Future[None], steering: bool = False) -> None:
        h.steering = steering
        h.killed_on_cancel = False  # it started: the calls of the killed turn are answered on disk
        if h.accept_slot is not None:  # the process mapped it before it said ready: see _accept
            h.accept_slot.unlink()
        if h.status == "spawning":
            h.status = "idle"
        h.last_active = self.clock.now_ms()
        if not ready.done():
            ready.set_result(None)
        self._pump(h)

    def _on_start_error(self, h: InstanceHandle, ready: asyncio.Future[None], rec: StartError) -> None:
        h.start_failed = True
        err = error_from_dict(rec.error)
        if not ready.done():
            ready.set_exception(err)
            ready.exception()
        self._fail_queue(h, err)

    def _on_restart_request_msg(self, h: InstanceHandle, rec: RestartRequest) -> None:
        if self._on_restart_request is not None:
            self._track(self._on_restart_request(h, rec.reason or "self-restart"))

    def _on_sync_ack(self, h: InstanceHandle, rec: SyncAck) -> None:
        fut = h.syncs.pop(rec.id, None)
        if fut is not None and not fut.done():
            fut.set_result(None)

    def _log_record(self, h: InstanceHandle, fields: Any) -> None:
        """A log record of an agent process, handled by the host's logging as if it were its own
        (``-v`` shows the agent's info records and the tracebacks they carry)."""
        if not isinstance(fields, dict):
            return
        name = str(fields.get("name") or "goondan.agent")
        logger = logging.getLogger(name)
        level = fields.get("levelno")
        if not isinstance(level, int) or not logger.isEnabledFor(level):
            return
        record = logging.makeLogRecord(fields)
        record.agentProcess = h.name
        logger.handle(record)

    def _on_oversized(self, h: InstanceHandle, exc: FrameTooLarge) -> None:
        """An agent process sent a frame above the limit (its own check should have stopped it).
        The frame was skipped; if it was the current turn's result that turn would wait forever,
        so the turn fails now and a late ``turn_done`` for its ticket is ignored."""
        log.error("%s: %s (skipped)", h.name, exc)
        work, h.current = h.current, None
        if work is None:
            return
        self._fail(work, frame_error(exc))
        h.last_active = self.clock.now_ms()
        if h.status == "processing":
            h.status = "idle"
        self._pump(h)

    def _on_delta(self, rec: TextDelta) -> None:
        payload = rec.delta
        if self.direct_fallbacks and isinstance(payload, dict) and FALLBACK_KEY in payload:
            # a direct stream's fallback: for its connector only (the host's listeners, if any,
            # get the same delta unmarked); dropped once the connector stopped waiting
            sink = self.direct_fallbacks.get(payload.get("traceId"))  # type: ignore[arg-type]
            if sink is not None:
                try:
                    sink(payload)
                except Exception:
                    log.exception("forwarding a direct stream's fallback delta failed")
            return
        self._emit(self.delta_listeners, payload)

    def _emit(self, listeners: list[Listener], record: Any) -> None:
        for listener in listeners:
            try:
                listener(record)
            except Exception:
                log.exception("runtime event listener failed")

    # --- exits -----------------------------------------------------------------------------------

    def _on_exit(self, pid: int, code: int) -> None:
        h = self._by_pid.get(pid)
        if h is None or h.pid != pid:
            self._by_pid.pop(pid, None)
            return
        if pid in self._eof_pids:
            self._eof_pids.discard(pid)
            self._finish_exit(h, pid, code)
            return
        self._exit_codes[pid] = code
        conn = h.conn

        def unblock() -> None:  # a stream a leftover grandchild keeps open must not hold the exit
            if pid in self._exit_codes and conn is not None:
                conn.close()

        asyncio.get_running_loop().call_later(2.0, unblock)

    def _finish_exit(self, h: InstanceHandle, pid: int, code: int) -> None:
        self._by_pid.pop(pid, None)
        if h.pid != pid:
            return
        h.pid = None
        self.waits.drop(f"{h.agent}@{h.key}")  # its requests no longer wait for anything
        if h.conn is not None:
            h.conn.close()
            h.conn = None
        killing, h.killing = h.killing, None
        # steered messages the process held but had not made durable go to the next process, after
        # the turn they were sent to (if that one is redelivered too) and before the queue
        for steered in reversed(h.steered.values()):
            if steered.accepted and killing is not None:
                h.killed_turns.append(steered)  # it joined the turn that was cancelled
            elif steered.accepted:
                self._fail(steered, _exited_mid_turn(h.name, code))
            else:
                h.queue.appendleft(steered)
        h.steered.clear()
        slot, h.accept_slot = h.accept_slot, None
        if h.current is not None:
            work, h.current = h.current, None
            if not work.accepted and slot is not None:
                work.accepted = slot.read() == work.ticket  # see _accept
            if work is killing:
                # killed because it did not stop after a cancel: cancelled, even if it had not
                # started (it must not run in the next process)
                h.killed_turns.append(work)
                h.killed_on_cancel = True
            elif work.accepted and h.interrupted:
                self._fail(work, GoondanError("E_RUNTIME_CLOSED", f"interrupted: the turn of {h.name} was stopped"))
            elif work.accepted:
                self._fail(work, _exited_mid_turn(h.name, code))
            else:
                # never started there: the next process takes it, in its place at the head of the queue
                h.queue.appendleft(work)
        if slot is not None:
            slot.close()
        for fut in h.syncs.values():
            if not fut.done():
                fut.set_result(None)
        h.syncs.clear()
        if h.ready is not None and not h.ready.done():
            # died while starting: queued events would only crash it again, so they fail now
            err = GoondanError(
                "E_AGENT_START_FAILED",
                f"the process of {h.name} exited with code {code} before it was ready",
                suggestion="See the agent's log: an import, tool or extension failed while starting.",
            )
            h.ready.set_exception(err)
            h.ready.exception()
            self._fail_queue(h, err)
        stopping = h.stop_task is not None or h.status in ("draining", "terminated")
        if stopping or code == 0:
            h.status = "terminated"
            h.consecutive_crashes = 0
        elif h.start_failed:
            # It said why it could not start and exited on purpose: its error already went to
            # whoever waited for it (and the queue). Whether the host closes the runtime on that
            # error before this exit is read is a race (the exit code comes from the fork server
            # on another channel, often in the same read as the error), so the outcome must not
            # depend on it: not a crash, no crash count towards crashLoopBackOff.
            h.status = "terminated"
            log.debug("agent process %s (pid %d) exited with code %d after its start error", h.name, pid, code)
        else:
            h.consecutive_crashes += 1
            now = self.clock.now_ms()
            if h.consecutive_crashes > self.crash_threshold:
                delay = int(self.backoff.delay_ms(h.consecutive_crashes))
                h.status = "crashLoopBackOff"
                h.next_spawn_allowed_at = now + delay
                log.warning(
                    "[orchestrator] crashLoopBackOff %s",
                    json.dumps(
                        {
                            "event": "orchestrator.crashLoopBackOff",
                            "swarmName": self.swarm_name,
                            "agentName": h.agent,
                            "instanceKey": h.key,
                            "status": h.status,
                            "consecutiveCrashes": h.consecutive_crashes,
                            "crashThreshold": self.crash_threshold,
                            "backoffMs": delay,
                            "nextSpawnAllowedAt": h.next_spawn_allowed_at,
                            "exitCode": code,
                        }
                    ),
                )
                self._fail_queue(
                    h,
                    GoondanError(
                        "E_AGENT_CRASH_LOOP",
                        f"{h.name} keeps crashing ({h.consecutive_crashes} times); next start in {delay} ms",
                    ),
                )
            else:
                h.status = "crashed"
                h.next_spawn_allowed_at = now
                # name the output file only when the process wrote one (an early failure may not have)
                path = h.output.path if h.output is not None else None
                where = f"; its output is in {path}" if path and os.path.exists(path) else ""
                log.warning("agent process %s (pid %d) crashed with exit code %d%s", h.name, pid, code, where)
        if h.exited is not None and not h.exited.done():
            h.exited.set_result(code)
        if self._on_process_gone is not None:
            self._on_process_gone(h)
        if h.killed_turns:
            self._after_cancel_kill(h)
        elif h.queue and h.stop_task is None and h.status != "crashLoopBackOff" and not self.closing:
            self._spawn(h)
        if self._old_spawners:
            self._track(self._retire_spawners())

    def _after_cancel_kill(self, h: InstanceHandle) -> None:
        """The process of a cancelled turn was killed: start the next one at once (it answers the
        calls the turn left without a result ``E_TOOL_CANCELLED``, see ``killedOnCancel``) and
        resolve the cancelled requests once it is ready, so that their callers find a valid history
        on disk; if it cannot start (or the runtime closes), they resolve at once and the next
        start repairs the history."""
        turns, h.killed_turns = h.killed_turns, []

        def settle(_: Any = None) -> None:
            for work in turns:
                if not work.future.done():
                    work.future.set_result(dict(_KILLED_ON_CANCEL))

        if h.stop_task is None and not self.closing:
            self._spawn(h)
        ready = h.ready
        if ready is not None and not ready.done() and h.alive:
            ready.add_done_callback(settle)
        else:
            settle()

    # --- dispatch --------------------------------------------------------------------------------

    def submit(
        self, agent: str, key: str, event: dict[str, Any], stream: dict[str, Any] | None = None
    ) -> asyncio.Future[dict[str, Any]]:
        """Queue a turn; the future resolves with the TurnResult dict (or the start error).
        ``stream``: the connector its text deltas go to directly (see ``_direct_stream``)."""
        if self.closing:
            raise GoondanError("E_RUNTIME_CLOSED", "the runtime is closing")
        h = self.handles.get((agent, key)) or self.handle(agent, key)
        if h.status == "crashLoopBackOff":
            now = self.clock.now_ms()
            if now < h.next_spawn_allowed_at:
                raise GoondanError(
                    "E_AGENT_CRASH_LOOP",
                    f"{h.name} is in crashLoopBackOff for another {int(h.next_spawn_allowed_at - now)} ms",
                    suggestion="Fix the crash (see the agent's log), then retry or restart the agent.",
                )
        # the loop start() saw (asyncio.get_running_loop() costs a getpid syscall on Python 3.11)
        loop = self._loop if self._loop is not None else asyncio.get_running_loop()
        fut: asyncio.Future[dict[str, Any]] = loop.create_future()
        work = _Work(event, fut) if stream is None else _Work(event, fut, stream=stream)
        if h.steering and self._steer(h, work):
            return fut
        h.queue.append(work)
        if h.pid is None and h.spawn_task is None and h.stop_task is None:  # not alive
            self._spawn(h)
        self._pump(h)
        return fut

    def _steer(self, h: InstanceHandle, work: _Work) -> bool:
        """An agent with ``Agent.spec.steering: inject`` gets a message while its turn runs at once
        (it joins that turn, or waits in the process's own queue if the turn is ending), instead
        of the orchestrator holding it until the turn is done. False: queue it as usual."""
        if not h.steering or h.current is None or h.conn is None or h.stop_task is not None or h.queue:
            return False
        self.turns_dispatched += 1
        work.ticket = str(self.turns_dispatched)
        try:
            sent = h.conn.send_record(Turn(work.ticket, work.event, work.stream), ORCHESTRATOR, h.agent)
        except (TypeError, FrameTooLarge):
            return False  # the queue refuses it with its error
        if sent:
            h.steered[work.ticket] = work
        return bool(sent)

    def _pump(self, h: InstanceHandle) -> None:
        while h.status == "idle" and h.current is None and h.queue and h.conn is not None and h.stop_task is None:
            want = (bool(self.listeners), bool(self.delta_listeners))  # self.forwarding, spelt out
            if h.forwarding != want:  # the lists changed without listeners_changed()
                self._forward(h)
            work = h.queue.popleft()
            self.turns_dispatched += 1
            work.ticket, work.accepted = str(self.turns_dispatched), False
            try:
                sent = h.conn.send_record(Turn(work.ticket, work.event, work.stream), ORCHESTRATOR, h.agent)
            except TypeError as exc:  # not JSON: refuse this event, keep serving the queue
                self._fail(work, GoondanError("E_IPC_NOT_JSON", f"the event cannot cross the process boundary: {exc}"))
                continue
            except FrameTooLarge as exc:  # nothing was written: refuse this event, keep serving
                self._fail(work, frame_error(exc))
                continue
            if not sent:
                # the process is gone and its exit is on the way: the next process takes the event
                h.queue.appendleft(work)
                return
            h.current = work
            h.status = "processing"

    def _fail(self, work: _Work, exc: BaseException) -> None:
        if not work.future.done():
            work.future.set_exception(exc)
            work.future.exception()

    def _fail_queue(self, h: InstanceHandle, exc: BaseException) -> None:
        while h.queue:
            self._fail(h.queue.popleft(), exc)

    async def ensure_started(self, agent: str, key: str) -> InstanceHandle:
        """Spawn the instance if needed and wait until it is ready (start errors raise)."""
        h = self.handle(agent, key)
        now = self.clock.now_ms()
        if h.status == "crashLoopBackOff" and now < h.next_spawn_allowed_at and not h.alive:
            raise GoondanError(
                "E_AGENT_CRASH_LOOP",
                f"{h.name} is in crashLoopBackOff for another {int(h.next_spawn_allowed_at - now)} ms",
            )
        if h.stop_task is not None:
            with contextlib.suppress(BaseException):
                await asyncio.shield(h.stop_task)
        if not h.alive:
            self._spawn(h)
        if h.ready is not None:
            await asyncio.shield(h.ready)
        return h

    def admit(self, target: str, key: str) -> None:
        """An instance asks for ``target@key``: a new one must pass the swarm's spawn limits
        (``E_AGENT_SPAWN_LIMIT``); a live one is always reachable."""
        self._admit(target, key)

    async def restart(self, agents: set[str] | None, *, before_start: Callable[[], None] | None = None) -> list[str]:
        """Stop the live instances of ``agents`` (all when ``None``) gracefully — each finishes its
        turn — forgive earlier crashes of those agents, run ``before_start`` (a fresh restart clears
        the histories there, while nothing runs) and start the stopped ones again. Returns their
        ``agent:instanceKey`` names."""
        handles = [h for h in list(self.handles.values()) if (agents is None or h.agent in agents) and h.alive]
        await asyncio.gather(*(self.stop(h, "restart") for h in handles))
        for h in list(self.handles.values()):
            if (agents is None or h.agent in agents) and h.status in ("crashed", "crashLoopBackOff"):
                # a restart forgives earlier crashes: the next event starts it at once
                h.status, h.consecutive_crashes, h.next_spawn_allowed_at = "terminated", 0, 0.0
        if before_start is not None:
            before_start()
        for h in handles:
            h.consecutive_crashes = 0
            with contextlib.suppress(GoondanError):
                await self.ensure_started(h.agent, h.key)
        return [h.name for h in handles]

    async def restart_one(self, h: InstanceHandle) -> None:
        """Stop one instance gracefully and start it again (an agent's own restart request)."""
        await self.stop(h, "restart")
        with contextlib.suppress(GoondanError):
            await self.ensure_started(h.agent, h.key)

    async def delete(self, agent: str, key: str) -> bool:
        """Stop one instance (its current turn finishes) and forget it; whether it was known."""
        h = self.handles.get((agent, key))
        if h is None:
            return False
        await self.stop(h, "restart")
        self.handles.pop((agent, key), None)
        return True

    def live(self) -> list[tuple[str, str, str]]:
        """``(agent, instance_key, status)`` of every instance this supervisor knows, sorted."""
        return [(agent, key, h.status) for (agent, key), h in sorted(self.handles.items())]

    # --- inter-agent routing ----------------------------------------------------------------------------

    def _reply(self, caller: InstanceHandle, reply: Response | ErrorResponse) -> None:
        if caller.conn is None:
            self._dropped(caller)
            return
        try:
            sent = caller.conn.send_record(reply, ORCHESTRATOR, caller.agent)
        except FrameTooLarge as exc:
            event = reply.event if isinstance(reply, Response) else {}
            err = frame_error(exc)
            source = event.get("source") or {}
            reply = ErrorResponse(
                source,
                {
                    "inReplyTo": (event.get("metadata") or {}).get("inReplyTo"),
                    "errorCode": err.code,
                    "errorMessage": f"the response of agent '{source.get('name')}': {err.message}",
                },
            )
            sent = caller.conn.send_record(reply, ORCHESTRATOR, caller.agent)
        if not sent:
            self._dropped(caller)

    def _dropped(self, caller: InstanceHandle) -> None:
        # expected while the runtime closes or interrupts (Ctrl+C stops the caller first): not a warning
        quiet = self.closing or caller.interrupted
        log.log(
            logging.DEBUG if quiet else logging.WARNING, "response for %s dropped: its process is gone", caller.name
        )

    def _error_response(
        self, caller: InstanceHandle, corr: Any, target: str, code: str, text: str, suggestion: str | None = None
    ) -> None:
        meta = {"inReplyTo": corr, "errorCode": code, "errorMessage": text}
        if suggestion:
            meta["errorSuggestion"] = suggestion
        self._reply(caller, ErrorResponse({"kind": "agent", "name": target}, meta))

    def _route_request(self, caller: InstanceHandle, rec: RequestMsg) -> None:
        event = rec.event
        target = rec.target
        key = rec.instance_key or caller.key
        corr = (event.get("replyTo") or {}).get("correlationId")
        meta = event.get("metadata") or {}
        stack = meta.get("__goondanAgentCallStack") or []
        chain = [str(s) for s in stack] if isinstance(stack, list) else []
        caller_node = f"{caller.agent}@{caller.key}"
        if caller_node not in chain:
            chain.append(caller_node)
        node = f"{target}@{key}"
        if node in chain[waiting_from(meta) :]:  # only the agents waiting on this call close a cycle
            self._error_response(
                caller, corr, target, "CIRCULAR_CALL_DETECTED", f"Circular call detected: {' -> '.join([*chain, node])}"
            )
            return
        if target not in self.agent_names:
            missing = agent_not_found(target, self.swarm_name, self.agent_names)
            self._error_response(caller, corr, target, missing.code, missing.message, missing.suggestion)
            return
        # a synchronous request (an async one marks the whole stack as not waiting) to a target whose
        # turn waits, through others, on the caller can never be answered
        waits = waiting_from(meta) < len(stack if isinstance(stack, list) else ())
        path = self.waits.path(node, caller_node) if waits else None
        try:
            if path is not None:
                raise waiting_cycle(target, caller_node, path)
            check_call_depth(chain, node, self.limiter.limits.max_call_depth, target)
            self._admit(target, key)
        except AgentRequestError as exc:
            self._error_response(caller, corr, target, exc.code, exc.message, exc.suggestion)
            return
        try:
            fut = self.submit(target, key, event)
        except GoondanError as exc:
            failed = delivery_failed(target, exc)  # worded as the inline executor words it
            self._error_response(caller, corr, target, failed.code, failed.message, failed.suggestion)
            return
        self.pending_requests[str(corr)] = {"from": caller.name, "correlationId": corr, "callChain": chain}
        caller.outstanding += 1
        if waits:
            self.waits.add(caller_node, node)

        def done(f: asyncio.Future[dict[str, Any]]) -> None:
            if waits:
                self.waits.remove(caller_node, node)
            self.pending_requests.pop(str(corr), None)
            caller.outstanding -= 1
            caller.last_active = self.clock.now_ms()
            exc = f.exception()
            if exc is not None:
                failed = delivery_failed(target, exc)
                self._error_response(caller, corr, target, failed.code, failed.message, failed.suggestion)
                return
            result = f.result()
            reason = result.get("finishReason")
            if reason == "error" or reason in UNANSWERED:
                failed = (
                    request_failed(target, result.get("error"))
                    if reason == "error"
                    else request_unanswered(target, str(reason), result.get("pendingApprovals") or ())
                )
                self._error_response(caller, corr, target, failed.code, failed.message, failed.suggestion)
                return
            self._reply(
                caller,
                Response(
                    {
                        "id": new_id("evt"),
                        "type": "response",
                        "createdAt": now_iso(),
                        "traceId": event.get("traceId"),
                        "input": result.get("text") or "",
                        "instanceKey": key,
                        "source": {"kind": "agent", "name": target},
                        "metadata": {"inReplyTo": corr},
                    }
                ),
            )

        fut.add_done_callback(done)

    def _route_send(self, rec: Send) -> None:
        target, key = rec.target, rec.instance_key
        if target not in self.agent_names:
            return
        try:
            self._admit(target, key)
            fut = self.submit(target, key, rec.event)
        except GoondanError as exc:
            send_failed(target, key, exc)
            return

        def done(f: asyncio.Future[dict[str, Any]]) -> None:
            exc = None if f.cancelled() else f.exception()
            if exc is not None:  # the target could not take it (its tools do not load, ...): say so
                send_failed(target, key, exc)

        fut.add_done_callback(done)

    async def _rpc(self, h: InstanceHandle, conn: MessageChannel, rec: Rpc) -> None:
        args = rec.args
        owner_raw = args.get("owner") or [h.agent, h.key]
        owner = (str(owner_raw[0]), str(owner_raw[1]))
        reply = RpcResult(rec.rpc_id, True)
        try:
            if rec.op == "spawn":
                target, key = str(args["target"]), str(args["instanceKey"])
                self._admit(target, key)
                try:
                    await self.ensure_started(target, key)
                except GoondanError as exc:
                    raise AgentRequestError(
                        "IPC_DELIVERY_FAILED",
                        f"agent '{target}' could not start: [{exc.code}] {exc.message}",
                        target=target,
                    ) from exc
                cwd = args.get("cwd")
                fresh = self.registry.record(owner, target, key, cwd)
                value = {"target": target, "instanceKey": key, "spawned": fresh, "cwd": cwd}
                reply = RpcResult(rec.rpc_id, True, value)
            elif rec.op == "list":
                reply = RpcResult(rec.rpc_id, True, self.registry.list(owner, bool(args.get("includeAll"))))
            else:
                raise GoondanError("E_RPC", f"unknown rpc {rec.op!r}")
        except GoondanError as exc:
            error = {**exc.to_dict(), "target": getattr(exc, "target", None)}
            reply = RpcResult(rec.rpc_id, False, error=error)
        try:
            conn.send_record(reply, ORCHESTRATOR, h.agent)
        except FrameTooLarge as exc:
            conn.send_record(RpcResult(rec.rpc_id, False, error=frame_error(exc).to_dict()), ORCHESTRATOR, h.agent)

    # --- graceful shutdown ----------------------------------------------------------------------------

    async def stop(self, h: InstanceHandle, reason: str, grace_ms: float | None = None) -> None:
        """Graceful shutdown of one instance process; concurrent calls share one stop."""
        if h.stop_task is None:
            h.stop_task = asyncio.get_running_loop().create_task(self._stop(h, reason, grace_ms))
        task = h.stop_task
        await asyncio.shield(task)

    async def _stop(self, h: InstanceHandle, reason: str, grace_ms: float | None) -> None:
        try:
            if h.spawn_task is not None:
                with contextlib.suppress(BaseException):
                    await asyncio.shield(h.spawn_task)
            if h.pid is None or h.conn is None:
                if h.status not in ("crashed", "crashLoopBackOff"):
                    h.status = "terminated"
                return
            grace = self.grace_period_ms if grace_ms is None else grace_ms
            interrupt = reason == "interrupt"
            h.status = "draining"
            h.acked = asyncio.get_running_loop().create_future()
            exited = h.exited
            assert exited is not None
            conn, spawner, pid = h.conn, h.spawner, h.pid
            # ``interrupt``: cancel the running turn instead of finishing it
            await graceful_stop(
                name=h.name,
                send_shutdown=lambda: conn.send_record(
                    Shutdown(reason, int(grace), h.key, interrupt), ORCHESTRATOR, h.agent
                ),
                acked=h.acked,
                exited=exited,
                kill=lambda sig: spawner.kill(pid, sig),
                grace_ms=grace,
                clock=self.clock,
                interrupt=interrupt,
            )
            h.status = "terminated"
            h.consecutive_crashes = 0
        finally:
            h.stop_task = None
            if h.queue and not self.closing:
                self._spawn(h)

    # --- reconcile -----------------------------------------------------------------------------------

    def plan(self) -> ReconcilePlan:
        plan = ReconcilePlan()
        now = self.clock.now_ms()
        for h in self.handles.values():
            if (
                self.ttl_ms is not None
                and h.status == "idle"
                and h.pid is not None
                and h.current is None
                and not h.queue
                and h.outstanding == 0
                and h.stop_task is None
                and now - h.last_active >= self.ttl_ms
            ):
                plan.to_terminate.append(h.name)
            if h.status in ("crashed", "crashLoopBackOff") and not h.alive and h.stop_task is None:
                plan.to_respawn.append({"name": h.name, "backoffMs": max(0, int(h.next_spawn_allowed_at - now))})
        return plan

    async def reconcile(self) -> ReconcilePlan:
        plan = self.plan()
        by_name = {h.name: h for h in self.handles.values()}
        for name in plan.to_terminate:
            h = by_name[name]
            self._track(self._evict(h))
        for item in plan.to_respawn:
            if item["backoffMs"] == 0:
                self._spawn(by_name[item["name"]])
        return plan

    async def _evict(self, h: InstanceHandle) -> None:
        await self.stop(h, "idle_timeout")
        if not h.alive and not h.queue and h.status == "terminated" and h.outstanding == 0:
            self.handles.pop((h.agent, h.key), None)

    async def _reconcile_loop(self) -> None:
        while not self.closing:
            await self.clock.sleep_ms(self.reconcile_interval_ms)
            try:
                await self.reconcile()
            except Exception:
                log.exception("reconcile failed")

    # --- quiescence ------------------------------------------------------------------------------------

    def busy(self) -> bool:
        return any(h.current is not None or h.queue or h.spawn_task is not None for h in self.handles.values()) or bool(
            self.pending_requests
        )

    async def wait_idle(self) -> None:
        """Until no turn runs or waits anywhere and every agent process has finished its background
        work (async inter-agent requests, deliveries)."""
        while True:
            while self.busy():
                await asyncio.sleep(0.003)
            before = self.turns_dispatched
            syncs = []
            for h in self.handles.values():
                if h.conn is not None and h.status in ("idle", "processing"):
                    sync_id = new_id("sync")
                    fut: asyncio.Future[None] = asyncio.get_running_loop().create_future()
                    h.syncs[sync_id] = fut
                    if h.conn.send_record(Sync(sync_id), ORCHESTRATOR, h.agent):
                        syncs.append(fut)
                    else:
                        h.syncs.pop(sync_id, None)
            if syncs:
                await asyncio.gather(*syncs, return_exceptions=True)
            if not self.busy() and self.turns_dispatched == before:
                return


__all__ = ["STATUSES", "InstanceHandle", "Orchestrator", "ReconcilePlan", "backoff_ms"]
