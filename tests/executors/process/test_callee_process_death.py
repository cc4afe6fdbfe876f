"""A callee whose agent process dies under its turn (a tool that kills it: os._exit, a signal, the
OOM killer) answers the caller's request with ``AGENT_REQUEST_FAILED``, naming how the process ended
and pointing at ``gdn logs``. It said ``IPC_DELIVERY_FAILED`` "could not take the request" with the
suggestion to check that the agent *starts* (its tools, extensions and model load), which sent the
user looking in the wrong place; and "exited mid-turn" did not say how. The next request works on
a valid history.

Real runtime, real agent processes (process executor): the worker's tool SIGKILLs its own process."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import goondan
from kit import (
    agent_doc,
    base_ref,
    export,
    history,
    package_doc,
    python_model_doc,
    swarm_doc,
    tool_doc,
    tool_results,
    write_bundle,
)

MODEL = """
import json


def generate(request):
    messages = [m for m in request.messages if m["role"] != "system"]
    last = messages[-1]
    if last["role"] == "tool":
        return {"text": json.dumps(last["content"][0]["output"])}
    text = last["content"] if isinstance(last["content"], str) else ""
    if text.startswith("!"):
        return {"toolCalls": json.loads(text[1:])}
    return {"text": request.agent_name + " echo: " + text}
"""

TOOL = """
import os
import signal


def die(ctx, args):
    os.kill(os.getpid(), signal.SIGKILL)


def bye(ctx, args):
    os._exit(3)


handlers = {"die": die, "bye": bye}
"""


def _ask(target: str, text: str) -> str:
    return "!" + json.dumps([{"name": "agents__request", "args": {"target": target, "input": text}}])


def test_a_callee_whose_process_dies_mid_turn_fails_the_request_saying_how(tmp_path: Path) -> None:
    root = write_bundle(
        tmp_path / "b",
        package_doc(),
        python_model_doc(),
        tool_doc("ops", "./ops.py", [export("die"), export("bye")]),
        agent_doc("coord", tools=[base_ref("Tool", "agents")]),
        agent_doc("worker", tools=["ops"]),
        swarm_doc(["coord", "worker"]),
        files={"model.py": MODEL, "ops.py": TOOL},
    )
    die = "!" + json.dumps([{"name": "ops__die", "args": {}}])
    bye = "!" + json.dumps([{"name": "ops__bye", "args": {}}])

    async def main() -> tuple[list[Any], list[dict[str, Any]]]:
        async with goondan.Runtime(root, state_root=tmp_path / "state", executor="process") as rt:
            texts = []
            for text in (_ask("worker", die), _ask("worker", bye), _ask("worker", "still there?")):
                result = await rt.request(text, instance_key="k")
                texts.append(json.loads(result.text or "null"))
            await rt.wait_idle()
            return texts, history(rt, "worker", "k")

    (killed, exited, after), worker = asyncio.run(main())
    assert killed["type"] == "error-json", killed
    assert killed["value"] == {
        "code": "AGENT_REQUEST_FAILED",
        "message": "agent 'worker' failed to handle the request: [E_AGENT_PROCESS_EXITED] the process of "
        "worker:k exited mid-turn (killed by SIGKILL)",
        "suggestion": "`gdn logs --agent worker -v` shows that turn up to where the process ended (a tool or "
        "model that exits it: os._exit, a signal, the OOM killer); the next request starts a new one.",
    }
    assert exited["value"]["message"].endswith("exited mid-turn (exit code 3)"), exited
    assert after["value"]["response"] == "worker echo: still there?"
    # both interrupted tool calls were answered when the worker came back: a valid history
    results = tool_results(worker)
    assert [r["output"]["value"]["code"] for r in results] == ["E_TOOL_INTERRUPTED", "E_TOOL_INTERRUPTED"]
