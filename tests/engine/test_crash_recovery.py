"""A real crash: a child process is SIGKILLed in the middle of a turn (CONTRACT §8)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import goondan
import kit as k
from kit import agent_doc, export, tool_doc

MODEL = """\
import json
import os


def generate(request):
    messages = list(request.messages)
    with open(os.environ["REQ_LOG"], "a", encoding="utf-8") as fh:
        fh.write(json.dumps({"pid": os.getpid(), "messages": messages}) + "\\n")
    last = messages[-1]
    if last["role"] == "user" and last["content"] == "first":
        return {"text": "waiting now", "toolCalls": [{"id": "call-block", "name": "block__wait", "args": {}}]}
    return {"text": "answered: " + str(last.get("content"))}
"""

TOOL = """\
import os
import time


def wait(ctx, args):
    with open(os.environ["READY_FILE"], "w", encoding="utf-8") as fh:
        fh.write(str(os.getpid()))
    time.sleep(60)
    return "never"


handlers = {"wait": wait}
"""

CHILD = """\
import asyncio
import sys

import goondan


async def main():
    async with goondan.Runtime(sys.argv[1], state_root=sys.argv[2], isolation="inline") as rt:
        await rt.request("first")


asyncio.run(main())
"""


def _read_log(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]


def test_sigkill_mid_turn_keeps_emitted_messages_for_the_next_turn(
    tmp_path: Path, state_root: Path, monkeypatch: Any
) -> None:
    root = k.write_bundle(
        tmp_path / "bundle",
        k.package_doc(),
        k.python_model_doc(),
        tool_doc("block", "./tools/block.py", [export("wait")]),
        agent_doc("a", tools=["block"]),
        k.swarm_doc(["a"]),
        files={"model.py": MODEL, "tools/block.py": TOOL},
    )
    ready = tmp_path / "ready"
    req_log = tmp_path / "requests.jsonl"
    script = tmp_path / "child.py"
    script.write_text(CHILD, encoding="utf-8")
    env = {**os.environ, "READY_FILE": str(ready), "REQ_LOG": str(req_log)}
    child = subprocess.Popen(
        [sys.executable, str(script), str(root), str(state_root)],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    try:
        deadline = time.monotonic() + 30
        while not ready.exists():
            if child.poll() is not None:
                raise AssertionError(f"child exited early: {child.stderr.read().decode() if child.stderr else ''}")
            assert time.monotonic() < deadline, "child never reached the blocking tool"
            time.sleep(0.02)
        os.kill(child.pid, signal.SIGKILL)
        child.wait(10)
    finally:
        if child.poll() is None:
            child.kill()
            child.wait(10)
        if child.stderr:
            child.stderr.close()
    assert child.returncode == -signal.SIGKILL

    [inst] = k.instance_dirs(state_root)
    residual = k.read_jsonl(inst / "messages" / "events.jsonl")
    assert residual, "the killed turn should have left its emitted messages in events.jsonl"

    # a new runtime on the same state root runs the next turn
    monkeypatch.setenv("REQ_LOG", str(req_log))
    monkeypatch.setenv("READY_FILE", str(tmp_path / "unused"))

    async def main() -> Any:
        async with goondan.Runtime(root, state_root=state_root, isolation="inline") as rt:
            return await rt.request("second")

    result = k.run(main())
    assert result.text == "answered: second"

    calls = _read_log(req_log)
    assert len(calls) == 2
    assert calls[0]["pid"] != calls[1]["pid"]
    seen = calls[1]["messages"]
    assert seen[0] == {"role": "user", "content": "first"}
    assert seen[1]["role"] == "assistant"
    assert {"type": "text", "text": "waiting now"} in seen[1]["content"]
    tool_calls = [p for m in seen for p in k.parts(m, "tool-call")]
    assert [p["toolCallId"] for p in tool_calls] == ["call-block"]
    # the interrupted call got an error result on restart, so the provider request stays valid
    results = [p for m in seen for p in k.parts(m, "tool-result")]
    assert [(p["toolCallId"], p["output"]["type"], p["output"]["value"]["code"]) for p in results] == [
        ("call-block", "error-json", "E_TOOL_INTERRUPTED")
    ]
    assert seen[2]["role"] == "tool"
    assert [m for m in seen if m == {"role": "user", "content": "first"}] == [seen[0]]
    assert seen[-1] == {"role": "user", "content": "second"}

    base = k.read_jsonl(inst / "messages" / "base.jsonl")
    ids = [r["id"] for r in base]
    assert len(ids) == len(set(ids))
    contents = [r["data"]["content"] for r in base if r["data"]["role"] == "user"]
    assert contents.count("first") == 1 and contents.count("second") == 1
    assert base[-1]["data"] == {"role": "assistant", "content": "answered: second"}
    assert k.read_jsonl(inst / "messages" / "events.jsonl") == []
