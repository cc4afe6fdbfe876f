"""``watch=True``: which agents a file change affects (digest §2.10).

Each agent gets a fingerprint over everything its instances are built from: its Agent resource, its
Model (and a ``python`` model's entry file), its Tools and Extensions (resources and entry files,
with per-agent config) and the Swarm. After a change the bundle is reloaded and only agents whose
fingerprint changed are restarted; a Swarm change changes every fingerprint, so everything restarts.
"""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path
from typing import Any

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


__all__ = ["agent_fingerprints", "changed_agents", "scan"]
