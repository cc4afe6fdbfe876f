"""An agent process runs the turns it is sent one at a time, in arrival order, however many arrive
while one runs (the orchestrator sends one at a time, but a steering agent's messages and a turn
racing a restart reach the process while another runs). A ``sync`` and a graceful ``shutdown``
wait for the turns still waiting there. Turns are written straight onto a real agent process's
channel here, so the process's own queue is what orders them."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import proc_kit as pk
from proc_kit import call, until

import goondan
from goondan.executors.process._ipc import ORCHESTRATOR, Sync, Turn, TurnDone


def _users_and_roles(state_root: Path, key: str) -> tuple[list[str], list[str]]:
    base = pk.read_jsonl(pk.instance_dir(state_root, "a", key) / "messages" / "base.jsonl")
    users = [m["data"]["content"] for m in base if m["data"]["role"] == "user"]
    return users, [m["data"]["role"] for m in base]


async def _started(rt: goondan.Runtime, key: str) -> tuple[Any, list[str]]:
    """The instance's handle, with every ticket its process answers recorded in order."""
    assert (await rt.request("hello", instance_key=key)).text == f"a@{key} got: hello"
    orch = rt.orchestrator
    h = orch.handles[("a", key)]
    done: list[str] = []
    on_turn_done = orch._on_turn_done

    def record(handle: Any, rec: TurnDone) -> None:
        done.append(rec.ticket)
        on_turn_done(handle, rec)

    orch._on_turn_done = record
    return h, done


def _send_turns(rt: goondan.Runtime, h: Any, key: str, texts: list[str]) -> list[str]:
    tickets = []
    for i, text in enumerate(texts):
        ticket = f"direct-{i}"
        event = rt._event(text, "message", key, None, None, None, None)
        assert h.conn.send_record(Turn(ticket, event), ORCHESTRATOR, "a")
        tickets.append(ticket)
    return tickets


def test_turns_sent_while_one_runs_run_after_it_in_arrival_order(tmp_path: Path, state_root: Path) -> None:
    root = pk.bundle(tmp_path / "b")

    async def main() -> list[str]:
        async with goondan.Runtime(root, state_root=state_root, isolation="process") as rt:
            h, done = await _started(rt, "q")
            # the first one sleeps in a tool: the others arrive while it runs
            texts = [call("sleep", seconds=0.3), "second", "third", "fourth"]
            tickets = _send_turns(rt, h, "q", texts)
            await until(lambda: len(done) == len(tickets), what="every turn answered")
            assert done == tickets
            return tickets

    asyncio.run(main())
    users, roles = _users_and_roles(state_root, "q")
    assert users[1:] == [call("sleep", seconds=0.3), "second", "third", "fourth"]
    # no turn started before the previous one ended: the sleeping turn's tool call and result come
    # before the next user message
    assert roles == ["user", "assistant"] + ["user", "assistant", "tool", "assistant"] + ["user", "assistant"] * 3


def test_a_sync_is_answered_only_once_the_turns_waiting_in_the_process_are_done(
    tmp_path: Path, state_root: Path
) -> None:
    root = pk.bundle(tmp_path / "b")

    async def main() -> None:
        async with goondan.Runtime(root, state_root=state_root, isolation="process") as rt:
            h, done = await _started(rt, "s")
            tickets = _send_turns(rt, h, "s", [call("sleep", seconds=0.2), "after the sleep"])
            synced = asyncio.get_running_loop().create_future()
            h.syncs["probe"] = synced
            assert h.conn.send_record(Sync("probe"), ORCHESTRATOR, "a")
            await asyncio.wait_for(synced, 10)
            assert done == tickets  # both turns answered before the sync_ack

    asyncio.run(main())


def test_a_graceful_shutdown_runs_the_turns_waiting_in_the_process_first(tmp_path: Path, state_root: Path) -> None:
    root = pk.bundle(tmp_path / "b")

    async def main() -> None:
        async with goondan.Runtime(root, state_root=state_root, isolation="process") as rt:
            h, done = await _started(rt, "d")
            tickets = _send_turns(rt, h, "d", [call("sleep", seconds=0.2), "waiting one", "waiting two"])
            await rt.orchestrator.stop(h, "restart")
            assert done == tickets

    asyncio.run(main())
    users, _ = _users_and_roles(state_root, "d")
    assert users[-2:] == ["waiting one", "waiting two"]
