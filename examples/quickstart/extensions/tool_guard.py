"""Step middleware that removes denied tools from the catalog before the model call."""


def register(api, config):
    deny = set(config.get("deny", []))

    async def step(ctx):
        ctx.tool_catalog = [item for item in ctx.tool_catalog if item["name"] not in deny]
        return await ctx.next()

    api.pipeline.register("step", step)
