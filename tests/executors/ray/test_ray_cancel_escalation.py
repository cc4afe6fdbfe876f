"""The Ray executor escalates a cancel the turn does not honour as the process executor does (it
shares its orchestrator): the actor of a turn stuck in a synchronous tool is killed, the request
resolves ``cancelled``, a new actor answers the call ``E_TOOL_CANCELLED`` and the conversation goes
on there; the tool never runs again."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path
from typing import Any

import goondan
import kit

MODEL = """\
import json
import os


def generate(request):
    last = request.messages[-1]
    if last["role"] == "tool":
        return {"text": "tool said " + json.dumps(last["content"][0]["output"], sort_keys=True)}
    if last["content"] == "stuck":
        return {"toolCalls": [{"id": "c1", "name": "t__stuck", "args": {}}]}
    return {"text": "said " + str(last["content"]) + " in " + str(os.getpid())}
"""

TOOL = """\
import os
import time
from pathlib import Path


def stuck(ctx, args):
    with open(Path(__file__).with_name("runs.txt"), "a", encoding="utf-8") as fh:
        fh.write(str(os.getpid()) + "\\n")
    time.sleep(60)
    return "woke up"


handlers = {"stuck": stuck}
"""


def test_a_cancelled_turn_stuck_in_a_synchronous_tool_has_its_actor_killed_and_resolves_cancelled(
    tmp_path: Path, state_root: Path, ray_session: Any
) -> None:
    root = kit.write_bundle(
        tmp_path / "b",
        kit.package_doc("ray-cancel"),
        kit.python_model_doc(),
        kit.tool_doc("t", "./t.py", [kit.export("stuck")]),
        kit.agent_doc("a", tools=["t"]),
        kit.swarm_doc(["a"]),
        files={"model.py": MODEL, "t.py": TOOL},
    )
    runs = root / "runs.txt"

    async def main() -> tuple[Any, float, Any]:
        async with goondan.Runtime(root, state_root=state_root, executor="ray", cancel_grace_ms=1000) as rt:
            turn = asyncio.ensure_future(rt.request("stuck", instance_key="k"))
            deadline = time.monotonic() + 60
            while not runs.exists():
                assert time.monotonic() < deadline, "the tool never ran"
                await asyncio.sleep(0.05)
            started = time.monotonic()
            assert await rt.cancel("a", "k") is True
            result = await asyncio.wait_for(turn, 30)
            took = time.monotonic() - started
            return result, took, await rt.request("next", instance_key="k")

    result, took, after = asyncio.run(main())
    assert result.finish_reason == "cancelled", result
    assert took < 1.0 + 10, f"the cancelled turn resolved after {took:.1f} s"
    first = runs.read_text(encoding="utf-8").split()
    assert len(first) == 1  # never run again
    assert after.text.startswith("said next in ") and after.text.rsplit(" ", 1)[1] != first[0]
    base = kit.read_jsonl(kit.instance_dir(state_root, "a", "k") / "messages" / "base.jsonl")
    assert [m["data"]["role"] for m in base] == ["user", "assistant", "tool", "user", "assistant"]
    assert base[2]["data"]["content"][0]["output"]["value"]["code"] == "E_TOOL_CANCELLED"
