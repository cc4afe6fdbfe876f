"""Printing: colors, the ``[CODE] message`` / ``suggestion:`` / ``help:`` error format."""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Iterable, Mapping
from typing import Any, TextIO

EXIT_OK = 0
EXIT_INTERNAL = 1
EXIT_USAGE = 2
EXIT_CONFIG = 3
EXIT_VALIDATION = 4
EXIT_INTERRUPTED = 130

# Codes that say the bundle (or what it needs installed) cannot be set up, whichever layer found it:
# the loader (ConfigError), or the runtime when it first imports a user's tool, extension, python model
# or connector. They exit 3 (config), like a bundle that does not load for `gdn run`, so a script can
# tell "fix your bundle" from "the turn failed" (1) without parsing stderr.
LOAD_ERROR_CODES = frozenset(
    {
        "E_EXT_LOAD",
        "E_EXT_INIT",
        "E_EXT_CONFIG",
        "E_EXT_COMPAT",
        "E_TOOL_LOAD",
        "E_MODEL_LOAD",
        "E_MODEL_CONFIG",
        "E_MODEL_PROVIDER_UNKNOWN",
        "E_MODEL_SDK_MISSING",
        "E_CONNECTOR_LOAD",
        "E_CONNECTOR_CONFIG",
        "E_PACKAGE_MISSING",
        "E_PACKAGE_INCOMPATIBLE",
        "E_PACKAGE_INVALID",
        "E_ENV_FILE_NOT_FOUND",
        "E_TELEMETRY_CONFIG",
        "E_TELEMETRY_UNAVAILABLE",
        # the store the environment names refuses this login or has no such database: fix the URL
        "E_STORE_AUTH",
        "E_STORE_DATABASE_NOT_FOUND",
    }
)


# A store URL (--store / GOONDAN_STORE) that cannot mean any store, an executor (--executor /
# GOONDAN_EXECUTOR) nobody registered or that is not installed, Ray actor options that are not a JSON
# object: what the user typed cannot work, a usage error (2), unlike a store or cluster that is valid
# but does not answer (E_STORE_UNAVAILABLE, E_RAY_CONNECT: 1)
USAGE_ERROR_CODES = frozenset(
    {"E_STORE_URL_INVALID", "E_STORE_UNSUPPORTED", "E_EXECUTOR_UNSUPPORTED", "E_RAY_OPTIONS", "E_RAY_NOT_INSTALLED"}
)


def exit_code_for(code: object) -> int:
    """The exit code of a failure with this error code: 3 for a bundle that cannot be loaded or set
    up (``E_CONFIG_*`` and :data:`LOAD_ERROR_CODES`), 2 for :data:`USAGE_ERROR_CODES`, else 1 (a
    failed turn, an internal error)."""
    if isinstance(code, str) and (code.split("_", 2)[:2] == ["E", "CONFIG"] or code in LOAD_ERROR_CODES):
        return EXIT_CONFIG
    if code in USAGE_ERROR_CODES:
        return EXIT_USAGE
    return EXIT_INTERNAL


class Style:
    """ANSI colors only for terminals, never with ``--no-color``, a non-empty ``NO_COLOR`` or ``TERM=dumb``."""

    def __init__(self, stream: TextIO, enabled: bool) -> None:
        self.enabled = (
            enabled and stream.isatty() and not os.environ.get("NO_COLOR") and os.environ.get("TERM") != "dumb"
        )

    def __call__(self, text: str, code: str) -> str:
        return f"\033[{code}m{text}\033[0m" if self.enabled else text


class ErrorView:
    """An error given as a mapping (TurnResult.error, control replies) seen as an exception-like object."""

    def __init__(self, err: Mapping[str, Any]) -> None:
        self.code = err.get("code") or "E_TURN_FAILED"
        self.message = err.get("message") or "turn failed"
        self.suggestion = err.get("suggestion")
        self.help_url = err.get("helpUrl")


def location(item: Any) -> str | None:
    path = getattr(item, "path", None)
    file = getattr(item, "file", None)
    line = getattr(item, "line", None)
    column = getattr(item, "column", None)
    where = None
    if file:
        where = str(file)
        if line is not None:
            where += f":{line}"
            if column is not None:
                where += f":{column}"
    if path and where and path != where:  # a bundle path that does not exist is both: said once
        return f"{path} ({where})"
    return path or where


def print_error(
    exc: Any, *, json_mode: bool, color: bool, stream: TextIO | None = None, exit_code: int | None = None
) -> None:
    stream = stream or sys.stderr
    code = getattr(exc, "code", "INTERNAL_ERROR")
    message = getattr(exc, "message", None) or str(exc)
    suggestion = getattr(exc, "suggestion", None)
    help_url = getattr(exc, "help_url", None)
    if json_mode:
        payload: dict[str, Any] = {"code": code, "message": message}
        for key, value in (("suggestion", suggestion), ("helpUrl", help_url)):
            if value:
                payload[key] = value
        for attr in ("path", "file", "line", "column", "extension_name"):
            value = getattr(exc, attr, None)
            if value is not None:
                payload["extensionName" if attr == "extension_name" else attr] = value
        if exit_code is not None:
            payload["exitCode"] = exit_code
        stream.write(json.dumps(payload, ensure_ascii=False) + "\n")
        return
    style = Style(stream, color)
    stream.write(f"{style(f'[{code}]', '1;31')} {message}\n")
    where = location(exc)
    if where:
        stream.write(f"  at: {where}\n")
    if suggestion:
        stream.write(f"  suggestion: {suggestion}\n")
    if help_url:
        stream.write(f"  help: {help_url}\n")


class CliError(Exception):
    """A command failure with its exit code, printed in the standard error format."""

    def __init__(self, code: str, message: str, *, exit_code: int = EXIT_INTERNAL, suggestion: str | None = None):
        super().__init__(message)
        from ..errors import help_url_for

        self.code = code
        self.message = message
        self.exit_code = exit_code
        self.suggestion = suggestion
        self.help_url = help_url_for(code)


def unknown_agent(name: str, swarm: str, known: Iterable[str]) -> CliError:
    """An agent named on the command line (``--agent``) that the swarm does not have: a usage error
    (exit 2: the command line is wrong, not the bundle or the turn) with the near name."""
    from ._logs import near_names  # only on the error path

    return CliError(
        "E_AGENT_NOT_FOUND",
        f"agent {name!r} is not part of swarm {swarm!r}",
        exit_code=EXIT_USAGE,
        suggestion=near_names(name, known, "agent"),
    )
