"""A small HTTP/1.1 server on 127.0.0.1 that plays a provider's wire protocol for the SDK tests.

It runs its own asyncio loop in a thread (the SDK under test runs in the test's loop), records every
request (method, path, headers, JSON body), counts TCP connections opened and closed by the client,
and answers with scripted replies: JSON bodies, Server-Sent Events written as separate chunks (with
optional pauses between them), arbitrary status codes and headers, or a stall that never answers.
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
import threading
import time
from collections.abc import Callable
from typing import Any
from urllib.parse import parse_qs, urlsplit


@dataclasses.dataclass
class Req:
    method: str
    path: str
    query: dict[str, list[str]]
    headers: dict[str, str]
    body: bytes
    at: float

    @property
    def json(self) -> Any:
        return json.loads(self.body)


@dataclasses.dataclass
class Reply:
    status: int = 200
    body: Any = None  # dict/list -> JSON; bytes/str -> as is
    headers: dict[str, str] = dataclasses.field(default_factory=dict)
    sse: list[Any] | None = None  # events: dict -> "data: <json>", str -> written verbatim
    chunk_delay: float = 0.0
    stall_before: float = 0.0  # seconds to wait before the status line (a slow server)
    stall_after_chunks: int | None = None  # stop sending (but keep the connection) after N events


Handler = Callable[[Req], Reply]


def sse_event(data: Any, event: str | None = None) -> str:
    head = f"event: {event}\n" if event else ""
    payload = data if isinstance(data, str) else json.dumps(data)
    return f"{head}data: {payload}\n\n"


class FakeServer:
    def __init__(self, handler: Handler) -> None:
        self.handler = handler
        self.requests: list[Req] = []
        self.opened = 0
        self.closed_by_client = 0
        self._loop = asyncio.new_event_loop()
        self._ready = threading.Event()
        self._server: asyncio.base_events.Server | None = None
        self._thread = threading.Thread(target=self._run, daemon=True)
        self.port = 0

    # --- lifecycle ---------------------------------------------------------------------------

    def __enter__(self) -> FakeServer:
        self._thread.start()
        self._ready.wait(5)
        return self

    def __exit__(self, *exc: object) -> None:
        async def shutdown() -> None:
            if self._server is not None:
                self._server.close()
            for task in asyncio.all_tasks():
                if task is not asyncio.current_task():
                    task.cancel()

        asyncio.run_coroutine_threadsafe(shutdown(), self._loop).result(5)
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(5)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def _run(self) -> None:
        asyncio.set_event_loop(self._loop)

        async def start() -> None:
            self._server = await asyncio.start_server(self._serve, "127.0.0.1", 0)
            self.port = self._server.sockets[0].getsockname()[1]
            self._ready.set()

        self._loop.run_until_complete(start())
        self._loop.run_forever()

    def wait_for(self, predicate: Callable[[], bool], timeout: float = 5.0) -> bool:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if predicate():
                return True
            time.sleep(0.01)
        return predicate()

    # --- HTTP ------------------------------------------------------------------------------------

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.opened += 1
        try:
            while True:
                head = await reader.readuntil(b"\r\n\r\n")
                lines = head.decode("latin-1").split("\r\n")
                method, target, _ = lines[0].split(" ", 2)
                headers: dict[str, str] = {}
                for line in lines[1:]:
                    if ":" in line:
                        name, value = line.split(":", 1)
                        headers[name.strip().lower()] = value.strip()
                body = await reader.readexactly(int(headers.get("content-length", "0") or 0))
                parts = urlsplit(target)
                req = Req(method, parts.path, parse_qs(parts.query), headers, body, time.monotonic())
                self.requests.append(req)
                reply = self.handler(req)
                if not await self._respond(reply, writer, reader):
                    return
        except (asyncio.IncompleteReadError, ConnectionError):
            self.closed_by_client += 1
        except asyncio.CancelledError:
            pass
        finally:
            writer.close()

    async def _respond(self, reply: Reply, writer: asyncio.StreamWriter, reader: asyncio.StreamReader) -> bool:
        if reply.stall_before:
            await asyncio.sleep(reply.stall_before)
        status_line = f"HTTP/1.1 {reply.status} X\r\n"
        headers = {k.lower(): v for k, v in reply.headers.items()}
        if reply.sse is None:
            body = reply.body
            if isinstance(body, dict | list):
                data = json.dumps(body).encode()
                headers.setdefault("content-type", "application/json")
            elif isinstance(body, str):
                data = body.encode()
            else:
                data = body or b""
            headers["content-length"] = str(len(data))
            writer.write((status_line + _fmt(headers)).encode() + data)
            await writer.drain()
            return True
        headers.setdefault("content-type", "text/event-stream")
        headers["transfer-encoding"] = "chunked"
        writer.write((status_line + _fmt(headers)).encode())
        await writer.drain()
        for index, event in enumerate(reply.sse):
            if reply.stall_after_chunks is not None and index >= reply.stall_after_chunks:
                # keep the connection open and silent until the client gives up on it
                if await reader.read(1) == b"":
                    self.closed_by_client += 1
                return False
            if reply.chunk_delay:
                await asyncio.sleep(reply.chunk_delay)
            text = event if isinstance(event, str) else sse_event(event)
            data = text.encode()
            writer.write(f"{len(data):x}\r\n".encode() + data + b"\r\n")
            await writer.drain()
        writer.write(b"0\r\n\r\n")
        await writer.drain()
        return True


def _fmt(headers: dict[str, str]) -> str:
    return "".join(f"{k}: {v}\r\n" for k, v in headers.items()) + "\r\n"
