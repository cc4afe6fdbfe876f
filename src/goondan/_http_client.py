"""The one pooled async HTTP client goondan uses to talk to other services.

Chat platform APIs (Telegram, Slack, Discord, GitHub), attachment downloads and the Slack/Telegram
tools all send their requests through :func:`request`, which runs them on one ``httpx.AsyncClient``
per event loop. Sharing it matters: a connector that answers a busy chat reuses its TLS
connections instead of handshaking for every reply, and nothing blocks a worker thread.

Retries are deliberately narrow, because a retried POST can post a chat message twice:

- a request that never reached the server (connection refused, connect timeout) is retried for
  any method; one whose answer was lost on the way (read timeout, dropped connection) only for
  idempotent methods;
- a ``429 Too Many Requests`` or ``503 Service Unavailable`` answer is retried only for idempotent
  methods (GET, HEAD, OPTIONS, PUT, DELETE) or when the caller says the call is safe to repeat
  (``safe=True``: the API documents that a 429 means the call was not carried out, as Telegram's
  and Slack's do);
- the wait honours ``Retry-After`` (seconds or an HTTP date) or Telegram's
  ``parameters.retry_after``, else backs off exponentially with jitter; a server asking for a
  longer wait than :attr:`RetryPolicy.max_wait` gets its answer returned instead of a stalled caller.

httpx is imported on first use, so importing this module costs nothing for ``gdn --help``.
"""

from __future__ import annotations

import asyncio
import email.utils
import functools
import json
import random
import re
import ssl
import time
import weakref
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import httpx

IDEMPOTENT_METHODS = frozenset({"GET", "HEAD", "OPTIONS", "PUT", "DELETE"})
RETRY_STATUSES = frozenset({429, 503})
USER_AGENT = "goondan"
_LOOPBACK = ("127.0.0.1", "localhost", "[::1]")


@dataclass(frozen=True, slots=True)
class RetryPolicy:
    """How often and how long to retry. ``retries`` counts the extra attempts after the first."""

    retries: int = 3
    base_delay: float = 0.5
    max_delay: float = 8.0
    max_wait: float = 60.0


NO_RETRY = RetryPolicy(retries=0)
DEFAULT_RETRY = RetryPolicy()


class HttpClientError(OSError):
    """The request got no HTTP answer (DNS, refused connection, timeout, broken connection)."""


class ResponseTooLarge(ValueError):
    """The response body is larger than the caller's ``max_bytes``; nothing past it was read."""


@dataclass(slots=True)
class ClientResponse:
    status: int
    headers: dict[str, str]  # lower-cased names
    body: bytes
    url: str = ""
    attempts: int = 1
    reason: str = field(default="")

    def json(self) -> Any:
        return json.loads(self.body.decode("utf-8")) if self.body else None


_clients: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, httpx.AsyncClient] = weakref.WeakKeyDictionary()


def load_httpx() -> Any:
    """The httpx module, or a clear error when this environment lacks it."""
    try:
        import httpx
    except ImportError:
        from .errors import GoondanError

        raise GoondanError(
            "E_HTTPX_MISSING",
            "goondan's HTTP client (connectors, http-fetch, slack and telegram tools) needs httpx",
            suggestion="Install it into goondan's environment: pip install httpx.",
        ) from None
    return httpx


@functools.cache
def ssl_context() -> ssl.SSLContext:
    """One verifying TLS context for every client: loading the CA bundle costs tens of milliseconds,
    and a client is made per event loop (tests and tools often run a loop per call)."""
    load_httpx()
    import httpx

    return httpx.create_ssl_context(trust_env=False)


def shared_client() -> httpx.AsyncClient:
    """The running loop's pooled client, made on first use.

    Environment proxies are honoured, except for loopback targets (local gateways, tests), which a
    proxy could not reach anyway.
    """
    load_httpx()  # a clear error instead of ImportError
    import httpx

    loop = asyncio.get_running_loop()
    client = _clients.get(loop)
    if client is None or client.is_closed:
        direct: dict[str, httpx.AsyncBaseTransport | None] = {f"all://{host}": None for host in _LOOPBACK}
        client = httpx.AsyncClient(
            headers={"User-Agent": USER_AGENT},
            limits=httpx.Limits(max_connections=100, max_keepalive_connections=20, keepalive_expiry=30.0),
            mounts=direct,
            follow_redirects=True,
            verify=ssl_context(),
        )
        _clients[loop] = client
    return client


async def aclose_shared() -> None:
    """Close the running loop's client (a process that is about to exit calls this)."""
    client = _clients.pop(asyncio.get_running_loop(), None)
    if client is not None:
        await client.aclose()


