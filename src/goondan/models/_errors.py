"""The structured error a real provider call ends with once retries are exhausted.

Callers (the CLI, runtime events, tool results of inter-agent calls) see ``to_dict()``: besides the
usual code/message/suggestion it names the provider, the HTTP status and the provider's request id,
which is what a user needs to open a support ticket or correlate with the provider's dashboard.
"""

from __future__ import annotations

from typing import Any

from ..errors import ModelError


class ProviderError(ModelError):
    """A provider call failed for good (not retryable, or retries exhausted)."""

    provider: str
    status: int | None
    request_id: str | None
    attempts: int
    retryable: bool

    def __init__(
        self,
        code: str,
        message: str,
        *,
        provider: str,
        status: int | None = None,
        request_id: str | None = None,
        attempts: int = 1,
        retryable: bool = False,
        suggestion: str | None = None,
    ) -> None:
        super().__init__(code, message, suggestion=suggestion)
        self.provider = provider
        self.status = status
        self.request_id = request_id
        self.attempts = attempts
        self.retryable = retryable

    def to_dict(self) -> dict[str, Any]:
        out = super().to_dict()
        out["provider"] = self.provider
        if self.status is not None:
            out["status"] = self.status
        if self.request_id is not None:
            out["requestId"] = self.request_id
        out["attempts"] = self.attempts
        return out


def scrub(text: str, secret: str | None) -> str:
    """Remove an API key (and its common masked prefixes) from text that came back from a server."""
    if not secret or len(secret) < 4:
        return text
    return text.replace(secret, "***")
