"""mcp: a server tool whose input schema is not a valid JSON Schema (``{"type": "numbr"}``) is left
out with a warning naming it, and the server's other tools are offered. ``api.tools.register`` now
refuses such a schema (E_TOOL_DEFINITION_INVALID); without the bridge catching it, one bad tool
would fail the whole server's start. Before that refusal, every call of the tool failed with
jsonschema's own ``Unknown type 'numbr' for validator with schema: ...``. A real stdio server."""

from __future__ import annotations

import logging
from pathlib import Path

import policy_kit as k
import pytest
from test_mcp import _bundle, _call, _outputs

import goondan

RAW = str(Path(__file__).with_name("raw_server.py"))


def test_a_tool_with_an_invalid_input_schema_is_left_out_with_a_warning(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING)
    k.MODEL = k.scripted(_call("mcp__fine"), k.text_reply("done"))
    config = {"transport": {"type": "stdio", "command": ["{python}", RAW, "--bad-schema"]}}
    turn = goondan.run(_bundle(tmp_path, config), "go", state_root=tmp_path / "state", isolation="inline")
    assert turn.finish_reason == "text_response", turn
    catalog = [item["name"] for item in k.PROBE["tools"][0]]
    assert "mcp__fine" in catalog and "mcp__bad" not in catalog
    assert _outputs(k.REQUESTS[-1]) == [{"type": "text", "value": "fine ok"}]
    warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert any(
        "MCP server mcp: tool bad is not offered" in w and "'numbr' is not a JSON type" in w for w in warnings
    ), warnings
