"""A deterministic stand-in for an LLM: one tool per step, chosen from what the turn has done so far."""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from goondan.types import ModelOutput, ModelRequest


def _since_last_user(messages: Sequence[dict[str, Any]]) -> Sequence[dict[str, Any]]:
    for index in range(len(messages) - 1, -1, -1):
        if messages[index]["role"] == "user":
            return messages[index + 1 :]
    return messages


def _results(messages: Sequence[dict[str, Any]]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for message in _since_last_user(messages):
        if message["role"] == "tool":
            for part in message["content"]:
                output = part["output"]
                out[part["toolName"]] = output.get("value")
    return out


def _call(name: str, args: dict[str, Any]) -> ModelOutput:
    return {"text": None, "toolCalls": [{"name": name, "args": args}]}


def generate(request: ModelRequest) -> ModelOutput:
    tools = {t["name"] for t in request.tools}
    done = _results(request.messages)
    if "skills__open" not in done and "skills__open" in tools:
        return _call("skills__open", {"name": "release-notes"})
    if "skills__run" not in done:
        return _call("skills__run", {"name": "release-notes", "command": "sh ./draft.sh", "args": ["1.2.0"]})
    if "mcp__changelog" not in done:
        return _call("mcp__changelog", {"version": "1.2.0"})
    if "mcp__word_count" not in done:
        draft = done["skills__run"]["stdout"] + "\n" + str(done["mcp__changelog"])
        return _call("mcp__word_count", {"text": draft})
    draft = done["skills__run"]["stdout"].strip()
    changes = (
        json.dumps(done["mcp__changelog"]) if not isinstance(done["mcp__changelog"], str) else done["mcp__changelog"]
    )
    return {"text": f"{draft}\n{changes}\n({done['mcp__word_count']} words)", "toolCalls": []}
