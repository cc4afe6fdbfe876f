"""The Starlette application: a read-only JSON API, Server-Sent Events and the static page.

API (all ``GET``; errors are ``{"error": {code, message, suggestion}}`` with status 400/404, 503 while
the store is unavailable)::

    /api/overview                                   store, bundle, workspaces
    /api/instances?workspace&q&offset&limit         a page of instances, most recent first
    /api/instance?workspace&agent&key               one instance's live summary
    /api/conversation?workspace&agent&key&offset&limit   rows as a person reads them (no offset: last page)
    /api/turns?workspace&agent&key&offset&limit     turns, newest first (trace id, status, usage)
    /api/trace?workspace&trace                      one trace's span tree across instances
    /api/graph?workspace                            the swarm graph
    /api/stream?workspace&agent&key                 SSE: ``instance`` / ``instances`` change notices,
                                                    ``unavailable`` / ``available`` for the store

Live updates: the stream polls the watched instance's ``version()`` (a few stats) every
:data:`POLL_SECONDS` and the instance listing every :data:`LIST_POLL_SECONDS`, and sends a small
notice when something changed; the page then fetches only what it shows.

With a token every request must carry it: ``Authorization: Bearer T``, the ``X-Goondan-Token``
header, or the cookie that a first ``/?token=T`` page load sets (that load is redirected to ``/`` so the
token leaves the address bar). Anything else is ``401``.
"""

from __future__ import annotations

import asyncio
import contextlib
import hmac
import json
import threading
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

from starlette.applications import Starlette
from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import JSONResponse, PlainTextResponse, RedirectResponse, Response, StreamingResponse
from starlette.routing import Route
from starlette.types import ASGIApp, Receive, Scope, Send

from ..errors import GoondanError
from ._data import MAX_PAGE, StudioData, bad_request

STATIC_DIR = Path(__file__).with_name("static")
COOKIE = "gdn_studio"
POLL_SECONDS = 0.5
LIST_POLL_SECONDS = 2.0
KEEPALIVE_SECONDS = 15.0


class TokenGate:
    """Every request carries the token, or gets ``401`` (ASGI middleware around the whole app)."""

    def __init__(self, app: ASGIApp, token: str) -> None:
        self.app = app
        self.token = token.encode()

    def _ok(self, given: str | None) -> bool:
        return given is not None and hmac.compare_digest(given.encode(), self.token)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        request = Request(scope)
        auth = request.headers.get("authorization", "")
        bearer = auth[7:] if auth.lower().startswith("bearer ") else None
        if (
            self._ok(bearer)
            or self._ok(request.headers.get("x-goondan-token"))
            or self._ok(request.cookies.get(COOKIE))
        ):
            await self.app(scope, receive, send)
            return
        query_token = request.query_params.get("token")
        if self._ok(query_token) and request.url.path == "/":
            response: Response = RedirectResponse("/", status_code=303)
            response.set_cookie(COOKIE, query_token or "", httponly=True, samesite="strict")
            await response(scope, receive, send)
            return
        response = PlainTextResponse(
            "401 Unauthorized: this Studio needs its token (open /?token=... once, or send Authorization: Bearer ...)",
            status_code=401,
        )
        await response(scope, receive, send)


class HostGuard:
    """Answer only requests addressed to a loopback name (``Host`` header), when no token guards
    Studio: a web page elsewhere can point a DNS name of its own at 127.0.0.1 (DNS rebinding) and
    would otherwise read conversations through the visitor's browser."""

    def __init__(self, app: ASGIApp, allowed: frozenset[str]) -> None:
        self.app = app
        self.allowed = allowed

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http":
            host = Request(scope).headers.get("host", "")
            name = host[1 : host.find("]")] if host.startswith("[") else host.rsplit(":", 1)[0]
            if name.lower() not in self.allowed:
                response = PlainTextResponse(f"403 Forbidden: Studio answers only to {sorted(self.allowed)}", 403)
                await response(scope, receive, send)
                return
        await self.app(scope, receive, send)


def _int(request: Request, name: str, default: int, *, upper: int | None = None) -> int:
    raw = request.query_params.get(name)
    if raw is None or raw == "":
        return default
    try:
        value = int(raw)
    except ValueError:
        raise bad_request(f"{name}={raw!r} is not a whole number", f"Give {name} as a non-negative integer.") from None
    if value < 0:
        raise bad_request(f"{name}={raw!r} is negative", f"Give {name} as a non-negative integer.")
    return min(value, upper) if upper is not None else value


