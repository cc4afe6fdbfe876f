"""mcp: a server's tool (resource, prompt) list changing while the agent is connected.

Real servers (``changing_server.py``, the official SDK's lowlevel ``Server``) over stdio
subprocesses and streamable HTTP on 127.0.0.1, in both protocol eras: 2026-07-28 (change events on
a ``subscriptions/listen`` stream) and the handshake era (plain ``notifications/*/list_changed``),
bridged into real bundles run by ``goondan.Runtime`` with a ``python`` model that records the
tool catalog of every step."""

from __future__ import annotations

import asyncio
import logging
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import policy_kit as k
import pytest
from test_mcp import _bundle, _call, _free_port, _outputs, _start_http

import goondan

CHANGING = str(Path(__file__).with_name("changing_server.py"))
RAW = str(Path(__file__).with_name("raw_server.py"))


@pytest.fixture(params=["stdio", "stdio-legacy", "http", "http-legacy"])
def server(request: pytest.FixtureRequest) -> Iterator[dict[str, Any]]:
    """The extension config for one changing server (a fresh one per test)."""
    transport, _, era = request.param.partition("-")
    flags = ["--legacy"] if era else []
    if transport == "stdio":
        yield {"transport": {"type": "stdio", "command": ["{python}", CHANGING, *flags]}}
        return
    port = _free_port()
    proc: subprocess.Popen[bytes] = _start_http(port, CHANGING, *flags)
    try:
        yield {
            "transport": {"type": "http", "endpoint": f"http://127.0.0.1:{port}/mcp"},
            "timeouts": {"connectMs": 5000},
        }
    finally:
        proc.kill()
        proc.wait()


def _catalog(step: int) -> dict[str, dict[str, Any]]:
    """The tool catalog the model saw at ``step`` (0-based over the whole test)."""
    return {item["name"]: item for item in k.PROBE["tools"][step]}


def _run(tmp_path: Path, config: dict[str, Any], *replies: dict[str, Any]) -> goondan.TurnResult:
    k.MODEL = k.scripted(*replies, k.text_reply("done"))
    root = _bundle(tmp_path, config)
    turn = goondan.run(root, "go", state_root=tmp_path / "state", isolation="inline")
    assert turn.finish_reason == "text_response", turn
    return turn


def test_a_tool_the_server_adds_is_in_the_next_steps_catalog_and_can_be_called(
    tmp_path: Path, server: dict[str, Any]
) -> None:
    _run(tmp_path, server, _call("mcp__grow"), _call("mcp__extra", cid="c2"))
    assert "mcp__extra" not in _catalog(0)
    assert _catalog(1)["mcp__extra"]["description"] == "Added by grow."
    assert _outputs(k.REQUESTS[-1]) == [
        {"type": "text", "value": "grow done"},
        {"type": "text", "value": "extra ok"},
    ]


@pytest.mark.parametrize("server", ["stdio", "http-legacy"], indirect=True)
def test_a_tool_the_server_drops_leaves_the_catalog_and_calling_it_is_not_in_catalog(
    tmp_path: Path, server: dict[str, Any]
) -> None:
    _run(tmp_path, server, _call("mcp__shrink"), _call("mcp__doomed", cid="c2"))
    assert "mcp__doomed" in _catalog(0)
    assert "mcp__doomed" not in _catalog(1)
    dropped = _outputs(k.REQUESTS[-1])[-1]
    assert dropped["type"] == "error-json"
    assert dropped["value"]["code"] == "E_TOOL_NOT_IN_CATALOG"


