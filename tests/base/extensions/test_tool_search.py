"""tool-search (seed 003 §14.2, digest §6 and §9.2 extensions-logging-tool-search): the search tool,
the state-backed selection, and the rule that it never becomes a way to run a tool the catalog does
not allow. Everything runs through real bundles and ``goondan.Runtime`` with a ``python`` model."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import policy_kit as k

import goondan
from goondan.base.extensions.tool_search import narrow, search

SEARCH = "tool-search__search"

# records the tool names offered at every model call, besides the messages policy_kit records
RECORDING_MODEL = """\
import json
import policy_kit


def generate(request):
    policy_kit.PROBE.setdefault("tools", []).append([t["name"] for t in request.tools])
    policy_kit.REQUESTS.append(json.loads(json.dumps(list(request.messages))))
    return policy_kit.MODEL(request)
"""

# a bundle-local extension that removes t__fail from every step's catalog, at a configurable priority
DENY = """\
def register(api, config):
    async def step(ctx):
        ctx.tool_catalog = [t for t in ctx.tool_catalog if t["name"] != "t__fail"]
        return await ctx.next()

    api.pipeline.register("step", step, priority=config.get("priority", 0))
"""

TS = k.base_ref("tool-search")


def _bundle(tmp_path: Path, extensions: list[Any], extra_docs: tuple[dict[str, Any], ...] = ()) -> Path:
    return k.bundle(
        tmp_path / "bundle",
        extensions,
        extra_docs=extra_docs,
        files={"model.py": RECORDING_MODEL, "deny.py": DENY},
    )


def _deny_doc() -> dict[str, Any]:
    return {"apiVersion": k.API, "kind": "Extension", "metadata": {"name": "deny"}, "spec": {"entry": "./deny.py"}}


def _call(name: str, args: dict[str, Any], cid: str = "c1") -> dict[str, Any]:
    return {"text": None, "toolCalls": [{"id": cid, "name": name, "args": args}]}


def _tool_outputs(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    for message in messages:
        if message["role"] == "tool":
            out.extend(part["output"] for part in message["content"])
    return out


async def _request(root: Path, state: Path, text: str = "go") -> goondan.TurnResult:
    async with goondan.Runtime(root, isolation="inline", state_root=state) as rt:
        return await rt.request(text)


def _tools_seen() -> list[list[str]]:
    return k.PROBE["tools"]  # type: ignore[no-any-return]


def test_a_search_narrows_the_next_steps_catalog_to_the_matches_plus_the_search_tool(tmp_path: Path) -> None:
    root = _bundle(tmp_path, [TS])
    k.MODEL = k.scripted(_call(SEARCH, {"query": "echo"}), k.text_reply("done"))
    turn = asyncio.run(_request(root, tmp_path / "state"))
    assert turn.finish_reason == "text_response"
    first, second = _tools_seen()
    assert set(first) == {"t__echo", "t__fail", SEARCH}
    assert second == ["t__echo", SEARCH]
    (output,) = _tool_outputs(k.REQUESTS[1])
    assert output["type"] == "json"
    assert output["value"]["results"] == [{"name": "t__echo", "description": "echo a value"}]
    assert output["value"]["selectedTools"] == ["t__echo"]


def test_the_selection_is_kept_in_extension_state_across_restarts(tmp_path: Path) -> None:
    root = _bundle(tmp_path, [TS])
    state = tmp_path / "state"
    k.MODEL = k.scripted(_call(SEARCH, {"query": "always fails"}), k.text_reply("done"))
    asyncio.run(_request(root, state))
    (state_file,) = state.rglob("extensions/tool-search.json")
    stored = json.loads(state_file.read_text())
    assert stored["selectedTools"] == ["t__fail"]
    assert stored["lastQuery"] == "always fails"
    assert {item["name"] for item in stored["catalogSnapshot"]} == {"t__echo", "t__fail", SEARCH}
    k.PROBE.clear()
    k.MODEL = k.scripted(k.text_reply("again"))
    asyncio.run(_request(root, state))  # a new Runtime over the same state root
    assert _tools_seen() == [["t__fail", SEARCH]]


def test_a_tool_outside_the_selection_is_refused_by_the_executor(tmp_path: Path) -> None:
    root = _bundle(tmp_path, [TS])
    k.MODEL = k.scripted(
        _call(SEARCH, {"query": "echo"}),
        _call("t__fail", {}, "c2"),  # not selected: not in this step's catalog
        k.text_reply("done"),
    )
    asyncio.run(_request(root, tmp_path / "state"))
    refusal = _tool_outputs(k.REQUESTS[2])[-1]
    assert refusal == {
        "type": "error-json",
        "value": {
            "code": "E_TOOL_NOT_IN_CATALOG",
            "message": "Tool 't__fail' is not available in the current Tool Catalog.",
            "suggestion": "Call only tools listed in this step's tool catalog: t__echo, tool-search__search",
        },
    }


def test_a_selected_tool_that_an_inner_middleware_removes_never_comes_back(tmp_path: Path) -> None:
    """The deny middleware runs inside tool-search (priority 2000 > 1000): the snapshot still has
    t__fail, so the search selects it — and it still never reaches the model or the executor."""
    deny = {"ref": {"kind": "Extension", "name": "deny"}, "config": {"priority": 2000}}
    root = _bundle(tmp_path, [TS, deny], (_deny_doc(),))
    k.MODEL = k.scripted(
        _call(SEARCH, {"query": "fails"}),
        _call("t__fail", {}, "c2"),
        k.text_reply("done"),
    )
    asyncio.run(_request(root, tmp_path / "state"))
    assert all("t__fail" not in names for names in _tools_seen())
    assert _tools_seen()[1] == [SEARCH]
    outputs = _tool_outputs(k.REQUESTS[2])
    assert outputs[0]["value"]["selectedTools"] == ["t__fail"]
    assert outputs[1]["value"]["code"] == "E_TOOL_NOT_IN_CATALOG"  # not "boom": the handler never ran


def test_a_tool_removed_by_an_outer_middleware_is_not_even_found(tmp_path: Path) -> None:
    deny = {"ref": {"kind": "Extension", "name": "deny"}, "config": {"priority": -10}}
    root = _bundle(tmp_path, [TS, deny], (_deny_doc(),))
    k.MODEL = k.scripted(_call(SEARCH, {"query": "fails"}), _call("t__fail", {}, "c2"), k.text_reply("done"))
    asyncio.run(_request(root, tmp_path / "state"))
    outputs = _tool_outputs(k.REQUESTS[2])
    assert outputs[0]["value"]["results"] == []
    assert outputs[1]["value"]["code"] == "E_TOOL_NOT_IN_CATALOG"
    assert all("t__fail" not in names for names in _tools_seen())


def test_a_search_that_matches_nothing_clears_the_selection_and_a_short_query_keeps_it(tmp_path: Path) -> None:
    root = _bundle(tmp_path, [k.base_ref("tool-search", {"minQueryLength": 3})])
    k.MODEL = k.scripted(
        _call(SEARCH, {"query": "echo"}),
        _call(SEARCH, {"query": "ec"}, "c2"),  # too short: selection unchanged
        _call(SEARCH, {"query": "no such tool"}, "c3"),
        k.text_reply("done"),
    )
    asyncio.run(_request(root, tmp_path / "state"))
    seen = _tools_seen()
    assert seen[1] == ["t__echo", SEARCH]
    assert seen[2] == ["t__echo", SEARCH]
    assert set(seen[3]) == {"t__echo", "t__fail", SEARCH}
    short = _tool_outputs(k.REQUESTS[2])[1]["value"]
    assert short["results"] == [] and short["selectedTools"] == ["t__echo"]


def test_without_persist_selection_the_search_only_reports(tmp_path: Path) -> None:
    root = _bundle(tmp_path, [k.base_ref("tool-search", {"persistSelection": False})])
    k.MODEL = k.scripted(_call(SEARCH, {"query": "echo"}), k.text_reply("done"))
    asyncio.run(_request(root, tmp_path / "state"))
    assert set(_tools_seen()[1]) == {"t__echo", "t__fail", SEARCH}
    assert _tool_outputs(k.REQUESTS[1])[0]["value"]["results"][0]["name"] == "t__echo"


def test_search_ranks_name_hits_before_description_hits_and_word_overlap() -> None:
    snapshot = [
        {"name": "fs__write", "description": "write a file"},
        {"name": "bash__exec", "description": "run a shell command"},
        {"name": "file__read", "description": "read a file from disk"},
        {"name": "tool-search__search", "description": "search tools"},
    ]
    assert [r["name"] for r in search(snapshot, "FILE", 10, "tool-search__search")] == [
        "file__read",
        "fs__write",
    ]
    assert [r["name"] for r in search(snapshot, "read file", 10, "tool-search__search")] == [
        "file__read",
        "fs__write",
    ]
    assert search(snapshot, "search", 10, "tool-search__search") == []
    assert len(search(snapshot, "a", 1, "x")) == 1


def test_narrow_only_ever_removes_items() -> None:
    catalog = [{"name": "a__x"}, {"name": "b__y"}]
    assert narrow(catalog, ["b__y", "ghost__z"], "ts__search") == [{"name": "b__y"}]
