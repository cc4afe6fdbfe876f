"""The error types every Goondan failure is reported with.

Every error carries a stable ``code`` (documented in ``docs/errors.md``), a human ``message`` and,
wherever we can tell the user what to do next, a ``suggestion``. The CLI prints them as
``[CODE] message`` / ``suggestion:`` / ``help:`` and never shows a traceback for them.
"""

from __future__ import annotations

from typing import Any

HELP_URL_BASE = "https://goondan.ai/errors/"


def help_url_for(code: str) -> str:
    return f"{HELP_URL_BASE}{code}"


class GoondanError(Exception):
    """Base class of every error Goondan raises on purpose."""

    code: str
    message: str
    suggestion: str | None
    help_url: str | None

    def __init__(
        self,
        code: str,
        message: str,
        *,
        suggestion: str | None = None,
        help_url: str | None = None,
    ) -> None:
        super().__init__(message)
        self.code = code
        self.message = message
        self.suggestion = suggestion
        self.help_url = help_url if help_url is not None else help_url_for(code)

    def __str__(self) -> str:
        return f"[{self.code}] {self.message}"

    def to_dict(self) -> dict[str, Any]:
        """The JSON shape used in tool results, `--json` output and runtime events."""
        out: dict[str, Any] = {"code": self.code, "message": self.message}
        if self.suggestion:
            out["suggestion"] = self.suggestion
        if self.help_url:
            out["helpUrl"] = self.help_url
        return out


class ConfigIssue:
    """One problem found in a bundle: where it is, what is wrong, and how to fix it."""

    __slots__ = ("code", "column", "file", "line", "message", "path", "severity", "suggestion")

    def __init__(
        self,
        code: str,
        message: str,
        *,
        path: str | None = None,
        file: str | None = None,
        line: int | None = None,
        column: int | None = None,
        suggestion: str | None = None,
        severity: str = "error",
    ) -> None:
        self.code = code
        self.message = message
        self.path = path
        self.file = file
        self.line = line
        self.column = column
        self.suggestion = suggestion
        self.severity = severity

    @property
    def help_url(self) -> str:
        return help_url_for(self.code)

    @property
    def location(self) -> str | None:
        """``file:line:column`` (1-based), or whatever part of it is known."""
        if self.file is None:
            return None
        if self.line is None:
            return self.file
        if self.column is None:
            return f"{self.file}:{self.line}"
        return f"{self.file}:{self.line}:{self.column}"

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"code": self.code, "message": self.message, "severity": self.severity}
        for key in ("path", "file", "line", "column", "suggestion"):
            value = getattr(self, key)
            if value is not None:
                out[key] = value
        out["helpUrl"] = self.help_url
        return out

    def __repr__(self) -> str:
        loc = self.location or "?"
        return f"ConfigIssue({self.code}, {self.message!r}, at={self.path!r} {loc})"


class ConfigError(GoondanError):
    """A bundle (or one of its resources) is invalid. ``errors`` lists every problem found."""

    path: str | None
    file: str | None
    line: int | None
    column: int | None
    errors: list[ConfigIssue]

    def __init__(
        self,
        code: str,
        message: str,
        *,
        path: str | None = None,
        file: str | None = None,
        line: int | None = None,
        column: int | None = None,
        suggestion: str | None = None,
        help_url: str | None = None,
        errors: list[ConfigIssue] | None = None,
    ) -> None:
        super().__init__(code, message, suggestion=suggestion, help_url=help_url)
        self.path = path
        self.file = file
        self.line = line
        self.column = column
        self.errors = list(errors) if errors else []

    @classmethod
    def from_issue(cls, issue: ConfigIssue, errors: list[ConfigIssue] | None = None) -> ConfigError:
        return cls(
            issue.code,
            issue.message,
            path=issue.path,
            file=issue.file,
            line=issue.line,
            column=issue.column,
            suggestion=issue.suggestion,
            errors=errors if errors is not None else [issue],
        )

    def __str__(self) -> str:
        where = ""
        if self.file is not None:
            where = f" ({self.file}"
            if self.line is not None:
                where += f":{self.line}"
                if self.column is not None:
                    where += f":{self.column}"
            where += ")"
        path = f" at {self.path}" if self.path else ""
        return f"[{self.code}] {self.message}{path}{where}"

    def to_dict(self) -> dict[str, Any]:
        out = super().to_dict()
        for key in ("path", "file", "line", "column"):
            value = getattr(self, key)
            if value is not None:
                out[key] = value
        return out


class ExtensionError(GoondanError):
    """An extension failed to load (``E_EXT_LOAD``), register (``E_EXT_INIT``), accept its config
    (``E_EXT_CONFIG``) or used an API surface this runtime does not offer (``E_EXT_COMPAT``)."""

    extension_name: str | None

    def __init__(
        self,
        code: str,
        message: str,
        *,
        extension_name: str | None = None,
        suggestion: str | None = None,
        help_url: str | None = None,
    ) -> None:
        super().__init__(code, message, suggestion=suggestion, help_url=help_url)
        self.extension_name = extension_name

    def to_dict(self) -> dict[str, Any]:
        out = super().to_dict()
        if self.extension_name is not None:
            out["extensionName"] = self.extension_name
        return out


class AgentRequestError(GoondanError):
    """An inter-agent request or send failed (``AGENT_NOT_FOUND``, ``CIRCULAR_CALL_DETECTED``,
    ``AGENT_REQUEST_TIMEOUT``, ...)."""

    target: str | None

    def __init__(
        self,
        code: str,
        message: str,
        *,
        target: str | None = None,
        suggestion: str | None = None,
        help_url: str | None = None,
    ) -> None:
        super().__init__(code, message, suggestion=suggestion, help_url=help_url)
        self.target = target


class ModelError(GoondanError):
    """A model provider failed or produced something the runtime cannot use."""


class StorageError(GoondanError):
    """Persisted state is unreadable or could not be written durably."""

    file: str | None
    line: int | None

    def __init__(
        self,
        code: str,
        message: str,
        *,
        file: str | None = None,
        line: int | None = None,
        suggestion: str | None = None,
    ) -> None:
        super().__init__(code, message, suggestion=suggestion)
        self.file = file
        self.line = line


__all__ = [
    "AgentRequestError",
    "ConfigError",
    "ConfigIssue",
    "ExtensionError",
    "GoondanError",
    "ModelError",
    "StorageError",
    "help_url_for",
]
