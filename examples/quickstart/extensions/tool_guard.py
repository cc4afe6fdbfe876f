"""Step middleware that removes denied tools from the catalog before the model call."""

from __future__ import annotations

from typing import Any

from goondan.types import ExtensionApi, StepContext, StepResult


def register(api: ExtensionApi, config: dict[str, Any]) -> None:
    deny = set(config.get("deny", []))

    async def step(ctx: StepContext) -> StepResult:
        ctx.tool_catalog = [item for item in ctx.tool_catalog if item["name"] not in deny]
        return await ctx.next()

    api.pipeline.register("step", step)