def _need(request: Request, *names: str) -> list[str]:
    values = []
    for name in names:
        value = request.query_params.get(name)
        if not value:
            raise bad_request(f"the query parameter {name!r} is missing", f"Call it with {', '.join(names)}.")
        values.append(value)
    return values


def _json(value: Any, status: int = 200) -> Response:
    return JSONResponse(value, status_code=status, headers={"cache-control": "no-store"})


#: a store Studio cannot read now (PostgreSQL down, or its login refused since it started): no fault of
#: the request, so 503 (retry later), and an open event stream waits for it to come back
STORE_DOWN_CODES = frozenset({"E_STORE_UNAVAILABLE", "E_STORE_AUTH", "E_STORE_DATABASE_NOT_FOUND"})


def _error(exc: GoondanError) -> Response:
    status = 404 if exc.code == "E_STUDIO_NOT_FOUND" else 503 if exc.code in STORE_DOWN_CODES else 400
    return _json({"error": _fields(exc)}, status)


def _fields(exc: GoondanError) -> dict[str, Any]:
    return {"code": exc.code, "message": exc.message, "suggestion": exc.suggestion}


def _endpoint(fn: Callable[[Request], Any]) -> Callable[[Request], Any]:
    """A JSON endpoint whose work (store reads) runs in the thread pool; GoondanErrors become 4xx
    (503 for a store that is down)."""

    async def handler(request: Request) -> Response:
        try:
            return _json(await run_in_threadpool(fn, request))
        except GoondanError as exc:
            return _error(exc)

    return handler


def create_app(
    data: StudioData,
    *,
    token: str | None = None,
    info: dict[str, Any] | None = None,
    allowed_hosts: frozenset[str] | None = None,
    stopping: threading.Event | None = None,
) -> ASGIApp:
    """The Studio ASGI app over ``data`` (``info`` is shown in the header: store URL, bundle).
    With ``token`` every request must carry it; else ``allowed_hosts`` (when given) are the only
    ``Host`` names it answers. Event streams end soon after ``stopping`` is set (the server sets it
    when asked to exit, so open pages never hold the shutdown up)."""
    stop = stopping if stopping is not None else threading.Event()
    meta = dict(info or {})

    def overview(request: Request) -> Any:
        return {**meta, "workspaces": data.workspaces()}

    def instances(request: Request) -> Any:
        return data.instances(
            workspace=request.query_params.get("workspace") or None,
            query=request.query_params.get("q") or None,
            offset=_int(request, "offset", 0),
            limit=_int(request, "limit", 50, upper=MAX_PAGE),
        )

    def instance(request: Request) -> Any:
        return data.instance(*_need(request, "workspace", "agent", "key"))

    def conversation(request: Request) -> Any:
        ws, agent, key = _need(request, "workspace", "agent", "key")
        offset = None if request.query_params.get("offset") in (None, "") else _int(request, "offset", 0)
        return data.conversation(ws, agent, key, offset=offset, limit=_int(request, "limit", 100, upper=MAX_PAGE))

    def turns(request: Request) -> Any:
        ws, agent, key = _need(request, "workspace", "agent", "key")
        return data.turns(
            ws, agent, key, offset=_int(request, "offset", 0), limit=_int(request, "limit", 50, upper=MAX_PAGE)
        )

    def trace(request: Request) -> Any:
        return data.trace(*_need(request, "workspace", "trace"))

    def graph(request: Request) -> Any:
        return data.graph(*_need(request, "workspace"))

    async def stream(request: Request) -> Response:
        workspace = request.query_params.get("workspace") or None
        agent, key = request.query_params.get("agent"), request.query_params.get("key")
        ident = (workspace, agent, key) if workspace and agent and key else None
        watched = None
        if ident is not None:
            try:
                watched = await run_in_threadpool(data.view, *ident)
            except GoondanError as exc:
                # a store that is down opens the stream anyway (it says so and follows the instance
                # once the store is back): a browser's EventSource never reconnects after a 503
                if exc.code not in STORE_DOWN_CODES:
                    return _error(exc)
        return StreamingResponse(
            _events(request, data, workspace, watched, stop, ident),
            media_type="text/event-stream",
            headers={"cache-control": "no-store", "x-accel-buffering": "no"},
        )

    assets = _load_assets()

    async def index(request: Request) -> Response:
        body, media_type = assets["index.html"]
        return Response(body, media_type=media_type, headers={"cache-control": "no-cache"})

    async def asset(request: Request) -> Response:
        found = assets.get(request.path_params["name"])
        if found is None:
            return PlainTextResponse("404 Not Found", status_code=404)
        return Response(found[0], media_type=found[1], headers={"cache-control": "no-cache"})

    routes = [
        Route("/", index),
        Route("/api/overview", _endpoint(overview)),
        Route("/api/instances", _endpoint(instances)),
        Route("/api/instance", _endpoint(instance)),
        Route("/api/conversation", _endpoint(conversation)),
        Route("/api/turns", _endpoint(turns)),
        Route("/api/trace", _endpoint(trace)),
        Route("/api/graph", _endpoint(graph)),
        Route("/api/stream", stream),
        Route("/static/{name}", asset),
    ]

    @contextlib.asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        yield
        data.close()

    app = Starlette(routes=routes, lifespan=lifespan)
    if token:
        return TokenGate(app, token)
    return HostGuard(app, allowed_hosts) if allowed_hosts is not None else app


