"""Reading what a run left on disk: JSONL files, instance directories, committed conversations."""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any


def read_jsonl(path: Path) -> list[dict[str, Any]]:
    """The records of a JSONL file (none when it does not exist yet)."""
    if not path.exists():
        return []
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]


def instance_dirs(state_root: Path) -> list[Path]:
    return sorted(p for p in state_root.glob("workspaces/*/instances/*") if p.is_dir())


def instance_dir(state_root: Path, agent: str, key: str) -> Path:
    """The directory of one instance, found through its ``metadata.json``."""
    for path in instance_dirs(state_root):
        meta = path / "metadata.json"
        if meta.exists():
            data = json.loads(meta.read_text(encoding="utf-8"))
            if data.get("agentName") == agent and data.get("instanceKey") == key:
                return path
    raise AssertionError(f"no instance {agent}@{key} under {state_root}")


def roles(messages: Iterable[Mapping[str, Any]]) -> list[str]:
    return [str(m["role"]) for m in messages]


def parts(message: Mapping[str, Any], kind: str) -> list[dict[str, Any]]:
    content = message.get("content")
    if not isinstance(content, list):
        return []
    return [p for p in content if isinstance(p, dict) and p.get("type") == kind]


def tool_results(messages: Iterable[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """The tool-result parts of a conversation, in order."""
    out: list[dict[str, Any]] = []
    for m in messages:
        if m.get("role") == "tool":
            out.extend(parts(m, "tool-result"))
    return out


def history(rt: Any, agent: str | None = None, key: str | None = None) -> list[dict[str, Any]]:
    """The committed conversation of an instance (``base.jsonl`` plus residual events) as LLM messages."""
    name = agent or rt.entry_agent
    store = rt.workspace  # the bundle's workspace (its id derives from the bundle and the swarm)
    path = store.instance_path(name, key or rt.swarm_instance_key) / "messages"
    records = read_jsonl(path / "base.jsonl")
    assert read_jsonl(path / "events.jsonl") == [], "history() expects a committed conversation"
    return [r["data"] for r in records]
