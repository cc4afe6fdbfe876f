"""tool-search: lets the model pick the tools it needs instead of seeing every tool at every step.

The extension registers one tool, ``<extension>__search`` (``tool-search__search`` under the
default name), and one step middleware:

- The **middleware** snapshots the step's catalog (``name`` + ``description``) as it reaches this
  layer, then — when a selection is stored — narrows ``ctx.tool_catalog`` to the selected tools plus
  the search tool itself.
- The **tool** searches that snapshot (never the registry), stores the matches as the selection
  (``selectedTools``) together with ``catalogSnapshot`` and ``lastQuery`` in ``api.state``, and the
  next step sees the narrowed catalog. A search that matches nothing clears the selection, so the
  full catalog comes back.

Why it can never be a way around the catalog: the middleware only
ever *removes* items from the catalog it was handed; it never adds one back from the snapshot, the
state or the registry. A tool another middleware removed therefore stays removed whatever the
selection says, and the executor refuses any call to a tool that is not in the step's final catalog
(``E_TOOL_NOT_IN_CATALOG``). The search results only name tools of the snapshot, i.e. tools this
layer was allowed to show.

The middleware runs innermost by default (``priority`` 1000), so the snapshot is the catalog after
every other extension's filtering and the search does not advertise tools that are about to be
removed. (Upstream snapshotted the *filtered* catalog, so a second search could only find tools of
the first selection; this snapshot is taken before narrowing, so every search sees all tools the
step allows.)

Config: ``toolName`` (default ``<extension>__search``), ``maxResults`` (10), ``minQueryLength`` (1),
``persistSelection`` (true: store the selection in ``api.state`` so it narrows later steps and
survives restarts; false: the search only reports matches and the catalog is never narrowed),
``priority`` (1000).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from goondan.types import ExtensionApi, StepContext, StepResult, ToolCatalogItem, ToolContext

DEFAULT_EXTENSION_NAME = "tool-search"
DEFAULT_MAX_RESULTS = 10
DEFAULT_PRIORITY = 1000

CONFIG_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "toolName": {"type": "string", "minLength": 1},
        "maxResults": {"type": "integer", "minimum": 1},
        "minQueryLength": {"type": "integer", "minimum": 0},
        "persistSelection": {"type": "boolean"},
        "priority": {"type": "integer"},
    },
    "additionalProperties": False,
}

_WORD = re.compile(r"[a-z0-9]+")


def extension_name(api: ExtensionApi, default: str) -> str:
    """This extension's resource name: tool names must be ``<name>__<tool>``, and the five-part API
    carries the name only in the logger it hands out (``goondan.extension.<name>``)."""
    name = getattr(api, "name", None)
    if isinstance(name, str) and name:
        return name
    logger_name = getattr(getattr(api, "logger", None), "name", "")
    prefix = "goondan.extension."
    if isinstance(logger_name, str) and logger_name.startswith(prefix) and len(logger_name) > len(prefix):
        return logger_name[len(prefix) :]
    return default


def snapshot_of(catalog: Iterable[Mapping[str, Any]]) -> list[dict[str, str]]:
    """What the search looks at: each catalog item's name and description (no schemas: the state
    stays small and the model gets the schemas from the catalog itself)."""
    out: list[dict[str, str]] = []
    for item in catalog:
        name = item.get("name")
        if isinstance(name, str):
            description = item.get("description")
            out.append({"name": name, "description": description if isinstance(description, str) else ""})
    return out


def _score(query: str, words: Sequence[str], item: dict[str, str]) -> int:
    """Rank: whole query in the name > whole query in the description > share of query words found.
    Case-insensitive; ``0`` means no match."""
    name = item["name"].lower()
    description = item["description"].lower()
    if query in name:
        return 1000
    if query in description:
        return 500
    haystack = f"{name} {description}"
    found = sum(1 for w in words if w in haystack)
    return found * 100 // len(words) if words else 0


def search(snapshot: Sequence[dict[str, str]], query: str, limit: int, exclude: str) -> list[dict[str, str]]:
    """Matches of ``query`` in ``snapshot`` (best first, then catalog order), at most ``limit``."""
    needle = query.strip().lower()
    words = _WORD.findall(needle)
    scored: list[tuple[int, int, dict[str, str]]] = []
    for position, item in enumerate(snapshot):
        if item["name"] == exclude:
            continue
        score = _score(needle, words, item)
        if score > 0:
            scored.append((-score, position, item))
    scored.sort(key=lambda t: (t[0], t[1]))
    return [dict(item) for _, _, item in scored[:limit]]


def narrow(catalog: list[ToolCatalogItem], selected: Iterable[str], always: str) -> list[ToolCatalogItem]:
    """The catalog restricted to ``selected`` plus ``always``. Only removes: an item that is not in
    ``catalog`` cannot appear in the result."""
    keep = set(selected)
    keep.add(always)
    return [item for item in catalog if item.get("name") in keep]


def register(api: ExtensionApi, config: dict[str, Any]) -> None:
    ext = extension_name(api, DEFAULT_EXTENSION_NAME)
    tool_name = str(config.get("toolName") or f"{ext}__search")
    max_results = int(config.get("maxResults", DEFAULT_MAX_RESULTS))
    min_query = int(config.get("minQueryLength", 1))
    persist = bool(config.get("persistSelection", True))
    priority = int(config.get("priority", DEFAULT_PRIORITY))
    # the snapshot of the step currently running; the search tool only runs inside a step, after
    # this extension's middleware has taken it
    current: dict[str, list[dict[str, str]]] = {"snapshot": []}

    async def load() -> dict[str, Any]:
        value = await api.state.get()
        return value if isinstance(value, dict) else {}

    async def step(ctx: StepContext) -> StepResult:
        snapshot = snapshot_of(ctx.tool_catalog)
        current["snapshot"] = snapshot
        if persist:
            state = await load()
            if state.get("catalogSnapshot") != snapshot:
                await api.state.set({**state, "catalogSnapshot": snapshot})
            selected = state.get("selectedTools")
            if isinstance(selected, list) and selected:
                ctx.tool_catalog = narrow(ctx.tool_catalog, (s for s in selected if isinstance(s, str)), tool_name)
        return await ctx.next()

    async def search_tool(ctx: ToolContext, args: dict[str, Any]) -> dict[str, Any]:
        query = str(args.get("query", ""))
        limit = min(int(args.get("limit") or max_results), max_results)
        state = await load() if persist else {}
        if len(query.strip()) < max(min_query, 1):
            return {
                "query": query,
                "results": [],
                "selectedTools": list(state.get("selectedTools") or []),
                "note": f"query too short (at least {max(min_query, 1)} characters); selection unchanged",
            }
        results = search(current["snapshot"], query, limit, tool_name)
        selected = [r["name"] for r in results]
        out: dict[str, Any] = {"query": query, "results": results, "selectedTools": selected}
        if persist:
            await api.state.set(
                {**state, "selectedTools": selected, "catalogSnapshot": current["snapshot"], "lastQuery": query}
            )
            out["note"] = (
                f"From the next step only these tools and {tool_name} are available; search again to change it."
                if selected
                else "Nothing matched: the selection is cleared and every tool is available again."
            )
        return out

    api.tools.register(
        {
            "name": tool_name,
            "description": "Search the tools available to you by name or purpose. The matching tools become "
            "your tool set from the next step on (search again to change it).",
            "parameters": {
                "type": "object",
                "properties": {
                    "query": {"type": "string", "description": "Words describing the tool you need."},
                    "limit": {
                        "type": "integer",
                        "minimum": 1,
                        "description": f"Maximum number of results (at most {max_results}).",
                    },
                },
                "required": ["query"],
                "additionalProperties": False,
            },
        },
        search_tool,
    )
    api.pipeline.register("step", step, priority=priority)
