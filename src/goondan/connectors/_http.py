"""A small HTTP/1.1 server and client on the standard library, for connectors.

Connectors receive webhooks from a handful of well-behaved senders (Slack, GitHub, Discord, curl), so
a strict subset suffices: ``Content-Length`` bodies up to :data:`MAX_BODY`, one request per
connection. Keeping it in the standard library means a connector process starts fast and the base
install needs no web framework.
"""

from __future__ import annotations

import asyncio
import json
import logging
import urllib.error
import urllib.request
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import parse_qs, urlsplit

MAX_BODY = 1 << 20
MAX_HEADER_LINES = 100
_REASONS = {
    200: "OK",
    202: "Accepted",
    204: "No Content",
    400: "Bad Request",
    401: "Unauthorized",
    403: "Forbidden",
    404: "Not Found",
    405: "Method Not Allowed",
    409: "Conflict",
    411: "Length Required",
    413: "Payload Too Large",
    500: "Internal Server Error",
    503: "Service Unavailable",
}
log = logging.getLogger("goondan.connectors.http")


@dataclass
class HttpRequest:
    method: str
    target: str
    headers: dict[str, str]  # lower-cased names
    body: bytes

    @property
    def path(self) -> str:
        return urlsplit(self.target).path or "/"

    @property
    def query(self) -> dict[str, list[str]]:
        return parse_qs(urlsplit(self.target).query)

    def header(self, name: str) -> str | None:
        return self.headers.get(name.lower())

    def json(self) -> Any:
        return json.loads(self.body.decode("utf-8"))


@dataclass
class HttpResponse:
    status: int = 200
    body: bytes = b""
    headers: dict[str, str] = field(default_factory=dict)

    @classmethod
    def json(cls, status: int, payload: Any) -> HttpResponse:
        return cls(status, json.dumps(payload).encode("utf-8"), {"Content-Type": "application/json"})

    @classmethod
    def text(cls, status: int, text: str) -> HttpResponse:
        return cls(status, text.encode("utf-8"), {"Content-Type": "text/plain; charset=utf-8"})


Handler = Callable[[HttpRequest], Awaitable[HttpResponse]]


async def _read_request(reader: asyncio.StreamReader) -> HttpRequest | HttpResponse:
    line = await reader.readline()
    parts = line.decode("latin-1").strip().split()
    if len(parts) != 3 or not parts[2].startswith("HTTP/"):
        return HttpResponse.text(400, "bad request line")
    headers: dict[str, str] = {}
    for _ in range(MAX_HEADER_LINES):
        raw = await reader.readline()
        if raw in (b"\r\n", b"\n", b""):
            break
        name, _, value = raw.decode("latin-1").partition(":")
        headers[name.strip().lower()] = value.strip()
    else:
        return HttpResponse.text(400, "too many headers")
    if "chunked" in headers.get("transfer-encoding", "").lower():
        return HttpResponse.text(411, "chunked bodies are not supported; send Content-Length")
    try:
        length = int(headers.get("content-length", "0"))
    except ValueError:
        return HttpResponse.text(400, "bad Content-Length")
    if length < 0 or length > MAX_BODY:
        return HttpResponse.text(413, "body too large")
    body = await reader.readexactly(length) if length else b""
    return HttpRequest(parts[0].upper(), parts[1], headers, body)


def _encode(response: HttpResponse) -> bytes:
    reason = _REASONS.get(response.status, "Status")
    head = [f"HTTP/1.1 {response.status} {reason}"]
    headers = {"Content-Length": str(len(response.body)), "Connection": "close", **response.headers}
    head.extend(f"{k}: {v}" for k, v in headers.items())
    return ("\r\n".join(head) + "\r\n\r\n").encode("latin-1") + response.body


async def serve_http(handler: Handler, host: str = "127.0.0.1", port: int = 8080) -> asyncio.Server:
    """Start serving ``handler`` on ``host:port``; errors in the handler become 500 responses."""

    async def on_client(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            parsed = await asyncio.wait_for(_read_request(reader), timeout=30)
            if isinstance(parsed, HttpResponse):
                response = parsed
            else:
                try:
                    response = await handler(parsed)
                except Exception:
                    log.exception("connector HTTP handler failed")
                    response = HttpResponse.json(500, {"ok": False, "error": "internal error"})
            writer.write(_encode(response))
            await writer.drain()
        except (TimeoutError, asyncio.IncompleteReadError, ConnectionError):
            pass
        finally:
            writer.close()
            try:
                await writer.wait_closed()
            except ConnectionError:
                pass

    return await asyncio.start_server(on_client, host, port)


@dataclass
class ClientResponse:
    status: int
    headers: dict[str, str]
    body: bytes

    def json(self) -> Any:
        return json.loads(self.body.decode("utf-8")) if self.body else None


def _request_sync(
    method: str, url: str, body: bytes | None, headers: Mapping[str, str], timeout: float
) -> ClientResponse:
    req = urllib.request.Request(url, data=body, method=method, headers=dict(headers))
    host = urlsplit(url).hostname or ""
    # loopback targets (tests, local gateways) never go through an environment proxy
    handlers = [urllib.request.ProxyHandler({})] if host in ("127.0.0.1", "localhost", "::1") else []
    opener = urllib.request.build_opener(*handlers)
    try:
        with opener.open(req, timeout=timeout) as resp:
            return ClientResponse(resp.status, {k.lower(): v for k, v in resp.headers.items()}, resp.read())
    except urllib.error.HTTPError as exc:
        return ClientResponse(exc.code, {k.lower(): v for k, v in exc.headers.items()}, exc.read())


async def http_request(
    method: str,
    url: str,
    *,
    json_body: Any = None,
    headers: Mapping[str, str] | None = None,
    timeout: float = 30.0,
) -> ClientResponse:
    """One HTTP request in a worker thread; HTTP error statuses are returned, network errors raise OSError."""
    all_headers = dict(headers or {})
    body = None
    if json_body is not None:
        body = json.dumps(json_body).encode("utf-8")
        all_headers.setdefault("Content-Type", "application/json; charset=utf-8")
    return await asyncio.to_thread(_request_sync, method, url, body, all_headers, timeout)


__all__ = ["ClientResponse", "Handler", "HttpRequest", "HttpResponse", "http_request", "serve_http"]
