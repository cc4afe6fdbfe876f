"""A turn's acceptance (its user message is durable, no user code ran yet) is marked in the agent
process's accept slot, a shared 64-byte file, instead of a ``turn_accepted`` frame that woke the
host on every turn (issue 17). The host reads the slot only when the process died: a turn it shows
accepted fails (its tool may have had side effects), one it does not show is given to the next
process. These prove the slot survives a SIGKILL of its writer and that a death after acceptance
still fails the turn rather than running it again."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
import tempfile
from pathlib import Path

import proc_kit as pk
import pytest
from proc_kit import call

import goondan
from goondan.executors.process._accept import SLOT_SIZE, AcceptSlot, AcceptSlots

WRITER = """
import os, signal, sys, time
from goondan.executors.process._accept import AcceptSlot
path = sys.argv[1]
slot = AcceptSlot.open(path)
assert slot is not None
slot.mark("41")
print("mapped", flush=True)
while os.path.exists(path):  # the host unlinks the file once the process has mapped it
    time.sleep(0.01)
slot.mark("42")
os.kill(os.getpid(), signal.SIGKILL)
"""


def test_a_ticket_marked_in_the_slot_is_read_by_the_host_after_its_file_was_unlinked_and_its_writer_killed() -> None:
    slots = AcceptSlots()
    try:
        slot = slots.create()
        assert slot is not None and slot.path is not None
        path = slot.path
        assert Path(path).stat().st_size == SLOT_SIZE and slot.read() == ""
        proc = subprocess.Popen([sys.executable, "-c", WRITER, path], stdout=subprocess.PIPE)
        assert proc.stdout is not None and proc.stdout.readline() == b"mapped\n"
        assert slot.read() == "41"
        slot.unlink()
        assert not Path(path).exists() and slot.path is None
        assert proc.wait(timeout=60) == -9
        assert slot.read() == "42"  # the page outlived the file and its writer
        slot.close()
        assert slot.read() == ""
    finally:
        slots.close()


def test_a_slot_that_cannot_be_opened_leaves_the_process_to_send_frames(tmp_path: Path) -> None:
    assert AcceptSlot.open(None) is None
    assert AcceptSlot.open(str(tmp_path / "elsewhere" / "1")) is None  # e.g. an actor on another machine


def test_a_ticket_too_long_for_the_slot_is_refused_so_a_frame_is_sent() -> None:
    slots = AcceptSlots()
    try:
        host = slots.create()
        assert host is not None
        slot = AcceptSlot.open(host.path)
        assert slot is not None
        assert slot.mark("x" * SLOT_SIZE) is False
        assert slot.mark("7") is True and host.read() == "7"
        host.close()
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
            slot = handle.accept_slot
            # mapped by the process and the host, its file already unlinked: nothing left on disk
            assert slot is not None and slot.path is None and slot.read() != ""
            with pytest.raises(goondan.GoondanError) as info:
                await asyncio.wait_for(rt.request(call("crash", code=3), instance_key="k"), 60)
            assert info.value.code == "E_AGENT_PROCESS_EXITED"
            assert handle.accept_slot is not slot and slot.read() == ""  # closed with its process
            again = await rt.request("after", instance_key="k")
            assert again.text == "a@k got: after"

    asyncio.run(main())
    left = [
        p for base in ("/dev/shm", tempfile.gettempdir()) for p in Path(base).glob(f"goondan-accept-{os.getpid()}-*")
    ]
    assert left == []  # every slot file was unlinked once its process had mapped it
    crashed = [r for r in pk.out(root, "model") if "crash" in str(r["messages"][-1].get("content"))]
    assert len(crashed) == 1  # the model saw the crashing turn once: it was not given to a new process
