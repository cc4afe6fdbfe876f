"""``python -m goondan.connectors.host --fd N``: runs one connector entry in its own process.

The supervisor (``gdn run``) starts one host per Connection, so a connector that blocks, leaks or
crashes cannot take the agents down with it. See :mod:`goondan.connectors._protocol` for the messages.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import inspect
import logging
import os
import signal
import socket
import sys
import traceback
from pathlib import Path
from typing import Any

from .._http_client import aclose_shared
from ..errors import GoondanError
from ..executors.process._ipc import (
    ConnectorDelta,
    ConnectorReply,
    ConnectorStart,
    ConnectorStopped,
    Dispatcher,
    FrameChannel,
    IpcError,
    Ready,
    Record,
    Shutdown,
    ShutdownAck,
    StartError,
    decode_record,
)
from ._context import ConnectorContext, Reply
from ._direct import DeltaSocket
from ._protocol import SUPERVISOR

log = logging.getLogger("goondan.connectors")

READY_GRACE_SECONDS = 0.3


async def _first(conn: FrameChannel) -> ConnectorStart | None:
    """The ``connector_start`` the supervisor sends first (frames before it that are not one are
    logged and skipped), or ``None`` when the supervisor went away."""
    while True:
        try:
            msg = await conn.recv()
            if msg is None:
                return None
            record = decode_record(msg)
        except IpcError as exc:
            log.error("connector host: skipped a message before start: %s", exc)
            continue
        if isinstance(record, ConnectorStart):
            return record
        log.error("connector host: skipped a %s message before start", record.KIND)


def _unknown_secrets(module: Any, connector: str, secrets: Any) -> dict[str, str] | None:
    """A Connection secret the connector never reads, when its module says which it reads (``SECRETS``):
    ``signingSecrt`` left the webhook without its secret, so it accepted unsigned requests, silently."""
    known = getattr(module, "SECRETS", None)
    if not isinstance(known, tuple | list | frozenset | set) or not known:
        return None
    names = [str(name) for name in known]
    unknown = sorted(str(key) for key in secrets if str(key) not in names)
    if not unknown:
        return None
    from .._hints import did_you_mean, join_hints

    listing = f"Connector/{connector} reads: {', '.join(names)}"
    return {
        "code": "E_CONNECTOR_CONFIG",
        "message": f"spec.secrets.{unknown[0]} is not a secret Connector/{connector} reads"
        + (f" (nor {', '.join(unknown[1:])})" if unknown[1:] else ""),
        "suggestion": join_hints(did_you_mean(unknown[0], names), listing) or listing,
    }


async def _serve(fd: int) -> int:
    sock = socket.socket(fileno=fd)
    # frames are handled in the read callback: a streamed delta reaches the HTTP client's socket
    # in the same callback that read it off the channel, no task woken in between
    conn = await FrameChannel.open(sock)
    me = "connector"

    def send(record: Record) -> None:
        conn.send_record(record, me, SUPERVISOR)

    start = await _first(conn)
    if start is None:
        return 2
    me = start.connection
    entry = Path(start.entry).resolve()
    try:
        from .._modules import import_path

        # import_path gives the entry's bundle its own package: sibling and bundle-root imports work
        # without touching sys.path (which would let a user's `slack.py` shadow a real package).
        module = import_path(entry)
    except Exception as exc:
        from .._usercode import import_failure

        # where in the user's module (or what it imports) it failed, as a tool's import failure says
        # it; the bare "ModuleNotFoundError: No module named 'x'" named no file or line
        message = import_failure("connector", entry, exc).split(": ", 1)[1]
        log.info("connector host %s: %s", start.connection, message, exc_info=exc)
        hint = f"Fix {entry.name}: `gdn run -v` prints the traceback of its import."
        send(StartError({"code": "E_CONNECTOR_LOAD", "message": message, "suggestion": hint}))
        await conn.drain()
        return 1
    run = getattr(module, "run", None)
    if run is None or not inspect.iscoroutinefunction(run):
        message = f"{entry} must define `async def run(ctx)`"
        send(StartError({"code": "E_CONNECTOR_LOAD", "message": message}))
        await conn.drain()
        return 1

    refused = _unknown_secrets(module, start.connector, start.secrets)
    if refused is not None:
        send(StartError(refused))
        await conn.drain()
        return 1

    announced = asyncio.Event()
    direct: DeltaSocket | None = None

    def on_ready() -> None:
        if not announced.is_set():
            announced.set()
            send(Ready(os.getpid(), direct.address if direct is not None else ""))

    ctx = ConnectorContext(
        connection=start.connection,
        connector=start.connector,
        config={str(k): str(v) for k, v in start.config.items()},
        secrets={str(k): str(v) for k, v in start.secrets.items()},
        send=send,
        on_ready=on_ready,
    )
    # where agent processes send the deltas of streamed events directly (see _direct)
    direct = DeltaSocket.open(ctx)

    def on_reply(rec: ConnectorReply) -> None:
        reply = Reply(rec.text, rec.finish_reason, rec.error)
        if direct is None:
            ctx._resolve(rec.id, reply)
        else:
            direct.reply(rec.id, reply, rec.direct)

    task = asyncio.create_task(run(ctx))
    shutdown = asyncio.Event()
    # what the host answers to; anything else the supervisor sends is logged and skipped
    table = (
        Dispatcher(f"connector host {me}", log)
        .on(ConnectorReply, on_reply)
        .on(ConnectorDelta, lambda rec: ctx._delta(rec.id, rec.delta, rec.step))
        .on(Shutdown, lambda _rec: shutdown.set())
    )

    def bad_frame(exc: IpcError) -> None:
        log.error("connector host %s: skipped a frame: %s", me, exc)

    async def inbound() -> None:
        """Handle the supervisor's messages until it asks to shut down or goes away."""
        serving = asyncio.ensure_future(conn.serve(table.dispatch, bad_frame))
        stopping = asyncio.ensure_future(shutdown.wait())
        try:
            await asyncio.wait({serving, stopping}, return_when=asyncio.FIRST_COMPLETED)
        finally:
            serving.cancel()
            stopping.cancel()

    control = asyncio.create_task(inbound())
    ready_wait = asyncio.create_task(announced.wait())
    done, _ = await asyncio.wait({task, ready_wait}, timeout=READY_GRACE_SECONDS, return_when=asyncio.FIRST_COMPLETED)
    if task in done and not announced.is_set():
        early = task.exception()
        if early is not None:
            if isinstance(early, GoondanError):  # it says what went wrong and what to do
                send(StartError(early.to_dict()))
            else:
                send(StartError({"code": "E_CONNECTOR_START", "message": f"{type(early).__name__}: {early}"}))
            await conn.drain()
            return 1
    on_ready()  # still running after the grace period (or already announced): it is up
    ready_wait.cancel()

    await asyncio.wait({task, control}, return_when=asyncio.FIRST_COMPLETED)
    reason = "returned"
    error: dict[str, str] | None = None
    if not task.done():
        reason = "shutdown"
        # nothing answers a streamed event once the channel stops being read: end those streams
        # with an error first, so a client in the middle of a streamed answer reads its end (the
        # webhook's error event) while the server finishes the requests in flight, instead of a
        # body cut off mid-stream
        ctx._fail_streams("gdn run is stopping")
        # and so are the events waiting for a whole reply (replyMode sync): answered now with
        # E_CONNECTOR_STOPPED, they were left to the server's shutdown grace and then cancelled,
        # a plain-text 500 and a CancelledError traceback (gdn run killed while a turn ran)
        ctx._fail_pending("gdn run stopped before the reply was ready")
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError, Exception):
            await task
    elif task.cancelled():
        reason = "shutdown"
    elif (failure := task.exception()) is not None:
        # the supervisor logs it with this traceback and restarts the connector like a crash
        reason = "failed"
        error = {
            "code": "E_CONNECTOR_FAILED",
            "message": f"{type(failure).__name__}: {failure}",
            "traceback": "".join(traceback.format_exception(failure)),
        }
    else:
        # the connector finished on its own (e.g. cli at end of input): let its last replies arrive
        while ctx._pending and not control.done():
            await asyncio.wait({control}, timeout=0.05)
    if direct is not None:
        direct.close()
    ctx._fail_pending("the connector stopped")
    with contextlib.suppress(ConnectionError, IpcError):
        send(ConnectorStopped(reason, error))
        if shutdown.is_set():
            send(ShutdownAck())
        await conn.drain()
    # stopping now: the supervisor's SIGTERM (a host slow to exit after its ack) works again
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    control.cancel()
    with contextlib.suppress(Exception):
        await aclose_shared()  # the connector's pooled HTTP connections
    conn.close()
    return 0 if reason != "failed" else 1


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m goondan.connectors.host")
    parser.add_argument("--fd", type=int, required=True, help="socket file descriptor shared with the supervisor")
    parser.add_argument("--log-level", default="WARNING")
    args = parser.parse_args(argv)
    logging.basicConfig(level=args.log_level, stream=sys.stderr, format="%(levelname)s %(name)s: %(message)s")
    # Ctrl+C in the terminal reaches the whole process group, and so does SIGTERM from `systemctl
    # stop` (KillMode=control-group), `timeout` or `kill -- -PGID`: the supervisor decides when we
    # stop, after gdn run let the running turns answer. Dying on the group's SIGTERM cut the replies
    # in flight (a webhook client's connection closed without an answer) and read as a crash.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    os.set_inheritable(args.fd, False)
    return asyncio.run(_serve(args.fd))


if __name__ == "__main__":
    raise SystemExit(main())
