"""register(): connects, lists the server's tools/resources/prompts and exposes them (see package doc)."""

from __future__ import annotations

import hashlib
import re
from pathlib import Path
from typing import Any

from goondan.base.extensions.mcp._bridge import (
    Bridge,
    BridgeError,
    Holder,
    Unavailable,
    acquire,
    release,
    release_when_collected,
)
from goondan.base.extensions.mcp._config import CONFIG_SCHEMA, ConfigProblem, ServerConfig, parse_config
from goondan.base.extensions.skills._synced_message import sync_system_message
from goondan.base.extensions.tool_search import extension_name
from goondan.errors import ExtensionError

DEFAULT_EXTENSION_NAME = "mcp"
MARKER = "__goondanMcpContext"
MAX_TOOL_NAME = 64  # providers (OpenAI, Anthropic) cap function names at 64 characters
_BAD = re.compile(r"[^A-Za-z0-9_-]+")

__all__ = ["CONFIG_SCHEMA", "register"]


class McpToolError(Exception):
    """The server ran the tool and reported ``isError``."""

    code = "E_MCP_TOOL_ERROR"

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.suggestion = "The MCP server reported this error; adjust the arguments or try another tool."


def tool_name_part(raw: str, ext: str, used: set[str]) -> str:
    """A catalog-safe, unique ``<tool>`` part for an MCP tool name (one ``__`` in the full name,
    ``[A-Za-z0-9_-]``, at most 64 characters in total)."""
    part = re.sub(r"_{2,}", "_", _BAD.sub("_", raw)).strip("_-") or "tool"
    room = max(MAX_TOOL_NAME - len(ext) - 2, 12)
    if len(part) > room:
        part = part[: room - 9].rstrip("_-") + "-" + hashlib.sha1(raw.encode()).hexdigest()[:8]
    candidate, n = part, 2
    while candidate in used:
        candidate = f"{part[: room - 4]}-{n}"
        n += 1
    used.add(candidate)
    return candidate


def _block_json(block: Any) -> Any:
    data = block.model_dump(mode="json", by_alias=True, exclude_none=True)
    if isinstance(data, dict) and isinstance(data.get("data"), str):
        data["data"] = f"<{len(data['data'])} base64 characters omitted>"
    return data


def tool_output(result: Any) -> Any:
    """A ``CallToolResult`` as a tool output: text when every block is text, else JSON blocks;
    ``isError`` raises so the model gets an error result."""
    content = list(result.content or [])
    texts = [b.text for b in content if getattr(b, "type", None) == "text"]
    if result.is_error:
        raise McpToolError("\n".join(texts) or "the MCP tool reported an error")
    if content and len(texts) == len(content):
        return "\n".join(texts)
    if not content and result.structured_content is not None:
        return {"type": "json", "value": result.structured_content}
    return [_block_json(b) for b in content]


def _resource_text(result: Any) -> str:
    parts = []
    for item in result.contents:
        text = getattr(item, "text", None)
        if isinstance(text, str):
            parts.append(text)
        else:
            blob = getattr(item, "blob", "") or ""
            parts.append(f"[binary {getattr(item, 'mime_type', None) or 'data'}, {len(blob)} base64 characters]")
    return "\n".join(parts)


class _Exposed:
    """What this extension shows of its server, per agent instance."""

    def __init__(self, api: Any, name: str, cfg: ServerConfig) -> None:
        self.api = api
        self.name = name
        self.cfg = cfg
        self.holder = Holder()
        self.listed_generation = -1
        self.tool_names: dict[str, str] = {}  # original -> catalog part
        self.resources: list[Any] = []
        self.prompts: list[Any] = []
        self.used: set[str] = set()

    @property
    def bridge(self) -> Bridge | None:
        return self.holder.bridge

    @bridge.setter
    def bridge(self, value: Bridge | None) -> None:
        self.holder.bridge = value

    async def start(self, base: Path | None) -> None:
        """Connect and list; an unreachable server is ``E_EXT_INIT`` naming its command line."""
        bridge = acquire(self.name, self.cfg, base, self.api.logger)
        try:
            await self.refresh(bridge)
        except BridgeError as exc:
            await release(bridge)
            raise ExtensionError(
                "E_EXT_INIT",
                f"extension {self.name}: {exc}",
                extension_name=self.name,
                suggestion=exc.suggestion,
            ) from None
        self.bridge = bridge

    async def refresh(self, bridge: Bridge) -> None:
        async def listing(client: Any) -> tuple[list[Any], list[Any], list[Any]]:
            caps = client.server_capabilities
            tools = (await client.list_tools()).tools if self.cfg.tools and caps.tools else []
            resources = (await client.list_resources()).resources if self.cfg.resources and caps.resources else []
            prompts = (await client.list_prompts()).prompts if self.cfg.prompts and caps.prompts else []
            return list(tools), list(resources), list(prompts)

        tools, self.resources, self.prompts = await bridge.use("listing", listing)
        self.listed_generation = bridge.generation
        for tool in tools:
            if tool.name not in self.tool_names:
                self.tool_names[tool.name] = tool_name_part(tool.name, self.name, self.used)
            self._register_tool(tool.name, self.tool_names[tool.name], tool)

    def _register_tool(self, original: str, part: str, tool: Any) -> None:
        async def handler(ctx: Any, args: dict[str, Any]) -> Any:
            bridge = self._bridge()
            result = await bridge.use(f"tool '{original}'", lambda c: c.call_tool(original, args))
            return tool_output(result)

        schema = dict(tool.input_schema or {"type": "object", "properties": {}})
        schema.setdefault("type", "object")
        self.api.tools.register(
            {
                "name": f"{self.name}__{part}",
                "description": tool.description or tool.title or f"MCP tool {original} of {self.name}",
                "parameters": schema,
            },
            handler,
        )

    def _bridge(self) -> Bridge:
        if self.bridge is None:
            raise Unavailable(f"MCP server '{self.name}' is not connected yet", "It connects at the start of a turn.")
        return self.bridge

    def context_text(self) -> str:
        lines: list[str] = []
        if self.resources:
            lines.append(f"[mcp.resources server={self.name}]")
            for r in self.resources:
                desc = f": {r.description}" if r.description else ""
                mime = f" [{r.mime_type}]" if r.mime_type else ""
                lines.append(f"- {r.uri} ({r.name}){desc}{mime}")
            lines += [f"Read one with {self.name}__read-resource.", "[/mcp.resources]"]
        if self.prompts:
            lines.append(f"[mcp.prompts server={self.name}]")
            for p in self.prompts:
                args = ", ".join(a.name + ("*" if a.required else "") for a in (p.arguments or []))
                desc = f": {p.description}" if p.description else ""
                lines.append(f"- {p.name}({args}){desc}")
            lines += [f"Get one with {self.name}__get-prompt (* = required argument).", "[/mcp.prompts]"]
        return "\n".join(lines)


