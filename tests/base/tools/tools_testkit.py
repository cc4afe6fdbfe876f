"""Helpers for the standard-tool tests: a fake tool context, a handler runner and a bundle builder.

Unit tests call handlers directly with :class:`FakeCtx` (a real workdir under ``tmp_path``).
End-to-end tests write a real bundle (:func:`tools_bundle`) whose agents reference the built-in
tools as ``{kind: Tool, name: ..., package: "@goondan/base"}`` and whose ``python`` model forwards
every call to ``kit.MODEL`` (the shared kit's model hook).
"""

from __future__ import annotations

import asyncio
import inspect
import logging
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import kit


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


def tools_bundle(
    root: Path,
    agents: Mapping[str, Sequence[str]],
    *,
    entry: str | None = None,
    tool_config: Mapping[str, Any] | None = None,
) -> Path:
    """A bundle with the kit's forwarding python model and agents using the given built-in tools;
    ``tool_config`` gives some of the tools a per-agent ``config``."""
    configs = tool_config or {}

    def ref(tool: str) -> dict[str, Any]:
        return (
            {"ref": kit.base_ref("Tool", tool), "config": configs[tool]}
            if tool in configs
            else kit.base_ref("Tool", tool)
        )

    return kit.write_bundle(
        root,
        kit.package_doc("tools-test"),
        kit.python_model_doc(model="fake"),
        *(kit.agent_doc(name, tools=[ref(t) for t in tools]) for name, tools in agents.items()),
        kit.swarm_doc(list(agents), entry=entry, name="tools-swarm"),
        files={"model.py": kit.FORWARDING_MODEL},
    )


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


def last_results() -> list[dict[str, Any]]:
    """The tool-result parts the last model call received."""
    return kit.tool_results(kit.REQUESTS[-1].messages) if kit.REQUESTS else []


def output_value(part: Mapping[str, Any]) -> Any:
    """The JSON value a tool-result part carries (ok results) or its error dict (errors)."""
    return part["output"]["value"]
