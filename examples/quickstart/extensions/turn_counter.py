"""Keeps a persisted per-instance turn counter in api.state and exposes it as a tool."""

from __future__ import annotations

from typing import Any

from goondan.types import ExtensionApi, ToolContext, TurnCompletedEvent, TurnContext, TurnResult


async def register(api: ExtensionApi) -> None:
    async def turn(ctx: TurnContext) -> TurnResult:
        state = await api.state.get() or {"turns": 0}
        state["turns"] += 1
        await api.state.set(state)
        return await ctx.next()

    async def stats(ctx: ToolContext, args: dict[str, Any]) -> dict[str, Any]:
        state = await api.state.get() or {"turns": 0}
        return {"turns": state["turns"], "instance": ctx.instance_key}

    def completed(event: TurnCompletedEvent) -> None:
        api.logger.debug("turn done in %sms", event["duration"])

    api.pipeline.register("turn", turn)
    api.tools.register(
        {
            "name": "turn-counter__stats",
            "description": "How many turns this conversation has had.",
            "parameters": {"type": "object", "properties": {}, "additionalProperties": False},
        },
        stats,
    )
    api.events.on("turn.completed", completed)