@pytest.mark.parametrize("server", ["stdio-legacy", "http"], indirect=True)
def test_a_changed_description_and_schema_replace_the_old_ones(tmp_path: Path, server: dict[str, Any]) -> None:
    _run(tmp_path, server, _call("mcp__reshape"), _call("mcp__shape", {"x": "old argument"}, "c2"))
    before, after = _catalog(0)["mcp__shape"], _catalog(1)["mcp__shape"]
    assert before["description"] == "Version 1." and after["description"] == "Version 2."
    assert after["parameters"]["required"] == ["size"]
    rejected = _outputs(k.REQUESTS[-1])[-1]["value"]  # checked against the new schema, not the old one
    assert rejected["code"] == "E_TOOL_INVALID_ARGS"
    assert "args.size: required property is missing" in rejected["message"]
    unchanged = [name for name in _catalog(0) if name != "mcp__shape"]
    assert [name for name in _catalog(1) if name != "mcp__shape"] == unchanged  # the others keep their places


@pytest.mark.parametrize("server", ["stdio", "http-legacy"], indirect=True)
def test_a_burst_of_notifications_costs_one_or_two_listings_and_ends_in_the_final_state(
    tmp_path: Path, server: dict[str, Any]
) -> None:
    _run(tmp_path, server, _call("mcp__burst", {"n": 12}), _call("mcp__listings", cid="c2"))
    listings = int(_outputs(k.REQUESTS[-1])[-1]["value"])
    assert listings - 1 in (1, 2)  # the first listing was at connect
    assert {f"mcp__b{i}" for i in range(12)} <= set(_catalog(1))


@pytest.mark.parametrize("server", ["stdio", "http-legacy"], indirect=True)
def test_a_notification_during_a_listing_is_answered_with_one_more_listing(
    tmp_path: Path, server: dict[str, Any]
) -> None:
    _run(tmp_path, server, _call("mcp__churn"), _call("mcp__late", cid="c2"), _call("mcp__listings", cid="c3"))
    assert "mcp__late" in _catalog(1)  # the first re-listing was already stale
    late, listings = _outputs(k.REQUESTS[-1])[1:]
    assert late == {"type": "text", "value": "late ok"}
    assert listings == {"type": "text", "value": "3"}  # connect, re-list, one more


@pytest.mark.parametrize("server", ["stdio", "http-legacy"], indirect=True)
def test_a_failing_relisting_keeps_the_old_tools_logs_a_warning_and_is_retried_next_turn(
    tmp_path: Path, server: dict[str, Any], caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING)
    root = _bundle(tmp_path, server)

    async def scenario() -> list[dict[str, Any]]:
        async with goondan.Runtime(root, isolation="inline", state_root=tmp_path / "state") as rt:
            k.MODEL = k.scripted(_call("mcp__break"), _call("mcp__listings", cid="c2"), k.text_reply("done"))
            await rt.request("break it")
            first = _outputs(k.REQUESTS[-1])[-1]
            k.MODEL = k.scripted(_call("mcp__listings", cid="c3"), k.text_reply("done"))
            await rt.request("count again")
            return [first, _outputs(k.REQUESTS[-1])[-1]]

    after_break, next_turn = asyncio.run(scenario())
    assert list(_catalog(1)) == list(_catalog(0)) == list(_catalog(3))  # no ghost, nothing lost
    assert after_break == {"type": "text", "value": "2"}  # the old tools still run
    assert next_turn == {"type": "text", "value": "3"}  # the next turn tried once more
    warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    failures = [
        w
        for w in warnings
        if "[E_MCP_REQUEST_FAILED] MCP server mcp: re-listing its tools failed" in w
        and "tool listing is broken" in w
        and "keeping the previous listing" in w
    ]
    assert len(failures) == 2, warnings


def test_a_server_refusing_the_change_stream_still_serves_its_tools_with_a_warning(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING)
    config = {"transport": {"type": "stdio", "command": ["{python}", CHANGING, "--no-listen"]}}
    _run(tmp_path, config, _call("mcp__listings"))
    assert _outputs(k.REQUESTS[-1]) == [{"type": "text", "value": "1"}]
    warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert any(
        "MCP server mcp refused to send change notifications" in w and "re-listed only after a reconnect" in w
        for w in warnings
    ), warnings


