"""An agent process that dies after taking a turn's event but before the turn's user message is on
disk must not lose the message: the event goes to the next process, which answers it once and
stores the message once. A death right after the message was stored (before the host heard that the
turn began) must not store it twice: redelivery is idempotent by event id.

The deaths are real SIGKILLs at the runtime's crash points (``GOONDAN_STORAGE_CRASH_AT``). Only the
first agent process gets the crash point: it is started by a fork server that read the variable,
which is then replaced by one that did not, so the respawned process serves the event."""

from __future__ import annotations

import asyncio
from pathlib import Path

import proc_kit as pk
import pytest

import goondan


def _users(state_root: Path, key: str) -> list[str]:
    inst = pk.instance_dir(state_root, "a", key) / "messages"
    base = pk.read_jsonl(inst / "base.jsonl") + [e.get("message", e) for e in pk.read_jsonl(inst / "events.jsonl")]
    return [m["data"]["content"] for m in base if m["data"]["role"] == "user"]


@pytest.mark.parametrize("point", ["turn_before_inbound", "turn_after_inbound"])
def test_a_process_killed_between_taking_an_event_and_accepting_it_answers_once_and_stores_once(
    tmp_path: Path, state_root: Path, monkeypatch: pytest.MonkeyPatch, point: str
) -> None:
    root = pk.bundle(tmp_path / "b")

    async def main() -> None:
        async with goondan.Runtime(root, state_root=state_root, isolation="process") as rt:
            orch = rt.orchestrator
            assert (await rt.request("before", instance_key="k")).text == "a@k got: before"
            await orch.stop(orch.handles[("a", "k")], "restart")
            monkeypatch.setenv("GOONDAN_STORAGE_CRASH_AT", point)
            await orch.replace_spawner()
            await orch.ensure_started("a", "k")  # this process dies at the crash point
            doomed = orch.handles[("a", "k")].pid
            monkeypatch.delenv("GOONDAN_STORAGE_CRASH_AT")
            await orch.replace_spawner()  # the respawned process does not
            result = await asyncio.wait_for(rt.request("hello", instance_key="k"), 60)
            assert result.finish_reason == "text_response", result.error
            assert result.text == "a@k got: hello"
            assert orch.handles[("a", "k")].pid not in (None, doomed)
            assert orch.handles[("a", "k")].consecutive_crashes == 0

    asyncio.run(main())
    assert _users(state_root, "k") == ["before", "hello"]
    answered = [r for r in pk.out(root, "model") if r["messages"][-1]["content"] == "hello"]
    assert len(answered) == 1
