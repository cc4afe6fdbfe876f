"""The connectors' webhook server (uvicorn + Starlette) and their HTTP client.

``serve_http(handler, host, port)`` serves a connector's ``async def handler(HttpRequest) ->
HttpResponse`` with uvicorn, run inside the connector host's own event loop (no threads, no
signal handlers of its own: the supervisor decides when a connector stops). The port is reachable
by anyone, so beyond what uvicorn and h11 already do (a real HTTP/1.1 parser, keep-alive,
pipelining, ``Expect: 100-continue``, chunked bodies) the server enforces:

- a body limit (:data:`MAX_BODY`) while the body is being read: an advertised ``Content-Length``
  over it is refused before a byte of body is read, a chunked body is cut off at the limit (413);
- limits on the head: request target (414), header count, header line and total head size (431);
- a read deadline per request against slow clients (408), see
  :mod:`goondan.connectors._http_protocol`;
- ``Content-Length`` together with ``Transfer-Encoding`` is refused (400): a request two parsers
  could read differently is how request smuggling starts;
- a cap on concurrent connections and requests (503).

The handler sees the exact bytes of the body, which signature checks need. Every refusal is one
warning line in ``goondan.connectors.http`` and a JSON answer ``{"ok": false, "reason", "error"}``
(:func:`~goondan.connectors._http_protocol.refusal_body`); an exception in a handler is a 500
without details. A handler may answer with a body it produces as it goes
(:meth:`HttpResponse.event_stream`, Server-Sent Events): each chunk is written when yielded, flow
control holds the producer while the client reads slowly, and a client that hangs up cancels it.
"""

from __future__ import annotations

import asyncio
import contextlib
import errno
import json
import logging
import re
import socket
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any
from urllib.parse import parse_qs, urlsplit

from .._http_client import ClientResponse, request
from ..errors import GoondanError

if TYPE_CHECKING:
    import uvicorn
    from starlette.types import Receive, Scope, Send

MAX_LINE = 8192
MAX_HEADER_LINES = 100
MAX_HEADER_BYTES = 32 * 1024
MAX_BODY = 1 << 20
READ_TIMEOUT = 30.0
KEEP_ALIVE_SECONDS = 5.0
SHUTDOWN_GRACE_SECONDS = 3.0
MAX_CONNECTIONS = 256
log = logging.getLogger("goondan.connectors.http")
_SURROGATE_ESCAPE = re.compile(rb"\\u[dD][89a-fA-F]")


@dataclass
class HttpRequest:
    method: str
    target: str
    headers: dict[str, str]  # lower-cased names; repeated headers joined with ", "
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
        """The body as JSON; ``ValueError`` (the connectors' 400) for one that is not JSON, not UTF-8,
        or nested deeper than Python's decoder recurses: ``[[[[...`` from a client is its error, it
        was a RecursionError, a 500 ``internal_error`` with a traceback in the log."""
        try:
            data = json.loads(self.body.decode("utf-8"))
        except RecursionError:
            raise ValueError("it is nested too deeply") from None
        # a lone surrogate (`"\ud800"`) is valid JSON but not Unicode text: it passed, and the event
        # failed to encode on its way to the agent, a 500 internal_error with a traceback in the log.
        # Only a \uD8.. - \uDF.. escape can make one (UTF-8 cannot), so only then is it looked for.
        if _SURROGATE_ESCAPE.search(self.body) is not None:
            try:
                json.dumps(data, ensure_ascii=False).encode("utf-8")
            except UnicodeEncodeError:
                raise ValueError(
                    "a string in it holds a lone UTF-16 surrogate (\\uD800-\\uDFFF), not Unicode text"
                ) from None
        return data