def test_a_relisting_that_breaks_the_mcp_schema_keeps_the_old_tools_with_a_warning(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING)
    raw = {"transport": {"type": "stdio", "command": ["{python}", RAW]}}
    _run(tmp_path, raw, _call("mcp__spoil"), _call("mcp__fine", cid="c2"))
    assert list(_catalog(1)) == list(_catalog(0))
    assert _outputs(k.REQUESTS[-1])[-1] == {"type": "text", "value": "fine ok"}
    warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert any(
        "[E_MCP_BAD_RESPONSE] MCP server mcp: re-listing its tools failed" in w
        and "tools.2.inputSchema.type: Input should be 'object'" in w
        for w in warnings
    ), warnings


def test_a_first_listing_that_breaks_the_mcp_schema_is_e_ext_init_naming_the_problem(tmp_path: Path) -> None:
    raw = {"transport": {"type": "stdio", "command": ["{python}", RAW, "--odd"], "cwd": str(tmp_path)}}
    k.MODEL = k.scripted(k.text_reply("unreachable"))
    with pytest.raises(goondan.ExtensionError) as info:
        goondan.run(_bundle(tmp_path, raw), "go", state_root=tmp_path / "state", isolation="inline")
    assert info.value.code == "E_EXT_INIT"
    assert "answered listing with an invalid result: tools.2.inputSchema.type: Input should be 'object'" in (
        info.value.message
    )


@pytest.mark.parametrize("server", ["stdio", "http-legacy"], indirect=True)
def test_resources_and_prompts_the_server_adds_appear_in_the_next_steps_context(
    tmp_path: Path, server: dict[str, Any]
) -> None:
    config = {**server, "expose": {"tools": True, "resources": True, "prompts": True}}
    both = {
        "text": None,
        "toolCalls": [
            {"id": "c1", "name": "mcp__add-resource", "args": {}},
            {"id": "c2", "name": "mcp__add-prompt", "args": {}},
        ],
    }
    _run(tmp_path, config, both)

    def context(request: list[dict[str, Any]]) -> str:
        (text,) = [m["content"] for m in request if m["role"] == "system"]
        return str(text)

    assert "notes://new" not in context(k.REQUESTS[0]) and "- fresh()" not in context(k.REQUESTS[0])
    assert "- notes://new (new): A new note" in context(k.REQUESTS[1])
    assert "- fresh(): A fresh prompt." in context(k.REQUESTS[1])


def test_changes_reach_every_agent_instance_sharing_one_server(tmp_path: Path) -> None:
    """Scope ``instance``: two agent instances share one session; each applies the change to
    its own catalog at its own next step."""
    root = _bundle(tmp_path, {"transport": {"type": "stdio", "command": ["{python}", CHANGING]}})

    async def scenario() -> tuple[dict[str, Any], dict[str, Any]]:
        async with goondan.Runtime(root, isolation="inline", state_root=tmp_path / "state") as rt:
            k.MODEL = k.scripted(_call("mcp__listings"), k.text_reply("done"))
            await rt.request("first", instance_key="k2")  # k2 connects (and lists) first
            k.MODEL = k.scripted(_call("mcp__grow"), _call("mcp__extra", cid="c2"), k.text_reply("done"))
            await rt.request("grow", instance_key="k1")
            k.MODEL = k.scripted(_call("mcp__extra", cid="c3"), k.text_reply("done"))
            await rt.request("again", instance_key="k2")
            return _outputs(k.REQUESTS[-3])[-1], _outputs(k.REQUESTS[-1])[-1]

    from_k1, from_k2 = asyncio.run(scenario())
    assert from_k1 == {"type": "text", "value": "extra ok"}
    assert from_k2 == {"type": "text", "value": "extra ok"}
    assert "mcp__extra" in _catalog(-2)  # k2's first step of its second turn
