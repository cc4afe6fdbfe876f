"""The environment a tool's child process gets: a minimal one, plus what the config allows.

Whatever a command prints lands in the conversation history (and at the model provider), so a
command must not see the runtime's environment wholesale: it holds provider API keys, tokens and
whatever the user exported. A child gets only what it needs to run:

- ``PATH`` (the runtime's, else the system default), ``LANG``/``LC_*``/``TZ``/``TMPDIR``/``USER``/
  ``LOGNAME`` when the runtime has them (they carry no secrets and change how programs behave);
- ``HOME`` set to the instance workdir: the user's home holds credential files, and a login shell
  (``sh -l``) would source its profile, which often exports keys again;
- ``TERM=dumb`` and ``SHELL=/bin/sh``: the output is read by a model, not a terminal.

Tool config ``env: {allow: [NAME | GLOB, ...], set: {NAME: value}}`` adds more: ``allow`` copies
runtime variables by name or shell-style pattern (``PIP_*``; ``["*"]`` restores the whole
environment), ``set`` fixes values. Allowing ``HOME`` passes the runtime's home instead of the
workdir.
"""

from __future__ import annotations

import fnmatch
import math
import os
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from goondan.errors import GoondanError

CONFIG_INVALID = "E_TOOL_CONFIG_INVALID"
PASSED_WHEN_SET = ("PATH", "LANG", "LC_ALL", "LC_CTYPE", "LC_MESSAGES", "TZ", "TMPDIR", "USER", "LOGNAME")
_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
_PATTERN = re.compile(r"^[A-Za-z0-9_*?\[\]!]+$")
_SUGGESTION = (
    "Write the tool config as env: {allow: [GITHUB_TOKEN, 'PIP_*'], set: {NAME: value}} "
    "(allow: variable names or shell patterns; set: names to strings, numbers or booleans)."
)


@dataclass(frozen=True, slots=True)
class EnvPolicy:
    allow: tuple[str, ...] = ()
    set: dict[str, str] = field(default_factory=dict)


def _invalid(where: str, message: str) -> GoondanError:
    return GoondanError(CONFIG_INVALID, f"{where}: {message}", suggestion=_SUGGESTION)


def _scalar(value: Any) -> str | None:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str):
        return value
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float) and math.isfinite(value):
        return str(int(value)) if value.is_integer() else str(value)
    return None


def parse_env_policy(raw: Any, where: str) -> EnvPolicy:
    """Check an ``env`` config value; bad shapes are ``E_TOOL_CONFIG_INVALID`` naming the key."""
    if raw is None:
        return EnvPolicy()
    if not isinstance(raw, Mapping):
        raise _invalid(where, f"env must be a mapping with 'allow' and/or 'set', got {type(raw).__name__}")
    unknown = [str(k) for k in raw if k not in ("allow", "set")]
    if unknown:
        raise _invalid(where, f"unknown key(s) {', '.join(unknown)} in env (allowed: allow, set)")
    allow = raw.get("allow") or []
    if not isinstance(allow, list) or not all(isinstance(a, str) and _PATTERN.match(a) for a in allow):
        raise _invalid(where, "env.allow must be a list of variable names or shell patterns like 'PIP_*'")
    fixed: dict[str, str] = {}
    set_raw = raw.get("set") or {}
    if not isinstance(set_raw, Mapping):
        raise _invalid(where, "env.set must be a mapping of variable names to values")
    for name, value in set_raw.items():
        if not isinstance(name, str) or not _NAME.match(name):
            raise _invalid(where, f"env.set has an invalid variable name {name!r}")
        text = _scalar(value)
        if text is None:
            raise _invalid(where, f"env.set.{name} must be a string, number or boolean")
        fixed[name] = text
    return EnvPolicy(tuple(allow), fixed)


def check_tool_config(config: Any, allowed: tuple[str, ...], where: str) -> Mapping[str, Any]:
    """The tool's config mapping (``{}`` when unset), refusing keys the tool does not know."""
    if config is None:
        return {}
    if not isinstance(config, Mapping):
        raise _invalid(where, f"config must be a mapping, got {type(config).__name__}")
    unknown = [str(k) for k in config if k not in allowed]
    if unknown:
        raise GoondanError(
            CONFIG_INVALID,
            f"{where}: unknown config key(s) {', '.join(unknown)} (allowed: {', '.join(allowed)})",
            suggestion="Remove or correct the key in the Tool's config (or the agent's tools[].config).",
        )
    return config


def child_env(policy: EnvPolicy, workdir: Path, source: Mapping[str, str] | None = None) -> dict[str, str]:
    """The environment for a child process under ``policy`` (see the module docstring)."""
    runtime = os.environ if source is None else source
    env = {name: runtime[name] for name in PASSED_WHEN_SET if runtime.get(name)}
    env.setdefault("PATH", os.defpath)
    env.update({"HOME": str(workdir), "TERM": "dumb", "SHELL": "/bin/sh"})
    for pattern in policy.allow:
        for name, value in runtime.items():
            if fnmatch.fnmatchcase(name, pattern):
                env[name] = value
    env.update(policy.set)
    return env


__all__ = ["CONFIG_INVALID", "EnvPolicy", "check_tool_config", "child_env", "parse_env_policy"]