@dataclass
class HttpResponse:
    status: int = 200
    body: bytes = b""
    headers: dict[str, str] = field(default_factory=dict)
    stream: AsyncIterator[bytes] | None = None
    """When set, the body (instead of ``body``): chunks written as they are yielded. A client that
    hangs up cancels the iterator where it waits, so its ``finally`` runs."""
    on_open: Callable[[Callable[[bytes], bool]], None] | None = None
    """With ``stream``: called before the answer starts with ``write(chunk) -> bool``, which writes a
    body chunk at once, from any callback, and returns ``False`` when it cannot (head not out yet,
    client slow or gone), leaving the chunk to the caller. ``write`` knows nothing of ``stream``: the
    caller uses it only while the iterator waits with nothing pending, or chunks would overtake it."""

    @classmethod
    def event_stream(
        cls,
        events: AsyncIterator[bytes],
        status: int = 200,
        *,
        on_open: Callable[[Callable[[bytes], bool]], None] | None = None,
    ) -> HttpResponse:
        """A ``text/event-stream`` answer (Server-Sent Events) whose events ``events`` yields, already
        encoded. Caches and proxies are told not to hold it back (``no-cache``, ``X-Accel-Buffering``).
        ``on_open``: see the field (what lets a producer skip a loop iteration per event)."""
        headers = {
            "Content-Type": "text/event-stream; charset=utf-8",
            "Cache-Control": "no-cache",
            "X-Accel-Buffering": "no",
        }
        return cls(status, b"", headers, events, on_open)

    @classmethod
    def json(cls, status: int, payload: Any) -> HttpResponse:
        return cls(status, json.dumps(payload).encode("utf-8"), {"Content-Type": "application/json"})

    @classmethod
    def refusal(cls, status: int, reason: str, error: str, headers: Mapping[str, str] | None = None) -> HttpResponse:
        """A refused request: ``{"ok": false, "reason": <code>, "error": <what was wrong>}``, the shape
        the server's own refusals (413, 408, ...) have, so a client reads ``reason`` for what to do
        and ``error`` for a person, whichever layer refused it (a failed turn is not a refusal: its
        ``error`` is the turn's ``{"code", "message"}``)."""
        body = json.dumps({"ok": False, "reason": reason, "error": error}).encode("utf-8")
        return cls(status, body, {"Content-Type": "application/json", **(headers or {})})

    @classmethod
    def text(cls, status: int, text: str) -> HttpResponse:
        return cls(status, text.encode("utf-8"), {"Content-Type": "text/plain; charset=utf-8"})


Handler = Callable[[HttpRequest], Awaitable[HttpResponse]]


def wrong_route(req: HttpRequest, path: str) -> HttpResponse | None:
    """The refusal a webhook connector serving ``POST path`` answers first: 404 ``not_found`` for
    another path (which is not named: an obscure path may be part of the secret), 405
    ``method_not_allowed`` (with ``Allow: POST``) for another method; ``None`` when neither."""
    # '/hook', '/hook/' and 'hook' are one path: a Connection's config and its callers spell it every
    # way ('hook' in github's, slack's or discord's config made every request a 404)
    if "/" + req.path.strip("/") != "/" + path.strip().strip("/"):
        return HttpResponse.refusal(404, "not_found", "nothing is served at this path")
    if req.method != "POST":
        return HttpResponse.refusal(405, "method_not_allowed", "use POST", {"Allow": "POST"})
    return None


def _head_refusal(scope: Scope, max_body: int) -> tuple[int, str] | None:
    """What is wrong with the request head, as ``(status, detail)``, or ``None``."""
    if not str(scope.get("http_version", "1.1")).startswith("1."):
        return 505, f"unsupported version HTTP/{scope.get('http_version')}"
    raw_target = scope.get("raw_path", b"") + (b"?" + scope["query_string"] if scope.get("query_string") else b"")
    if len(raw_target) > MAX_LINE:
        return 414, f"request target longer than {MAX_LINE} bytes"
    headers: list[tuple[bytes, bytes]] = scope["headers"]
    if len(headers) > MAX_HEADER_LINES:
        return 431, f"more than {MAX_HEADER_LINES} header lines"
    sizes = [len(name) + len(value) + 4 for name, value in headers]
    if any(size > MAX_LINE for size in sizes):
        return 431, f"a header line longer than {MAX_LINE} bytes"
    if sum(sizes) > MAX_HEADER_BYTES:
        return 431, f"headers larger than {MAX_HEADER_BYTES} bytes"
    names = {name for name, _ in headers}
    if b"transfer-encoding" in names and b"content-length" in names:
        return 400, "both Content-Length and Transfer-Encoding"
    length = next((value for name, value in headers if name == b"content-length"), b"")
    if length.isdigit() and int(length) > max_body:
        return 413, f"body of {int(length)} bytes is over the {max_body}-byte limit"
    return None


