"""http-fetch: HTTP GET/POST for the agent.

Only ``http``/``https`` URLs (also after redirects). The request runs in a worker thread with the
stdlib client so the event loop never blocks; ``timeoutMs`` bounds the whole exchange (connect,
headers and body), not just one socket read. The body is read up to ``maxBytes`` and cut on a
character boundary, with ``truncated`` saying so. HTTP error statuses (404, 500, ...) are normal
results: the status is information for the model. Tool errors are for requests that got no
response at all (timeout, refused connection, DNS failure, TLS failure).

Loopback, private, link-local and metadata addresses are refused (``E_TOOL_ADDRESS_REFUSED``) on
the resolved address of every connection, redirects included, unless the Tool config
``allowHosts: [name | IP | CIDR, ...]`` permits them (see :mod:`goondan.base.tools._netguard`).
Environment proxies (``http_proxy``...) are not used: through a proxy the target's address could
not be checked.
"""

from __future__ import annotations

import asyncio
import codecs
import functools
import http.client
import json
import time
import urllib.error
import urllib.request
from email.message import Message
from http.client import HTTPException, HTTPMessage, IncompleteRead
from typing import Any
from urllib.parse import urlsplit

from goondan.base.tools._common import (
    ToolExecutionError,
    ToolInputError,
    args_dict,
    check_keys,
    opt_int,
    require_str,
    string_map,
)
from goondan.base.tools._env import check_tool_config
from goondan.base.tools._netguard import AddressPolicy, guarded_create_connection, parse_address_policy
from goondan.types import ToolContext

DEFAULT_TIMEOUT_MS = 30_000
MAX_TIMEOUT_MS = 600_000
DEFAULT_MAX_BYTES = 500_000
MAX_MAX_BYTES = 20_000_000
USER_AGENT = "goondan-http-fetch/1"
_CHUNK = 65536


class _HttpOnlyRedirects(urllib.request.HTTPRedirectHandler):
    """Follow redirects, but never to a scheme other than http/https (e.g. ``ftp:`` or ``file:``)."""

    def redirect_request(
        self, req: urllib.request.Request, fp: Any, code: int, msg: str, headers: HTTPMessage, newurl: str
    ) -> urllib.request.Request | None:
        if urlsplit(newurl).scheme.lower() not in ("http", "https"):
            raise ToolExecutionError(
                "E_HTTP_REDIRECT_REFUSED",
                f"refused a redirect from {req.full_url} to non-HTTP URL {newurl}",
                suggestion="Only http and https URLs can be fetched; fetch an http(s) URL directly.",
            )
        return super().redirect_request(req, fp, code, msg, headers, newurl)


def _guarded_connection(cls: Any, policy: AddressPolicy, host: str, **kwargs: Any) -> Any:
    conn = cls(host, **kwargs)
    conn._create_connection = guarded_create_connection(policy)  # every connect is checked
    return conn


class _GuardedHTTPHandler(urllib.request.HTTPHandler):
    def __init__(self, policy: AddressPolicy) -> None:
        super().__init__()
        self._policy = policy

    def http_open(self, req: urllib.request.Request) -> Any:
        return self.do_open(functools.partial(_guarded_connection, http.client.HTTPConnection, self._policy), req)


class _GuardedHTTPSHandler(urllib.request.HTTPSHandler):
    def __init__(self, policy: AddressPolicy) -> None:
        super().__init__()
        self._policy = policy

    def https_open(self, req: urllib.request.Request) -> Any:
        factory = functools.partial(_guarded_connection, http.client.HTTPSConnection, self._policy)
        return self.do_open(factory, req, context=self._context)  # type: ignore[attr-defined]


def _opener(policy: AddressPolicy) -> urllib.request.OpenerDirector:
    return urllib.request.build_opener(
        urllib.request.ProxyHandler({}),
        _GuardedHTTPHandler(policy),
        _GuardedHTTPSHandler(policy),
        _HttpOnlyRedirects(),
    )


def _policy(ctx: ToolContext) -> AddressPolicy:
    config = check_tool_config(getattr(ctx, "config", None), ("allowHosts",), "Tool/http-fetch config")
    return parse_address_policy(config.get("allowHosts"), "Tool/http-fetch config")


def _url(args: dict[str, Any]) -> str:
    url = require_str(args, "url")
    parts = urlsplit(url)
    if parts.scheme.lower() not in ("http", "https") or not parts.netloc:
        raise ToolInputError(
            f"'url' must be an absolute http or https URL, got '{url}'",
            suggestion="Use a URL like https://example.com/path.",
        )
    return url


def _decode(data: bytes, content_type: str | None, truncated: bool) -> str:
    charset = "utf-8"
    if content_type:
        msg = Message()
        msg["content-type"] = content_type
        found = msg.get_content_charset()
        if found:
            try:
                codecs.lookup(found)
                charset = found
            except LookupError:
                pass
    return codecs.getincrementaldecoder(charset)(errors="replace").decode(data, final=not truncated)


def _read_body(resp: Any, max_bytes: int, deadline: float, url: str, timeout_ms: int) -> tuple[bytes, bool]:
    buf = bytearray()
    while len(buf) <= max_bytes:
        if time.monotonic() > deadline:
            raise _timeout(url, timeout_ms)
        chunk = resp.read(min(_CHUNK, max_bytes + 1 - len(buf)))
        if not chunk:
            missing = getattr(resp, "length", None)  # bytes the Content-Length still promised
            if isinstance(missing, int) and missing > 0:
                raise IncompleteRead(bytes(buf), missing)
            return bytes(buf), False
        buf += chunk
    return bytes(buf[:max_bytes]), True


