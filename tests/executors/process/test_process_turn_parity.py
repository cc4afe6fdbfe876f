"""The turn pipeline behaves the same with every executor: tools, catalog-filtering step
middleware, persisted extension state, runtime events, history on disk and extension failures."""

from __future__ import annotations

import asyncio
import json
import shutil
from pathlib import Path
from typing import Any

import pytest

import goondan
import kit

EXAMPLE = Path(__file__).resolve().parents[3] / "examples" / "quickstart"


def _ask_all(root: Path, state_root: Path, executor: str, *inputs: str) -> list[Any]:
    async def main() -> list[Any]:
        async with goondan.Runtime(root, state_root=state_root, executor=executor) as rt:
            return [await rt.request(text) for text in inputs]

    return asyncio.run(main())


def _instance_dir(state_root: Path) -> Path:
    (meta,) = state_root.glob("workspaces/*/instances/*/metadata.json")
    return meta.parent


def _jsonl(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def test_quickstart_turns_give_the_same_results_in_both_modes(tmp_path: Path, state_root: Path, executor: str):
    results = _ask_all(EXAMPLE, state_root, executor, "add 2 and 3", "wipe it", "stats")
    assert [r.finish_reason for r in results] == ["text_response"] * 3
    assert results[0].text == 'Tool said: {"sum":5}'
    # the step middleware hid shell__wipe, so the executor refused the call and the handler never ran
    assert "E_TOOL_NOT_IN_CATALOG" in results[1].text
    # the extension's state counted all three turns (persisted and restored inside the instance)
    assert results[2].text == 'Tool said: {"turns":3,"instance":"quickstart"}'
    inst = _instance_dir(state_root)
    assert json.loads((inst / "extensions" / "turn-counter.json").read_text()) == {"turns": 3}
    roles = [r["data"]["role"] for r in _jsonl(inst / "messages" / "base.jsonl")]
    # user, prompt (system, once), then per turn: assistant tool call, tool result, assistant text
    assert (
        roles == ["user", "system", "assistant", "tool", "assistant"] + ["user", "assistant", "tool", "assistant"] * 2
    )
    assert _jsonl(inst / "messages" / "events.jsonl") == []


def test_runtime_events_are_the_same_sequence_in_both_modes(tmp_path: Path, state_root: Path, executor: str):
    _ask_all(EXAMPLE, state_root, executor, "add 2 and 3")
    events = _jsonl(_instance_dir(state_root) / "messages" / "runtime-events.jsonl")
    assert [e["type"] for e in events] == kit.ONE_TOOL_TURN_EVENTS
    assert len({e["traceId"] for e in events}) == 1
    turn_span = events[0]["spanId"]
    assert "parentSpanId" not in events[0]
    assert events[1]["parentSpanId"] == turn_span and events[2]["parentSpanId"] == events[1]["spanId"]
    assert events[-1]["stepCount"] == 2


BROKEN = """\
def register(api):
    raise RuntimeError("boom at register")
"""


def test_an_extension_that_fails_to_register_fails_the_request_in_both_modes(
    tmp_path: Path, state_root: Path, executor: str
):
    root = tmp_path / "bundle"
    shutil.copytree(EXAMPLE, root)
    (root / "extensions" / "turn_counter.py").write_text(BROKEN)
    with pytest.raises(goondan.ExtensionError) as info:
        _ask_all(root, state_root, executor, "hello")
    assert info.value.code == "E_EXT_INIT"
    assert "boom at register" in info.value.message
    assert info.value.extension_name == "turn-counter"
