"""A small HTTP/1.1 server and client on the standard library, for connectors.

Connectors receive webhooks from a handful of well-behaved senders (Slack, GitHub, Discord, curl), so
a strict subset suffices: ``Content-Length`` bodies up to :data:`MAX_BODY`, one request per
connection. The port is still reachable by anyone, so everything else (oversized, malformed or slow
requests) is refused with the status a real server would send, logged in one line, without
disturbing other clients. Keeping it in the standard library means a connector process starts fast and the base
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

from ._http_read import MAX_BODY, MAX_LINE, Rejected, read_request

# seconds a client has to send a whole request, and how long a refused one may keep sending
READ_TIMEOUT = 30.0
LINGER_SECONDS = 2.0
LINGER_BYTES = 4 << 20
MAX_CONNECTIONS = 256
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
    408: "Request Timeout",
    411: "Length Required",
    413: "Payload Too Large",
    414: "URI Too Long",
    431: "Request Header Fields Too Large",
    500: "Internal Server Error",
    503: "Service Unavailable",
    505: "HTTP Version Not Supported",
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


def _encode(response: HttpResponse) -> bytes:
    reason = _REASONS.get(response.status, "Status")
    head = [f"HTTP/1.1 {response.status} {reason}"]
    headers = {"Content-Length": str(len(response.body)), "Connection": "close", **response.headers}
    head.extend(f"{k}: {v}" for k, v in headers.items())
    return ("\r\n".join(head) + "\r\n\r\n").encode("latin-1") + response.body


def _peer(writer: asyncio.StreamWriter) -> str:
    peer = writer.get_extra_info("peername")
    if isinstance(peer, tuple) and len(peer) >= 2:
        return f"{peer[0]}:{peer[1]}"
    return str(peer or "?")


async def _linger(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    """After refusing a request, half-close and swallow what the client still sends, briefly.

    Closing a socket with unread input makes the kernel answer with a reset, which can destroy the
    refusal before the client reads it (a client still uploading a too-large body would see
    "connection reset" instead of 413). Real servers linger the same way.
    """
    try:
        if writer.can_write_eof():
            writer.write_eof()
        deadline = asyncio.get_running_loop().time() + LINGER_SECONDS
        drained = 0
        while drained < LINGER_BYTES:
            left = deadline - asyncio.get_running_loop().time()
            if left <= 0:
                return
            chunk = await asyncio.wait_for(reader.read(65536), left)
            if not chunk:
                return
            drained += len(chunk)
    except (TimeoutError, ConnectionError, OSError):
        return


async def serve_http(
    handler: Handler,
    host: str = "127.0.0.1",
    port: int = 8080,
    *,
    read_timeout: float = READ_TIMEOUT,
    max_body: int = MAX_BODY,
    max_connections: int = MAX_CONNECTIONS,
) -> asyncio.Server:
    """Start serving ``handler`` on ``host:port``; errors in the handler become 500 responses.

    A request must arrive whole within ``read_timeout`` seconds (else 408); what cannot be read
    safely gets the matching 4xx (see :mod:`goondan.connectors._http_read`) and one warning line in
    the log. Beyond ``max_connections`` open connections new ones get 503 at once, so slow clients
    cannot starve the others.
    """
    open_connections = 0

    async def refuse(reader: asyncio.StreamReader, writer: asyncio.StreamWriter, status: int, detail: str) -> None:
        log.warning("refused a request from %s with %d: %s", _peer(writer), status, detail)
        writer.write(_encode(HttpResponse.text(status, detail)))
        await writer.drain()
        await _linger(reader, writer)

    async def send_continue_for(writer: asyncio.StreamWriter) -> None:
        writer.write(b"HTTP/1.1 100 Continue\r\n\r\n")
        await writer.drain()

    async def on_client(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        nonlocal open_connections
        open_connections += 1
        try:
            if open_connections > max_connections:
                await refuse(reader, writer, 503, f"more than {max_connections} open connections")
                return
            try:
                raw = await asyncio.wait_for(
                    read_request(reader, max_body=max_body, send_continue=lambda: send_continue_for(writer)),
                    timeout=read_timeout,
                )
            except Rejected as exc:
                await refuse(reader, writer, exc.status, exc.detail)
                return
            except TimeoutError:
                await refuse(reader, writer, 408, f"request not received within {read_timeout:g}s")
                return
            except asyncio.IncompleteReadError:
                log.info("client %s hung up before sending a whole request", _peer(writer))
                return
            if raw is None:
                return
            request = HttpRequest(raw.method, raw.target, raw.headers, raw.body)
            try:
                response = await handler(request)
            except Exception:
                log.exception("connector HTTP handler failed")
                response = HttpResponse.json(500, {"ok": False, "error": "internal error"})
            writer.write(_encode(response))
            await writer.drain()
        except (ConnectionError, OSError) as exc:
            log.info("client %s went away: %s", _peer(writer), type(exc).__name__)
        finally:
            open_connections -= 1
            writer.close()
            try:
                await writer.wait_closed()
            except (ConnectionError, OSError):
                pass

    # the stream limit bounds one line (request line, header line) before readuntil gives up
    return await asyncio.start_server(on_client, host, port, limit=MAX_LINE)


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
