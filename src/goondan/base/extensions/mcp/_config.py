"""The MCP extension's config as a typed value, plus the schema checked at load."""

from __future__ import annotations

import hashlib
import json
import shlex
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

DEFAULT_CONNECT_TIMEOUT_MS = 30_000
DEFAULT_CALL_TIMEOUT_MS = 120_000
PYTHON_PLACEHOLDER = "{python}"

_STR_MAP = {"type": "object", "additionalProperties": {"type": "string"}}

CONFIG_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "transport": {
            "type": "object",
            "properties": {
                "type": {"enum": ["stdio", "http"]},
                "command": {
                    "anyOf": [
                        {"type": "string", "minLength": 1},
                        {"type": "array", "items": {"type": "string"}, "minItems": 1},
                    ]
                },
                "env": _STR_MAP,
                "cwd": {"type": "string", "minLength": 1},
                "endpoint": {"type": "string", "pattern": "^https?://"},
                "headers": _STR_MAP,
            },
            "required": ["type"],
            "additionalProperties": False,
        },
        "attach": {
            "type": "object",
            "properties": {"mode": {"enum": ["stateful", "stateless"]}, "scope": {"enum": ["instance", "agent"]}},
            "additionalProperties": False,
        },
        "expose": {
            "type": "object",
            "properties": {
                "tools": {"type": "boolean"},
                "resources": {"type": "boolean"},
                "prompts": {"type": "boolean"},
            },
            "additionalProperties": False,
        },
        "timeouts": {
            "type": "object",
            "properties": {
                "connectMs": {"type": "integer", "minimum": 1},
                "callMs": {"type": "integer", "minimum": 1},
            },
            "additionalProperties": False,
        },
    },
    "required": ["transport"],
    "additionalProperties": False,
}


class ConfigProblem(ValueError):
    """A config the schema accepts but that cannot work (e.g. stdio without a command)."""


@dataclass(frozen=True)
class ServerConfig:
    transport: str
    command: tuple[str, ...] = ()
    env: dict[str, str] = field(default_factory=dict)
    cwd: str | None = None
    endpoint: str | None = None
    headers: dict[str, str] = field(default_factory=dict)
    mode: str = "stateful"
    scope: str = "instance"
    tools: bool = True
    resources: bool = False
    prompts: bool = False
    connect_timeout_s: float = DEFAULT_CONNECT_TIMEOUT_MS / 1000
    call_timeout_s: float = DEFAULT_CALL_TIMEOUT_MS / 1000

    @property
    def stateful(self) -> bool:
        return self.mode == "stateful"

    def needs_base(self) -> bool:
        """Whether connecting needs the bundle root: a stdio server whose cwd is not absolute."""
        return self.transport == "stdio" and (self.cwd is None or not Path(self.cwd).expanduser().is_absolute())

    def resolved_cwd(self, base: Path | None) -> Path | None:
        if self.transport != "stdio":
            return None
        cwd = Path(self.cwd).expanduser() if self.cwd else None
        if cwd is not None and cwd.is_absolute():
            return cwd
        if base is None:
            return cwd
        return base / cwd if cwd is not None else base

    def argv(self) -> list[str]:
        return [sys.executable if part == PYTHON_PLACEHOLDER else part for part in self.command]

    def describe(self, base: Path | None = None) -> str:
        """How the server is reached, for error messages: the command line (and cwd) or the URL."""
        if self.transport == "http":
            return f"endpoint {self.endpoint}"
        cwd = self.resolved_cwd(base)
        where = f" (cwd {cwd})" if cwd is not None else ""
        return f"command `{shlex.join(self.argv())}`{where}"

    def fingerprint(self, base: Path | None) -> str:
        """Identity of a connection: equal fingerprints may share one session (scope ``instance``)."""
        data = {
            "t": self.transport,
            "c": self.argv(),
            "e": self.env,
            "w": str(self.resolved_cwd(base)),
            "u": self.endpoint,
            "h": self.headers,
            "m": self.mode,
        }
        return hashlib.sha256(json.dumps(data, sort_keys=True).encode()).hexdigest()


def parse_config(config: dict[str, Any]) -> ServerConfig:
    transport = config["transport"]
    kind = transport["type"]
    attach = config.get("attach") or {}
    expose = config.get("expose") or {}
    timeouts = config.get("timeouts") or {}
    command: tuple[str, ...] = ()
    if kind == "stdio":
        raw = transport.get("command")
        if raw is None:
            raise ConfigProblem("transport.command is required for the stdio transport")
        command = tuple(shlex.split(raw)) if isinstance(raw, str) else tuple(raw)
        if not command or not command[0]:
            raise ConfigProblem("transport.command must name a program")
    elif not transport.get("endpoint"):
        raise ConfigProblem("transport.endpoint is required for the http transport")
    return ServerConfig(
        transport=kind,
        command=command,
        env=dict(transport.get("env") or {}),
        cwd=transport.get("cwd"),
        endpoint=transport.get("endpoint"),
        headers=dict(transport.get("headers") or {}),
        mode=attach.get("mode", "stateful"),
        scope=attach.get("scope", "instance"),
        tools=bool(expose.get("tools", True)),
        resources=bool(expose.get("resources", False)),
        prompts=bool(expose.get("prompts", False)),
        connect_timeout_s=int(timeouts.get("connectMs", DEFAULT_CONNECT_TIMEOUT_MS)) / 1000,
        call_timeout_s=int(timeouts.get("callMs", DEFAULT_CALL_TIMEOUT_MS)) / 1000,
    )
