"""delegate__ask: forward a question to another agent of the swarm and return its reply."""

from typing import Any


async def ask(ctx: Any, args: dict[str, Any]) -> str:
    result = await ctx.runtime.request(args["agent"], args["question"])
    return str(result.response)


handlers = {"ask": ask}
