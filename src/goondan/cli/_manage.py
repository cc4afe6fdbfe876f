"""``gdn instance list|delete|restart`` and ``gdn restart``: state on disk and running ``gdn run``s."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from ._output import EXIT_OK, EXIT_USAGE, CliError
from ._state import active_runs, state_root


def _workspaces(root: Path) -> list[str]:
    base = root / "workspaces"
    if not base.is_dir():
        return []
    return sorted(p.name for p in base.iterdir() if p.is_dir() and not p.name.startswith("."))


def _instances(root: Path, workspace: str | None) -> list[tuple[str, Any]]:
    from ..storage import WorkspaceStore

    out: list[tuple[str, Any]] = []
    for ws in _workspaces(root):
        if workspace is not None and ws != workspace:
            continue
        out.extend((ws, info) for info in WorkspaceStore(root, ws).list_instances())
    return out


def cmd_instance_list(args: argparse.Namespace) -> int:
    root = state_root(args)
    running = {r.get("workspace"): r for r in active_runs(root)}
    rows = [
        (ws, info)
        for ws, info in _instances(root, args.workspace)
        if args.agent is None or info.agent_name == args.agent
    ]
    rows.sort(key=lambda row: row[1].updated_at, reverse=True)
    if args.limit and not args.all:
        rows = rows[: args.limit]
    if args.json:
        for ws, info in rows:
            record = {
                "workspace": ws,
                "agentName": info.agent_name,
                "instanceKey": info.instance_key,
                "status": info.status,
                "createdAt": info.created_at.isoformat(),
                "updatedAt": info.updated_at.isoformat(),
                "running": ws in running,
                "path": str(info.path),
            }
            sys.stdout.write(json.dumps(record, ensure_ascii=False) + "\n")
        return EXIT_OK
    if not rows:
        if not args.quiet:
            sys.stdout.write(f"No instances under {root}.\n")
        return EXIT_OK
    header = ("WORKSPACE", "AGENT", "INSTANCE KEY", "STATUS", "UPDATED", "RUN")
    table = [header] + [
        (
            ws,
            info.agent_name,
            info.instance_key,
            info.status,
            info.updated_at.strftime("%Y-%m-%d %H:%M:%S"),
            f"pid {running[ws]['pid']}" if ws in running else "-",
        )
        for ws, info in rows
    ]
    widths = [max(len(str(row[i])) for row in table) for i in range(len(header))]
    for row in table:
        sys.stdout.write("  ".join(str(cell).ljust(w) for cell, w in zip(row, widths, strict=True)).rstrip() + "\n")
    return EXIT_OK


def cmd_instance_delete(args: argparse.Namespace) -> int:
    from ..storage import WorkspaceStore

    root = state_root(args)
    matches = [
        (ws, info)
        for ws, info in _instances(root, args.workspace)
        if info.instance_key == args.key and (args.agent is None or info.agent_name == args.agent)
    ]
    if not matches:
        raise CliError(
            "E_INSTANCE_NOT_FOUND",
            f"no instance with key {args.key!r} under {root}",
            suggestion="List instances with `gdn instance list`.",
        )
    running = {r.get("workspace"): r for r in active_runs(root)}
    busy = sorted({ws for ws, _ in matches if ws in running})
    if busy and not args.force:
        raise CliError(
            "E_RUN_ACTIVE",
            f"workspace {busy[0]!r} is in use by a running gdn run (pid {running[busy[0]]['pid']})",
            suggestion="Stop that gdn run first, or pass --force.",
        )
    for ws, info in matches:
        WorkspaceStore(root, ws).delete_instance(info.agent_name, info.instance_key)
        if not args.quiet:
            sys.stdout.write(f"deleted {info.agent_name}@{info.instance_key} (workspace {ws})\n")
    return EXIT_OK


def _pick_run(root: Path, key: str | None) -> dict[str, Any]:
    runs = active_runs(root)
    if key is not None:
        runs = [r for r in runs if r.get("instanceKey") == key or r.get("workspace") == key]
    if not runs:
        what = f" with instance key {key!r}" if key else ""
        raise CliError(
            "E_NO_ACTIVE_RUN",
            f"no running gdn run{what} under {root}",
            suggestion="Start one with `gdn run` (with the same --state-root) and try again.",
        )
    if len(runs) > 1:
        keys = ", ".join(str(r.get("instanceKey")) for r in runs)
        raise CliError(
            "E_INVALID_ARGUMENT",
            f"{len(runs)} gdn runs are active ({keys}); choose one",
            exit_code=EXIT_USAGE,
            suggestion="Pass --instance-key KEY.",
        )
    return runs[0]


def _restart(args: argparse.Namespace, key: str | None, agent: str | None) -> int:
    from ._control import control_request

    root = state_root(args)
    run = _pick_run(root, key)
    try:
        reply = control_request(str(run["socket"]), {"op": "restart", "agent": agent, "fresh": bool(args.fresh)})
    except OSError as exc:
        raise CliError(
            "E_CONTROL_UNREACHABLE",
            f"cannot reach gdn run (pid {run['pid']}) at {run['socket']}: {exc}",
            suggestion="Is it still running? Check with `gdn instance list`.",
        ) from None
    if not reply.get("ok"):
        err = reply.get("error") or {}
        raise CliError(
            str(err.get("code") or "E_RESTART_FAILED"),
            str(err.get("message") or "restart failed"),
            suggestion=err.get("suggestion"),
        )
    if args.json:
        sys.stdout.write(
            json.dumps({"ok": True, "instanceKey": run.get("instanceKey"), "agent": agent, "fresh": bool(args.fresh)})
            + "\n"
        )
    elif not args.quiet:
        what = f'agent "{agent}"' if agent else f'swarm "{run.get("swarm")}" (instanceKey={run.get("instanceKey")})'
        sys.stdout.write(f"{what} restarted" + (" (fresh, state cleared)" if args.fresh else "") + "\n")
    return EXIT_OK


def cmd_restart(args: argparse.Namespace) -> int:
    return _restart(args, args.instance_key, args.agent)


def cmd_instance_restart(args: argparse.Namespace) -> int:
    return _restart(args, args.key, None)
