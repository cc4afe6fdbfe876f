"""A stdio MCP server written with the official `mcp` SDK: the tools the agent gets over MCP."""

from mcp.server.mcpserver import MCPServer

app = MCPServer("inventory")

STOCK = {"apples": 12, "pears": 0}


@app.tool()
def stock(item: str) -> int:
    """How many of an item are in stock."""
    return STOCK.get(item, 0)


@app.tool()
def reorder(item: str, quantity: int) -> str:
    """Order more of an item."""
    return f"ordered {quantity} {item}"


if __name__ == "__main__":
    app.run()
