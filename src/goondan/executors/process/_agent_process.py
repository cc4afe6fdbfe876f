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
import contextlib
import functools
import logging
import os
import socket
from typing import Any, NoReturn

from ..._ids import new_id
from ...engine._agents import AgentsHub
from ...errors import AgentRequestError, GoondanError
from ._ipc import ORCHESTRATOR, Connection, FrameTooLarge, IpcError, frame_error, message

log = logging.getLogger("goondan.executors.process")


class ProcessBackend:
    """Inter-agent routing through the orchestrator (see ``HubBackend``)."""

    def __init__(self, conn: Connection, agent: str) -> None:
        self._conn = conn
        self._agent = agent
        self._pending: dict[str, tuple[str, asyncio.Future[str]]] = {}
        self._rpcs: dict[str, asyncio.Future[Any]] = {}

    def _event(self, kind: str, **fields: Any) -> None:
        try:
            sent = self._conn.send(message("event", self._agent, ORCHESTRATOR, {"kind": kind, **fields}))
        except FrameTooLarge as exc:
            err = frame_error(exc)
            raise AgentRequestError(
                err.code, err.message, target=fields.get("target"), suggestion=err.suggestion
            ) from None
        if not sent:
            raise AgentRequestError("IPC_DELIVERY_FAILED", "the orchestrator connection is closed")

    async def run_request(self, target: str, key: str, event: dict[str, Any]) -> str:
        corr = str(event["replyTo"]["correlationId"])
        fut: asyncio.Future[str] = asyncio.get_running_loop().create_future()
        self._pending[corr] = (target, fut)
        try:
            self._event("request", event=event, target=target, instanceKey=key)
            return await fut
        finally:
            self._pending.pop(corr, None)

    async def run_send(self, target: str, key: str, event: dict[str, Any]) -> None:
        self._event("send", event=event, target=target, instanceKey=key)

    async def _rpc(self, op: str, **args: Any) -> Any:
        rpc_id = new_id("rpc")
        fut: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
        self._rpcs[rpc_id] = fut
        try:
            self._event("rpc", rpcId=rpc_id, op=op, args=args)
            return await fut
        finally:
            self._rpcs.pop(rpc_id, None)

    async def spawn(self, owner: tuple[str, str], target: str, key: str, cwd: str | None) -> dict[str, Any]:
        value: dict[str, Any] = await self._rpc("spawn", owner=list(owner), target=target, instanceKey=key, cwd=cwd)
        return value

    async def list(self, owner: tuple[str, str], include_all: bool) -> dict[str, Any]:
        value: dict[str, Any] = await self._rpc("list", owner=list(owner), includeAll=include_all)
        return value

    def on_response(self, payload: dict[str, Any]) -> None:
        if payload.get("kind") == "response":
            event = payload.get("event") or {}
            corr = (event.get("metadata") or {}).get("inReplyTo")
            entry = self._pending.get(str(corr))
            if entry and not entry[1].done():
                text = event.get("input")
                entry[1].set_result(text if isinstance(text, str) else "")
            return
        meta = payload.get("metadata") or {}
        entry = self._pending.get(str(meta.get("inReplyTo")))
        if entry and not entry[1].done():
            entry[1].set_exception(
                AgentRequestError(
                    str(meta.get("errorCode") or "IPC_DELIVERY_FAILED"),
                    str(meta.get("errorMessage") or "the request failed"),
                    target=entry[0],
                )
            )

    def on_rpc_result(self, payload: dict[str, Any]) -> None:
        fut = self._rpcs.get(str(payload.get("rpcId")))
        if fut is None or fut.done():
            return
        if payload.get("ok"):
            fut.set_result(payload.get("value"))
        else:
            err = payload.get("error") or {}
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
            self._send("log", record=fields)
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
    reader, writer = await asyncio.open_unix_connection(sock=sock)
    conn = Connection(reader, writer)
    agent: str = spec["agent"]
    key: str = spec["instanceKey"]

    def send(kind: str, **fields: Any) -> None:
        try:
            conn.send(message("event", agent, ORCHESTRATOR, {"kind": kind, **fields}))
        except FrameTooLarge as exc:
            # nothing was written; the one request this message belonged to fails, the channel stays
            if kind == "turn_done":
                err = frame_error(exc).to_dict()
                result = {"turnId": fields["result"].get("turnId", ""), "finishReason": "error", "text": None}
                send("turn_done", ticket=fields["ticket"], result={**result, "responseMessage": None, "error": err})
            elif kind == "start_error":
                error = dict(fields["error"])
                error["message"] = str(error.get("message", ""))[:4096]
                error.pop("traceback", None)
                conn.send(message("event", agent, ORCHESTRATOR, {"kind": kind, "error": error}))
            else:
                log.warning("%s@%s: %s message dropped: %s", agent, key, kind, exc)

    _forward_logging(send, spec.get("logLevel"))
    backend = ProcessBackend(conn, agent)
    hub = AgentsHub(ctx, backend)
    listeners = [lambda record: send("runtime_event", record=record)]
    deltas = [lambda payload: send("text_delta", delta=payload)] if spec.get("deltas") else []
    instance = ctx.build_instance(agent, key, hub=hub, listeners=listeners, delta_listeners=deltas)
    try:
        await instance.start()
    except BaseException as exc:
        send("start_error", error=error_dict(exc))
        with contextlib.suppress(Exception):
            await writer.drain()
        return 3
    send("agent_ready", pid=os.getpid())
    current: asyncio.Task[None] | None = None
    queue: asyncio.Queue[dict[str, Any]] = asyncio.Queue()

    async def turns() -> None:
        while True:
            payload = await queue.get()
            # accepted once the user's message is durable: from then on a crash belongs to this turn
            # (recovered as interrupted); before it the orchestrator hands the event to the next
            # process, which does not store the message again if it was stored (same event id)
            accepted = functools.partial(send, "turn_accepted", ticket=payload["ticket"])
            try:
                result = (await instance.run_turn(payload["event"], on_accepted=accepted)).to_dict()
            except Exception as exc:
                err = error_dict(exc)
                result = {"turnId": "", "finishReason": "error", "text": None, "responseMessage": None, "error": err}
            send("turn_done", ticket=payload["ticket"], result=result)
            reason = instance.restart_requested
            if reason is not None:
                instance.restart_requested = None
                send("restart_request", reason=reason)

    async def sync(sync_id: Any) -> None:
        while hub.busy or not queue.empty() or instance.lock.locked():
            await asyncio.sleep(0.002)
        send("sync_ack", id=sync_id)

    loop = asyncio.get_running_loop()
    current = loop.create_task(turns())
    background: set[asyncio.Task[Any]] = set()
    while True:
        try:
            msg = await conn.recv()
        except IpcError as exc:
            log.error("%s@%s: skipped a frame from the orchestrator: %s", agent, key, exc)
            continue
        if msg is None:
            os._exit(0)
        mtype = msg["type"]
        payload = msg.get("payload") or {}
        if mtype == "shutdown" and payload.get("interrupt"):
            await _interrupted(current, background, hub, instance)
            conn.send(message("shutdown_ack", agent, ORCHESTRATOR, {"instanceKey": key}))
            with contextlib.suppress(Exception):
                await writer.drain()
            _exit_now()
        if mtype == "shutdown":
            grace = payload.get("gracePeriodMs")
            deadline = loop.time() + (grace / 1000 if isinstance(grace, int | float) else 30.0)
            while not queue.empty() or instance.lock.locked() or (hub.busy and loop.time() < deadline):
                await asyncio.sleep(0.002)
            current.cancel()
            await instance.close()
            conn.send(message("shutdown_ack", agent, ORCHESTRATOR, {"instanceKey": key}))
            with contextlib.suppress(Exception):
                await writer.drain()
            return 0
        if mtype != "event":
            continue
        kind = payload.get("kind")
        if kind == "turn":
            queue.put_nowait(payload)
        elif kind in ("response", "error_response"):
            backend.on_response(payload)
        elif kind == "rpc_result":
            backend.on_rpc_result(payload)
        elif kind == "sync":
            task = asyncio.get_running_loop().create_task(sync(payload.get("id")))
            background.add(task)
            task.add_done_callback(background.discard)


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
