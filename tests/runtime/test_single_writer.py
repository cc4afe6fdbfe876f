"""Two runtimes on one state root: an instance is written by one of them at a time, and the lease
dies with its holder (CONTRACT §10 single writer). Real processes, both isolation modes."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

SRC = str(Path(__file__).resolve().parents[2] / "src")

BUNDLE = """\
apiVersion: goondan.ai/v1
kind: Model
metadata:
  name: echo
spec:
  provider: scripted
  model: echo
  options:
    rules:
      - reply:
          text: "echo: {{last}}"
---
apiVersion: goondan.ai/v1
kind: Agent
metadata:
  name: talker
spec:
  modelConfig:
    modelRef: Model/echo
---
apiVersion: goondan.ai/v1
kind: Swarm
metadata:
  name: default
spec:
  entryAgent: Agent/talker
  agents: [Agent/talker]
"""

CHILD = """
import asyncio, json, sys
import goondan

async def main():
    bundle, state, isolation, text, hold = sys.argv[1:6]
    async with goondan.Runtime(bundle, state_root=state, isolation=isolation) as rt:
        try:
            result = await rt.request(text)
            out = {"text": result.text, "error": result.error}
        except goondan.GoondanError as exc:
            out = {"text": None, "error": exc.to_dict()}
        print(json.dumps(out), flush=True)
        if hold == "hold":
            sys.stdin.readline()

asyncio.run(main())
"""


def _env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("GOONDAN_STATE_ROOT", "GOONDAN_ISOLATION")}
    env["PYTHONPATH"] = SRC + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
    return env


def _start(bundle: Path, state: Path, isolation: str, text: str, hold: bool) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-c", CHILD, str(bundle), str(state), isolation, text, "hold" if hold else "once"],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=_env(),
        start_new_session=True,
    )


def _answer(proc: subprocess.Popen[str]) -> dict[str, object]:
    assert proc.stdout is not None
    line = proc.stdout.readline()
    assert line, proc.stderr.read() if proc.stderr else "no output"
    out: dict[str, object] = json.loads(line)
    return out


def _once(bundle: Path, state: Path, isolation: str, text: str) -> dict[str, object]:
    proc = _start(bundle, state, isolation, text, hold=False)
    try:
        return _answer(proc)
    finally:
        proc.wait(60)


def test_a_second_runtime_cannot_write_an_instance_another_holds(tmp_path: Path, executor: str) -> None:
    bundle = tmp_path / "bundle"
    bundle.mkdir()
    (bundle / "goondan.yaml").write_text(textwrap.dedent(BUNDLE))
    state = tmp_path / "state"
    holder = _start(bundle, state, executor, "first", hold=True)
    try:
        assert _answer(holder)["text"] == "echo: first"
        refused = _once(bundle, state, executor, "second")
        error = refused["error"]
        assert isinstance(error, dict) and error["code"] == "E_INSTANCE_LOCKED", refused
        assert "pid " in str(error["message"]) and "since" in str(error["message"])
        # the holder dies the hard way: its lease goes with it
        os.killpg(holder.pid, signal.SIGKILL)
        holder.wait(30)
        after = _once(bundle, state, executor, "third")
        assert after["text"] == "echo: third", after
    finally:
        if holder.poll() is None:
            os.killpg(holder.pid, signal.SIGKILL)
            holder.wait(30)
    [base] = state.glob("workspaces/*/instances/*/messages/base.jsonl")
    texts = [json.loads(line)["data"]["content"] for line in base.read_text().splitlines()]
    assert texts == ["first", "echo: first", "third", "echo: third"]  # nothing of the refused request
