"""bash: run shell commands and scripts for the agent.

``exec`` runs ``/bin/sh -lc <command>``; ``script`` runs ``<shell> <path> args...``. Both run in
the instance workdir unless ``cwd`` says otherwise, with a minimal environment (never the runtime's
own, which holds provider API keys: a command's output lands in the history) plus what the Tool
config ``env: {allow: [...], set: {...}}`` adds (see :mod:`goondan.base.tools._env`) plus the call's
``env`` values, and return what happened (exit code, signal, captured output) as a normal result: a
failing command is information for the model, not a tool error. Tool errors are reserved for calls
that could not run at all (bad arguments, missing script or directory, missing shell).

The shell is not a sandbox: commands can touch anything the runtime's user can.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from goondan.base.tools._common import (
    ToolExecutionError,
    ToolInputError,
    args_dict,
    check_keys,
    opt_int,
    opt_str,
    require_str,
    string_map,
)
from goondan.base.tools._env import check_tool_config, child_env, parse_env_policy
from goondan.base.tools._process import DEFAULT_OUTPUT_LIMIT, ProcessOutcome, run_process
from goondan.types import ToolContext

DEFAULT_TIMEOUT_MS = 30_000
MAX_TIMEOUT_MS = 3_600_000
MAX_OUTPUT_LIMIT = 10_000_000
EXEC_SHELL = "/bin/sh"
DEFAULT_SCRIPT_SHELL = "/bin/bash"


def _workdir(ctx: ToolContext) -> Path:
    return Path(ctx.workdir)


def _cwd(ctx: ToolContext, args: dict[str, Any]) -> Path:
    raw = opt_str(args, "cwd")
    base = _workdir(ctx)
    if raw is None or raw == "":
        return base
    path = Path(raw)
    path = path if path.is_absolute() else base / path
    if not path.is_dir():
        raise ToolExecutionError(
            "E_BASH_CWD_NOT_FOUND",
            f"cwd '{raw}' is not an existing directory",
            suggestion="Pass a directory that exists, relative to the instance workdir, or omit cwd.",
        )
    return path.resolve()


def _env(ctx: ToolContext, args: dict[str, Any]) -> dict[str, str]:
    config = check_tool_config(getattr(ctx, "config", None), ("env",), "Tool/bash config")
    policy = parse_env_policy(config.get("env"), "Tool/bash config")
    env = child_env(policy, _workdir(ctx))
    env.update(string_map(args, "env") or {})
    return env


def _common_args(args: dict[str, Any]) -> tuple[int, int]:
    timeout = opt_int(args, "timeoutMs", DEFAULT_TIMEOUT_MS, minimum=1, maximum=MAX_TIMEOUT_MS)
    limit = opt_int(args, "maxOutputBytes", DEFAULT_OUTPUT_LIMIT, minimum=2, maximum=MAX_OUTPUT_LIMIT)
    assert timeout is not None and limit is not None
    return timeout, limit


def _outcome(result: ProcessOutcome) -> dict[str, Any]:
    out: dict[str, Any] = {
        "durationMs": result.duration_ms,
        "stdout": result.stdout,
        "stderr": result.stderr,
        "exitCode": result.exit_code,
        "signal": result.signal,
        "timedOut": result.timed_out,
    }
    if result.stdout_truncated or result.stderr_truncated:
        out["outputTruncated"] = True
    return out


async def exec_command(ctx: ToolContext, input: Any) -> dict[str, Any]:
    """``bash__exec``: ``{command, cwd?, timeoutMs?, env?, maxOutputBytes?}``."""
    args = args_dict(input)
    check_keys(args, ("command", "cwd", "timeoutMs", "env", "maxOutputBytes"))
    command = require_str(args, "command")
    timeout, limit = _common_args(args)
    cwd = _cwd(ctx, args)
    result = await run_process(
        [EXEC_SHELL, "-lc", command], cwd=cwd, env=_env(ctx, args), timeout_ms=timeout, output_limit=limit
    )
    return {"command": command, "cwd": str(cwd), **_outcome(result)}


async def run_script(ctx: ToolContext, input: Any) -> dict[str, Any]:
    """``bash__script``: ``{path, args?, shell?, cwd?, timeoutMs?, env?, maxOutputBytes?}``."""
    args = args_dict(input)
    check_keys(args, ("path", "args", "shell", "cwd", "timeoutMs", "env", "maxOutputBytes"))
    raw_path = require_str(args, "path")
    script_args = args.get("args")
    if script_args is None:
        script_args = []
    if not isinstance(script_args, list) or not all(
        isinstance(a, str | int | float) and not isinstance(a, bool) for a in script_args
    ):
        raise ToolInputError("'args' must be an array of strings")
    argv_tail = [a if isinstance(a, str) else str(a) for a in script_args]
    shell = opt_str(args, "shell") or DEFAULT_SCRIPT_SHELL
    timeout, limit = _common_args(args)
    cwd = _cwd(ctx, args)
    path = Path(raw_path)
    path = path if path.is_absolute() else _workdir(ctx) / path
    if not path.is_file():
        raise ToolExecutionError(
            "E_BASH_SCRIPT_NOT_FOUND",
            f"script '{raw_path}' does not exist or is not a file",
            suggestion="Write the script first (file-system__write) or pass a path relative to the instance workdir.",
        )
    try:
        result = await run_process(
            [shell, str(path), *argv_tail], cwd=cwd, env=_env(ctx, args), timeout_ms=timeout, output_limit=limit
        )
    except FileNotFoundError:
        raise ToolExecutionError(
            "E_BASH_SHELL_NOT_FOUND",
            f"shell '{shell}' was not found",
            suggestion="Pass an installed interpreter as 'shell', e.g. /bin/sh.",
        ) from None
    except PermissionError:
        raise ToolExecutionError(
            "E_BASH_SHELL_NOT_EXECUTABLE",
            f"shell '{shell}' is not executable",
            suggestion="Pass an executable interpreter as 'shell', e.g. /bin/sh.",
        ) from None
    return {"path": raw_path, "shell": shell, "args": argv_tail, "cwd": str(cwd), **_outcome(result)}


handlers = {"exec": exec_command, "script": run_script}
