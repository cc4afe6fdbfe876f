"""A call to a mistyped agent name says which agent was meant: AGENT_NOT_FOUND's suggestion starts
with "did you mean 'worker'?" before the list of agents (it only listed them), for agents__request
(ctx.runtime.request) and agents__send, with either executor. Real runtime, real agent processes."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest

import goondan
from kit import agent_doc, base_ref, history, package_doc, python_model_doc, swarm_doc, tool_results, write_bundle

MODEL = """
import json


def generate(request):
    last = [m for m in request.messages if m["role"] != "system"][-1]
    if last["role"] == "tool":
        return {"text": "done"}
    return {"toolCalls": json.loads(last["content"])}
"""


@pytest.mark.parametrize("executor", ["inline", "process"])
def test_a_mistyped_agent_name_gets_did_you_mean(tmp_path: Path, executor: str) -> None:
    root = write_bundle(
        tmp_path / "b",
        package_doc(),
        python_model_doc(),
        agent_doc("coord", tools=[base_ref("Tool", "agents")]),
        agent_doc("worker"),
        swarm_doc(["coord", "worker"]),
        files={"model.py": MODEL},
    )
    calls = [
        {"name": "agents__request", "args": {"target": "workr", "input": "hi"}},
        {"name": "agents__send", "args": {"target": "Worker", "input": "hi"}},
    ]

    async def main() -> list[dict[str, Any]]:
        async with goondan.Runtime(root, state_root=tmp_path / "state", executor=executor) as rt:
            await rt.request(json.dumps(calls), instance_key="k")
            return history(rt, "coord", "k")

    request, send = (r["output"]["value"] for r in tool_results(asyncio.run(main())))
    assert request == {
        "code": "AGENT_NOT_FOUND",
        "message": "agent 'workr' is not part of swarm 'default'",
        "suggestion": "did you mean 'worker'? Call one of: coord, worker.",
    }
    assert send["code"] == "AGENT_NOT_FOUND"
    assert send["suggestion"] == "did you mean 'worker'? Send to one of: coord, worker."
