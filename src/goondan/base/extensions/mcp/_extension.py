"""register(): connects, lists the server's tools/resources/prompts and exposes them (see package doc)."""

from __future__ import annotations

import asyncio
import hashlib
import re
from pathlib import Path
from typing import Any

from goondan.base.extensions.mcp._bridge import (
    Bridge,
    BridgeError,
    Holder,
    RequestRejected,
    Unavailable,
    acquire,
    describe_error,
    release,
    release_when_collected,
)
from goondan.base.extensions.mcp._config import CONFIG_SCHEMA, ConfigProblem, ServerConfig, parse_config
from goondan.base.extensions.skills._synced_message import sync_system_message
from goondan.base.extensions.tool_search import extension_name
from goondan.errors import ExtensionError, GoondanError
from goondan.types import ExtensionApi, StepContext, StepResult, ToolContext, ToolDefinition, TurnContext, TurnResult

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


KINDS = ("tools", "resources", "prompts")
MAX_RELIST_ROUNDS = 3  # a server that changes on every listing is picked up again at the next step
MAX_PAGES = 100


async def _all_pages(fetch: Any, field: str, what: str) -> list[Any]:
    """Every item of a paginated listing. A partial listing would make the tools on the missing
    pages look removed, so a listing that never ends is an error instead."""
    items: list[Any] = []
    cursor = None
    for _ in range(MAX_PAGES):
        page = await fetch(cursor=cursor, cache_mode="refresh")  # a change notification may precede it
        items.extend(getattr(page, field) or [])
        cursor = page.next_cursor
        if cursor is None:
            return items
    raise RequestRejected(
        f"the {what} listing did not end after {MAX_PAGES} pages",
        "Check the server's pagination (nextCursor).",
    )


def _remove_tool(api: ExtensionApi, name: str) -> None:
    api.tools.unregister(name)


class _Exposed:
    """What this extension shows of its server, per agent instance.

    Listings are refreshed when the server says a list changed (or after a new session), but only
    at step boundaries: at the start of a turn and after a step whose tool calls have all finished,
    i.e. just before the runtime builds the next step's catalog. The registry therefore never
    changes under a running tool call, and notifications that arrive while a listing is in flight
    are kept and answered with one more listing.
    """

    def __init__(self, api: ExtensionApi, name: str, cfg: ServerConfig) -> None:
        self.api = api
        self.name = name
        self.cfg = cfg
        self.holder = Holder()
        self.listed_generation = -1
        self.tool_names: dict[str, str] = {}  # original -> catalog part
        self.tool_items: dict[str, ToolDefinition] = {}  # original -> catalog item as registered
        self.tools_listed = False
        self.resources: list[Any] = []
        self.prompts: list[Any] = []
        self.used: set[str] = set()
        self.exposed = {kind for kind, on in zip(KINDS, (cfg.tools, cfg.resources, cfg.prompts), strict=True) if on}
        self.pending: set[str] = set()  # kinds the server said changed since they were last listed
        self.failed: set[str] = set()  # kinds whose re-listing failed; retried at the next turn
        self._lock = asyncio.Lock()

    @property
    def bridge(self) -> Bridge | None:
        return self.holder.bridge

    @bridge.setter
    def bridge(self, value: Bridge | None) -> None:
        self.holder.bridge = value

    def on_change(self, kind: str) -> None:
        """A change notification (from an SDK task): only recorded, acted on at the next boundary."""
        if kind in self.exposed:
            self.pending.add(kind)

    async def start(self, base: Path | None) -> None:
        """Connect and list; an unreachable server is ``E_EXT_INIT`` naming its command line."""
        bridge = acquire(self.name, self.cfg, base, self.api.logger)
        bridge.watch(self.on_change)  # before listing, so no change falls between the two
        try:
            await self.refresh(bridge, self.exposed)
        except BridgeError as exc:
            bridge.unwatch(self.on_change)
            await release(bridge)
            raise ExtensionError(
                "E_EXT_INIT",
                f"extension {self.name}: {exc}",
                extension_name=self.name,
                suggestion=exc.suggestion,
            ) from None
        self.bridge = bridge

    async def stop(self) -> None:
        bridge, self.bridge = self.bridge, None
        if bridge is not None:
            bridge.unwatch(self.on_change)
            await release(bridge)

    def _due(self, bridge: Bridge, turn_start: bool) -> set[str]:
        if turn_start and self.failed:
            self.pending |= self.failed
            self.failed = set()
        # a new session may serve other tools; stateless mode opens one per use, so there it is
        # checked once per turn
        if bridge.generation != self.listed_generation and (turn_start or self.cfg.stateful):
            return set(self.exposed)
        return set(self.pending)

    async def sync(self, *, turn_start: bool) -> None:
        """Re-list what changed (see the class doc). Never raises: a failed listing is logged and
        the previous tools stay."""
        bridge = self.bridge
        if bridge is None or not self._due(bridge, turn_start):
            return  # the common case, without taking the lock
        async with self._lock:
            for _ in range(MAX_RELIST_ROUNDS):
                kinds = self._due(bridge, turn_start)
                if not kinds or bridge is not self.bridge:
                    return
                self.pending -= kinds  # a notification arriving from here on asks for another round
                try:
                    await self.refresh(bridge, kinds)
                except Exception as exc:  # never into the turn: the old listing stays usable
                    self.failed |= kinds
                    self.listed_generation = bridge.generation
                    code = getattr(exc, "code", None)
                    self.api.logger.warning(
                        "%sMCP server %s: re-listing its %s failed: %s; keeping the previous listing "
                        "(tried again at the next turn)",
                        f"[{code}] " if isinstance(code, str) else "",
                        self.name,
                        "/".join(sorted(kinds)),
                        exc if isinstance(exc, BridgeError) else describe_error(exc),
                    )
                    return

    async def refresh(self, bridge: Bridge, kinds: set[str]) -> None:
        """List ``kinds`` (all pages) and apply the result; raises on failure, changing nothing."""

        async def listing(client: Any) -> tuple[list[Any] | None, list[Any] | None, list[Any] | None]:
            caps = client.server_capabilities

            async def one(kind: str, fetch: Any, field: str) -> list[Any] | None:
                if kind not in kinds or kind not in self.exposed:
                    return None
                return await _all_pages(fetch, field, kind) if getattr(caps, kind, None) else []

            tools = await one("tools", client.list_tools, "tools")
            resources = await one("resources", client.list_resources, "resources")
            prompts = await one("prompts", client.list_prompts, "prompts")
            return tools, resources, prompts

        tools, resources, prompts = await bridge.use("listing", listing)
        self.listed_generation = bridge.generation
        if tools is not None:
            self._apply_tools(tools)
        if resources is not None:
            self.resources = resources
        if prompts is not None:
            self.prompts = prompts

    def _apply_tools(self, tools: list[Any]) -> None:
        listed = {tool.name: tool for tool in tools}
        removed = [original for original in self.tool_names if original not in listed]
        for original in removed:
            part = self.tool_names.pop(original)
            self.tool_items.pop(original, None)
            self.used.discard(part)
            _remove_tool(self.api, f"{self.name}__{part}")
        added: list[str] = []
        changed: list[str] = []
        for original, tool in listed.items():
            new = original not in self.tool_names
            if new:
                self.tool_names[original] = tool_name_part(original, self.name, self.used)
            if self._register_tool(original, self.tool_names[original], tool):
                (added if new else changed).append(original)
        if self.tools_listed and (added or removed or changed):
            summary = [
                f"{label} {', '.join(names)}"
                for label, names in (("added", added), ("removed", removed), ("changed", changed))
                if names
            ]
            self.api.logger.info("MCP server %s changed its tools: %s", self.name, "; ".join(summary))
        self.tools_listed = True

    def _register_tool(self, original: str, part: str, tool: Any) -> bool:
        """Register (or replace) one server tool; ``False`` when it is registered unchanged (a
        re-registration would move it to the end of the catalog for nothing)."""
        schema = dict(tool.input_schema or {"type": "object", "properties": {}})
        schema.setdefault("type", "object")
        item: ToolDefinition = {
            "name": f"{self.name}__{part}",
            "description": tool.description or tool.title or f"MCP tool {original} of {self.name}",
            "parameters": schema,
        }
        if self.tool_items.get(original) == item:
            return False

        async def handler(ctx: ToolContext, args: dict[str, Any]) -> Any:
            bridge = self._bridge()
            result = await bridge.use(f"tool '{original}'", lambda c: c.call_tool(original, args))
            return tool_output(result)

        try:
            self.api.tools.register(item, handler)
        except GoondanError as exc:  # an input schema that is no JSON Schema: that tool alone is left out
            self.api.logger.warning("MCP server %s: tool %s is not offered: %s", self.name, original, exc.message)
            return False
        self.tool_items[original] = item
        return True

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


