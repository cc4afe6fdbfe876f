"""A tiny MCP server for the tests, written with the official SDK: ``python mcp_server.py`` serves
stdio, ``python mcp_server.py <port>`` serves streamable HTTP on 127.0.0.1:<port>/mcp."""

from __future__ import annotations

import os
import signal
import sys

from mcp.server.mcpserver import Context, MCPServer

app = MCPServer("test-notes")


@app.tool()
def add(a: int, b: int) -> int:
    """Add two integers."""
    return a + b


@app.tool()
def pid() -> str:
    """The server's process id."""
    return str(os.getpid())


@app.tool()
def crash() -> str:
    """Kill this server while the call is running."""
    os.kill(os.getpid(), signal.SIGKILL)
    return "unreachable"


@app.tool()
def refuse(reason: str) -> str:
    """Always fails."""
    raise ValueError(reason)


@app.tool()
async def slow(seconds: float) -> str:
    """Answers after ``seconds``."""
    import anyio

    await anyio.sleep(seconds)
    return "slow ok"


@app.tool(name="weird.name/with__parts")
def weird() -> str:
    """A tool whose name is not catalog-safe."""
    return "weird ok"


@app.tool()
def header(name: str, ctx: Context) -> str:
    """An HTTP request header as the server received it (empty over stdio)."""
    request = ctx.request_context.request
    headers = getattr(request, "headers", None)
    return str(headers.get(name, "")) if headers is not None else ""


@app.resource("notes://today", description="Today's note")
def today() -> str:
    return "buy milk"


@app.prompt()
def review(code: str) -> str:
    """Review a piece of code."""
    return f"Please review: {code}"


if __name__ == "__main__":
    if len(sys.argv) > 1:
        app.run("streamable-http", host="127.0.0.1", port=int(sys.argv[1]))
    else:
        app.run()
