"""``gdn instance list|delete|restart`` and ``gdn restart``: state on disk and running ``gdn run``s."""

from __future__ import annotations

import argparse
import json
import shlex
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ._output import EXIT_CONFIG, EXIT_INTERNAL, EXIT_OK, EXIT_USAGE, CliError
from ._state import active_runs, state_root, store_backend, store_label

MANIFEST = "goondan.yaml"
LEGACY_BUNDLE = "(unknown: created before workspaces had a bundle)"


@dataclass(frozen=True, slots=True)
class _Scope:
    """The bundle whose workspaces a ``gdn instance`` command acts on (PATH argument, else the
    current directory when it holds a ``goondan.yaml``)."""

    bundle: str
    package: str | None

    def owns(self, record: dict[str, Any] | None) -> bool:
        if record is None:
            return False
        if self.package:
            return bool(record.get("package") == self.package)
        return not record.get("package") and record.get("bundle") == self.bundle

    def owns_run(self, root: Path, run: dict[str, Any]) -> bool:
        from ..storage import read_workspace_record

        record = read_workspace_record(root / "workspaces" / str(run.get("workspace")))
        if record is not None:
            return self.owns(record)
        # no workspace.json yet (written with the first conversation): the run's own identity says
        # which bundle it serves; a Package-named bundle's run was not found before its first request
        identity = run.get("identity")
        if isinstance(identity, dict):
            return self.owns({"package": identity.get("package"), "bundle": identity.get("bundle")})
        return not self.package and run.get("bundle") == self.bundle


def _package_name(manifest: Path) -> str | None:
    """The bundle's ``Package`` name, read without loading the bundle (a bundle that does not load,
    or whose secrets are not set, still has workspaces to list and delete)."""
    import yaml

    try:
        for doc in yaml.safe_load_all(manifest.read_text(encoding="utf-8")):
            if isinstance(doc, dict) and doc.get("kind") == "Package":
                name = (doc.get("metadata") or {}).get("name")
                return name if isinstance(name, str) and name else None
    except (OSError, UnicodeDecodeError, yaml.YAMLError, AttributeError):
        return None
    return None


def _scope(args: argparse.Namespace) -> _Scope | None:
    if getattr(args, "all_workspaces", False) or getattr(args, "workspace", None):
        return None
    given = getattr(args, "path", None)
    if given is None:
        cwd = Path.cwd()
        if not (cwd / MANIFEST).is_file():
            return None
        target = cwd
    else:
        target = Path(given)
        if target.is_file() and target.name == MANIFEST:
            target = target.parent
        if not (target / MANIFEST).is_file():
            raise CliError(
                "E_CONFIG_NOT_A_BUNDLE",
                f"{given} is not a bundle: it has no {MANIFEST}",
                exit_code=EXIT_CONFIG,
                suggestion="Pass a bundle directory, or --all-workspaces / -w ID to look at every bundle's state.",
            )
    directory = target.resolve()
    return _Scope(str(directory), _package_name(directory / MANIFEST))


def _instances(
    backend: Any, workspace: str | None, scope: _Scope | None = None
) -> list[tuple[str, dict[str, Any] | None, Any]]:
    """``(workspace id, workspace record, InstanceInfo)`` of every instance in scope, read through
    the store backend (a directory or a database alike)."""
    out: list[tuple[str, dict[str, Any] | None, Any]] = []
    for ws in backend.list_workspaces():
        if workspace is not None and ws != workspace:
            continue
        store = backend.workspace(ws)
        record = store.record()
        if scope is not None and not scope.owns(record):
            continue
        out.extend((ws, record, info) for info in store.list_instances())
        # the file store also names the instances whose metadata.json is corrupt (see _unreadable_note)
        unreadable = getattr(store, "unreadable_instances", None)
        if unreadable is not None:
            out.extend((ws, record, info) for info in unreadable())
    return out


def _unreadable_note(rows: list[tuple[str, dict[str, Any] | None, Any]]) -> None:
    """Warn about each listed instance whose ``metadata.json`` cannot be read. Its conversation is
    in ``messages/`` and does not depend on the metadata; the next turn of that instance in
    ``gdn run`` writes a new ``metadata.json`` (its ``createdAt`` then restarts at that turn)."""
    from ..storage._workspace import INCOMPLETE_STATUS

    for _ws, _record, info in rows:
        problem = getattr(info, "problem", None)
        if problem and info.status == INCOMPLETE_STATUS:
            sys.stderr.write(
                f"warning: instance {info.agent_name}/{info.instance_key} is {INCOMPLETE_STATUS}: {problem} "
                f"({info.path}). Nothing is lost by deleting it (gdn instance delete "
                f"{shlex.quote(info.instance_key)} --agent {shlex.quote(info.agent_name)}); its next turn in "
                "gdn run completes it.\n"
            )
        elif problem:
            sys.stderr.write(
                f"warning: {problem} ({Path(info.path) / 'metadata.json'}): instance "
                f"{info.agent_name}/{info.instance_key} is listed as {info.status!r}, named from its "
                f"directory. Its conversation is in {Path(info.path) / 'messages'}, which does not depend on "
                "that file; its next turn "
                "in gdn run writes a new metadata.json (createdAt then restarts), or restore the file "
                "from a backup.\n"
            )


