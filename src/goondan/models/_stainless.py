"""Failure classification for the ``openai`` and ``anthropic`` SDKs, which share one error model
(``APIStatusError`` with the HTTP response, ``APITimeoutError``, ``APIConnectionError``)."""

from __future__ import annotations

from types import ModuleType
from typing import Any

from ._retry import Failure, parse_retry_after


def classify(sdk: ModuleType, exc: BaseException) -> Failure | None:
    if isinstance(exc, sdk.APIStatusError):
        response: Any = exc.response
        headers = dict(response.headers) if response is not None else {}
        request_id = getattr(exc, "request_id", None) or headers.get("request-id") or headers.get("x-request-id")
        return Failure(
            "status",
            _status_message(exc),
            status=int(exc.status_code),
            request_id=str(request_id) if request_id else None,
            retry_after=parse_retry_after(headers),
        )
    if isinstance(exc, sdk.APITimeoutError):
        return Failure("timeout", "the request timed out")
    if isinstance(exc, sdk.APIConnectionError):
        cause = exc.__cause__
        detail = f"{type(cause).__name__}: {cause}" if cause is not None else str(exc)
        return Failure("connection", f"connection failed ({detail})")
    if isinstance(exc, sdk.APIResponseValidationError):
        return Failure("bad-response", f"the response did not match the API schema: {exc}")
    if isinstance(exc, sdk.APIError):
        # e.g. an error object sent inside an event stream: no HTTP status to judge it by
        return Failure("provider", _status_message(exc))
    return None


def _status_message(exc: Any) -> str:
    body = getattr(exc, "body", None)
    if isinstance(body, dict):
        err = body.get("error", body)
        if isinstance(err, dict) and isinstance(err.get("message"), str):
            kind = err.get("type")
            return f"{kind}: {err['message']}" if isinstance(kind, str) else err["message"]
    return str(getattr(exc, "message", exc))
