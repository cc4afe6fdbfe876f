"""Retries with exponential backoff and jitter, honouring the server's ``retry-after``.

Goondan runs its own loop (the SDKs' built-in retries are switched off) so that every provider
behaves the same, the policy is configurable per Model, and an exhausted call always ends in one
:class:`ProviderError` naming provider, status and request id. A streamed call is never retried once
a text delta has been delivered: listeners would otherwise see the same text twice.
"""

from __future__ import annotations

import asyncio
import dataclasses
import email.utils
import logging
import random
import time
from collections.abc import Awaitable, Callable, Mapping
from typing import TypeVar

from ._errors import ProviderError, scrub
from ._options import NetworkOptions

log = logging.getLogger("goondan.models")

T = TypeVar("T")

RETRYABLE_STATUS = frozenset({408, 409, 429})


@dataclasses.dataclass(slots=True)
class Failure:
    """What went wrong in one attempt, in provider-neutral terms."""

    kind: str  # status | timeout | connection | bad-response
    message: str
    status: int | None = None
    request_id: str | None = None
    retry_after: float | None = None

    @property
    def retryable(self) -> bool:
        if self.kind in ("timeout", "connection"):
            return True
        if self.kind == "status" and self.status is not None:
            return self.status in RETRYABLE_STATUS or self.status >= 500
        return False


def parse_retry_after(headers: Mapping[str, str] | None) -> float | None:
    """Seconds the server asked us to wait: ``retry-after-ms``, or ``retry-after`` as seconds or an
    HTTP date."""
    if not headers:
        return None
    lowered = {str(k).lower(): str(v) for k, v in headers.items()}
    raw_ms = lowered.get("retry-after-ms")
    if raw_ms:
        try:
            return max(0.0, float(raw_ms) / 1000.0)
        except ValueError:
            pass
    raw = lowered.get("retry-after")
    if not raw:
        return None
    try:
        return max(0.0, float(raw))
    except ValueError:
        pass
    try:
        when = email.utils.parsedate_to_datetime(raw)
    except (TypeError, ValueError):
        return None
    return max(0.0, when.timestamp() - time.time())


def backoff_delay(retry_index: int, options: NetworkOptions, rng: random.Random | None = None) -> float:
    """Exponential backoff with "equal jitter": half fixed, half random, so that many clients that
    failed together do not retry together."""
    ceiling = min(options.retry_max_delay, options.retry_base_delay * (2.0**retry_index))
    jitter: float = (rng or random).uniform(0, ceiling / 2)
    return ceiling / 2 + jitter


_CODES = {
    "timeout": ("E_MODEL_TIMEOUT", "Raise Model.spec.options.timeoutSeconds, or check that the endpoint is up."),
    "connection": ("E_MODEL_CONNECTION", "Check Model.spec.endpoint and the network connection."),
    "bad-response": (
        "E_MODEL_BAD_RESPONSE",
        "The provider answered with something that is not a valid response; check Model.spec.endpoint.",
    ),
}


def endpoint_label(url: str) -> str:
    """``scheme://host:port/path`` of an endpoint URL: user info, query and fragment (where
    credentials hide) are left out, so the label can go into errors and logs."""
    from urllib.parse import urlsplit

    try:
        parts = urlsplit(url)
        host = parts.hostname or ""
        port = f":{parts.port}" if parts.port is not None else ""
    except ValueError:
        return "(unparsable endpoint URL)"
    if ":" in host:
        host = f"[{host}]"
    return f"{parts.scheme}://{host}{port}{parts.path}" if parts.scheme else f"{host}{port}{parts.path}"


def failure_error(
    failure: Failure, *, provider: str, attempts: int, secret: str | None, endpoint: str | None = None
) -> ProviderError:
    code, suggestion = _CODES.get(failure.kind, ("E_MODEL_PROVIDER_ERROR", None))
    status = failure.status
    if failure.kind == "status" and status is not None:
        if status == 429:
            code, suggestion = "E_MODEL_RATE_LIMITED", "Wait and retry, or raise the rate limit with the provider."
        elif status in (401, 403):
            code = "E_MODEL_AUTH"
            suggestion = "Check the API key: Model.spec.apiKey (valueFrom.env) or the provider's standard env var."
        elif 400 <= status < 500:
            code = "E_MODEL_BAD_REQUEST"
            suggestion = "Check Model.spec.model, Agent.spec.modelConfig.params and the tool schemas."
        else:
            suggestion = "The provider failed; retry later."
    parts = [f"{provider} request to {endpoint} failed" if endpoint else f"{provider} request failed"]
    if status is not None:
        parts.append(f"with HTTP {status}")
    if attempts > 1:
        parts.append(f"after {attempts} attempts")
    message = " ".join(parts) + f": {scrub(failure.message, secret)}"
    if failure.request_id:
        message += f" (request id {failure.request_id})"
    return ProviderError(
        code,
        message,
        provider=provider,
        status=status,
        request_id=failure.request_id,
        attempts=attempts,
        retryable=failure.retryable,
        suggestion=suggestion,
    )


async def call_with_retries(
    attempt: Callable[[], Awaitable[T]],
    *,
    provider: str,
    options: NetworkOptions,
    classify: Callable[[BaseException], Failure | None],
    secret: str | None,
    delivered: Callable[[], bool] = lambda: False,
    sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
    endpoint: str | None = None,
) -> T:
    """Run ``attempt`` until it succeeds, a failure is not retryable, or retries run out.

    ``classify`` turns an SDK exception into a :class:`Failure` (None: not a provider failure, re-raise
    as is). ``delivered`` tells whether text deltas already reached listeners."""
    attempts = 0
    while True:
        attempts += 1
        try:
            return await attempt()
        except asyncio.CancelledError:
            raise
        except Exception as exc:
            failure = classify(exc)
            if failure is None:
                raise
            retries_left = options.max_retries - (attempts - 1)
            wait: float | None = None
            if failure.retryable and retries_left > 0 and not delivered():
                if failure.retry_after is not None:
                    if failure.retry_after <= options.max_retry_after:
                        wait = failure.retry_after
                else:
                    wait = backoff_delay(attempts - 1, options)
            if wait is None:
                if failure.retry_after is not None and failure.retry_after > options.max_retry_after:
                    failure.message += (
                        f" (the server asked to retry after {failure.retry_after:g}s, more than "
                        f"options.maxRetryAfterSeconds={options.max_retry_after:g})"
                    )
                raise failure_error(
                    failure, provider=provider, attempts=attempts, secret=secret, endpoint=endpoint
                ) from exc
            log.warning(
                "%s model call failed (%s%s); retry %d/%d in %.2fs",
                provider,
                failure.kind,
                f" {failure.status}" if failure.status is not None else "",
                attempts,
                options.max_retries,
                wait,
            )
            await sleep(wait)
