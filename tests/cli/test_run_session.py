"""`gdn run` sessions and start-up: exit codes of a piped chat, every config problem shown, Ctrl+C mid-turn."""

from __future__ import annotations

import json
import os
import signal
import time
from pathlib import Path

import pytest
from cli_testkit import ECHO_BUNDLE, gdn
from test_interactive_pty import Terminal

from kit import write_bundle

PYTHON_MODEL_BUNDLE = """\
apiVersion: goondan.ai/v1
kind: Package
metadata:
  name: session-suite
spec:
  version: 0.1.0
---
apiVersion: goondan.ai/v1
kind: Model
metadata:
  name: flaky
spec:
  provider: python
  model: flaky
  options:
    entry: ./model.py
---
apiVersion: goondan.ai/v1
kind: Agent
metadata:
  name: talker
spec:
  modelConfig:
    modelRef: Model/flaky
---
apiVersion: goondan.ai/v1
kind: Swarm
metadata:
  name: default
spec:
  entryAgent: Agent/talker
  agents: [Agent/talker]
"""

FLAKY_MODEL = """\
import asyncio


async def generate(request):
    last = str(request.messages[-1])
    if "fail" in last:
        raise RuntimeError("the model is down")
    if "slow" in last:
        await asyncio.sleep(30)
    return {"text": "fine"}
"""


def _flaky_bundle(tmp_path: Path) -> Path:
    bundle = write_bundle(tmp_path / "b", PYTHON_MODEL_BUNDLE)
    (bundle / "model.py").write_text(FLAKY_MODEL)
    return bundle


@pytest.mark.parametrize(
    ("lines", "code"),
    [("ok\nok\n", 0), ("fail\n", 1), ("fail\nok\n", 1), ("ok\nfail\nok\n", 1)],
)
def test_piped_chat_exits_1_when_any_turn_failed(tmp_path: Path, lines: str, code: int) -> None:
    bundle = _flaky_bundle(tmp_path)
    proc = gdn(tmp_path, "run", str(bundle), "--state-root", str(tmp_path / "s"), stdin=lines)
    assert proc.returncode == code, proc.stderr
    assert proc.stdout == "fine\n" * lines.split().count("ok")  # every line was still answered
    printed = [line for line in proc.stderr.splitlines() if line.startswith("[E_MODEL_CALL]")]
    assert len(printed) == lines.split().count("fail")


def test_run_shows_every_config_problem_with_file_and_line(tmp_path: Path) -> None:
    broken = ECHO_BUNDLE.replace("modelRef: Model/echo", "modelRef: Model/nope")
    bundle = write_bundle(tmp_path / "b", broken)
    proc = gdn(tmp_path, "run", str(bundle), "--input", "hi", "--state-root", str(tmp_path / "s"))
    assert proc.returncode == 3
    # both agents reference the missing model: both problems are listed, each with file:line
    assert proc.stderr.count("Model/nope") >= 2, proc.stderr
    assert "goondan.yaml:26" in proc.stderr and "goondan.yaml:34" in proc.stderr
    assert "more problem(s)" not in proc.stderr


def test_ctrl_c_during_a_turn_cancels_it_and_ctrl_c_at_the_prompt_exits_130(tmp_path: Path) -> None:
    bundle = _flaky_bundle(tmp_path)
    state = tmp_path / "state"
    term = Terminal(tmp_path, str(bundle), "--state-root", str(state))
    try:
        term.expect("> ")
        term.send("ok\r")
        term.expect("fine")
        term.expect("> ")
        term.send("slow\r")
        deadline = time.monotonic() + 10
        metadata = list(state.glob("workspaces/*/instances/*/metadata.json"))
        while time.monotonic() < deadline:
            metadata = list(state.glob("workspaces/*/instances/*/metadata.json"))
            if metadata and json.loads(metadata[0].read_text()).get("status") == "processing":
                break
            time.sleep(0.05)
        assert metadata and json.loads(metadata[0].read_text())["status"] == "processing"
        os.killpg(term.proc.pid, signal.SIGINT)  # cancels the turn: back to the prompt
        term.expect("cancelled")
        term.expect("> ")
        os.killpg(term.proc.pid, signal.SIGINT)  # no turn runs: ends the session
        assert term.wait() == 130
    finally:
        term.close()
    statuses = [json.loads(p.read_text()).get("status") for p in metadata]
    assert "processing" not in statuses, statuses
