"""`gdn run --input` prints the answer as soon as the turn returns, before the runtime closes. A
coordinator whose request to a worker timed out had its answer ready at once, but it was printed
only after the graceful close had let the worker's turn finish (up to the grace period: the
terminal showed nothing for that long). It then says which turns it waits for and that Ctrl+C stops
them. Real `gdn run`, inline and process executors."""

from __future__ import annotations

import json
import selectors
import subprocess
import sys
import time
from pathlib import Path

import pytest
from cli_testkit import env_for

from kit import agent_doc, base_ref, export, package_doc, python_model_doc, swarm_doc, tool_doc, write_bundle

WORKER_SECONDS = 10

MODEL = """
import json


def generate(request):
    messages = [m for m in request.messages if m["role"] != "system"]
    last = messages[-1]
    if last["role"] == "tool":
        return {"text": "coord got " + last["content"][0]["output"]["value"]["code"]}
    if request.agent_name == "worker":
        return {"toolCalls": [{"name": "ops__slow", "args": {}}]}
    args = {"target": "worker", "input": "work", "timeoutMs": 300}
    return {"toolCalls": [{"name": "agents__request", "args": args}]}
"""

TOOL = f"""
import asyncio


async def slow(ctx, args):
    await asyncio.sleep({WORKER_SECONDS})
    return "done"


handlers = {{"slow": slow}}
"""


@pytest.mark.parametrize("executor", ["inline", "process"])
def test_the_answer_is_printed_before_the_run_waits_for_a_worker(tmp_path: Path, executor: str) -> None:
    bundle = write_bundle(
        tmp_path / "b",
        package_doc(),
        python_model_doc(),
        tool_doc("ops", "./ops.py", [export("slow")]),
        agent_doc("coord", tools=[base_ref("Tool", "agents")]),
        agent_doc("worker", tools=["ops"]),
        swarm_doc(["coord", "worker"]),
        files={"model.py": MODEL, "ops.py": TOOL},
    )
    state = tmp_path / "state"
    run = [sys.executable, "-m", "goondan", "run", str(bundle), "--state-root", str(state), "--executor", executor]
    started = time.monotonic()
    proc = subprocess.Popen(
        [*run, "--input", "go"],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=env_for(tmp_path),
        cwd=tmp_path,
    )
    try:
        assert proc.stdout is not None
        selector = selectors.DefaultSelector()
        selector.register(proc.stdout, selectors.EVENT_READ)
        ready = selector.select(timeout=WORKER_SECONDS - 2)
        answered = time.monotonic() - started
        assert ready, "no answer before the worker's turn ended"
        line = proc.stdout.readline().decode()
        assert proc.poll() is None  # still letting the worker's turn finish
        code = proc.wait(60)
        stderr = proc.stderr.read().decode() if proc.stderr else ""
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert line == "coord got AGENT_REQUEST_TIMEOUT\n", (line, answered)
    assert code == 0, stderr
    # and says what it waits for, and how to stop it (the run looked hung)
    assert "waiting for the turn still running to finish (worker@default; at most 30 s): Ctrl+C stops it\n" in stderr
    assert time.monotonic() - started >= WORKER_SECONDS  # the worker's turn did finish, and is committed
    worker = [p for p in state.glob("workspaces/*/instances/*/metadata.json") if "worker" in p.parent.name]
    assert [json.loads(p.read_text())["status"] for p in worker] == ["idle"]
