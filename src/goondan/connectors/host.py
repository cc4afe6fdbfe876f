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
from pathlib import Path
from typing import Any

from ._context import ConnectorContext, Reply
from ._protocol import MAX_LINE, encode, read_message

READY_GRACE_SECONDS = 0.3


async def _serve(fd: int) -> int:
    sock = socket.socket(fileno=fd)
    reader, writer = await asyncio.open_unix_connection(sock=sock, limit=MAX_LINE)

    def send(message: dict[str, Any]) -> None:
        if not writer.is_closing():
            writer.write(encode(message))

    start = await read_message(reader)
    if start is None or start.get("type") != "start":
        return 2
    connection = str(start.get("connection", "connector"))
    try:
        from .._modules import import_path

        # import_path gives the entry's bundle its own package: sibling and bundle-root imports work
        # without touching sys.path (which would let a user's `slack.py` shadow a real package).
        entry = Path(str(start["entry"])).resolve()
        module = import_path(entry)
        run = getattr(module, "run", None)
        if run is None or not inspect.iscoroutinefunction(run):
            raise TypeError(f"{entry} must define `async def run(ctx)`")
    except Exception as exc:
        send({"type": "start_error", "error": {"code": "E_CONNECTOR_LOAD", "message": f"{type(exc).__name__}: {exc}"}})
        await writer.drain()
        return 1

    announced = asyncio.Event()

    def on_ready() -> None:
        if not announced.is_set():
            announced.set()
            send({"type": "started"})

    ctx = ConnectorContext(
        connection=connection,
        connector=str(start.get("connector", "")),
        config={str(k): str(v) for k, v in (start.get("config") or {}).items()},
        secrets={str(k): str(v) for k, v in (start.get("secrets") or {}).items()},
        send=send,
        on_ready=on_ready,
    )
    task = asyncio.create_task(run(ctx))

    async def inbound() -> None:
        while True:
            message = await read_message(reader)
            if message is None or message["type"] == "shutdown":
                return
            if message["type"] == "reply":
                error = message.get("error")
                ctx._resolve(
                    str(message.get("id")),
                    Reply(
                        message.get("text") if isinstance(message.get("text"), str) else None,
                        message.get("finishReason") if isinstance(message.get("finishReason"), str) else None,
                        error if isinstance(error, dict) else None,
                    ),
                )

    control = asyncio.create_task(inbound())
    ready_wait = asyncio.create_task(announced.wait())
    done, _ = await asyncio.wait({task, ready_wait}, timeout=READY_GRACE_SECONDS, return_when=asyncio.FIRST_COMPLETED)
    if task in done and not announced.is_set():
        early = task.exception()
        if early is not None:
            send(
                {
                    "type": "start_error",
                    "error": {"code": "E_CONNECTOR_START", "message": f"{type(early).__name__}: {early}"},
                }
            )
            await writer.drain()
            return 1
    on_ready()  # still running after the grace period (or already announced): it is up
    ready_wait.cancel()

    await asyncio.wait({task, control}, return_when=asyncio.FIRST_COMPLETED)
    reason = "returned"
    error: dict[str, str] | None = None
    if not task.done():
        reason = "shutdown"
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError, Exception):
            await task
    elif task.cancelled():
        reason = "shutdown"
    elif task.exception() is not None:
        failure = task.exception()
        reason = "failed"
        error = {"code": "E_CONNECTOR_FAILED", "message": f"{type(failure).__name__}: {failure}"}
        logging.getLogger(f"goondan.connector.{connection}").error("connector failed", exc_info=failure)
    else:
        # the connector finished on its own (e.g. cli at end of input): let its last replies arrive
        while ctx._pending and not control.done():
            await asyncio.wait({control}, timeout=0.05)
    ctx._fail_pending("the connector stopped")
    send({"type": "stopped", "reason": reason, **({"error": error} if error else {})})
    with contextlib.suppress(ConnectionError):
        await writer.drain()
    control.cancel()
    writer.close()
    return 0 if reason != "failed" else 1


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m goondan.connectors.host")
    parser.add_argument("--fd", type=int, required=True, help="socket file descriptor shared with the supervisor")
    parser.add_argument("--log-level", default="WARNING")
    args = parser.parse_args(argv)
    logging.basicConfig(level=args.log_level, stream=sys.stderr, format="%(levelname)s %(name)s: %(message)s")
    # Ctrl+C in the terminal reaches the whole process group: the supervisor decides when we stop.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    os.set_inheritable(args.fd, False)
    return asyncio.run(_serve(args.fd))


if __name__ == "__main__":
    raise SystemExit(main())
