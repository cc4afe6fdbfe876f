"""What the ``slack`` and ``telegram`` tools share: the bot token, API calls, workdir files.

**Token.** Never an argument: a model would have to see it (and could be talked into sending it
elsewhere). It comes from the Tool config ``token`` (a string, or a ValueSource
``{valueFrom: {env: NAME}}`` / ``{value: ...}``), else from the platform's customary environment
variables. It is never logged, never part of a result, and redacted from error messages (Telegram
puts it in every URL path).

**Calls.** Through the shared pooled client (:mod:`goondan._http_client`), ``timeoutMs`` per call
(default 15 s), marked safe to retry on 429/503 because both platforms answer a rate-limited call
without carrying it out (the wait honours ``Retry-After`` / ``parameters.retry_after``).

**Files.** Uploads read from and downloads write to paths inside the instance workdir only, through
the same symlink-safe walk as the ``file-system`` tool.
"""

from __future__ import annotations

import errno
import mimetypes
import os
import stat as stat_mod
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from goondan._http_client import ClientResponse, HttpClientError, ResponseTooLarge, request
from goondan.base.tools._common import ToolExecutionError, ToolInputError
from goondan.base.tools._confine import Walk, workdir_root
from goondan.base.tools._env import check_tool_config
from goondan.types import ToolContext

TOKEN_MISSING = "E_TOOL_TOKEN_MISSING"
DEFAULT_TIMEOUT_MS = 15_000
MAX_FILE_BYTES = 50 * 1024 * 1024
CONFIG_KEYS = ("token", "apiBase", "timeoutMs")


def tool_config(ctx: ToolContext, tool: str) -> Mapping[str, Any]:
    return check_tool_config(getattr(ctx, "config", None), CONFIG_KEYS, f"Tool/{tool} config")


def _value(raw: Any, where: str) -> str | None:
    """A config value that may be a ValueSource: ``{value}`` or ``{valueFrom: {env: NAME}}``."""
    if raw is None or isinstance(raw, str):
        return raw or None
    if isinstance(raw, Mapping):
        if isinstance(raw.get("value"), str):
            return str(raw["value"]) or None
        source = raw.get("valueFrom")
        if isinstance(source, Mapping) and isinstance(source.get("env"), str):
            return os.environ.get(source["env"]) or None
    raise ToolExecutionError(
        "E_TOOL_CONFIG_INVALID",
        f"{where}: token must be a string or {{valueFrom: {{env: NAME}}}}",
        suggestion="Write token: {valueFrom: {env: SLACK_BOT_TOKEN}} (keep the token itself out of the bundle).",
    )


def resolve_token(ctx: ToolContext, tool: str, env_names: Sequence[str]) -> str:
    config = tool_config(ctx, tool)
    token = _value(config.get("token"), f"Tool/{tool} config")
    for name in env_names:
        if token:
            break
        token = os.environ.get(name) or None
    if not token:
        raise ToolExecutionError(
            TOKEN_MISSING,
            f"no {tool} bot token: the Tool config has no token and none of {', '.join(env_names)} is set",
            suggestion=f"Set {env_names[0]} in the environment (or .env), or the Tool config "
            f"token: {{valueFrom: {{env: {env_names[0]}}}}}.",
        )
    return token


def api_base(ctx: ToolContext, tool: str, default: str) -> str:
    raw = tool_config(ctx, tool).get("apiBase")
    if raw is not None and (not isinstance(raw, str) or not raw.startswith(("http://", "https://"))):
        raise ToolExecutionError(
            "E_TOOL_CONFIG_INVALID",
            f"Tool/{tool} config: apiBase must be an http(s) URL",
            suggestion=f"Leave it unset for {default}, or give the base URL of a compatible API.",
        )
    return (raw or default).rstrip("/")


