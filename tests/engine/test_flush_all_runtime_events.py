"""flush_all_runtime_events() writes what the engine buffered, for a process about to end at once
(gdn run on a second Ctrl+C): with a store that takes batches, turn.started and step.started wait in
the buffer while a synchronous model call holds the event loop (the scheduled flush runs only when
the turn suspends). Real file store; the check reads runtime-events.jsonl from inside the model."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import goondan
import kit as k
from goondan.engine import _instance, flush_all_runtime_events
from kit import agent_doc, text


def _on_disk(state_root: Path) -> list[str]:
    return [
        json.loads(line)["type"]
        for path in state_root.glob("**/runtime-events.jsonl")
        for line in path.read_text().splitlines()
        if line.strip()
    ]


def test_flush_all_runtime_events_writes_what_a_blocked_turn_buffered(tmp_path: Path, state_root: Path) -> None:
    seen: dict[str, list[str]] = {}
    answer = text("done")

    def model(request: Any) -> Any:
        seen["before"] = _on_disk(state_root)
        flush_all_runtime_events()  # what gdn run's immediate exit does
        seen["after"] = _on_disk(state_root)
        return answer

    k.MODEL = model
    root = k.simple_bundle(tmp_path, agents=[agent_doc("a")])

    async def scenario() -> None:
        async with goondan.Runtime(root, state_root=state_root, isolation="inline") as rt:
            await rt.request("go")
            assert not _instance._BUFFERING  # a returned turn has written its records: nothing kept

    k.run(scenario())
    assert seen == {"before": [], "after": ["turn.started", "step.started"]}
    assert _on_disk(state_root) == ["turn.started", "step.started", "step.completed", "turn.completed"]
