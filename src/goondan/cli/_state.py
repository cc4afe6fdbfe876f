"""The state root for a command and the registry of running ``gdn run`` processes.

A ``gdn run`` that stays up (connectors, interactive session) registers itself in
``<state_root>/runtime/runs/<workspaceId>.json`` = ``{pid, socket, instanceKey, swarm, bundle,
startedAt, connectors}`` and answers control requests on that Unix socket (see ``_control``), which is
how ``gdn restart`` and ``gdn instance restart`` reach it. A record whose pid is gone is stale and is
ignored (and removed).
"""

from __future__ import annotations

import argparse
import contextlib
import hashlib
import json
import os
import tempfile
from pathlib import Path
from typing import Any

MAX_SOCKET_PATH = 100


def state_root_arg(args: argparse.Namespace) -> Path | None:
    value = getattr(args, "state_root", None)
    return Path(value) if value else None


def state_root(args: argparse.Namespace, env: dict[str, str] | None = None) -> Path:
    from ..storage import resolve_state_root

    return resolve_state_root(getattr(args, "state_root", None), env)


def store_backend(args: argparse.Namespace, env: dict[str, str] | None = None) -> Any:
    """The store a command reads (``--store URL``, else ``GOONDAN_STORE``, else the filesystem
    store under the state root): ``gdn instance`` and ``gdn logs`` go through it, so they work
    the same against a directory and a PostgreSQL database."""
    from ..storage import open_store

    return open_store(getattr(args, "store", None), state_root=state_root(args, env), env=env)


def store_label(backend: Any) -> str:
    """Where a store is, for messages: its directory, or its URL without a password."""
    root = getattr(backend, "root", None)
    if isinstance(root, Path):
        return str(root)
    from ..storage._backends import _redact

    return _redact(str(backend.url))


def runs_dir(root: Path) -> Path:
    return root / "runtime" / "runs"


def socket_path(root: Path, workspace: str) -> Path:
    """The control socket; moved to the temp dir when the state root makes the path too long for AF_UNIX."""
    path = runs_dir(root) / f"{workspace}.sock"
    if len(str(path)) <= MAX_SOCKET_PATH:
        return path
    digest = hashlib.sha256(str(path).encode()).hexdigest()[:16]
    return Path(tempfile.gettempdir()) / f"goondan-{digest}.sock"


def pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def active_runs(root: Path) -> list[dict[str, Any]]:
    """Live registered runs; stale records are deleted on the way."""
    out: list[dict[str, Any]] = []
    directory = runs_dir(root)
    if not directory.is_dir():
        return out
    for file in sorted(directory.glob("*.json")):
        try:
            record = json.loads(file.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            continue
        if not isinstance(record, dict) or not isinstance(record.get("pid"), int):
            continue
        if not pid_alive(record["pid"]):
            with contextlib.suppress(OSError):
                file.unlink()
            continue
        record["_file"] = str(file)
        out.append(record)
    return out


def write_run(root: Path, workspace: str, record: dict[str, Any]) -> Path:
    from ..storage._atomic import ensure_private_dirs, replace_atomically

    directory = runs_dir(root)
    ensure_private_dirs(directory)
    target = directory / f"{workspace}.json"
    replace_atomically(target, json.dumps(record, indent=2).encode("utf-8"), durable=False)
    return target
