"""Closing a runtime: ``close()`` called from code lets the running turn finish (the grace period),
while leaving ``async with`` by cancellation (Ctrl+C) cancels running turns at once. An interrupted
turn keeps what it made durable, leaves the instance ``idle``, and its unfinished tool call is
answered with ``E_TOOL_INTERRUPTED`` on the next start — with every executor."""

from __future__ import annotations

import asyncio
import json
import time
from pathlib import Path
from typing import Any

import proc_kit as pk
from proc_kit import call, until

import goondan


def _status(state_root: Path, key: str) -> str | None:
    try:
        meta = pk.instance_dir(state_root, "a", key) / "metadata.json"
    except AssertionError:
        return None
    status: str | None = json.loads(meta.read_text()).get("status")
    return status


def test_close_from_code_lets_the_running_turn_finish(tmp_path: Path, state_root: Path, executor: str) -> None:
    root = pk.bundle(tmp_path / "b")

    async def main() -> Any:
        rt = goondan.Runtime(root, state_root=state_root, executor=executor)
        await rt.start()
        turn = asyncio.ensure_future(rt.request(call("sleep", seconds=1.0), instance_key="k"))
        await until(lambda: _status(state_root, "k") == "processing", what="the turn")
        await rt.close()
        return await turn

    result = asyncio.run(main())
    assert result.finish_reason == "text_response", result.error
    assert result.text.startswith("a tool: ")
    assert '"slept": 1.0' in result.text


def test_leaving_the_runtime_by_cancellation_stops_its_turn_at_once(
    tmp_path: Path, state_root: Path, executor: str
) -> None:
    root = pk.bundle(tmp_path / "b")
    never = tmp_path / "never-released"

    async def owner() -> None:
        async with goondan.Runtime(root, state_root=state_root, executor=executor) as rt:
            await rt.request(call("hold", release=str(never)), instance_key="k")

    async def main() -> float:
        task = asyncio.ensure_future(owner())
        await until(lambda: _status(state_root, "k") == "processing", timeout=30, what="the turn")
        await asyncio.sleep(0.2)  # the tool is running
        started = time.monotonic()
        task.cancel()
        try:
            await task
        except asyncio.CancelledError:
            pass
        return time.monotonic() - started

    took = asyncio.run(main())
    assert took < 3.0, f"closing took {took:.1f} s"
    assert _status(state_root, "k") == "idle"

    async def after() -> Any:
        async with goondan.Runtime(root, state_root=state_root, executor=executor) as rt:
            return await rt.request("next", instance_key="k")

    assert asyncio.run(after()).text == "a@k got: next"
    base = pk.read_jsonl(pk.instance_dir(state_root, "a", "k") / "messages" / "base.jsonl")
    roles = [m["data"]["role"] for m in base]
    assert roles == ["user", "assistant", "tool", "user", "assistant"], roles
    assert base[2]["data"]["content"][0]["output"]["value"]["code"] == "E_TOOL_INTERRUPTED"
