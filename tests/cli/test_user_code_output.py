"""A user's own code (tools, extensions, python models) can neither end ``gdn run`` nor write into its
answer stream, and its tracebacks are kept (issue 11 items 10 and 17)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from cli_testkit import gdn

from kit import write_bundle

BUNDLE = """\
apiVersion: goondan.ai/v1
kind: Package
metadata:
  name: user-code
spec:
  version: 0.1.0
---
apiVersion: goondan.ai/v1
kind: Model
metadata:
  name: m
spec:
  provider: python
  model: m
  options:
    entry: ./model.py
---
apiVersion: goondan.ai/v1
kind: Tool
metadata:
  name: t
spec:
  entry: ./tools/t.py
  exports:
    - name: chatty
      description: prints a lot
      parameters: {type: object, properties: {}}
    - name: quits
      description: calls sys.exit
      parameters: {type: object, properties: {}}
    - name: boom
      description: raises
      parameters: {type: object, properties: {}}
---
apiVersion: goondan.ai/v1
kind: Agent
metadata:
  name: a
spec:
  modelConfig:
    modelRef: Model/m
  tools: [Tool/t]
---
apiVersion: goondan.ai/v1
kind: Swarm
metadata:
  name: user-code
spec:
  entryAgent: Agent/a
  agents: [Agent/a]
"""

MODEL = """\
import sys


def generate(request):
    last = request.messages[-1]
    print("model says hi")
    if last["role"] == "tool":
        return {"text": "final answer"}
    return {"toolCalls": [{"name": "t__" + last["content"], "args": {}}]}
"""

TOOL = """\
import sys


def chatty(ctx, args):
    sys.stderr.write("to stderr\\n")
    for i in range(20000):
        print("noise line", i, "x" * 40)
    return "ok"


def quits(ctx, args):
    sys.exit(3)


def helper_that_fails():
    raise ValueError("deliberate failure in the tool")


def boom(ctx, args):
    helper_that_fails()


handlers = {"chatty": chatty, "quits": quits, "boom": boom}
"""


def bundle(tmp_path: Path) -> Path:
    root = write_bundle(tmp_path / "b", BUNDLE)
    (root / "model.py").write_text(MODEL, encoding="utf-8")
    (root / "tools").mkdir()
    (root / "tools" / "t.py").write_text(TOOL, encoding="utf-8")
    return root


@pytest.mark.parametrize("isolation", ["inline", "process"])
def test_stdout_of_gdn_run_input_is_exactly_the_answer_when_user_code_prints(tmp_path: Path, isolation: str) -> None:
    root = bundle(tmp_path)
    proc = gdn(tmp_path, "run", str(root), "--input", "chatty", GOONDAN_ISOLATION=isolation)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout == "final answer\n"
    assert "noise line" not in proc.stderr  # kept for -v, not shown by default


def test_printed_output_of_user_code_is_logged_bounded_with_v(tmp_path: Path) -> None:
    root = bundle(tmp_path)
    proc = gdn(tmp_path, "run", str(root), "--input", "chatty", "-v")
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout == "final answer\n"
    assert "tool t__chatty wrote to stdout" in proc.stderr
    assert "noise line 0 " in proc.stderr
    assert "noise line 19999" not in proc.stderr  # beyond the 64 KiB kept
    assert "more characters to stdout/stderr (not kept" in proc.stderr
    assert "to stderr" in proc.stderr
    assert "model says hi" in proc.stderr


def test_sys_exit_in_a_tool_does_not_end_gdn_run(tmp_path: Path) -> None:
    root = bundle(tmp_path)
    proc = gdn(tmp_path, "run", str(root), "--input", "quits")
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout == "final answer\n"


def _runtime_events(tmp_path: Path) -> list[dict[str, object]]:
    files = list((tmp_path / "home").rglob("runtime-events.jsonl")) + list(tmp_path.rglob("runtime-events.jsonl"))
    records: list[dict[str, object]] = []
    for path in set(files):
        records.extend(json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip())
    return records


@pytest.mark.parametrize("isolation", ["inline", "process"])
def test_tool_traceback_is_kept_in_runtime_event_and_shown_by_logs_v(tmp_path: Path, isolation: str) -> None:
    root = bundle(tmp_path)
    proc = gdn(tmp_path, "run", str(root), "--input", "boom", GOONDAN_ISOLATION=isolation)
    assert proc.returncode == 0, proc.stderr
    [failed] = [r for r in _runtime_events(tmp_path) if r["type"] == "tool.completed" and r.get("status") == "error"]
    error = failed["error"]
    assert isinstance(error, dict)
    assert "helper_that_fails" in error["traceback"]
    assert "ValueError: deliberate failure in the tool" in error["traceback"]
    plain = gdn(tmp_path, "logs")
    assert "helper_that_fails" not in plain.stdout
    # without -v the error line still names the exception and says where the traceback is
    [line] = [t for t in plain.stdout.splitlines() if "tool.completed" in t and "status=error" in t]
    assert "(ValueError: deliberate failure in the tool; gdn logs -v for the traceback)" in line
    verbose = gdn(tmp_path, "logs", "-v")
    assert "helper_that_fails" in verbose.stdout


def test_tool_traceback_is_printed_by_gdn_run_v(tmp_path: Path) -> None:
    root = bundle(tmp_path)
    proc = gdn(tmp_path, "run", str(root), "--input", "boom", "-v")
    assert proc.returncode == 0, proc.stderr
    assert "Traceback (most recent call last)" in proc.stderr
    assert "helper_that_fails" in proc.stderr
