"""A request whose target's turn ends without an answer fails with a code saying why, instead of
``{"accepted": true, "response": ""}`` that a coordinator's model read as the worker's (empty)
answer: ``AGENT_AWAITING_APPROVAL`` when the worker's turn paused for a person's approval (naming
the tool and the approval id, and warning that asking again denies the waiting call), and
``AGENT_REQUEST_CANCELLED`` when somebody cancelled the worker's turn.

Real runtime; inline and process executors (in process mode every call crosses the orchestrator)."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest

import goondan
from kit import (
    agent_doc,
    base_ref,
    export,
    package_doc,
    python_model_doc,
    swarm_doc,
    tool_doc,
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
import asyncio


def deploy(ctx, args):
    return {"deployed": True}


async def slow(ctx, args):
    await asyncio.sleep(30)
    return {"done": True}


handlers = {"deploy": deploy, "slow": slow}
"""


def _bundle(root: Path) -> Path:
    worker = agent_doc("worker", tools=["ops"])
    worker["spec"]["approval"] = {"tools": ["ops__deploy"]}
    return write_bundle(
        root,
        package_doc(),
        python_model_doc(),
        tool_doc("ops", "./ops.py", [export("deploy"), export("slow")]),
        agent_doc("coord", tools=[base_ref("Tool", "agents")]),
        worker,
        swarm_doc(["coord", "worker"]),
        files={"model.py": MODEL, "ops.py": TOOL},
    )


def _ask_worker(tool: str) -> str:
    inner = "!" + json.dumps([{"name": tool, "args": {}}])
    return "!" + json.dumps([{"name": "agents__request", "args": {"target": "worker", "input": inner}}])


@pytest.mark.parametrize("executor", ["inline", "process"])
def test_a_worker_paused_for_approval_does_not_answer_with_an_empty_response(tmp_path: Path, executor: str) -> None:
    root = _bundle(tmp_path / "b")

    async def main() -> tuple[Any, list[Any]]:
        async with goondan.Runtime(root, state_root=tmp_path / "state", executor=executor) as rt:
            result = await rt.request(_ask_worker("ops__deploy"), instance_key="k")
            return json.loads(result.text or "null"), await rt.pending_approvals()

    output, pending = asyncio.run(main())
    [waiting] = pending
    assert output["type"] == "error-json", output  # was json {"response": "", "accepted": true, ...}
    assert output["value"]["code"] == "AGENT_AWAITING_APPROVAL"
    assert output["value"]["message"] == (
        f"agent 'worker' has not answered: its turn waits for a person to approve ops__deploy "
        f"(approval {waiting.approval_id})"
    )
    assert "gdn approvals approve ID" in output["value"]["suggestion"]
    assert "a new request denies the waiting call" in output["value"]["suggestion"]


@pytest.mark.parametrize("executor", ["inline", "process"])
def test_a_worker_whose_turn_is_cancelled_does_not_answer_with_an_empty_response(tmp_path: Path, executor: str) -> None:
    root = _bundle(tmp_path / "b")

    async def main() -> Any:
        async with goondan.Runtime(root, state_root=tmp_path / "state", executor=executor) as rt:
            started: asyncio.Event = asyncio.Event()
            rt.on_runtime_event(
                lambda e: started.set() if e.get("type") == "tool.called" and e.get("agentName") == "worker" else None
            )
            task = asyncio.create_task(rt.request(_ask_worker("ops__slow"), instance_key="k"))
            await asyncio.wait_for(started.wait(), 20)
            assert await rt.cancel("worker", "k")
            result = await asyncio.wait_for(task, 20)
            return json.loads(result.text or "null")

    output = asyncio.run(main())
    assert output["type"] == "error-json", output
    assert output["value"]["code"] == "AGENT_REQUEST_CANCELLED"
    assert output["value"]["message"] == "agent 'worker' has not answered: its turn was cancelled"
