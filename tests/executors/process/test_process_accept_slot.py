"""A turn's acceptance (its user message is durable, no user code ran yet) is marked in the agent
process's accept slot, a shared 64-byte file, instead of a ``turn_accepted`` frame that woke the
host on every turn (issue 17). The host reads the slot only when the process died: a turn it shows
accepted fails (its tool may have had side effects), one it does not show is given to the next
process. These prove the slot survives a SIGKILL of its writer and that a death after acceptance
still fails the turn rather than running it again."""

from __future__ import annotations

import asyncio
import subprocess
import sys
from pathlib import Path

import proc_kit as pk
import pytest
from proc_kit import call

import goondan
from goondan.executors.process._accept import SLOT_SIZE, AcceptSlot, AcceptSlots

WRITER = """
import os, signal, sys
from goondan.executors.process._accept import AcceptSlot
slot = AcceptSlot.open(sys.argv[1])
assert slot is not None
slot.mark("41")
slot.mark("42")
os.kill(os.getpid(), signal.SIGKILL)
"""


def test_a_ticket_marked_in_the_slot_is_read_by_the_host_after_its_writer_was_killed() -> None:
    slots = AcceptSlots()
    try:
        path = slots.create()
        assert path is not None and Path(path).stat().st_size == SLOT_SIZE
        assert slots.read(path) == ""
        proc = subprocess.run([sys.executable, "-c", WRITER, path], capture_output=True, timeout=60)
        assert proc.returncode == -9, proc.stderr.decode()
        assert slots.read(path) == "42"
        slots.remove(path)
        assert not Path(path).exists()
    finally:
        slots.close()


def test_a_slot_that_cannot_be_opened_leaves_the_process_to_send_frames(tmp_path: Path) -> None:
    assert AcceptSlot.open(None) is None
    assert AcceptSlot.open(str(tmp_path / "elsewhere" / "1")) is None  # e.g. an actor on another machine


def test_a_ticket_too_long_for_the_slot_is_refused_so_a_frame_is_sent(tmp_path: Path) -> None:
    slots = AcceptSlots()
    try:
        path = slots.create()
        slot = AcceptSlot.open(path)
        assert slot is not None and path is not None
        assert slot.mark("x" * SLOT_SIZE) is False
        assert slot.mark("7") is True and slots.read(path) == "7"
    finally:
        slots.close()


def test_a_process_that_dies_after_accepting_a_turn_fails_it_instead_of_running_it_again(
    tmp_path: Path, state_root: Path
) -> None:
    root = pk.bundle(tmp_path / "b", agents=("a",))

    async def main() -> None:
        async with goondan.Runtime(root, state_root=state_root, isolation="process") as rt:
            await rt.request("warm", instance_key="k")
            handle = rt.orchestrator.handles[("a", "k")]
            assert handle.accept_slot is not None and Path(handle.accept_slot).exists()
            slot = handle.accept_slot
            with pytest.raises(goondan.GoondanError) as info:
                await asyncio.wait_for(rt.request(call("crash", code=3), instance_key="k"), 60)
            assert info.value.code == "E_AGENT_PROCESS_EXITED"
            assert not Path(slot).exists()  # the dead process's slot is gone with it
            again = await rt.request("after", instance_key="k")
            assert again.text == "a@k got: after"

    asyncio.run(main())
    crashed = [r for r in pk.out(root, "model") if "crash" in str(r["messages"][-1].get("content"))]
    assert len(crashed) == 1  # the model saw the crashing turn once: it was not given to a new process