def _timeout(url: str, timeout_ms: int) -> ToolExecutionError:
    return ToolExecutionError(
        "E_HTTP_TIMEOUT",
        f"request to {url} timed out after {timeout_ms}ms",
        suggestion="Retry, or raise timeoutMs if the server is slow.",
    )


def _exchange(
    method: str,
    url: str,
    headers: dict[str, str],
    body: bytes | None,
    timeout_ms: int,
    max_bytes: int,
    policy: AddressPolicy,
) -> dict[str, Any]:
    started = time.monotonic()
    deadline = started + timeout_ms / 1000
    request = urllib.request.Request(url, data=body, headers=headers, method=method)
    try:
        resp = _opener(policy).open(request, timeout=timeout_ms / 1000)
    except urllib.error.HTTPError as exc:
        resp = exc  # an HTTP error status is still a response
    except ToolExecutionError:
        raise
    except ValueError as exc:  # e.g. a header value with a newline, or characters a URL cannot hold
        raise ToolInputError(f"cannot send this request: {exc}") from None
    except (TimeoutError, urllib.error.URLError, OSError, HTTPException) as exc:
        reason = exc.reason if isinstance(exc, urllib.error.URLError) else exc
        if isinstance(reason, TimeoutError) or "timed out" in str(reason):
            raise _timeout(url, timeout_ms) from None
        raise ToolExecutionError(
            "E_HTTP_REQUEST_FAILED",
            f"{method} {url} failed: {reason}",
            suggestion="Check the URL and that the server is reachable.",
        ) from None
    with resp:
        try:
            data, truncated = _read_body(resp, max_bytes, deadline, url, timeout_ms)
        except (TimeoutError, OSError, HTTPException) as exc:
            if isinstance(exc, TimeoutError) or "timed out" in str(exc):
                raise _timeout(url, timeout_ms) from None
            raise ToolExecutionError(
                "E_HTTP_REQUEST_FAILED",
                f"{method} {url}: reading the body failed: {type(exc).__name__}: {exc}",
                suggestion="Retry; the server closed the connection before sending the whole body.",
            ) from None
        resp_headers: dict[str, str] = {}
        for name, value in resp.headers.items():
            key = name.lower()
            resp_headers[key] = f"{resp_headers[key]}, {value}" if key in resp_headers else value
        return {
            "url": resp.geturl() or url,
            "method": method,
            "status": resp.status,
            "statusText": resp.reason or "",
            "headers": resp_headers,
            "body": _decode(data, resp.headers.get("content-type"), truncated),
            "truncated": truncated,
            "durationMs": int((time.monotonic() - started) * 1000),
        }


async def _fetch(
    ctx: ToolContext, method: str, args: dict[str, Any], body: bytes | None, default_type: str | None
) -> dict[str, Any]:
    policy = _policy(ctx)
    url = _url(args)
    headers = string_map(args, "headers") or {}
    timeout_ms = opt_int(args, "timeoutMs", DEFAULT_TIMEOUT_MS, minimum=1, maximum=MAX_TIMEOUT_MS)
    max_bytes = opt_int(args, "maxBytes", DEFAULT_MAX_BYTES, minimum=1, maximum=MAX_MAX_BYTES)
    assert timeout_ms is not None and max_bytes is not None
    lowered = {k.lower() for k in headers}
    if "user-agent" not in lowered:
        headers["User-Agent"] = USER_AGENT
    if default_type and "content-type" not in lowered:
        headers["Content-Type"] = default_type
    work = asyncio.to_thread(_exchange, method, url, headers, body, timeout_ms, max_bytes, policy)
    try:
        # the socket timeout bounds each blocking call; this bounds the whole exchange
        return await asyncio.wait_for(work, timeout_ms / 1000 + 1.0)
    except TimeoutError:
        raise _timeout(url, timeout_ms) from None


async def get(ctx: ToolContext, input: Any) -> dict[str, Any]:
    """``http-fetch__get``: ``{url, headers?, timeoutMs?, maxBytes?}``."""
    args = args_dict(input)
    check_keys(args, ("url", "headers", "timeoutMs", "maxBytes"))
    return await _fetch(ctx, "GET", args, None, None)


async def post(ctx: ToolContext, input: Any) -> dict[str, Any]:
    """``http-fetch__post``: like get, plus ``body`` (JSON value, sent as JSON) or ``bodyString``."""
    args = args_dict(input)
    check_keys(args, ("url", "headers", "timeoutMs", "maxBytes", "body", "bodyString"))
    has_body, has_string = args.get("body") is not None, args.get("bodyString") is not None
    if has_body and has_string:
        raise ToolInputError("pass either 'body' or 'bodyString', not both")
    if has_string:
        text = args["bodyString"]
        if not isinstance(text, str):
            raise ToolInputError("'bodyString' must be a string")
        return await _fetch(ctx, "POST", args, text.encode("utf-8"), "text/plain; charset=utf-8")
    if has_body:
        data = json.dumps(args["body"], ensure_ascii=False).encode("utf-8")
        return await _fetch(ctx, "POST", args, data, "application/json")
    return await _fetch(ctx, "POST", args, b"", None)


handlers = {"get": get, "post": post}
