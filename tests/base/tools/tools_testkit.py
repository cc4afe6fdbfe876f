"""Helpers for the standard-tool tests: a fake tool context, a handler runner and bundle builders.

Unit tests call handlers directly with :class:`FakeCtx` (a real workdir under ``tmp_path``).
End-to-end tests write a real bundle whose agents reference the built-in tools as
``{kind: Tool, name: ..., package: "@goondan/base"}`` and whose ``python`` model forwards every
call to :data:`MODEL` (``tests/base/tools`` is on ``sys.path`` while the tests run).
"""

from __future__ import annotations

import asyncio
import inspect
import json
import logging
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

API = "goondan.ai/v1"
BASE = "@goondan/base"

# what the python model does; set per test (reset by conftest)
MODEL: Callable[[Any], Any] | None = None
# the messages each model call received (JSON copies)
SEEN: list[list[dict[str, Any]]] = []

FORWARDING_MODEL = """\
import tools_testkit


def generate(request):
    return tools_testkit.forward(request)
"""


def forward(request: Any) -> Any:
    SEEN.append(json.loads(json.dumps(list(request.messages))))
    assert MODEL is not None, "test did not set tools_testkit.MODEL"
    return MODEL(request)


def reset() -> None:
    global MODEL
    MODEL = None
    SEEN.clear()


@dataclass
class FakeCtx:
    """The attributes a tool handler may use (CONTRACT §5), with a real workdir."""

    workdir: Path
    runtime: Any = None
    agent_name: str = "agent-a"
    instance_key: str = "key-1"
    turn_id: str = "turn-1"
    trace_id: str = "trace-1"
    tool_call_id: str = "call-1"
    message: Any = None
    logger: logging.Logger = field(default_factory=lambda: logging.getLogger("tools-test"))
    config: dict[str, Any] = field(default_factory=dict)  # the Tool's config (spec.config + agent override)


def run(handler: Callable[[Any, Any], Any], ctx: Any, args: Any) -> Any:
    """Call a handler (sync or async) the way the executor does."""

    async def main() -> Any:
        out = handler(ctx, args)
        return await out if inspect.isawaitable(out) else out

    return asyncio.run(main())


# --- bundles ------------------------------------------------------------------------------------


def base_tool(name: str) -> dict[str, Any]:
    return {"kind": "Tool", "name": name, "package": BASE}


def agent_doc(name: str, tools: Sequence[str], tool_config: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """An Agent using built-in tools; ``tool_config`` gives some of them a per-agent ``config``."""
    configs = tool_config or {}
    items = [{"ref": base_tool(t), "config": configs[t]} if t in configs else base_tool(t) for t in tools]
    return {
        "apiVersion": API,
        "kind": "Agent",
        "metadata": {"name": name},
        "spec": {"modelConfig": {"modelRef": "Model/m"}, "tools": items},
    }


def write_bundle(
    root: Path,
    agents: Mapping[str, Sequence[str]],
    *,
    entry: str | None = None,
    tool_config: Mapping[str, Any] | None = None,
) -> Path:
    """A bundle with one forwarding python model and agents using the given built-in tools."""
    names = list(agents)
    docs: list[dict[str, Any]] = [
        {"apiVersion": API, "kind": "Package", "metadata": {"name": "tools-test"}, "spec": {"version": "0.1.0"}},
        {
            "apiVersion": API,
            "kind": "Model",
            "metadata": {"name": "m"},
            "spec": {"provider": "python", "model": "fake", "options": {"entry": "./model.py"}},
        },
        *(agent_doc(n, t, tool_config) for n, t in agents.items()),
        {
            "apiVersion": API,
            "kind": "Swarm",
            "metadata": {"name": "tools-swarm"},
            "spec": {"entryAgent": f"Agent/{entry or names[0]}", "agents": [{"ref": f"Agent/{n}"} for n in names]},
        },
    ]
    root.mkdir(parents=True, exist_ok=True)
    (root / "goondan.yaml").write_text(yaml.safe_dump_all(docs, sort_keys=False), encoding="utf-8")
    (root / "model.py").write_text(FORWARDING_MODEL, encoding="utf-8")
    return root


def calls_then_text(*calls: tuple[str, dict[str, Any]], final: str = "done") -> Callable[[Any], Any]:
    """A model that makes the given tool calls (one per step) and then answers ``final``."""
    steps = list(calls)
    state = {"i": 0}

    def generate(request: Any) -> Any:
        i = state["i"]
        state["i"] += 1
        if i < len(steps):
            name, args = steps[i]
            return {"text": None, "toolCalls": [{"id": f"c{i}", "name": name, "args": args}]}
        return {"text": final, "toolCalls": []}

    return generate


def tool_results(messages: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """The tool-result parts of a model input, in order."""
    out: list[dict[str, Any]] = []
    for m in messages:
        if m.get("role") == "tool" and isinstance(m.get("content"), list):
            out.extend(p for p in m["content"] if p.get("type") == "tool-result")
    return out


def last_results() -> list[dict[str, Any]]:
    return tool_results(SEEN[-1]) if SEEN else []


def output_value(part: Mapping[str, Any]) -> Any:
    """The JSON value a tool-result part carries (ok results) or its error dict (errors)."""
    return part["output"]["value"]
