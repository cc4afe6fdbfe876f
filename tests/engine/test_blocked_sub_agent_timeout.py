"""timeoutMs of a sub-agent request holds when the target blocks the event loop. Inline, a target
whose python model or sync tool sleeps (``time.sleep``) keeps the timer from firing until it
returns; the caller then got the target's late answer as if it had come in time. Now it gets
AGENT_REQUEST_TIMEOUT as soon as the blocking call returns (the process executor's target runs in
its own process: the timer fires on time there). Real ``gdn run`` subprocesses on real bundles."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from kit import agent_doc, base_ref, export, package_doc, python_model_doc, swarm_doc, tool_doc, write_bundle

# a asks w with timeoutMs 300 and answers with the tool result it got; w blocks for 1.5 s in its
# model ("model") or in its sync tool ("tool"), then answers "late answer"
CALLER = """\
import json


def generate(request):
    last = request.messages[-1]
    if last["role"] == "tool":
        return {"text": json.dumps(last["content"][0]["output"]["value"])}
    said = last["content"] if isinstance(last["content"], str) else last["content"][0]["text"]
    args = {"target": "w", "input": said, "timeoutMs": 300}
    return {"toolCalls": [{"id": "c1", "name": "agents__request", "args": args}]}
"""

TARGET = """\
import time


def generate(request):
    last = request.messages[-1]
    if last["role"] == "tool":
        return {"text": "late answer"}
    said = last["content"] if isinstance(last["content"], str) else last["content"][0]["text"]
    if said == "model":
        time.sleep(1.5)
        return {"text": "late answer"}
    return {"toolCalls": [{"id": "c1", "name": "slow__wait", "args": {}}]}
"""

SLOW_TOOL = """\
import time


def wait(ctx, args):
    time.sleep(1.5)
    return "waited"


handlers = {"wait": wait}
"""


def _bundle(root: Path) -> Path:
    target_model = python_model_doc("slowmodel", "./target.py")
    return write_bundle(
        root,
        package_doc("blocked"),
        python_model_doc(),
        target_model,
        tool_doc("slow", "./slow.py", [export("wait")]),
        agent_doc("a", tools=[base_ref("Tool", "agents")]),
        agent_doc("w", model="slowmodel", tools=["slow"]),
        swarm_doc(["a", "w"]),
        files={"model.py": CALLER, "target.py": TARGET, "slow.py": SLOW_TOOL},
    )


@pytest.mark.parametrize("blocking", ["model", "tool"])
@pytest.mark.parametrize("executor", ["inline", "process"])
def test_a_sub_agent_request_times_out_even_when_the_target_blocks_the_event_loop(
    tmp_path: Path, executor: str, blocking: str
) -> None:
    bundle = _bundle(tmp_path / "b")
    started = time.monotonic()
    state = str(tmp_path / "state")
    env = {k: v for k, v in os.environ.items() if not k.startswith("GOONDAN_")}
    command = [sys.executable, "-m", "goondan", "run", str(bundle), "--executor", executor]
    run = subprocess.run(
        [*command, "--state-root", state, "--input", blocking],
        capture_output=True,
        text=True,
        env=env,
        timeout=60,
    )
    took = time.monotonic() - started
    assert run.returncode == 0, run.stderr
    answer = json.loads(run.stdout)
    assert answer.get("response") is None, answer  # not the late answer
    assert answer["code"] == "AGENT_REQUEST_TIMEOUT"
    assert answer["message"] == "Agent request to 'w' timed out after 300ms"
    assert took < 30, took
