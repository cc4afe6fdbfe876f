"""logging extension (digest §6, §9.2 extensions-logging-tool-search, seed 001 §8.5)."""

from __future__ import annotations

import asyncio
import logging
from pathlib import Path
from typing import Any

import policy_kit as k
import pytest

import goondan
from goondan.errors import ExtensionError

LOGGER = "goondan.extension.logging"


def _records(caplog: pytest.LogCaptureFixture) -> list[tuple[str, str]]:
    return [(r.levelname, r.getMessage()) for r in caplog.records if r.name == LOGGER]


def _run(tmp_path: Path, config: dict[str, Any], *replies: Any) -> Any:
    root = k.bundle(tmp_path / "b", [k.base_ref("logging", config)])
    k.MODEL = k.scripted(*replies)

    async def go() -> Any:
        async with goondan.Runtime(root, state_root=tmp_path / "state", isolation="inline") as rt:
            return await rt.request("hello")

    return asyncio.run(go())


def test_it_registers_one_middleware_of_each_kind() -> None:
    h = k.harness("logging")
    assert [len(h.registry.describe(t)) for t in ("turn", "step", "toolCall")] == [1, 1, 1]


def test_turns_and_steps_log_at_info_and_tool_calls_at_debug(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG)
    result = _run(tmp_path, {"level": "debug"}, k.calls_reply("c1"), k.text_reply("bye"))
    assert result.text == "bye"
    records = _records(caplog)
    events = [(level, message.split(" ", 1)[0]) for level, message in records]
    assert events == [
        ("INFO", "turn.start"),
        ("INFO", "step.start"),
        ("DEBUG", "toolCall.start"),
        ("DEBUG", "toolCall.complete"),
        ("INFO", "step.complete"),
        ("INFO", "step.start"),
        ("INFO", "step.complete"),
        ("INFO", "turn.complete"),
    ]
    by_event = {message.split(" ", 1)[0]: message for _, message in records}
    assert "inputType=" in by_event["turn.start"] and "traceId=" in by_event["turn.start"]
    assert "agentName=a" in by_event["turn.start"]
    assert "finishReason=text_response" in by_event["turn.complete"]
    assert "durationMs=" in by_event["turn.complete"]
    assert "stepIndex=0 catalogSize=2" in records[1][1]
    assert "shouldContinue=true" in records[4][1]
    assert "toolName=t__echo toolCallId=c1" in by_event["toolCall.start"]
    assert "args=" not in by_event["toolCall.start"]
    assert "status=ok" in by_event["toolCall.complete"]


def test_tool_args_are_logged_only_when_enabled(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG)
    _run(tmp_path, {"level": "debug", "includeToolArgs": True}, k.calls_reply("c1"), k.text_reply("bye"))
    (start,) = [m for _, m in _records(caplog) if m.startswith("toolCall.start")]
    assert 'args={"value":"c1"}' in start


def test_the_level_filters_lines(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG)
    _run(tmp_path, {"level": "info"}, k.calls_reply("c1"), k.text_reply("bye"))
    assert all(level == "INFO" for level, _ in _records(caplog))
    caplog.clear()
    _run(tmp_path / "again", {"level": "error"}, k.text_reply("bye"))
    assert _records(caplog) == []


def test_failures_are_logged_as_errors_and_rethrown_unchanged(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG)

    def broken(request: Any) -> Any:
        raise RuntimeError("model exploded")

    result = _run(tmp_path, {}, broken)
    assert result.finish_reason == "error"
    assert "model exploded" in result.error["message"]
    errors = [m for level, m in _records(caplog) if level == "ERROR"]
    assert [m.split(" ", 1)[0] for m in errors] == ["step.error", "turn.error"]
    assert "model exploded" in errors[0]


@pytest.mark.parametrize("config", [{"level": "verbose"}, {"includeToolArgs": 1}, {"format": "json"}])
def test_invalid_config_is_an_extension_config_error(config: dict[str, Any]) -> None:
    with pytest.raises(ExtensionError) as info:
        k.harness("logging", config)
    assert info.value.code == "E_EXT_CONFIG"
