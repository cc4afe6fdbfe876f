"""A small HTTP/1.1 server on 127.0.0.1 that plays a provider's wire protocol for the SDK tests.

It runs its own asyncio loop in a thread (the SDK under test runs in the test's loop), records every
request (method, path, headers, JSON body), counts TCP connections opened and closed by the client,
and answers with scripted replies: JSON bodies, Server-Sent Events written as separate chunks (with
optional pauses between them), arbitrary status codes and headers, or a stall that never answers.
:class:`ThinkingMessagesAPI` plays Anthropic's Messages API with extended thinking on top of it.
"""

from __future__ import annotations

import asyncio
import base64
import dataclasses
import hashlib
import json
import threading
import time
from collections.abc import Callable, Iterator
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
    pauses: dict[int, float] = dataclasses.field(default_factory=dict)  # event index -> seconds to wait before it
    before_event: Callable[[int], None] | None = None  # called right before event i is written (timing probes)


Handler = Callable[[Req], Reply]


def openai_text(text: str, model: str = "served") -> Reply:
    """An OpenAI chat completion whose answer is ``text``."""
    message = {"role": "assistant", "content": text}
    return Reply(
        body={
            "id": "c",
            "object": "chat.completion",
            "created": 1,
            "model": model,
            "choices": [{"index": 0, "message": message, "finish_reason": "stop"}],
            "usage": {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2},
        }
    )


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
            if index in reply.pauses:
                await asyncio.sleep(reply.pauses[index])
            if reply.before_event is not None:
                reply.before_event(index)
            text = event if isinstance(event, str) else sse_event(event)
            data = text.encode()
            writer.write(f"{len(data):x}\r\n".encode() + data + b"\r\n")
            await writer.drain()
        writer.write(b"0\r\n\r\n")
        await writer.drain()
        return True


def _fmt(headers: dict[str, str]) -> str:
    return "".join(f"{k}: {v}\r\n" for k, v in headers.items()) + "\r\n"


# --- the Anthropic Messages API with extended thinking ------------------------------------------

THINKING_TYPES = ("thinking", "redacted_thinking")


def thinking_block(text: str) -> dict[str, Any]:
    """A thinking block as the API returns it: the signature is opaque to clients, here a digest the
    fake can check (the API rejects any block whose text or signature was changed)."""
    return {"type": "thinking", "thinking": text, "signature": _sign(text)}


def redacted_thinking_block(data: str) -> dict[str, Any]:
    return {"type": "redacted_thinking", "data": data}


def _sign(text: str) -> str:
    return base64.b64encode(hashlib.sha256(b"fake-anthropic:" + text.encode()).digest() * 4).decode()


def anthropic_message(content: list[dict[str, Any]], *, msg_id: str = "msg_1") -> dict[str, Any]:
    calls = any(block["type"] == "tool_use" for block in content)
    return {
        "id": msg_id,
        "type": "message",
        "role": "assistant",
        "model": "test-model",
        "content": content,
        "stop_reason": "tool_use" if calls else "end_turn",
        "stop_sequence": None,
        "usage": {"input_tokens": 20, "output_tokens": 9},
    }


