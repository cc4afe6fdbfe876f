"""http-fetch: HTTP GET/POST for the agent.

Only ``http``/``https`` URLs (also after redirects, up to :data:`MAX_REDIRECTS`). Requests run on a
pooled async httpx client (one per event loop and ``allowHosts`` policy, so repeated fetches from a
site reuse their connection); ``timeoutMs`` bounds the whole exchange (connect, headers, redirects
and body), not just one socket read. The body is read up to ``maxBytes`` and cut on a character
boundary, with ``truncated`` saying so. HTTP error statuses (404, 500, ...) are normal results: the
status is information for the model. Tool errors are for requests that got no response at all
(timeout, refused connection, DNS failure, TLS failure). Nothing is retried: a model that wants to
retry can, and a POST must not be sent twice behind its back.

Loopback, private, link-local and metadata addresses are refused (``E_TOOL_ADDRESS_REFUSED``) on
the resolved address of every connection, redirects included, unless the Tool config
``allowHosts: [name | IP | CIDR, ...]`` permits them (see :mod:`goondan.base.tools._netguard`).
Environment proxies (``http_proxy``...) are not used: through a proxy the target's address could
not be checked.
"""

from __future__ import annotations

import asyncio
import codecs
import json
import time
import weakref
from email.message import Message
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

from goondan._http_client import load_httpx, ssl_context
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
from goondan.base.tools._netguard import AddressPolicy, checked_addresses, guarded_network_backend, parse_address_policy
from goondan.types import ToolContext

if TYPE_CHECKING:
    import httpx

DEFAULT_TIMEOUT_MS = 30_000
MAX_TIMEOUT_MS = 600_000
DEFAULT_MAX_BYTES = 500_000
MAX_MAX_BYTES = 20_000_000
MAX_REDIRECTS = 10
USER_AGENT = "goondan-http-fetch/1"

_clients: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, dict[AddressPolicy, httpx.AsyncClient]] = (
    weakref.WeakKeyDictionary()
)


def _client(policy: AddressPolicy) -> httpx.AsyncClient:
    """The loop's pooled client for ``policy``: every new connection goes through the address guard."""
    load_httpx()  # a clear error instead of ImportError
    import httpcore
    import httpx

    per_loop = _clients.setdefault(asyncio.get_running_loop(), {})
    client = per_loop.get(policy)
    if client is None or client.is_closed:
        transport = httpx.AsyncHTTPTransport(verify=ssl_context(), trust_env=False)
        # httpx builds its httpcore pool without a way to pass a network backend; this is the same
        # pool with the guarded backend (connections are checked, TLS and pooling unchanged)
        transport._pool = httpcore.AsyncConnectionPool(
            ssl_context=ssl_context(),
            max_connections=20,
            max_keepalive_connections=10,
            keepalive_expiry=30.0,
            network_backend=guarded_network_backend(policy),
        )
        client = httpx.AsyncClient(transport=transport, trust_env=False, follow_redirects=False)
        per_loop[policy] = client
    return client


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


def _timeout(url: str, timeout_ms: int) -> ToolExecutionError:
    return ToolExecutionError(
        "E_HTTP_TIMEOUT",
        f"request to {url} timed out after {timeout_ms}ms",
        suggestion="Retry, or raise timeoutMs if the server is slow.",
    )


def _failed(method: str, url: str, exc: Exception, reading: bool = False) -> ToolExecutionError:
    if reading:
        return ToolExecutionError(
            "E_HTTP_REQUEST_FAILED",
            f"{method} {url}: reading the body failed: {type(exc).__name__}: {exc}",
            suggestion="Retry; the server closed the connection before sending the whole body.",
        )
    return ToolExecutionError(
        "E_HTTP_REQUEST_FAILED",
        f"{method} {url} failed: {exc}",
        suggestion="Check the URL and that the server is reachable.",
    )


async def _unparsable_host(policy: AddressPolicy, url: str, exc: Exception) -> ToolExecutionError | ToolInputError:
    """httpx refuses some host spellings (``0177.0.0.1``) that resolvers accept: judge the address
    they name first, so an internal address is reported as one, else ask for a plain spelling."""
    parts = urlsplit(url)
    if parts.hostname:
        try:
            await checked_addresses(policy, parts.hostname, parts.port or 80)
        except ToolExecutionError as refused:
            return refused
        except OSError:
            pass
    return ToolInputError(
        f"cannot send this request: {exc}",
        suggestion="Write the host as a name or a plain dotted-decimal IPv4 / bracketed IPv6 address.",
    )


async def _read_body(response: httpx.Response, max_bytes: int) -> tuple[bytes, bool]:
    buf = bytearray()
    async for chunk in response.aiter_bytes():
        buf += chunk
        if len(buf) > max_bytes:
            return bytes(buf[:max_bytes]), True
    return bytes(buf), False


async def _exchange(
    method: str,
    url: str,
    headers: dict[str, str],
    body: bytes | None,
    timeout_ms: int,
    max_bytes: int,
    policy: AddressPolicy,
) -> dict[str, Any]:
    load_httpx()
    import httpx

    started = time.monotonic()
    client = _client(policy)
    try:
        request = client.build_request(method, url, headers=headers, content=body, timeout=timeout_ms / 1000)
    except (httpx.InvalidURL, ValueError) as exc:
        raise await _unparsable_host(policy, url, exc) from None
    try:
        for _hop in range(MAX_REDIRECTS + 1):
            response = await client.send(request, stream=True)
            if not response.is_redirect:
                break
            target = response.url.join(response.headers["location"])
            await response.aclose()
            if target.scheme not in ("http", "https"):
                raise ToolExecutionError(
                    "E_HTTP_REDIRECT_REFUSED",
                    f"refused a redirect from {request.url} to non-HTTP URL {target}",
                    suggestion="Only http and https URLs can be fetched; fetch an http(s) URL directly.",
                )
            if response.next_request is None:
                break
            request = response.next_request
        else:
            raise ToolExecutionError(
                "E_HTTP_REQUEST_FAILED",
                f"{method} {url} was redirected more than {MAX_REDIRECTS} times",
                suggestion="Fetch the final URL directly.",
            )
    except httpx.TimeoutException:
        raise _timeout(url, timeout_ms) from None
    except httpx.LocalProtocolError as exc:  # e.g. a header value with a newline
        raise ToolInputError(f"cannot send this request: {exc}") from None
    except httpx.HTTPError as exc:
        raise _failed(method, url, exc) from None
    try:
        data, truncated = await _read_body(response, max_bytes)
    except httpx.TimeoutException:
        raise _timeout(url, timeout_ms) from None
    except httpx.HTTPError as exc:
        raise _failed(method, url, exc, reading=True) from None
    finally:
        await response.aclose()
    resp_headers: dict[str, str] = {}
    for name, value in response.headers.multi_items():
        key = name.lower()
        resp_headers[key] = f"{resp_headers[key]}, {value}" if key in resp_headers else value
    return {
        "url": str(response.url),
        "method": method,
        "status": response.status_code,
        "statusText": response.reason_phrase or "",
        "headers": resp_headers,
        "body": _decode(data, response.headers.get("content-type"), truncated),
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
    try:
        # httpx's timeouts bound each phase; this bounds the whole exchange
        async with asyncio.timeout(timeout_ms / 1000):
            return await _exchange(method, url, headers, body, timeout_ms, max_bytes, policy)
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
