"""Ctrl+C on `gdn run --input` while the coordinator waits on a worker exits 130 promptly. The first
Ctrl+C cancelled the coordinator's turn at once, but the run then closed gracefully and waited for
the worker's turn to finish (up to the grace period: 30 s here; with the process executor a
"response for coord dropped" WARNING followed). Now the worker's turn stops with the run (as a
second Ctrl+C stops it), its history stays valid and the next run works. Real `gdn run`
processes, inline and process executors."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from cli_testkit import env_for, gdn

from kit import agent_doc, base_ref, export, package_doc, python_model_doc, swarm_doc, tool_doc, write_bundle

EXIT_BOUND_SECONDS = 8.0  # the worker sleeps 60 s; the grace period is 30 s

MODEL = """
import json


def generate(request):
    messages = [m for m in request.messages if m["role"] != "system"]
    last = messages[-1]
    if last["role"] == "tool":
        return {"text": request.agent_name + " got " + json.dumps(last["content"][0]["output"])}
    text = last["content"] if isinstance(last["content"], str) else ""
    if text == "delegate":
        return {"toolCalls": [{"name": "agents__request", "args": {"target": "worker", "input": "work"}}]}
    if text == "work":
        return {"toolCalls": [{"name": "ops__slow", "args": {}}]}
    return {"text": request.agent_name + " echo: " + text}
"""

TOOL = """
import asyncio
from pathlib import Path


async def slow(ctx, args):
    (Path(__file__).parent / "started").write_text("yes")
    await asyncio.sleep(60)
    return "done"


handlers = {"slow": slow}
"""


@pytest.mark.parametrize("executor", ["inline", "process"])
def test_ctrl_c_while_the_coordinator_waits_on_a_worker_exits_promptly(tmp_path: Path, executor: str) -> None:
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
    proc = subprocess.Popen(
        [*run, "--input", "delegate"],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=env_for(tmp_path),
        cwd=tmp_path,
        start_new_session=True,
    )
    try:
        deadline = time.monotonic() + 30
        while not (bundle / "started").exists():
            assert proc.poll() is None and time.monotonic() < deadline, "the worker's tool never started"
            time.sleep(0.05)
        time.sleep(0.2)
        started = time.monotonic()
        os.killpg(proc.pid, signal.SIGINT)
        code = proc.wait(60)
        took = time.monotonic() - started
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
        stderr = proc.stderr.read().decode() if proc.stderr else ""
        proc.wait()
    assert code == 130, stderr
    assert took < EXIT_BOUND_SECONDS, f"exit took {took:.1f} s: {stderr}"
    assert "Traceback" not in stderr and "WARNING" not in stderr, stderr
    # both conversations are valid: the next run asks the worker again and gets its answer
    (bundle / "started").unlink()
    nxt = gdn(tmp_path, "run", str(bundle), "--state-root", str(state), "--executor", executor, "--input", "hello")
    assert nxt.returncode == 0, nxt.stderr
    assert nxt.stdout == "coord echo: hello\n"
    worker = gdn(
        tmp_path,
        "run",
        str(bundle),
        "--state-root",
        str(state),
        "--executor",
        executor,
        "--agent",
        "worker",
        "--input",
        "again",
    )
    assert worker.returncode == 0, worker.stderr
    assert worker.stdout == "worker echo: again\n"
    for path in state.glob("workspaces/*/instances/*/metadata.json"):
        assert json.loads(path.read_text())["status"] != "processing"