def _bundle_label(record: dict[str, Any] | None) -> str:
    if record is None:
        return LEGACY_BUNDLE
    package = record.get("package")
    bundle = str(record.get("bundle") or "?")
    return f"{package} ({bundle})" if package else bundle


def _legacy_note(backend: Any, scope: _Scope | None) -> None:
    """Tell about state written before workspaces belonged to a bundle: it is hidden by the scope."""
    if scope is None:
        return
    legacy = [ws for ws in backend.list_workspaces() if backend.workspace(ws).record() is None]
    if legacy:
        sys.stderr.write(
            f"note: {len(legacy)} workspace(s) from an older goondan ({', '.join(legacy[:3])}"
            f"{', ...' if len(legacy) > 3 else ''}) belong to no bundle; see `gdn instance list --all-workspaces`\n"
        )


def cmd_instance_list(args: argparse.Namespace) -> int:
    root = state_root(args)
    backend = store_backend(args)
    scope = _scope(args)
    running = {r.get("workspace"): r for r in active_runs(root)}
    rows = [
        (ws, record, info)
        for ws, record, info in _instances(backend, args.workspace, scope)
        if args.agent is None or info.agent_name == args.agent
    ]
    from ..storage._lease import shown_status

    rows.sort(key=lambda row: row[2].updated_at, reverse=True)
    if args.limit and not args.all:
        rows = rows[: args.limit]
    if not args.quiet:
        _unreadable_note(rows)
    if args.json:
        for ws, record, info in rows:
            out = {
                "workspace": ws,
                "bundle": record.get("bundle") if record else None,
                "package": record.get("package") if record else None,
                "swarm": record.get("swarm") if record else None,
                "agentName": info.agent_name,
                "instanceKey": info.instance_key,
                "status": shown_status(info),  # as the table says: `interrupted`, not a stale `processing`
                "createdAt": info.created_at.isoformat(),
                "updatedAt": info.updated_at.isoformat(),
                "running": ws in running,
                "path": str(info.path) if info.path != Path() else None,
            }
            if getattr(info, "problem", None):
                out["problem"] = info.problem
            sys.stdout.write(json.dumps(out, ensure_ascii=False) + "\n")
        return EXIT_OK
    if not args.quiet:
        _legacy_note(backend, scope)
    if not rows:
        if not args.quiet:
            where = f" of bundle {scope.package or scope.bundle}" if scope else ""
            unknown = _unknown_workspace(backend, args.workspace)
            sys.stdout.write(f"No instances{where} under {store_label(backend)}.{' ' + unknown if unknown else ''}\n")
        return EXIT_OK
    header = ("WORKSPACE", "BUNDLE", "AGENT", "INSTANCE KEY", "STATUS", "UPDATED", "RUN")
    table = [header] + [
        (
            ws,
            _bundle_label(record),
            info.agent_name,
            info.instance_key,
            shown_status(info),
            info.updated_at.strftime("%Y-%m-%d %H:%M:%S"),
            f"pid {running[ws]['pid']}" if ws in running else "-",
        )
        for ws, record, info in rows
    ]
    widths = [max(len(str(row[i])) for row in table) for i in range(len(header))]
    for row in table:
        sys.stdout.write("  ".join(str(cell).ljust(w) for cell, w in zip(row, widths, strict=True)).rstrip() + "\n")
    return EXIT_OK


def _confirm(matches: list[tuple[str, dict[str, Any] | None, Any]]) -> bool:
    """Ask on the terminal; without one the caller must have said ``--yes``."""
    if not (sys.stdin.isatty() and sys.stderr.isatty()):
        raise CliError(
            "E_CONFIRMATION_REQUIRED",
            f"deleting {len(matches)} instance(s) needs a confirmation and there is no terminal to ask on",
            exit_code=EXIT_USAGE,
            suggestion="Pass --yes (-y) to delete without asking.",
        )
    sys.stderr.write("This deletes the conversation and state of:\n")
    for ws, record, info in matches:
        sys.stderr.write(f"  {info.agent_name}@{info.instance_key}  (workspace {ws}, bundle {_bundle_label(record)})\n")
    sys.stderr.write(f"Delete {len(matches)} instance(s)? [y/N] ")
    sys.stderr.flush()
    answer = sys.stdin.readline().strip().lower()
    return answer in ("y", "yes")