def timeout_seconds(ctx: ToolContext, tool: str) -> float:
    raw = tool_config(ctx, tool).get("timeoutMs", DEFAULT_TIMEOUT_MS)
    if not isinstance(raw, int) or isinstance(raw, bool) or raw < 1:
        raise ToolExecutionError(
            "E_TOOL_CONFIG_INVALID",
            f"Tool/{tool} config: timeoutMs must be a positive integer",
            suggestion=f"Use e.g. timeoutMs: {DEFAULT_TIMEOUT_MS}.",
        )
    return raw / 1000


def redact(text: str, token: str) -> str:
    return text.replace(token, "<token>") if token else text


async def call(
    code: str,
    what: str,
    method: str,
    url: str,
    token: str,
    *,
    timeout: float,
    max_bytes: int | None = None,
    **kwargs: Any,
) -> ClientResponse:
    """One API call; no answer at all is ``code`` naming ``what`` (the token redacted)."""
    try:
        return await request(method, url, timeout=timeout, safe=True, max_bytes=max_bytes, **kwargs)
    except ResponseTooLarge as exc:
        raise ToolExecutionError(
            code,
            f"{what}: {redact(str(exc), token)}",
            suggestion="The file is over the size limit; raise maxBytes or fetch it another way.",
        ) from None
    except HttpClientError as exc:
        raise ToolExecutionError(
            code,
            f"{what} failed: {redact(str(exc), token)}",
            suggestion="Check the network and the Tool config apiBase; the call can be retried.",
        ) from None


# --- workdir files ---------------------------------------------------------------------------------


def _io_error(raw: str, exc: OSError) -> ToolExecutionError:
    if isinstance(exc, FileNotFoundError):
        return ToolExecutionError("E_FS_NOT_FOUND", f"'{raw}' does not exist", suggestion="Check the path.")
    return ToolExecutionError("E_FS_IO", f"'{raw}': {exc.strerror or exc}", suggestion="Check the path.")


def read_workdir_file(ctx: ToolContext, raw: str, limit: int = MAX_FILE_BYTES) -> tuple[bytes, str]:
    """The bytes of ``raw`` (inside the workdir) and its file name."""
    try:
        with Walk(workdir_root(Path(ctx.workdir)), raw) as walk:
            fd = walk.open(os.O_RDONLY)
            with open(fd, "rb") as fh:
                if not stat_mod.S_ISREG(os.fstat(fd).st_mode):
                    raise ToolInputError(f"'{raw}' is not a regular file")
                data = fh.read(limit + 1)
            name = walk.path.name
    except OSError as exc:
        raise _io_error(raw, exc) from None
    if len(data) > limit:
        raise ToolInputError(f"'{raw}' is larger than {limit} bytes", suggestion="Upload a smaller file.")
    return data, name


def write_workdir_file(ctx: ToolContext, raw: str, data: bytes) -> str:
    """Write ``data`` to ``raw`` (inside the workdir, parents created); the path as shown to the model."""
    try:
        with Walk(workdir_root(Path(ctx.workdir)), raw) as walk:
            if walk.is_root:
                raise IsADirectoryError(errno.EISDIR, os.strerror(errno.EISDIR))
            walk.make_parents()
            fd = walk.open(os.O_WRONLY | os.O_CREAT | os.O_TRUNC)
            with open(fd, "wb") as fh:
                fh.write(data)
            return walk.display
    except OSError as exc:
        raise _io_error(raw, exc) from None


def media_type(name: str, declared: str | None = None) -> str:
    if declared and declared != "application/octet-stream":
        return declared
    return mimetypes.guess_type(name)[0] or "application/octet-stream"


__all__ = [
    "DEFAULT_TIMEOUT_MS",
    "MAX_FILE_BYTES",
    "TOKEN_MISSING",
    "api_base",
    "call",
    "media_type",
    "read_workdir_file",
    "redact",
    "resolve_token",
    "timeout_seconds",
    "tool_config",
    "write_workdir_file",
]
