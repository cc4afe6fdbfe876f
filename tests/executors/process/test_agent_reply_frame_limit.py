"""A worker whose answer is too large to cross the process boundary fails its caller's request
with the frame error's own suggestion (return less data, the limit and GOONDAN_IPC_MAX_FRAME_BYTES,
or write a file and pass its path); it said "`gdn logs --agent worker -v` shows what failed (its
turn.failed event, with the traceback)", although the worker's turn completed and there is no such
event. Real agent processes, the limit lowered for the test."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest

import goondan
from goondan.executors.process import _ipc
from kit import agent_doc, base_ref, package_doc, python_model_doc, swarm_doc, write_bundle

MODEL = """
import json


def generate(request):
    messages = [m for m in request.messages if m["role"] != "system"]
    last = messages[-1]
    if last["role"] == "tool":
        return {"text": json.dumps(last["content"][0]["output"])}
    if request.agent_name == "worker":
        return {"text": "x" * 300_000}
    return {"toolCalls": [{"name": "agents__request", "args": {"target": "worker", "input": "all of it"}}]}
"""


def test_an_answer_too_large_for_the_process_boundary_says_what_to_do(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(_ipc.MAX_FRAME_ENV, str(256 * 1024))  # the agent processes read it at start
    root = write_bundle(
        tmp_path / "b",
        package_doc(),
        python_model_doc(),
        agent_doc("coord", tools=[base_ref("Tool", "agents")]),
        agent_doc("worker"),
        swarm_doc(["coord", "worker"]),
        files={"model.py": MODEL},
    )

    async def main() -> Any:
        async with goondan.Runtime(root, state_root=tmp_path / "state", executor="process") as rt:
            result = await rt.request("go", instance_key="k")
            return json.loads(result.text or "null")

    output = asyncio.run(main())
    assert output["type"] == "error-json", output
    value = output["value"]
    assert value["code"] == "AGENT_REQUEST_FAILED"
    assert "[E_IPC_FRAME_TOO_LARGE]" in value["message"]
    assert value["suggestion"] == (
        "Return or send less data (limit 262144 bytes; GOONDAN_IPC_MAX_FRAME_BYTES changes it), "
        "or write large results to a file and pass its path."
    )