def anthropic_stream(message: dict[str, Any]) -> list[str]:
    """The SSE events the API sends for ``message``: text, thinking and tool input arrive in pieces,
    a thinking block's signature in one ``signature_delta`` just before its ``content_block_stop``,
    a redacted_thinking block whole in its ``content_block_start``."""

    def halves(text: str) -> list[str]:
        cut = len(text) // 2
        return [piece for piece in (text[:cut], text[cut:]) if piece]

    start = {**message, "content": [], "stop_reason": None, "usage": {**message["usage"], "output_tokens": 1}}
    events = [
        sse_event({"type": "message_start", "message": start}, "message_start"),
        sse_event({"type": "ping"}, "ping"),
    ]
    for index, block in enumerate(message["content"]):
        deltas: list[dict[str, Any]] = []
        opening: dict[str, Any]
        if block["type"] == "text":
            opening = {"type": "text", "text": ""}
            deltas = [{"type": "text_delta", "text": piece} for piece in halves(block["text"])]
        elif block["type"] == "thinking":
            opening = {"type": "thinking", "thinking": "", "signature": ""}
            deltas = [{"type": "thinking_delta", "thinking": piece} for piece in halves(block["thinking"])]
            deltas.append({"type": "signature_delta", "signature": block["signature"]})
        elif block["type"] == "tool_use":
            opening = {**block, "input": {}}
            deltas = [{"type": "input_json_delta", "partial_json": p} for p in halves(json.dumps(block["input"]))]
        else:
            opening = block
        events.append(
            sse_event({"type": "content_block_start", "index": index, "content_block": opening}, "content_block_start")
        )
        for delta in deltas:
            events.append(
                sse_event({"type": "content_block_delta", "index": index, "delta": delta}, "content_block_delta")
            )
        events.append(sse_event({"type": "content_block_stop", "index": index}, "content_block_stop"))
    events.append(
        sse_event(
            {
                "type": "message_delta",
                "delta": {"stop_reason": message["stop_reason"], "stop_sequence": None},
                "usage": {"output_tokens": message["usage"]["output_tokens"]},
            },
            "message_delta",
        )
    )
    events.append(sse_event({"type": "message_stop"}, "message_stop"))
    return events


class ThinkingMessagesAPI:
    """A Messages API handler that answers with scripted content lists (JSON, or SSE when the request
    streams) and checks requests the way the API does when extended thinking is on:

    - ``thinking.budget_tokens`` must be at least 1024 and below ``max_tokens``;
    - every thinking / redacted_thinking block sent must be one this server returned, unchanged;
    - in the final assistant turn (everything after the last user message that is not only tool
      results), if it used tools, the first assistant message must start with a thinking block.

    Violations get the API's 400 ``invalid_request_error``, and the scripted reply is not consumed.
    """

    def __init__(self, replies: list[list[dict[str, Any]]]) -> None:
        self.replies = list(replies)
        self.issued: list[dict[str, Any]] = []
        self.rejections: list[str] = []
        self.answered = 0

    def __call__(self, req: Req) -> Reply:
        body = req.json
        problem = self.problem(body)
        if problem is None and not self.replies:
            problem = "the fake has no scripted reply left"
        if problem is not None:
            self.rejections.append(problem)
            error = {"type": "error", "error": {"type": "invalid_request_error", "message": problem}}
            return Reply(400, error, {"request-id": f"req_fake_{len(self.rejections)}"})
        content = self.replies.pop(0)
        self.issued.extend(json.loads(json.dumps(b)) for b in content if b["type"] in THINKING_TYPES)
        self.answered += 1
        message = anthropic_message(content, msg_id=f"msg_{self.answered}")
        return Reply(sse=anthropic_stream(message)) if body.get("stream") else Reply(body=message)

    def problem(self, body: dict[str, Any]) -> str | None:
        thinking = body.get("thinking") or {}
        messages = body.get("messages") or []
        for i, message in enumerate(messages):
            for j, block in enumerate(_blocks(message)):
                if block.get("type") in THINKING_TYPES and block not in self.issued:
                    return f"messages.{i}.content.{j}: Invalid `signature` in `{block['type']}` block"
        if thinking.get("type") not in ("enabled", "adaptive"):
            return None
        if thinking.get("type") == "enabled":
            budget = thinking.get("budget_tokens")
            if not isinstance(budget, int) or budget < 1024 or budget >= body.get("max_tokens", 0):
                return "thinking.budget_tokens: must be at least 1024 and less than max_tokens"
        start = 0
        for i, message in enumerate(messages):
            if message["role"] == "user" and any(b.get("type") != "tool_result" for b in _blocks(message)):
                start = i + 1
        turn = [(i, m) for i, m in enumerate(messages[start:], start) if m["role"] == "assistant"]
        if not any(b.get("type") == "tool_use" for _, m in turn for b in _blocks(m)):
            return None
        first_index, first = turn[0]
        found = _blocks(first)[0].get("type")
        if found not in THINKING_TYPES:
            return (
                f"messages.{first_index}.content.0.type: Expected `thinking` or `redacted_thinking`, but found "
                f"`{found}`. When `thinking` is enabled, a final `assistant` message must start with a thinking "
                "block (preceding the lastmost set of `tool_use` and `tool_result` blocks)."
            )
        return None


