"""One agent process (``isolation="process"``): one agent instance, forked from the fork server.

It builds its :class:`AgentInstance` (loading its own model, tools and extensions), reports
``agent_ready`` (or ``start_error``), and then serves ``turn`` events one at a time in arrival order.
A turn is reported ``turn_accepted`` once its user message is on disk: a death before that leaves
the event to the next process (which does not store the message twice: it carries the event id).
Inter-agent calls leave through :class:`ProcessBackend` to the orchestrator; the hub's rules (call
stack, timeouts, async inbox) are the same code as inline. On ``shutdown`` it stops taking turns,
finishes the current one (which folds and persists it), saves extension state, answers
``shutdown_ack`` and exits 0. A ``shutdown`` marked ``interrupt`` (Ctrl+C on the host) cancels the
current turn instead of finishing it. When the orchestrator's end of the socket closes it exits at
once: everything a turn made durable is already on disk.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import functools
import logging
import os
import signal
import socket
from typing import Any, NoReturn

from ..._ids import new_id
from ...engine._agents import AgentsHub
from ...errors import AgentRequestError, GoondanError
from ._accept import AcceptSlot
from ._direct_stream import BROKEN, DirectStreams
from ._ipc import (
    ORCHESTRATOR,
    AgentReady,
    CancelTurn,
    Dispatcher,
    ErrorResponse,
    Forward,
    FrameChannel,
    FrameTooLarge,
    IpcError,
    Log,
    MessageChannel,
    Record,
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

log = logging.getLogger("goondan.executors.process")


class ProcessBackend:
    """Inter-agent routing through the orchestrator (see ``HubBackend``)."""

    def __init__(self, conn: MessageChannel, agent: str) -> None:
        self._conn = conn
        self._agent = agent
        self._pending: dict[str, tuple[str, asyncio.Future[str]]] = {}
        self._rpcs: dict[str, asyncio.Future[Any]] = {}

    def _event(self, record: Record, target: str | None = None) -> None:
        try:
            sent = self._conn.send_record(record, self._agent, ORCHESTRATOR)
        except FrameTooLarge as exc:
            err = frame_error(exc)
            raise AgentRequestError(err.code, err.message, target=target, suggestion=err.suggestion) from None
        if not sent:
            raise AgentRequestError("IPC_DELIVERY_FAILED", "the orchestrator connection is closed")

    async def run_request(self, target: str, key: str, event: dict[str, Any]) -> str:
        corr = str(event["replyTo"]["correlationId"])
        fut: asyncio.Future[str] = asyncio.get_running_loop().create_future()
        self._pending[corr] = (target, fut)
        try:
            self._event(RequestMsg(event, target, key), target)
            return await fut
        finally:
            self._pending.pop(corr, None)

    async def run_send(self, target: str, key: str, event: dict[str, Any]) -> None:
        self._event(Send(event, target, key), target)

    async def _rpc(self, op: str, **args: Any) -> Any:
        rpc_id = new_id("rpc")
        fut: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
        self._rpcs[rpc_id] = fut
        try:
            self._event(Rpc(rpc_id, op, args), args.get("target"))
            return await fut
        finally:
            self._rpcs.pop(rpc_id, None)

    async def spawn(self, owner: tuple[str, str], target: str, key: str, cwd: str | None) -> dict[str, Any]:
        value: dict[str, Any] = await self._rpc("spawn", owner=list(owner), target=target, instanceKey=key, cwd=cwd)
        return value

    async def list(self, owner: tuple[str, str], include_all: bool) -> dict[str, Any]:
        value: dict[str, Any] = await self._rpc("list", owner=list(owner), includeAll=include_all)
        return value

    def on_response(self, rec: Response) -> None:
        corr = (rec.event.get("metadata") or {}).get("inReplyTo")
        entry = self._pending.get(str(corr))
        if entry and not entry[1].done():
            text = rec.event.get("input")
            entry[1].set_result(text if isinstance(text, str) else "")

    def on_error_response(self, rec: ErrorResponse) -> None:
        meta = rec.metadata
        entry = self._pending.get(str(meta.get("inReplyTo")))
        if entry and not entry[1].done():
            entry[1].set_exception(
                AgentRequestError(
                    str(meta.get("errorCode") or "IPC_DELIVERY_FAILED"),
                    str(meta.get("errorMessage") or "the request failed"),
                    target=entry[0],
                    suggestion=meta.get("errorSuggestion"),
                )
            )

    def on_rpc_result(self, rec: RpcResult) -> None:
        fut = self._rpcs.get(rec.rpc_id)
        if fut is None or fut.done():
            return
        if rec.ok:
            fut.set_result(rec.value)
        else:
            err = rec.error or {}
            fut.set_exception(
                AgentRequestError(
                    str(err.get("code") or "IPC_DELIVERY_FAILED"),
                    str(err.get("message") or "failed"),
                    target=err.get("target"),
                )
            )


_RECORD_FIELDS = (
    "name",
    "levelno",
    "levelname",
    "pathname",
    "filename",
    "module",
    "lineno",
    "funcName",
    "created",
    "msecs",
    "process",
    "processName",
    "threadName",
    "stack_info",
)


class IpcLogHandler(logging.Handler):
    """Sends this process's log records to the orchestrator, which hands them to the host's logging:
    an agent process has no terminal of its own (its fds 1 and 2 go to the instance's output log),
    so this is how ``-v`` shows its info records and the tracebacks they carry."""

    def __init__(self, send: Any) -> None:
        super().__init__()
        self._send = send
        self._busy = False

    def emit(self, record: logging.LogRecord) -> None:
        if self._busy:  # a record about a failed send must not send again
            return
        self._busy = True
        try:
            fields: dict[str, Any] = {k: getattr(record, k, None) for k in _RECORD_FIELDS}
            fields["msg"] = record.getMessage()
            fields["args"] = None
            exc_text = record.exc_text
            if record.exc_info and not exc_text:
                exc_text = logging.Formatter().formatException(record.exc_info)
            fields["exc_text"] = exc_text
            self._send(Log(fields))
        except Exception:
            pass
        finally:
            self._busy = False


def _forward_logging(send: Any, level: Any) -> None:
    root = logging.getLogger()
    for handler in list(root.handlers):
        root.removeHandler(handler)
    root.addHandler(IpcLogHandler(send))
    root.setLevel(level if isinstance(level, int) and level > 0 else logging.WARNING)


def error_dict(exc: BaseException) -> dict[str, Any]:
    out = exc.to_dict() if isinstance(exc, GoondanError) else {"code": "E_AGENT_START", "message": f"{exc}"}
    out["class"] = type(exc).__name__
    return out


async def _serve(sock: socket.socket, spec: dict[str, Any], ctx: Any) -> int:
    # Unix socket, or TCP for the Ray executor's actors (same records, same framing)
    conn = await FrameChannel.open(sock)
    agent: str = spec["agent"]
    key: str = spec["instanceKey"]

    def send(record: Record) -> None:
        try:
            conn.send_record(record, agent, ORCHESTRATOR)
        except FrameTooLarge as exc:
            # nothing was written; the one request this message belonged to fails, the channel stays
            if isinstance(record, TurnDone):
                err = frame_error(exc).to_dict()
                result = {"turnId": record.result.get("turnId", ""), "finishReason": "error", "text": None}
                send(TurnDone(record.ticket, {**result, "responseMessage": None, "error": err}))
            elif isinstance(record, StartError):
                error = dict(record.error)
                error["message"] = str(error.get("message", ""))[:4096]
                error.pop("traceback", None)
                conn.send_record(StartError(error), agent, ORCHESTRATOR)
            else:
                log.warning("%s@%s: %s message dropped: %s", agent, key, record.KIND, exc)

    _forward_logging(send, spec.get("logLevel"))
    backend = ProcessBackend(conn, agent)
    hub = AgentsHub(ctx, backend)

    def defer(record: Record) -> None:
        """Runtime events: nobody waits on them, so a step's burst of them goes out in one write."""
        try:
            conn.defer(record.message(agent, ORCHESTRATOR))
        except FrameTooLarge as exc:
            log.warning("%s@%s: %s message dropped: %s", agent, key, record.KIND, exc)

    def event(record: dict[str, Any]) -> None:
        # a tool call is announced at once (with what was deferred before it, in order): a tool
        # may block this process's event loop for minutes, and the host must know it is running
        (send if record.get("type") == "tool.called" else defer)(RuntimeEvent(record))

    def delta(payload: Any) -> None:
        send(TextDelta(payload))

    # The engine reads these lists by reference: an empty one is its fast path (no record is even
    # offered), which is what a host without listeners gets; ``forward`` refills or empties them.
    listeners: list[Any] = [event] if spec.get("events", True) else []
    deltas: list[Any] = [delta] if spec.get("deltas") else []
    forwarding = [bool(spec.get("deltas"))]
    # turns whose deltas go straight to a connector (see _direct_stream): its listener is in
    # ``deltas`` (first: the connector's client waits on it) while one of them runs; a turn whose
    # stream cannot be opened sends its deltas through gdn run instead (``delta``, marked)
    direct = DirectStreams(delta)

    def set_deltas() -> None:
        deltas[:] = ([direct.listener] if direct.active else []) + ([delta] if forwarding[0] else [])

    direct.on_change = set_deltas

    def on_forward(rec: Forward) -> None:
        listeners[:] = [event] if rec.events else []
        forwarding[0] = rec.deltas
        set_deltas()

    try:
        # opening the conversation is part of starting: a store that cannot be reached (a database
        # that is down) is reported as what it is, not as a process that died before it was ready
        instance = ctx.build_instance(agent, key, hub=hub, listeners=listeners, delta_listeners=deltas)
        # the previous process was killed because its cancelled turn did not stop: the calls that
        # turn left without a result are answered as cancelled, which is what its caller was told
        instance.killed_on_cancel = bool(spec.get("killedOnCancel"))
        await instance.start()
    except BaseException as exc:
        send(StartError(error_dict(exc)))
        with contextlib.suppress(Exception):
            await conn.drain()
        return 3
    # where accepted turns are marked without a frame (see _accept); steering agents accept several
    # tickets at once and keep the frames, as does a process that cannot map the slot
    slot = None if instance.steering else AcceptSlot.open(spec.get("acceptSlot"))
    send(AgentReady(os.getpid(), instance.steering))
    # turns received and not started, in arrival order: one runs at a time (see turns())
    waiting: collections.deque[Turn] = collections.deque()
    # tickets of turns received but not finished, and those of them cancelled before they started
    held: set[str] = set()
    precancelled: set[str] = set()

    async def run_one(turn: Turn) -> None:
        # accepted once the user's message is durable: from then on a crash belongs to this turn
        # (recovered as interrupted); before it the orchestrator hands the event to the next
        # process, which does not store the message again if it was stored (same event id)
        def accepted() -> None:
            if slot is None or not slot.mark(turn.ticket):
                send(TurnAccepted(turn.ticket))

        cancelled = functools.partial(precancelled.__contains__, turn.ticket)
        target = turn.stream
        streaming = None if target is None else direct.begin(target, turn.event.get("traceId"))
        try:
            result = (await instance.run_turn(turn.event, on_accepted=accepted, cancelled=cancelled)).to_dict()
        except Exception as exc:
            err = error_dict(exc)
            result = {"turnId": "", "finishReason": "error", "text": None, "responseMessage": None, "error": err}
        finally:
            held.discard(turn.ticket)
            precancelled.discard(turn.ticket)
        # the end marker is in the connector's queue before turn_done leaves: its reply comes after
        if streaming is not None and not await direct.end(streaming, turn.event.get("traceId")):
            result["directStream"] = BROKEN
        send(TurnDone(turn.ticket, result))
        reason = instance.restart_requested
        if reason is not None:
            instance.restart_requested = None
            send(RestartRequest(str(reason)))

    # what the idle turns() task waits on; on_turn resolves it
    wake: list[asyncio.Future[None]] = []

    async def turns() -> None:
        # An asyncio.Queue does the same with about a dozen more Python calls per turn and a getpid
        # syscall (its get() asks for the running loop): this task wakes from idle for every turn,
        # with cold caches, where each call counts.
        while True:
            while waiting:
                await run_one(waiting.popleft())
            idle = loop.create_future()
            wake.append(idle)
            try:
                await idle
            finally:
                wake.clear()

    async def sync(rec: Sync) -> None:
        while hub.busy or waiting or instance.lock.locked():
            await asyncio.sleep(0.002)
        send(SyncAck(rec.id))

    loop = asyncio.get_running_loop()
    current = loop.create_task(turns())
    background: set[asyncio.Task[Any]] = set()

    def on_turn(rec: Turn) -> None:
        held.add(rec.ticket)
        if not instance.takes_steered:
            waiting.append(rec)
            if wake and not wake[0].done():
                wake[0].set_result(None)
            return
        # Agent.spec.steering inject: the message joins the running turn, answered with its result
        task = loop.create_task(run_one(rec))
        background.add(task)
        task.add_done_callback(background.discard)

    def on_cancel(rec: CancelTurn) -> None:
        # the running (or starting) turn; else the dispatched one, if it is still on its way here
        if instance.cancel_turn():
            return
        if rec.ticket in held:
            precancelled.add(rec.ticket)
        else:
            log.info("%s@%s: cancel (%s) found no running turn", agent, key, rec.reason)

    def on_sync(rec: Sync) -> None:
        task = loop.create_task(sync(rec))
        background.add(task)
        task.add_done_callback(background.discard)

    async def shutdown(rec: Shutdown) -> int:
        if rec.interrupt:
            await _interrupted(current, background, hub, instance)
            conn.send_record(ShutdownAck(key), agent, ORCHESTRATOR)
            with contextlib.suppress(Exception):
                await conn.drain()
            _exit_now()
        deadline = loop.time() + rec.grace_period_ms / 1000
        while waiting or instance.lock.locked() or (hub.busy and loop.time() < deadline):
            await asyncio.sleep(0.002)
        current.cancel()
        await instance.close()
        conn.send_record(ShutdownAck(key), agent, ORCHESTRATOR)
        # acknowledged: the supervisor's SIGTERM (a process slow to exit) works again (the fork
        # server made this process ignore the process group's SIGTERM)
        signal.signal(signal.SIGTERM, signal.SIG_DFL)
        with contextlib.suppress(Exception):
            await conn.drain()
        return 0

    # the exit code, once a shutdown has saved everything (the orchestrator's side closing first
    # ends the process at once instead: see orchestrator_gone)
    stopped: asyncio.Future[int] = loop.create_future()
    stopping: list[asyncio.Task[int]] = []

    def on_shutdown(rec: Shutdown) -> None:
        if stopping:  # one shutdown at a time; a second one changes nothing
            return
        task = loop.create_task(shutdown(rec))
        stopping.append(task)

        def done(t: asyncio.Task[int]) -> None:
            if stopped.done():
                return
            if t.cancelled():
                stopped.cancel()
            elif (exc := t.exception()) is not None:
                stopped.set_exception(exc)
            else:
                stopped.set_result(t.result())

        task.add_done_callback(done)

    # what this process answers to; anything else the orchestrator sends is logged and skipped
    table = (
        Dispatcher(f"agent process {agent}@{key}", log)
        .on(Turn, on_turn)
        .on(Response, backend.on_response)
        .on(ErrorResponse, backend.on_error_response)
        .on(RpcResult, backend.on_rpc_result)
        .on(Sync, on_sync)
        .on(CancelTurn, on_cancel)
        .on(Forward, on_forward)
        .on(Shutdown, on_shutdown)
    )

    def bad_frame(exc: IpcError) -> None:
        log.error("%s@%s: skipped a frame from the orchestrator: %s", agent, key, exc)

    # every message is handled in the read callback (messages keep coming during a shutdown: the
    # last turn may still wait for an inter-agent response)
    reading = loop.create_task(conn.serve(table.dispatch, bad_frame))

    def orchestrator_gone(_: Any) -> None:
        # everything a turn made durable is on disk; a shutdown under way finishes saving first
        if not stopping:
            with contextlib.suppress(Exception):  # runtime events a turn buffered this loop iteration
                instance.flush_runtime_events()
            os._exit(0)

    reading.add_done_callback(orchestrator_gone)
    return await stopped


async def _interrupted(
    current: asyncio.Task[None], background: set[asyncio.Task[Any]], hub: AgentsHub, instance: Any
) -> None:
    """An interrupt (Ctrl+C on the host): the running turn is cancelled, not finished. What it
    emitted is already in ``events.jsonl`` (replayed on the next start, its unfinished tool calls
    answered with ``E_TOOL_INTERRUPTED``); cancelling it writes status ``idle``. Queued turns are
    dropped with it (the host fails them). Then extension state is saved as on any shutdown."""
    tasks = [current, *background, *hub.tasks()]
    for task in tasks:
        task.cancel()
    await asyncio.gather(*tasks, return_exceptions=True)
    try:
        await instance.close()
    except Exception:
        log.exception("closing %s@%s after an interrupt failed", instance.agent_name, instance.instance_key)


def _exit_now() -> NoReturn:
    """Leave without asyncio's teardown, which would wait for threads a cancelled model or tool call
    may still run; everything durable is written and the host was told."""
    import sys

    with contextlib.suppress(Exception):
        sys.stdout.flush()
        sys.stderr.flush()
    os._exit(0)


def run_agent_process(fd: int, spec: dict[str, Any], ctx: Any) -> int:
    os.set_inheritable(fd, False)  # a subprocess a tool starts must not keep the orchestrator stream open
    sock = socket.socket(fileno=fd)
    return asyncio.run(_serve(sock, spec, ctx))


__all__ = ["ProcessBackend", "run_agent_process"]
