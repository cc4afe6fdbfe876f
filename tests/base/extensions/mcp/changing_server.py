"""An MCP server whose tools, resources and prompts change while clients are connected, written
with the official SDK's lowlevel ``Server`` so the tests control exactly what ``tools/list`` answers.

``python changing_server.py [--legacy] [--no-listen] [port]``: stdio, or streamable HTTP on
127.0.0.1:<port>/mcp. Both protocol eras are served the way real servers do it: on a 2026-07-28
connection change events go to ``subscriptions/listen`` streams (the SDK's subscription bus); with
``--legacy`` the server refuses ``server/discover`` (as servers written before 2026 do), so the
client falls back to the ``initialize`` handshake, and the server advertises ``listChanged`` and
sends plain ``notifications/*/list_changed`` on its connection channel.

The tool calls that change things (``grow``, ``shrink``, ``reshape``, ``burst``, ``churn``,
``break``, ``add-resource``, ``add-prompt``) notify and then wait a moment before replying: a
notification and a reply travel on different streams, and the tests want the client to have
heard about the change before the reply, as it would when a change happens some time before
the agent's next step.
"""

from __future__ import annotations

import sys
from typing import Any

import anyio
from mcp.server.lowlevel import NotificationOptions, Server
from mcp.server.subscriptions import (
    InMemorySubscriptionBus,
    ListenHandler,
    PromptsListChanged,
    ResourcesListChanged,
    ToolsListChanged,
)
from mcp.shared.exceptions import MCPError
from mcp.types import (
    INTERNAL_ERROR,
    METHOD_NOT_FOUND,
    CallToolResult,
    GetPromptResult,
    ListPromptsResult,
    ListResourcesResult,
    ListToolsResult,
    Prompt,
    PromptMessage,
    ReadResourceResult,
    Resource,
    TextContent,
    TextResourceContents,
    Tool,
)
from mcp_types.version import MODERN_PROTOCOL_VERSIONS

LEGACY = "--legacy" in sys.argv
HEAD_START_S = 0.2

EMPTY = {"type": "object", "properties": {}}


def _tool(name: str, description: str, schema: dict[str, Any] | None = None) -> Tool:
    return Tool(name=name, description=description, input_schema=schema or EMPTY)


TOOLS: dict[str, Tool] = {
    t.name: t
    for t in [
        _tool("grow", "Add the tool 'extra'."),
        _tool("shrink", "Remove the tool 'doomed'."),
        _tool("reshape", "Change the description and schema of 'shape'."),
        _tool(
            "burst",
            "Add n tools b0..b<n-1>, one notification each.",
            {"type": "object", "properties": {"n": {"type": "integer"}}},
        ),
        _tool("churn", "Notify; the listing that follows adds 'late' and notifies while it is answered."),
        _tool("break", "Add the tool 'ghost' and make every later listing fail."),
        _tool("listings", "How many tools/list requests this server answered."),
        _tool("doomed", "Removed by 'shrink'."),
        _tool("shape", "Version 1.", {"type": "object", "properties": {"x": {"type": "string"}}}),
        _tool("add-resource", "Add the resource notes://new."),
        _tool("add-prompt", "Add the prompt 'fresh'."),
    ]
}
RESOURCES: list[Resource] = [Resource(uri="notes://today", name="today", description="Today's note")]
PROMPTS: list[Prompt] = [Prompt(name="review", description="Review code.")]
STATE: dict[str, Any] = {"listings": 0, "broken": False, "churn": False}

bus = InMemorySubscriptionBus()


class ChangingServer(Server[Any]):
    def create_initialization_options(self, notification_options: Any = None, *args: Any, **kwargs: Any) -> Any:
        # handshake-era capabilities: advertise listChanged (the SDK's default says false)
        options = notification_options or NotificationOptions(True, True, True)
        return super().create_initialization_options(options, *args, **kwargs)


async def _notify(ctx: Any, kind: str) -> None:
    if ctx.protocol_version in MODERN_PROTOCOL_VERSIONS:
        event = {"tools": ToolsListChanged(), "resources": ResourcesListChanged(), "prompts": PromptsListChanged()}
        await bus.publish(event[kind])
    else:
        session = ctx.session
        send = {
            "tools": session.send_tool_list_changed,
            "resources": session.send_resource_list_changed,
            "prompts": session.send_prompt_list_changed,
        }
        await send[kind]()


def _text(value: str) -> CallToolResult:
    return CallToolResult(content=[TextContent(type="text", text=value)])


async def list_tools(ctx: Any, params: Any) -> ListToolsResult:
    STATE["listings"] += 1
    if STATE["broken"]:
        raise MCPError(INTERNAL_ERROR, "tool listing is broken")
    listing = list(TOOLS.values())
    if STATE["churn"]:
        # a change that lands while this listing is on its way: the listing is already stale
        STATE["churn"] = False
        TOOLS["late"] = _tool("late", "Added during a listing.")
        await _notify(ctx, "tools")
        await anyio.sleep(HEAD_START_S)
    return ListToolsResult(tools=listing)


