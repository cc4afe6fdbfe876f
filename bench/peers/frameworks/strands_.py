"""Strands Agents adapter: ``strands.Agent`` with a custom model provider and hook providers."""

from __future__ import annotations

import sys
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
import _harness as h
from strands import Agent, tool
from strands.hooks import (
    AfterInvocationEvent,
    AfterModelCallEvent,
    AfterToolCallEvent,
    BeforeInvocationEvent,
    BeforeModelCallEvent,
    BeforeToolCallEvent,
)
from strands.models import Model

TOOL_USE = [
    {"messageStart": {"role": "assistant"}},
    {"contentBlockStart": {"start": {"toolUse": {"name": "add", "toolUseId": "call_1"}}}},
    {"contentBlockDelta": {"delta": {"toolUse": {"input": '{"a": 1, "b": 2}'}}}},
    {"contentBlockStop": {}},
    {"messageStop": {"stopReason": "tool_use"}},
]
TEXT = [
    {"messageStart": {"role": "assistant"}},
    {"contentBlockStart": {"start": {}}},
    {"contentBlockDelta": {"delta": {"text": "done"}}},
    {"contentBlockStop": {}},
    {"messageStop": {"stopReason": "end_turn"}},
]


class ScriptedModel(Model):
    """Streams a toolUse for add(1, 2) unless the last message carries the toolResult, then 'done'."""

    def update_config(self, **model_config: Any) -> None:
        return None

    def get_config(self) -> Any:
        return {}

    def structured_output(self, *args: Any, **kwargs: Any) -> Any:
        raise NotImplementedError

    async def stream(
        self, messages: Any, tool_specs: Any = None, system_prompt: Any = None, **kw: Any
    ) -> AsyncIterator[Any]:  # type: ignore[override]
        script = TEXT if any("toolResult" in block for block in messages[-1]["content"]) else TOOL_USE
        for event in script:
            yield event


@tool
async def add(a: int, b: int) -> int:
    """Add two numbers."""
    return await h.atool_add(a, b)


EVENTS = {
    "turn": (BeforeInvocationEvent, AfterInvocationEvent),
    "model": (BeforeModelCallEvent, AfterModelCallEvent),
    "tool": (BeforeToolCallEvent, AfterToolCallEvent),
}


class PassHooks:
    """One layer: a no-op callback before and one after the level's call (hooks observe, they do not wrap)."""

    def __init__(self, level: str, probe: bool) -> None:
        self.level = level
        self.probe = probe

    def register_hooks(self, registry: Any, **kwargs: Any) -> None:
        before, after = EVENTS[self.level]
        if self.probe:
            level = self.level

            def on_before(event: Any) -> None:
                h.HITS[level] += 1
        else:

            def on_before(event: Any) -> None:
                return None

        def on_after(event: Any) -> None:
            return None

        registry.add_callback(before, on_before)
        registry.add_callback(after, on_after)


def build(layers: dict[str, int], probe: bool) -> Agent:
    hooks = [PassHooks(level, probe) for level, n in layers.items() for _ in range(n)]
    return Agent(model=ScriptedModel(), tools=[add], hooks=hooks, callback_handler=None)


class Runner:
    """A Strands Agent holds its conversation and refuses concurrent invocations: one agent per
    conversation, its history cleared before each turn (fresh history, as for the other peers)."""

    def __init__(self, layers: dict[str, int], probe: bool) -> None:
        self.layers = layers
        self.probe = probe
        self.agents: dict[int, Agent] = {}

    async def turn(self, conv: int) -> None:
        agent = self.agents.get(conv)
        if agent is None:
            agent = self.agents[conv] = build(self.layers, self.probe)
        agent.messages.clear()
        result = await agent.invoke_async("go")
        if str(result).strip() != "done":
            raise AssertionError(result)

    async def close(self) -> None:
        return None


class StrandsAdapter(h.Adapter):
    def __init__(self) -> None:
        super().__init__(
            name="strands",
            package="strands-agents",
            import_stmt="from strands import Agent",
            levels={
                "turn": "HookProvider: no-op callbacks on BeforeInvocationEvent + AfterInvocationEvent",
                "model": "HookProvider: no-op callbacks on BeforeModelCallEvent + AfterModelCallEvent",
                "tool": "HookProvider: no-op callbacks on BeforeToolCallEvent + AfterToolCallEvent",
            },
            fake_model="strands.models.Model subclass whose async stream() yields Bedrock-style stream events "
            "(toolUse, then text); passed as Agent(model=...); callback_handler=None",
            notes="agent.invoke_async('go') per turn, one Agent per conversation, messages cleared each turn; "
            "async @tool",
        )

    async def make(self, layers: dict[str, int], probe: bool = False) -> Runner:
        return Runner(layers, probe)

    async def new_agent(self) -> Any:
        return build({}, False)


if __name__ == "__main__":
    h.main(StrandsAdapter())