def _register_meta_tools(api: Any, ex: _Exposed) -> None:
    if ex.cfg.resources:
        ex.used.add("read-resource")

        async def read_resource(ctx: Any, args: dict[str, Any]) -> dict[str, Any]:
            uri = str(args["uri"])
            result = await ex._bridge().use(f"resource '{uri}'", lambda c: c.read_resource(uri))
            return {"uri": uri, "text": _resource_text(result)}

        api.tools.register(
            {
                "name": f"{ex.name}__read-resource",
                "description": f"Read a resource of the MCP server {ex.name} by URI (listed in your context).",
                "parameters": {
                    "type": "object",
                    "properties": {"uri": {"type": "string", "minLength": 1}},
                    "required": ["uri"],
                    "additionalProperties": False,
                },
            },
            read_resource,
        )
    if ex.cfg.prompts:
        ex.used.add("get-prompt")

        async def get_prompt(ctx: Any, args: dict[str, Any]) -> dict[str, Any]:
            name = str(args["name"])
            arguments = {str(k): str(v) for k, v in (args.get("arguments") or {}).items()}
            result = await ex._bridge().use(f"prompt '{name}'", lambda c: c.get_prompt(name, arguments))
            messages = [
                {"role": m.role, "text": getattr(m.content, "text", None) or str(_block_json(m.content))}
                for m in result.messages
            ]
            return {"name": name, "description": result.description, "messages": messages}

        api.tools.register(
            {
                "name": f"{ex.name}__get-prompt",
                "description": f"Get a prompt of the MCP server {ex.name} (listed in your context).",
                "parameters": {
                    "type": "object",
                    "properties": {
                        "name": {"type": "string", "minLength": 1},
                        "arguments": {"type": "object", "additionalProperties": {"type": "string"}},
                    },
                    "required": ["name"],
                    "additionalProperties": False,
                },
            },
            get_prompt,
        )


def _require_sdk(name: str) -> None:
    try:
        import mcp  # noqa: F401
    except ImportError as exc:
        raise ExtensionError(
            "E_EXT_INIT",
            f"extension {name} needs the official MCP SDK: {exc}",
            extension_name=name,
            suggestion="pip install 'goondan[mcp]'  (or: pip install 'mcp>=2.3,<3')",
        ) from None


async def register(api: Any, config: dict[str, Any]) -> None:
    name = extension_name(api, DEFAULT_EXTENSION_NAME)
    _require_sdk(name)
    try:
        cfg = parse_config(config)
    except ConfigProblem as exc:
        raise ExtensionError(
            "E_EXT_CONFIG",
            f"invalid config for extension {name}: {exc}",
            extension_name=name,
            suggestion="See seed 002 §11.1: transport {type: stdio, command} or {type: http, endpoint}.",
        ) from None
    ex = _Exposed(api, name, cfg)
    release_when_collected(ex, ex.holder)
    _register_meta_tools(api, ex)
    api_root = getattr(api, "bundle_root", None)
    if not cfg.needs_base() or api_root:
        await ex.start(Path(api_root) if api_root else None)

    async def turn(ctx: Any) -> Any:
        if ex.bridge is None:
            # the server's cwd is relative to the bundle root, known only from here on
            root = getattr(getattr(ctx.runtime, "agent", None), "bundle_root", None)
            await ex.start(Path(root) if root else None)
        elif ex.bridge.generation != ex.listed_generation:
            try:  # a new session since the last listing: pick up added tools
                await ex.refresh(ex.bridge)
            except BridgeError as exc:
                api.logger.warning("%s", exc)
        return await ctx.next()

    async def step(ctx: Any) -> Any:
        state = await api.state.get()
        state = state if isinstance(state, dict) else {}
        message_id = sync_system_message(
            ctx, marker=MARKER, extension=name, text=ex.context_text(), remembered_id=state.get("messageId")
        )
        if message_id != state.get("messageId"):
            await api.state.set({**state, "messageId": message_id})
        return await ctx.next()

    async def cleanup(*_: Any) -> None:
        bridge, ex.bridge = ex.bridge, None
        if bridge is not None:
            await release(bridge)

    api.pipeline.register("turn", turn, priority=-1000)
    if cfg.resources or cfg.prompts:
        api.pipeline.register("step", step)
    api.events.on("extension.cleanup", cleanup)