def _register_meta_tools(api: ExtensionApi, ex: _Exposed) -> None:
    if ex.cfg.resources:
        ex.used.add("read-resource")

        async def read_resource(ctx: ToolContext, args: dict[str, Any]) -> dict[str, Any]:
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

        async def get_prompt(ctx: ToolContext, args: dict[str, Any]) -> dict[str, Any]:
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
            suggestion="pip install 'goondan-runtime[mcp]'  (or: pip install 'mcp>=2.3,<3')",
        ) from None


async def register(api: ExtensionApi, config: dict[str, Any]) -> None:
    name = extension_name(api, DEFAULT_EXTENSION_NAME)
    _require_sdk(name)
    try:
        cfg = parse_config(config)
    except ConfigProblem as exc:
        raise ExtensionError(
            "E_EXT_CONFIG",
            f"invalid config for extension {name}: {exc}",
            extension_name=name,
            suggestion="Set transport to {type: stdio, command} or {type: http, endpoint}.",
        ) from None
    ex = _Exposed(api, name, cfg)
    release_when_collected(ex, ex.holder)
    _register_meta_tools(api, ex)
    api_root = getattr(api, "bundle_root", None)
    if not cfg.needs_base() or api_root:
        await ex.start(Path(api_root) if api_root else None)

    async def turn(ctx: TurnContext) -> TurnResult:
        if ex.bridge is None:
            # the server's cwd is relative to the bundle root, known only from here on
            root = getattr(getattr(ctx.runtime, "agent", None), "bundle_root", None)
            await ex.start(Path(root) if root else None)
        else:
            await ex.sync(turn_start=True)
        return await ctx.next()

    async def step(ctx: StepContext) -> StepResult:
        if cfg.resources or cfg.prompts:
            state = await api.state.get()
            state = state if isinstance(state, dict) else {}
            message_id = sync_system_message(
                ctx, marker=MARKER, extension=name, text=ex.context_text(), remembered_id=state.get("messageId")
            )
            if message_id != state.get("messageId"):
                await api.state.set({**state, "messageId": message_id})
        result = await ctx.next()
        if getattr(result, "should_continue", False):
            # this step's tool calls are done and the next step's catalog is not built yet; after
            # the last step the next turn's start does it, so the reply is not delayed
            await ex.sync(turn_start=False)
        return result

    async def cleanup(*_: Any) -> None:
        await ex.stop()

    api.pipeline.register("turn", turn, priority=-1000)
    if ex.exposed:
        api.pipeline.register("step", step)
    api.events.on("extension.cleanup", cleanup)
