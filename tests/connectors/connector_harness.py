"""Run a built-in connector's ``run(ctx)`` in-process, behind its real HTTP server on 127.0.0.1.

The connector gets a real :class:`ConnectorContext`; the test plays the supervisor's part: every
emitted event is recorded and answered at once with ``echo: <text>``. This is what ``gdn run``
does minus the agents, and it is fast enough to send many crafted requests.
"""

from __future__ import annotations

import asyncio
import importlib
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

from cn_testkit import free_port

from goondan.connectors import ConnectorContext, Reply
from goondan.executors.process._ipc import ConnectorEvent


@dataclass
class Running:
    url: str
    events: list[dict[str, Any]] = field(default_factory=list)
    messages: list[ConnectorEvent] = field(default_factory=list)
    ctx: ConnectorContext | None = None
    loop: asyncio.AbstractEventLoop | None = None

    def call(self, fn: Any, *args: Any) -> None:
        """Run ``fn(*args)`` on the connector's loop (feed it deltas and replies as the host would)."""
        assert self.loop is not None
        self.loop.call_soon_threadsafe(fn, *args)


@contextmanager
def running_connector(
    name: str,
    *,
    config: dict[str, str] | None = None,
    secrets: dict[str, str] | None = None,
    auto_reply: bool = True,
) -> Iterator[Running]:
    """``auto_reply=False``: events are only recorded; the test answers them through ``state.call``."""
    module = importlib.import_module(f"goondan.base.connectors.{name}")
    port = free_port()
    settings = {"port": str(port), **(config or {})}
    state = Running(url=f"http://127.0.0.1:{port}/")
    loop = asyncio.new_event_loop()
    ready = threading.Event()
    holder: dict[str, ConnectorContext] = {}

    def send(message: ConnectorEvent) -> None:
        event = message.event
        state.events.append(event)
        state.messages.append(message)
        if auto_reply:
            text = event["message"].get("text", "")
            loop.call_soon(holder["ctx"]._resolve, message.id, Reply(f"echo: {text}", "stop"))

    ctx = ConnectorContext(
        connection="test", connector=name, config=settings, secrets=secrets or {}, send=send, on_ready=ready.set
    )
    holder["ctx"] = ctx
    state.ctx, state.loop = ctx, loop
    task_box: dict[str, asyncio.Task[None]] = {}

    def main() -> None:
        asyncio.set_event_loop(loop)
        task_box["task"] = loop.create_task(module.run(ctx))
        try:
            loop.run_until_complete(task_box["task"])
        except (asyncio.CancelledError, Exception):
            pass
        finally:
            ready.set()

    thread = threading.Thread(target=main, daemon=True)
    thread.start()
    assert ready.wait(10), "connector did not become ready"
    try:
        yield state
    finally:
        loop.call_soon_threadsafe(lambda: task_box["task"].cancel())
        thread.join(10)
        loop.close()
