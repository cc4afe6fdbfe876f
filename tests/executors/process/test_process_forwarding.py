"""Agent processes send their runtime events and text deltas to the host only while a listener
there reads them (issue 17): without one, a turn is its ``turn_done`` on the wire (its acceptance is
marked in the process's accept slot, see test_process_accept_slot) instead of ten frames (8 runtime
events and ``turn_accepted``), each encoded, written, read and decoded for nothing.
A listener that subscribes later, between turns, sees every record of the next turn; one that
unsubscribes stops the traffic again."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import proc_kit as pk
from proc_kit import call

import goondan
import kit

STREAMING_MODEL = """\
def generate(request):
    if request.on_text_delta is not None:
        request.on_text_delta("str")
        request.on_text_delta("eamed")
    return {"text": "streamed"}
"""


def _received(rt: Any, key: str) -> int:
    """Messages the host has read so far from the process of instance ``a@key``."""
    conn = rt.orchestrator.handles[("a", key)].conn
    assert conn is not None
    return int(conn.received)


def test_without_a_listener_a_turn_sends_only_its_result(tmp_path: Path, state_root: Path) -> None:
    root = pk.bundle(tmp_path / "b", agents=("a",))

    async def main() -> list[int]:
        async with goondan.Runtime(root, state_root=state_root, isolation="process", persist=False) as rt:
            await rt.request(call("pid"), instance_key="k")  # started; a turn with a tool call
            counts = []
            for _ in range(3):
                before = _received(rt, "k")
                result = await rt.request(call("pid"), instance_key="k")
                assert result.text is not None and result.text.startswith("a tool:")
                counts.append(_received(rt, "k") - before)
            return counts

    assert asyncio.run(main()) == [1, 1, 1]


def test_a_listener_that_subscribes_between_turns_sees_the_whole_next_turn_until_it_unsubscribes(
    tmp_path: Path, state_root: Path
) -> None:
    root = pk.bundle(tmp_path / "b", agents=("a",))
    seen: list[dict[str, Any]] = []

    async def main() -> tuple[int, int]:
        async with goondan.Runtime(root, state_root=state_root, isolation="process") as rt:
            await rt.request(call("pid"), instance_key="k")  # the process runs, nobody listens
            off = rt.on_runtime_event(seen.append)
            await rt.request(call("pid"), instance_key="k")
            await rt.wait_idle()
            off()
            count = len(seen)
            before = _received(rt, "k")
            await rt.request(call("pid"), instance_key="k")
            await rt.wait_idle()
            return count, _received(rt, "k") - before

    count, frames = asyncio.run(main())
    types = [r.get("type") for r in seen]
    assert types[0] == "turn.started" and types[-1] == "turn.completed", types
    assert types.count("step.started") == 2 and types.count("tool.called") == 1, types
    assert len(seen) == count  # nothing after off()
    assert frames <= 2  # the result (and the sync of wait_idle): no runtime events


def test_a_text_delta_listener_added_after_the_process_started_gets_the_next_turns_deltas(
    tmp_path: Path, state_root: Path
) -> None:
    docs = [kit.package_doc(), kit.python_model_doc(), kit.agent_doc("a"), kit.swarm_doc(["a"])]
    root = kit.write_bundle(tmp_path / "b", *docs, files={"model.py": STREAMING_MODEL})
    deltas: list[str] = []

    async def main() -> None:
        async with goondan.Runtime(root, state_root=state_root, isolation="process") as rt:
            await rt.request("one", instance_key="k")  # started without a delta listener
            off = rt.on_text_delta(lambda record: deltas.append(str(record.get("delta"))))
            await rt.request("two", instance_key="k")
            off()
            await rt.request("three", instance_key="k")
            await rt.wait_idle()

    asyncio.run(main())
    assert deltas == ["str", "eamed"]


def test_a_listener_subscribed_from_another_thread_sees_the_next_turn(tmp_path: Path, state_root: Path) -> None:
    root = pk.bundle(tmp_path / "b", agents=("a",))
    seen: list[dict[str, Any]] = []

    async def main() -> None:
        async with goondan.Runtime(root, state_root=state_root, isolation="process") as rt:
            await rt.request("one", instance_key="k")
            await asyncio.to_thread(rt.on_runtime_event, seen.append)
            await rt.request("two", instance_key="k")
            await rt.wait_idle()

    asyncio.run(main())
    assert [r.get("type") for r in seen][-1] == "turn.completed"
    assert {r.get("type") for r in seen} >= {"turn.started", "step.started", "turn.completed"}