async def call_tool(ctx: Any, params: Any) -> CallToolResult:
    name, args = params.name, params.arguments or {}
    if name not in TOOLS:
        raise MCPError(METHOD_NOT_FOUND, f"unknown tool {name}")
    changed = "tools"
    if name == "grow":
        TOOLS["extra"] = _tool("extra", "Added by grow.")
    elif name == "shrink":
        TOOLS.pop("doomed", None)
    elif name == "reshape":
        schema = {"type": "object", "properties": {"size": {"type": "integer"}}, "required": ["size"]}
        TOOLS["shape"] = _tool("shape", "Version 2.", schema)
    elif name == "burst":
        for i in range(int(args.get("n", 5))):
            TOOLS[f"b{i}"] = _tool(f"b{i}", f"Burst tool {i}.")
            await _notify(ctx, "tools")
        await anyio.sleep(HEAD_START_S)
        return _text("burst done")
    elif name == "churn":
        STATE["churn"] = True
    elif name == "break":
        TOOLS["ghost"] = _tool("ghost", "Never seen.")
        STATE["broken"] = True
    elif name == "add-resource":
        RESOURCES.append(Resource(uri="notes://new", name="new", description="A new note"))
        changed = "resources"
    elif name == "add-prompt":
        PROMPTS.append(Prompt(name="fresh", description="A fresh prompt."))
        changed = "prompts"
    elif name == "listings":
        return _text(str(STATE["listings"]))
    else:
        return _text(f"{name} ok")
    await _notify(ctx, changed)
    await anyio.sleep(HEAD_START_S)
    return _text(f"{name} done")


async def list_resources(ctx: Any, params: Any) -> ListResourcesResult:
    return ListResourcesResult(resources=list(RESOURCES))


async def read_resource(ctx: Any, params: Any) -> ReadResourceResult:
    return ReadResourceResult(contents=[TextResourceContents(uri=params.uri, text="note text")])


async def list_prompts(ctx: Any, params: Any) -> ListPromptsResult:
    return ListPromptsResult(prompts=list(PROMPTS))


async def get_prompt(ctx: Any, params: Any) -> GetPromptResult:
    return GetPromptResult(messages=[PromptMessage(role="user", content=TextContent(type="text", text=params.name))])


server = ChangingServer(
    "changing",
    on_list_tools=list_tools,
    on_call_tool=call_tool,
    on_list_resources=list_resources,
    on_read_resource=read_resource,
    on_list_prompts=list_prompts,
    on_get_prompt=get_prompt,
    # --no-listen: a server that advertises change events but has no room for another stream
    on_subscriptions_listen=ListenHandler(bus, max_subscriptions=0 if "--no-listen" in sys.argv else 1024),
)


async def _stdio() -> None:
    from mcp.server.runner import serve_loop
    from mcp.server.stdio import stdio_server

    async with stdio_server() as (read, write):
        if not LEGACY:
            await server.run(read, write, server.create_initialization_options())
            return
        async with server.lifespan(server) as state:  # handshake era only, like a pre-2026 server
            await serve_loop(
                server, read, write, lifespan_state=state, init_options=server.create_initialization_options()
            )


def _refuse_discover(app: Any) -> Any:
    """ASGI wrapper: answer ``server/discover`` as a pre-2026 HTTP server does (method not found)."""
    import json

    async def wrapped(scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] != "http" or scope["method"] != "POST":
            await app(scope, receive, send)
            return
        chunks = []
        while True:
            message = await receive()
            chunks.append(message.get("body", b""))
            if not message.get("more_body"):
                break
        body = b"".join(chunks)
        try:
            request = json.loads(body)
        except ValueError:
            request = None
        if isinstance(request, dict) and request.get("method") == "server/discover":
            error = {
                "jsonrpc": "2.0",
                "id": request.get("id"),
                "error": {"code": METHOD_NOT_FOUND, "message": "Method not found"},
            }
            payload = json.dumps(error).encode()
            headers = [(b"content-type", b"application/json"), (b"content-length", str(len(payload)).encode())]
            await send({"type": "http.response.start", "status": 200, "headers": headers})
            await send({"type": "http.response.body", "body": payload})
            return
        replayed = False

        async def replay() -> Any:
            nonlocal replayed
            if not replayed:
                replayed = True
                return {"type": "http.request", "body": body, "more_body": False}
            return await receive()

        await app(scope, replay, send)

    return wrapped


def _http(port: int) -> None:
    import uvicorn

    app: Any = server.streamable_http_app(host="127.0.0.1")
    if LEGACY:
        app = _refuse_discover(app)
    uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning", lifespan="on")).run()


if __name__ == "__main__":
    ports = [a for a in sys.argv[1:] if a.isdigit()]
    if ports:
        _http(int(ports[0]))
    else:
        anyio.run(_stdio)
