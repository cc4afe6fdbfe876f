"""``watch=True``: which agents a file change affects (docs/architecture.md#restart-and-watch).

Each agent gets a fingerprint over everything its instances are built from: its Agent resource, its
Model (and a ``python`` model's entry file), its Tools and Extensions (resources and entry files,
with per-agent config) and the Swarm. After a change the bundle is reloaded and only agents whose
fingerprint changed are restarted; a Swarm change changes every fingerprint, so everything restarts.

A change that does not load (a tool file saved half-way through an edit, a YAML typo) is reported and
*not* applied: the agents keep running the last good version, and the next save that loads is applied
and reported as ``reloaded: <files>``. The reports go to the ``goondan.watch`` logger (INFO for a
reload, ERROR for a change that cannot be applied), which ``gdn run --watch`` always shows.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
from pathlib import Path
from typing import Any

log = logging.getLogger("goondan.watch")

SKIP_DIRS = {".git", ".goondan", "__pycache__", "node_modules", ".venv", "dist"}


def _spec_json(resource: Any) -> str:
    spec = resource.spec
    data = spec.model_dump(mode="json", by_alias=True) if hasattr(spec, "model_dump") else spec
    return json.dumps({"kind": resource.kind, "name": resource.name, "spec": data}, sort_keys=True, default=str)


def _file_digest(path: Path | None) -> str:
    if path is None:
        return ""
    try:
        return hashlib.sha1(path.read_bytes()).hexdigest()
    except OSError:
        return "missing"


def agent_fingerprints(bundle: Any, swarm_name: str | None) -> dict[str, str]:
    swarm = bundle.select_swarm(swarm_name)
    names = [bundle.resolve_ref(a, swarm, "Agent").name for a in swarm.spec.agents]
    swarm_part = _spec_json(swarm)
    out: dict[str, str] = {}
    for name in names:
        plan = bundle.agent_plan(name, swarm)
        h = hashlib.sha1()
        h.update(swarm_part.encode())
        h.update(_spec_json(plan.agent).encode())
        h.update(_spec_json(plan.model).encode())
        entry = (getattr(plan.model.spec, "options", None) or {}).get("entry")
        if isinstance(entry, str):
            h.update(_file_digest(Path(plan.model.root) / entry).encode())
        for tool in plan.tools:
            h.update(_spec_json(tool).encode())
            h.update(_file_digest(tool.entry_path()).encode())
        for binding in plan.extensions:
            h.update(_spec_json(binding.resource).encode())
            h.update(json.dumps(binding.config, sort_keys=True, default=str).encode())
            h.update(_file_digest(binding.resource.entry_path()).encode())
        out[name] = h.hexdigest()
    return out


def scan(root: Path) -> dict[str, tuple[int, int]]:
    """``path → (mtime_ns, size)`` of every YAML and Python file under the bundle."""
    found: dict[str, tuple[int, int]] = {}
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames[:] = [d for d in dirnames if d not in SKIP_DIRS and not d.startswith(".")]
        for fn in filenames:
            if fn.endswith((".yaml", ".yml", ".py")):
                path = os.path.join(dirpath, fn)
                try:
                    st = os.stat(path)
                except OSError:
                    continue
                found[path] = (st.st_mtime_ns, st.st_size)
    return found


def changed_agents(before: dict[str, str], after: dict[str, str]) -> list[str]:
    return sorted(name for name in after if before.get(name) != after[name])


def describe_problem(exc: BaseException) -> list[str]:
    """``[CODE] file:line: message`` for every problem of ``exc`` (a ``ConfigError`` lists them all)."""
    issues = getattr(exc, "errors", None) or [exc]
    out: list[str] = []
    for issue in issues:
        code = getattr(issue, "code", type(issue).__name__)
        message = getattr(issue, "message", None) or str(issue)
        file, line = getattr(issue, "file", None), getattr(issue, "line", None)
        where = f"{file}:{line}" if file and line is not None else file
        out.append(f"[{code}] {where}: {message}" if where else f"[{code}] {message}")
    return out


class WatchReport:
    """Tells the user what each saved change did: applied (``reloaded: ...``) or not (``reload failed``).

    Why it keeps state: the files named in ``reloaded:`` are every file changed since the last
    applied reload, so the save that fixes a broken file reports that file even when the fixed content
    equals the version still running (no agent restarts then, but the user must learn it is fixed).
    """

    def __init__(self, root: Path) -> None:
        self.root = root
        self.pending: set[str] = set()
        self.broken = False

    def touched(self, before: dict[str, tuple[int, int]], after: dict[str, tuple[int, int]]) -> None:
        for path in set(before) | set(after):
            if before.get(path) != after.get(path):
                try:
                    self.pending.add(Path(path).relative_to(self.root).as_posix())
                except ValueError:
                    self.pending.add(path)

    def failed(self, exc: BaseException) -> None:
        self.broken = True
        lines = describe_problem(exc)
        log.error(
            "reload failed: %s\n  still serving the last good version; save the fixed file to reload",
            "\n  ".join(lines),
        )

    def applied(self, restarted: list[str]) -> None:
        files = ", ".join(sorted(self.pending)) or "bundle"
        if restarted:
            log.info("reloaded: %s (restarted %s)", files, ", ".join(restarted))
        elif self.broken:
            log.info("reloaded: %s (same as the running version)", files)
        else:
            log.info("reloaded: %s (no agent affected)", files)
        self.pending.clear()
        self.broken = False


__all__ = ["WatchReport", "agent_fingerprints", "changed_agents", "describe_problem", "log", "scan"]