def retry_after_seconds(headers: Mapping[str, str], body: bytes) -> float | None:
    """The wait a 429/503 answer asks for: ``Retry-After`` (seconds or HTTP date), or Telegram's
    ``{"parameters": {"retry_after": N}}`` in the JSON body; ``None`` when it names none."""
    raw = headers.get("retry-after", "").strip()
    if raw:
        try:
            return max(0.0, float(raw))
        except ValueError:
            try:
                when = email.utils.parsedate_to_datetime(raw)
            except (TypeError, ValueError):
                when = None
            if when is not None:
                return max(0.0, when.timestamp() - time.time())
    try:
        data = json.loads(body.decode("utf-8")) if body[:1] == b"{" else None
    except ValueError:
        return None
    params = data.get("parameters") if isinstance(data, dict) else None
    value = params.get("retry_after") if isinstance(params, dict) else None
    return float(value) if isinstance(value, int | float) and not isinstance(value, bool) and value >= 0 else None


def _backoff(policy: RetryPolicy, attempt: int) -> float:
    delay = min(policy.max_delay, policy.base_delay * (2.0**attempt))
    return delay * (0.5 + random.random() / 2)


async def _read(response: httpx.Response, max_bytes: int | None) -> bytes:
    if max_bytes is None:
        return await response.aread()
    advertised = response.headers.get("content-length", "")
    if advertised.isdigit() and int(advertised) > max_bytes:
        raise ResponseTooLarge(f"{_safe_url(str(response.url))} is {advertised} bytes, over the limit of {max_bytes}")
    buf = bytearray()
    async for chunk in response.aiter_bytes():
        buf += chunk
        if len(buf) > max_bytes:
            raise ResponseTooLarge(f"{_safe_url(str(response.url))} is over the limit of {max_bytes} bytes")
    return bytes(buf)


async def request(
    method: str,
    url: str,
    *,
    json_body: Any = None,
    content: bytes | None = None,
    files: Mapping[str, tuple[str, bytes, str]] | None = None,
    data: Mapping[str, str] | None = None,
    params: Mapping[str, str | int] | None = None,
    headers: Mapping[str, str] | None = None,
    timeout: float = 30.0,
    retry: RetryPolicy = DEFAULT_RETRY,
    safe: bool = False,
    max_bytes: int | None = None,
) -> ClientResponse:
    """Send one request on the shared client and read the whole answer.

    HTTP error statuses are returned, not raised (the caller knows what a 404 means for it);
    :class:`HttpClientError` means there was no answer, :class:`ResponseTooLarge` that the body
    passed ``max_bytes``. ``timeout`` bounds each attempt as a whole (connect, send, read).
    """
    load_httpx()  # a clear error instead of ImportError
    import httpx

    method = method.upper()
    client = shared_client()
    idempotent = method in IDEMPOTENT_METHODS
    repeatable = safe or idempotent  # on 429 / 503: the server says it did not carry the call out
    attempt = 0
    while True:
        try:
            async with asyncio.timeout(timeout):
                req = client.build_request(
                    method,
                    url,
                    json=json_body,
                    content=content,
                    files=dict(files) if files else None,
                    data=dict(data) if data else None,
                    params=dict(params) if params else None,
                    headers=dict(headers or {}),
                    timeout=timeout,
                )
                response = await client.send(req, stream=True)
                try:
                    body = await _read(response, max_bytes)
                finally:
                    await response.aclose()
        except (httpx.ConnectError, httpx.ConnectTimeout) as exc:
            # nothing reached the server: repeating is safe for any method
            if attempt < retry.retries:
                await asyncio.sleep(_backoff(retry, attempt))
                attempt += 1
                continue
            raise HttpClientError(f"{method} {_safe_url(url)} failed: {type(exc).__name__}: {exc}") from None
        except TimeoutError:
            raise HttpClientError(f"{method} {_safe_url(url)} timed out after {timeout:g}s") from None
        except httpx.HTTPError as exc:
            # the request may have been carried out (a read timeout, a dropped answer): only an
            # idempotent one is sent again, whatever ``safe`` says about 429s
            if idempotent and attempt < retry.retries and isinstance(exc, httpx.TransportError):
                await asyncio.sleep(_backoff(retry, attempt))
                attempt += 1
                continue
            raise HttpClientError(f"{method} {_safe_url(url)} failed: {type(exc).__name__}: {exc}") from None
        result = ClientResponse(
            response.status_code,
            {k.lower(): v for k, v in response.headers.multi_items()},
            body,
            str(response.url),
            attempt + 1,
            response.reason_phrase,
        )
        if result.status in RETRY_STATUSES and repeatable and attempt < retry.retries:
            wait = retry_after_seconds(result.headers, body)
            wait = _backoff(retry, attempt) if wait is None else wait
            if wait <= retry.max_wait:
                await asyncio.sleep(wait)
                attempt += 1
                continue
        return result


def _safe_url(url: str) -> str:
    """``url`` without what could be a secret: Telegram puts the bot token in the path
    (``/bot<token>/``), others put keys in the query."""
    cut = url.split("?", 1)[0]
    return re.sub(r"/bot[^/]+", "/bot<token>", cut)


__all__ = [
    "DEFAULT_RETRY",
    "IDEMPOTENT_METHODS",
    "NO_RETRY",
    "RETRY_STATUSES",
    "ClientResponse",
    "HttpClientError",
    "ResponseTooLarge",
    "RetryPolicy",
    "aclose_shared",
    "request",
    "retry_after_seconds",
    "shared_client",
    "ssl_context",
]