def _unknown_workspace(backend: Any, workspace: str | None) -> str | None:
    """``--workspace ID`` that names no workspace: say so with the near ID (it read as if the
    workspace held no such instance, or no instance at all)."""
    if workspace is None:
        return None
    from ._logs import near_names

    known = list(backend.list_workspaces())
    if workspace in known:
        return None
    return f"There is no workspace {workspace!r}. " + near_names(workspace, known, "workspace")


def _missing_instance_hint(backend: Any, args: argparse.Namespace, scope: _Scope | None) -> str:
    """What exists instead of ``args.key`` (and ``args.agent``): the near key or the known keys, the
    agents that do hold the key, or the other bundle whose workspace holds it."""
    from ._logs import near_names

    listing = " List instances with `gdn instance list` (`--all-workspaces` for every bundle)."
    unknown = _unknown_workspace(backend, args.workspace)
    if unknown is not None:
        return unknown + listing
    instances = [info for _, _, info in _instances(backend, args.workspace, scope)]
    owners = sorted({info.agent_name for info in instances if info.instance_key == args.key})
    if owners:  # the key exists, only not for --agent
        return f"Key {args.key!r} belongs to agent(s) {', '.join(map(repr, owners))}: give one of them to --agent."
    if scope is not None and any(info.instance_key == args.key for _, _, info in _instances(backend, args.workspace)):
        return (
            f"Key {args.key!r} exists in another bundle's workspace: pass --all-workspaces (-A) or that bundle's PATH."
        )
    return near_names(args.key, {info.instance_key for info in instances}, "instance key") + listing


def cmd_instance_delete(args: argparse.Namespace) -> int:
    root = state_root(args)
    backend = store_backend(args)
    scope = _scope(args)
    matches = [
        (ws, record, info)
        for ws, record, info in _instances(backend, args.workspace, scope)
        if info.instance_key == args.key and (args.agent is None or info.agent_name == args.agent)
    ]
    if not matches:
        where = f" of bundle {scope.package or scope.bundle}" if scope else ""
        agent = f" of agent {args.agent!r}" if args.agent is not None else ""
        raise CliError(
            "E_INSTANCE_NOT_FOUND",
            f"no instance with key {args.key!r}{agent}{where} under {store_label(backend)}",
            suggestion=_missing_instance_hint(backend, args, scope),
        )
    running = {r.get("workspace"): r for r in active_runs(root)}
    busy = sorted({ws for ws, _, _ in matches if ws in running})
    if busy and not args.force:
        run = running[busy[0]]
        agents = sorted({info.agent_name for ws, _, info in matches if ws == busy[0]})
        agent = f" --agent {agents[0]}" if len(agents) == 1 else ""
        raise CliError(
            "E_RUN_ACTIVE",
            f"workspace {busy[0]!r} is in use by a running gdn run (pid {run['pid']})",
            # --force deletes it under that run, whose next turns on it then fail (E_INSTANCE_LEASE_LOST)
            suggestion=f"To start the conversation over while it runs: gdn restart --fresh{agent} "
            f"--instance-key {shlex.quote(str(run.get('instanceKey')))}. Or stop that gdn run first and delete "
            "again (--force deletes it under the run, whose next requests on it then fail).",
        )
    if not args.yes and not _confirm(matches):
        sys.stderr.write("Aborted; nothing was deleted.\n")
        return EXIT_INTERNAL
    for ws, _record, info in matches:
        backend.workspace(ws).delete_instance(info.agent_name, info.instance_key, force=args.force)
        if not args.quiet:
            sys.stdout.write(f"deleted {info.agent_name}@{info.instance_key} (workspace {ws})\n")
    return EXIT_OK


def _pick_run(root: Path, key: str | None, scope: _Scope | None = None, *, fresh: bool = False) -> dict[str, Any]:
    runs = active_runs(root)
    if scope is not None:
        runs = [r for r in runs if scope.owns_run(root, r)]
    active = runs
    if key is not None:
        runs = [r for r in runs if r.get("instanceKey") == key or r.get("workspace") == key]
    if not runs:
        what = f" with instance key {key!r}" if key else ""
        suggestion = "Start one with `gdn run` (with the same --state-root) and try again."
        if fresh and not active:  # the state is on disk: no running run is needed to clear it
            suggestion = (
                "--fresh clears the conversations of a running gdn run; with none running, "
                "`gdn instance delete KEY` deletes them (`gdn instance list` shows the keys)."
            )
        if key is not None and active:  # a typo'd key while runs are up: name the near one, not `gdn run`
            from ._logs import near_names

            suggestion = near_names(key, [str(r.get("instanceKey")) for r in active], "running instance key")
        raise CliError("E_NO_ACTIVE_RUN", f"no running gdn run{what} under {root}", suggestion=suggestion)
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
    run = _pick_run(root, key, _scope(args), fresh=bool(args.fresh))
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
            # an --agent the running swarm does not have is a usage error (see unknown_agent)
            exit_code=EXIT_USAGE if err.get("code") == "E_AGENT_NOT_FOUND" else EXIT_INTERNAL,
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