_MEDIA_TYPES = {".html": "text/html", ".js": "text/javascript", ".css": "text/css"}


def _load_assets() -> dict[str, tuple[bytes, str]]:
    """The page's files, read once: a handful of small files served from memory answer in
    microseconds on the event loop instead of a thread-pool hop and a file read per request, and
    only these names can ever be served."""
    return {
        path.name: (path.read_bytes(), _MEDIA_TYPES[path.suffix])
        for path in STATIC_DIR.iterdir()
        if path.suffix in _MEDIA_TYPES
    }


def _sse(event: str, payload: Any) -> bytes:
    return f"event: {event}\ndata: {json.dumps(payload, separators=(',', ':'))}\n\n".encode()


async def _events(
    request: Request,
    data: StudioData,
    workspace: str | None,
    watched: Any,
    stop: threading.Event,
    ident: tuple[str, str, str] | None = None,
) -> AsyncIterator[bytes]:
    """The notice stream of one page (module docstring); ends when the page goes away. While the
    store is unreachable it sends one ``unavailable`` notice (the error) and keeps polling; when the
    store answers again, ``available`` and ``instances`` (what changed meanwhile is fetched again)."""
    yield b"retry: 1000\n\n"
    loop = asyncio.get_running_loop()
    signature: int | None = None
    down = False
    primed = False  # the first poll only learns where things stand
    next_list = loop.time()
    next_ping = loop.time() + KEEPALIVE_SECONDS
    while not stop.is_set() and not await request.is_disconnected():
        if primed:
            await asyncio.sleep(POLL_SECONDS)
        now = loop.time()
        frames: list[bytes] = []
        try:
            if watched is None and ident is not None:  # the store was down when the page opened
                watched = await run_in_threadpool(data.view, *ident)
            if watched is not None and await run_in_threadpool(watched.refresh) and primed:
                frames.append(_sse("instance", await run_in_threadpool(watched.summary)))
            if signature is None or now >= next_list:
                next_list = now + LIST_POLL_SECONDS
                fresh = await run_in_threadpool(data.listing_signature, workspace)
                if signature is not None and fresh != signature:
                    frames.append(_sse("instances", {"workspace": workspace}))
                signature = fresh
        except GoondanError as exc:
            if exc.code not in STORE_DOWN_CODES:
                raise
            if not down:
                down = True
                frames.append(_sse("unavailable", _fields(exc)))
        else:
            if down:
                down = False
                frames += [_sse("available", {}), _sse("instances", {"workspace": workspace})]
        primed = True
        for frame in frames:
            yield frame
        if frames:
            next_ping = now + KEEPALIVE_SECONDS
        elif now >= next_ping:
            next_ping = now + KEEPALIVE_SECONDS
            yield b": ping\n\n"


__all__ = ["COOKIE", "STATIC_DIR", "HostGuard", "TokenGate", "create_app"]
