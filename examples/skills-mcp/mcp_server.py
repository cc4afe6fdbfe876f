"""The example's MCP server (stdio), written with the official `mcp` SDK."""

from __future__ import annotations

from mcp.server.mcpserver import MCPServer

app = MCPServer("release-notes")

CHANGES = {"1.2.0": ["Faster startup", "Skills can run scripts", "MCP servers reconnect after a crash"]}


@app.tool()
def changelog(version: str) -> str:
    """The changes that went into a version, one per line."""
    return "\n".join(f"- {change}" for change in CHANGES.get(version, ["(no changes recorded)"]))


@app.tool()
def word_count(text: str) -> int:
    """Count the words of a text."""
    return len(text.split())


@app.resource("release://versions", description="Known versions")
def versions() -> str:
    return ", ".join(sorted(CHANGES))


if __name__ == "__main__":
    app.run()
