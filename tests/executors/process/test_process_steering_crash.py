"""A message steered into a running turn (``Agent.spec.steering: inject``) is never lost to the
death of the agent process: it is accepted only once it is in the history (durable), and one the
process held but had not yet made durable goes to the next process, like any event not accepted.
The death is a real SIGKILL while the turn's tool runs, after the process took the message."""

from __future__ import annotations

import asyncio
import logging
import os
import signal
import time
from pathlib import Path
from typing import Any

import pytest

import goondan
import kit

MODEL = """\
def generate(request):
    last = request.messages[-1]
    users = [m["content"] for m in request.messages if m["role"] == "user" and isinstance(m["content"], str)]
    if last["role"] == "user" and last["content"] == "first":
        return {"toolCalls": [{"id": "c-wait", "name": "t__wait", "args": {}}]}
    return {"text": "saw: " + "|".join(users)}
"""

TOOL = """\
import asyncio
from pathlib import Path


async def wait(ctx, args):
    Path(__file__).with_name("started").write_text("1")
    await asyncio.sleep(30)
    return "waited"


handlers = {"wait": wait}
"""


def test_a_steered_message_taken_by_a_killed_process_is_answered_by_the_next_one(
    tmp_path: Path, state_root: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="goondan")
    agent = kit.agent_doc("a", tools=["t"])
    agent["spec"]["steering"] = "inject"
    root = kit.write_bundle(
        tmp_path / "b",
        kit.package_doc(),
        kit.python_model_doc(),
        kit.tool_doc("t", "./t.py", [kit.export("wait")]),
        agent,
        kit.swarm_doc(["a"]),
        files={"model.py": MODEL, "t.py": TOOL},
    )

    def steered() -> bool:
        return any("steered a message into the running turn" in r.getMessage() for r in caplog.records)

    async def main() -> tuple[BaseException | Any, Any, list[dict[str, Any]]]:
        async with goondan.Runtime(root, state_root=state_root, executor="process") as rt:
            first = asyncio.create_task(rt.request("first"))
            deadline = time.monotonic() + 20
            while not (root / "started").exists():
                assert time.monotonic() < deadline, "the tool never started"
                await asyncio.sleep(0.01)
            second = asyncio.create_task(rt.request("second"))
            while not steered():
                assert time.monotonic() < deadline, "the message was never steered into the turn"
                await asyncio.sleep(0.01)
            (handle,) = rt.orchestrator.handles.values()
            assert handle.pid is not None
            os.kill(handle.pid, signal.SIGKILL)
            outcome = await asyncio.gather(first, return_exceptions=True)
            answer = await asyncio.wait_for(second, 30)
            return outcome[0], answer, kit.history(rt)

    first, second, history = asyncio.run(main())
    assert isinstance(first, goondan.GoondanError) and first.code == "E_AGENT_PROCESS_EXITED"
    assert second.finish_reason == "text_response", second.error
    assert second.text == "saw: first|second"
    assert [m["content"] for m in history if m["role"] == "user"] == ["first", "second"]
