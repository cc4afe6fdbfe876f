"""Runtime events of an agent process reach the host while its turn is still running: a tool that
blocks its process's event loop (a synchronous handler running for minutes) has been announced
(``tool.called``) before it blocks, so ``gdn logs --follow``, Studio's live view and the status line
of ``gdn run`` show which tool is running (found by a fresh-eyes run: the status line said
"thinking" for the whole of a 30 s tool, and no event of the turn arrived before it returned)."""

from __future__ import annotations

import asyncio
import os
import signal
from pathlib import Path
from typing import Any

import proc_kit as pk
from proc_kit import call, until

import goondan


def test_a_blocking_tool_is_announced_to_the_host_before_it_blocks(tmp_path: Path, state_root: Path) -> None:
    root = pk.bundle(tmp_path / "b")
    ready = tmp_path / "ready"
    seen: list[dict[str, Any]] = []

    async def main() -> None:
        async with goondan.Runtime(root, state_root=state_root, isolation="process") as rt:
            rt.on_runtime_event(seen.append)
            pending = asyncio.ensure_future(rt.request(call("block", ready=str(ready)), instance_key="k"))
            await until(ready.exists, what="the blocking tool")
            await until(
                lambda: any(r.get("type") == "tool.called" and r.get("toolName") == "t__block" for r in seen),
                timeout=5,
                what="tool.called of the blocked tool at the host",
            )
            types = [r.get("type") for r in seen]
            assert types.index("turn.started") < types.index("step.started") < types.index("tool.called")
            os.kill(int(ready.read_text()), signal.SIGKILL)  # end the blocked process; the turn fails
            try:
                await pending
            except goondan.GoondanError:
                pass

    asyncio.run(main())
