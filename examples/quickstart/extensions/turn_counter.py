"""Keeps a persisted per-instance turn counter in api.state and exposes it as a tool."""


async def register(api):
    async def turn(ctx):
        state = await api.state.get() or {"turns": 0}
        state["turns"] += 1
        await api.state.set(state)
        return await ctx.next()

    async def stats(ctx, args):
        state = await api.state.get() or {"turns": 0}
        return {"turns": state["turns"], "instance": ctx.instance_key}

    api.pipeline.register("turn", turn)
    api.tools.register(
        {
            "name": "turn-counter__stats",
            "description": "How many turns this conversation has had.",
            "parameters": {"type": "object", "properties": {}, "additionalProperties": False},
        },
        stats,
    )
    api.events.on("turn.completed", lambda event: api.logger.debug("turn done in %sms", event["duration"]))