def _asgi_app(handler: Handler, max_body: int) -> Callable[[Scope, Receive, Send], Awaitable[None]]:
    """One ASGI app for the whole port: connectors route by path themselves (404/405 are theirs)."""
    from starlette.requests import ClientDisconnect, Request
    from starlette.responses import Response, StreamingResponse

    from ._http_protocol import body_writer, refusal_body

    def refuse(status: int, detail: str) -> Response:
        # closing (lingering while the client still sends, see _http_protocol): a refused request
        # says nothing good about the rest of the connection
        body = refusal_body(status, detail)
        return Response(body, status, media_type="application/json", headers={"Connection": "close"})

    async def app(scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            return
        client = scope.get("client")
        peer = f"{client[0]}:{client[1]}" if client else "?"
        refusal = _head_refusal(scope, max_body)
        if refusal is not None:
            log.warning("refused a request from %s with %d: %s", peer, *refusal)
            await refuse(*refusal)(scope, receive, send)
            return
        request = Request(scope, receive)
        body = bytearray()
        try:
            async for chunk in request.stream():
                body += chunk
                if len(body) > max_body:
                    detail = f"body over the {max_body}-byte limit"
                    log.warning("refused a request from %s with 413: %s", peer, detail)
                    await refuse(413, detail)(scope, receive, send)
                    return
        except ClientDisconnect:
            log.info("client %s hung up before sending its whole body", peer)
            return
        target = scope.get("raw_path", b"").decode("latin-1")
        if scope.get("query_string"):
            target += "?" + scope["query_string"].decode("latin-1")
        headers: dict[str, str] = {}
        for raw_name, raw_value in scope["headers"]:
            name, value = raw_name.decode("latin-1").lower(), raw_value.decode("latin-1")
            headers[name] = f"{headers[name]}, {value}" if name in headers else value
        try:
            response = await handler(HttpRequest(scope["method"], target, headers, bytes(body)))
        except Exception:
            log.exception("connector HTTP handler failed")
            response = HttpResponse.refusal(500, "internal_error", "internal error")
        if response.stream is not None:
            streamed = StreamingResponse(response.stream, response.status, headers=response.headers)
            if response.on_open is not None:
                write = body_writer(send)
                if write is not None:
                    response.on_open(write)
            try:
                await streamed(scope, receive, send)
            except ClientDisconnect:
                log.info("client %s hung up during a streamed answer", peer)
            finally:
                # a hang-up while a chunk was being written leaves the generator at its yield
                aclose = getattr(response.stream, "aclose", None)
                if aclose is not None:
                    await aclose()
            return
        out = Response(response.body, response.status, headers=response.headers)
        await out(scope, receive, send)

    return app


class HttpServer:
    """A running webhook server; ``async with`` it (or :meth:`close` + :meth:`wait_closed`) to stop.

    Shaped like :class:`asyncio.Server` where connectors use it (``sockets``, ``close``,
    ``wait_closed``, ``async with``). Stopping lets requests in flight finish for up to
    :data:`SHUTDOWN_GRACE_SECONDS`, then cancels them.
    """

    def __init__(self, server: uvicorn.Server, sock: socket.socket, task: asyncio.Task[None]) -> None:
        self._server = server
        self._task = task
        self.sockets = [sock]

    @property
    def port(self) -> int:
        return int(self.sockets[0].getsockname()[1])

    def close(self) -> None:
        self._server.should_exit = True

    async def wait_closed(self) -> None:
        await asyncio.shield(self._task)

    async def serve_forever(self) -> None:
        await asyncio.shield(self._task)

    async def __aenter__(self) -> HttpServer:
        return self

    async def __aexit__(self, *exc: object) -> None:
        self.close()
        with contextlib.suppress(asyncio.CancelledError):
            await self.wait_closed()


def _ingress_modules() -> tuple[Any, Any]:
    try:
        import starlette  # noqa: F401
        import uvicorn

        from . import _http_protocol
    except ImportError as exc:
        from ..errors import GoondanError

        raise GoondanError(
            "E_CONNECTOR_DEPENDENCY",
            f"webhook connectors need uvicorn and starlette, which are not installed ({exc.name})",
            suggestion="Install them into goondan's environment: pip install uvicorn starlette.",
        ) from None
    return uvicorn, _http_protocol


class PortInUseError(GoondanError, OSError):
    """The port is taken: a :class:`GoondanError` saying what to change, and still the ``OSError``
    that callers of :func:`serve_http` have always been able to catch."""


class ListenConfigError(GoondanError, OSError):
    """``config.host`` / ``config.port`` that cannot be listened on as written (a misspelt host
    name, an address of another machine, a privileged port): ``E_CONNECTOR_CONFIG``, a config
    error (exit 3), still an ``OSError`` for callers of :func:`serve_http`."""


_HOST_HINT = (
    "config.host is the address to listen on: 127.0.0.1 (this machine only), 0.0.0.0 (every interface) "
    "or a name or address of this machine."
)


_NAME_ERRORS = frozenset(
    getattr(socket, name) for name in ("EAI_NONAME", "EAI_AGAIN", "EAI_FAIL", "EAI_NODATA") if hasattr(socket, name)
)


def _listen_problem(exc: OSError, host: str, port: int) -> ListenConfigError | None:
    """The bind failure said in the Connection's terms; None for one that is not the config's
    (the bare OSError read 'Cannot assign requested address (while attempting to bind on ...)')."""
    # socket.create_server re-raises a bind failure as a plain OSError, a name lookup's included
    if isinstance(exc, socket.gaierror) or exc.errno in _NAME_ERRORS:
        message, hint = f"cannot listen on {host}:{port}: the host name {host!r} does not resolve", _HOST_HINT
    elif exc.errno == errno.EADDRNOTAVAIL:
        message, hint = f"cannot listen on {host}:{port}: {host} is not an address of this machine", _HOST_HINT
    elif exc.errno == errno.EACCES:
        message = f"cannot listen on port {port} of {host}: ports below 1024 need privileges"
        hint = "Use config.port 1024 or above (8080), with a reverse proxy in front for port 80 or 443."
    else:
        return None
    return ListenConfigError("E_CONNECTOR_CONFIG", message, suggestion=hint)


async def serve_http(
    handler: Handler,
    host: str = "127.0.0.1",
    port: int = 8080,
    *,
    read_timeout: float = READ_TIMEOUT,
    max_body: int = MAX_BODY,
    max_connections: int = MAX_CONNECTIONS,
) -> HttpServer:
    """Start serving ``handler`` on ``host:port`` (``0`` picks a free port, see ``server.port``).

    The port is bound before this returns, so a port in use is an ``OSError`` here, at start
    (:class:`PortInUseError`, which names the port and what to change).
    """
    uvicorn, protocol = _ingress_modules()
    try:
        sock = socket.create_server((host, port), family=socket.AF_INET6 if ":" in host else socket.AF_INET)
    except OSError as exc:
        if exc.errno == errno.EADDRINUSE:
            raise PortInUseError(
                "E_CONNECTOR_START",
                f"port {port} on {host} is already in use",
                suggestion="Another program (or another gdn run of a bundle with the same port) listens there: "
                "stop it, or give this Connection another config.port.",
            ) from None
        raise _listen_problem(exc, host, port) or exc from None
    sock.setblocking(False)
    guarded = type("ConnectorH11Protocol", (protocol.GuardedH11Protocol,), {"read_timeout": read_timeout})
    config = uvicorn.Config(
        _asgi_app(handler, max_body),
        http=guarded,
        lifespan="off",
        log_config=None,
        access_log=False,
        proxy_headers=False,  # the peer address is the socket's, not what a header claims
        server_header=False,
        timeout_keep_alive=KEEP_ALIVE_SECONDS,
        timeout_graceful_shutdown=SHUTDOWN_GRACE_SECONDS,
        limit_concurrency=max_connections + 1,
        h11_max_incomplete_event_size=MAX_HEADER_BYTES + MAX_LINE,
    )
    config.load()
    server = uvicorn.Server(config)
    server.lifespan = config.lifespan_class(config)
    try:
        await server.startup(sockets=[sock])
    except BaseException:
        sock.close()
        raise

    async def run() -> None:
        # uvicorn's serve() would install SIGINT/SIGTERM handlers; the host owns its signals
        try:
            await server.main_loop()
        finally:
            await server.shutdown(sockets=[sock])

    return HttpServer(server, sock, asyncio.create_task(run()))


async def http_request(
    method: str,
    url: str,
    *,
    json_body: Any = None,
    headers: Mapping[str, str] | None = None,
    timeout: float = 30.0,
    safe: bool = False,
) -> ClientResponse:
    """One request on the shared pooled client (:mod:`goondan._http_client`): HTTP error statuses
    are returned, network errors raise ``OSError``; 429/503 are retried for idempotent methods and
    for calls marked ``safe``."""
    return await request(method, url, json_body=json_body, headers=headers, timeout=timeout, safe=safe)


__all__ = ["ClientResponse", "Handler", "HttpRequest", "HttpResponse", "HttpServer", "http_request", "serve_http"]