def _blocks(message: dict[str, Any]) -> list[dict[str, Any]]:
    content = message.get("content")
    if isinstance(content, str):
        return [{"type": "text", "text": content}]
    return list(content or [])


# --- the Anthropic Messages API with prompt caching ---------------------------------------------

CACHE_LOOKBACK = 20  # blocks before a breakpoint at which the API still looks for a cached prefix
MAX_BREAKPOINTS = 4


def estimated_tokens(block: dict[str, Any]) -> int:
    """A block's size in tokens, estimated as the API-independent rule of thumb: 4 characters each."""
    return max(1, len(json.dumps(block, sort_keys=True, ensure_ascii=False)) // 4)


@dataclasses.dataclass
class CacheUse:
    """One answered request's token accounting, as ``usage`` reports it."""

    input_tokens: int  # after the last breakpoint and not read from the cache
    cache_creation_input_tokens: int
    cache_read_input_tokens: int

    @property
    def total(self) -> int:
        return self.input_tokens + self.cache_creation_input_tokens + self.cache_read_input_tokens

    @property
    def read_share(self) -> float:
        return self.cache_read_input_tokens / self.total if self.total else 0.0


class CachingMessagesAPI:
    """A Messages API handler that validates ``cache_control`` marks the way the API does and keeps
    a prompt cache with the API's semantics, so a test or benchmark can see what a real account
    would be billed.

    Rejected with the API's 400 ``invalid_request_error`` (documented limits and the messages the
    API gives for them): more than 4 marked blocks; a mark on a thinking / redacted_thinking block
    or on an empty text block; a mark on a whole message or inside a tool_result's content (marks go
    on top-level blocks only); a mark that is not ``{type: ephemeral[, ttl: 5m|1h]}``; a ``1h`` mark
    after a ``5m`` one in prefix order (tools, system, messages).

    The cache: the request is a sequence of blocks (tools, system, then each message's blocks); a
    prefix ending at a marked block is written when it holds at least ``min_tokens`` tokens; a
    request reads the longest cached prefix that ends at a marked block or at one of the
    ``CACHE_LOOKBACK - 1`` blocks before one. Prefixes are keyed by their exact content (marks
    excluded) and the model, as the API keys them. ``replies(body)`` returns the content blocks of
    the answer. ``uses`` holds one :class:`CacheUse` per answered request."""

    def __init__(self, replies: Callable[[dict[str, Any]], list[dict[str, Any]]], *, min_tokens: int = 1024) -> None:
        self.replies = replies
        self.min_tokens = min_tokens
        self.cache: set[str] = set()
        self.uses: list[CacheUse] = []
        self.rejections: list[str] = []

    def __call__(self, req: Req) -> Reply:
        body = req.json
        problem = cache_control_problem(body)
        if problem is not None:
            self.rejections.append(problem)
            error = {"type": "error", "error": {"type": "invalid_request_error", "message": problem}}
            return Reply(400, error, {"request-id": f"req_fake_{len(self.rejections)}"})
        use = self.account(body)
        self.uses.append(use)
        message = anthropic_message(self.replies(body), msg_id=f"msg_{len(self.uses)}")
        message["usage"] = {**dataclasses.asdict(use), "output_tokens": 9}
        return Reply(sse=anthropic_stream(message)) if body.get("stream") else Reply(body=message)

    def account(self, body: dict[str, Any]) -> CacheUse:
        blocks = list(_prefix_blocks(body))
        digest = hashlib.sha256(str(body.get("model")).encode())
        keys: list[str] = []
        ends: list[int] = []  # tokens up to and including block i
        marked: list[int] = []
        total = 0
        for i, (role, block) in enumerate(blocks):
            plain = {k: v for k, v in block.items() if k != "cache_control"}
            digest.update(json.dumps([role, plain], sort_keys=True).encode())
            keys.append(digest.hexdigest())
            total += estimated_tokens(plain)
            ends.append(total)
            if "cache_control" in block:
                marked.append(i)
        read = 0
        for at in marked:
            for i in range(at, max(-1, at - CACHE_LOOKBACK), -1):
                if keys[i] in self.cache:
                    read = max(read, ends[i])
                    break
        written = 0
        for at in marked:
            if ends[at] >= self.min_tokens:
                self.cache.add(keys[at])
                written = max(written, ends[at])
        creation = max(0, written - read)
        return CacheUse(total - read - creation, creation, read)


def _prefix_blocks(body: dict[str, Any]) -> Iterator[tuple[str, dict[str, Any]]]:
    """The request's blocks in the API's prefix order, each with what it belongs to (a new message's
    role starts a new message, so two messages never hash like one)."""
    for tool in body.get("tools") or []:
        yield "tool", tool
    system = body.get("system")
    for block in [{"type": "text", "text": system}] if isinstance(system, str) else system or []:
        yield "system", block
    for message in body.get("messages") or []:
        for j, block in enumerate(_blocks(message)):
            yield (f"{message['role']}:start" if j == 0 else message["role"]), block


def cache_control_problem(body: dict[str, Any]) -> str | None:
    """What the API would answer 400 for in ``body``'s cache_control marks, or ``None``."""
    marks: list[tuple[str, dict[str, Any], Any]] = []
    places: list[tuple[str, dict[str, Any]]] = [(f"tools.{i}", t) for i, t in enumerate(body.get("tools") or [])]
    system = body.get("system")
    if isinstance(system, list):
        places += [(f"system.{i}", b) for i, b in enumerate(system)]
    for i, message in enumerate(body.get("messages") or []):
        if "cache_control" in message:
            return f"messages.{i}.cache_control: Extra inputs are not permitted"
        content = message.get("content")
        for j, block in enumerate(content if isinstance(content, list) else []):
            places.append((f"messages.{i}.content.{j}", block))
            nested = block.get("content") if block.get("type") == "tool_result" else None
            for k, inner in enumerate(nested if isinstance(nested, list) else []):
                if "cache_control" in inner:
                    return f"messages.{i}.content.{j}.content.{k}.cache_control: Extra inputs are not permitted"
    for path, block in places:
        if "cache_control" in block:
            marks.append((path, block, block["cache_control"]))
    if len(marks) > MAX_BREAKPOINTS:
        return f"A maximum of {MAX_BREAKPOINTS} blocks with cache_control may be provided. Found {len(marks)}."
    longest_first = True
    for path, block, mark in marks:
        kind = block.get("type")
        if kind in THINKING_TYPES:
            return f"{path}.{kind}.cache_control: Extra inputs are not permitted"
        if kind == "text" and not block.get("text"):
            return "cache_control cannot be set for empty text blocks"
        if not isinstance(mark, dict) or mark.get("type") != "ephemeral":
            return f"{path}.cache_control.type: Input should be 'ephemeral'"
        if set(mark) - {"type", "ttl"} or mark.get("ttl", "5m") not in ("5m", "1h"):
            return f"{path}.cache_control: only type 'ephemeral' and ttl '5m' or '1h' are permitted"
        if mark.get("ttl") == "1h" and not longest_first:
            return (
                "a ttl='1h' cache_control block must not come after a ttl='5m' cache_control block "
                "(in the order tools, system, messages)"
            )
        longest_first = longest_first and mark.get("ttl") == "1h"
    return None
