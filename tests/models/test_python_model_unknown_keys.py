"""A python model that returns keys the provider does not read, spelt as the OpenAI/Anthropic APIs
spell them (``{"tool_calls": [...]}``, a call's ``"arguments"``), is ``E_MODEL_BAD_RESPONSE`` naming
the key and the one meant: the first was an empty response, retried three times and ended as "I could
not produce a usable response after several attempts." (exit 0), the second a call without arguments.
Real ``gdn run`` processes on a bundle whose model is a file."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

BUNDLE = """\
apiVersion: goondan.ai/v1
kind: Model
metadata: {name: m}
spec: {provider: python, model: m, options: {entry: ./model.py}}
---
apiVersion: goondan.ai/v1
kind: Tool
metadata: {name: calc}
spec:
  entry: ./calc.py
  exports:
    - {name: add, description: adds, parameters: {type: object, properties: {a: {type: number}}}}
---
apiVersion: goondan.ai/v1
kind: Agent
metadata: {name: a}
spec: {modelConfig: {modelRef: Model/m}, tools: [Tool/calc]}
---
apiVersion: goondan.ai/v1
kind: Swarm
metadata: {name: default}
spec: {entryAgent: Agent/a, agents: [Agent/a]}
"""

MODEL = """\
def generate(request):
    if request.messages[-1]["role"] == "tool":
        return {"text": "done", "usage": {"totalTokens": 3}}
    return RETURN
"""


def _run(tmp_path: Path, returned: str) -> subprocess.CompletedProcess[str]:
    bundle = tmp_path / "b"
    bundle.mkdir(exist_ok=True)
    (bundle / "goondan.yaml").write_text(BUNDLE)
    (bundle / "calc.py").write_text("def add(ctx, args):\n    return args\n\n\nhandlers = {'add': add}\n")
    (bundle / "model.py").write_text(MODEL.replace("RETURN", returned))
    return subprocess.run(
        [sys.executable, "-m", "goondan", "run", "b", "--input", "add", "--state-root", str(tmp_path / "state")],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=60,
        stdin=subprocess.DEVNULL,
    )


def test_tool_calls_in_snake_case_is_an_error_naming_toolcalls(tmp_path: Path) -> None:
    run = _run(tmp_path, '{"tool_calls": [{"name": "calc__add", "args": {"a": 1}}]}')
    assert run.returncode == 1, run.stdout + run.stderr
    assert (
        "[E_MODEL_BAD_RESPONSE] python model model.py returned a response with unknown key(s) 'tool_calls'; "
        "it reads only text, toolCalls, usage, finishReason"
    ) in run.stderr
    assert "suggestion: did you mean 'toolCalls'?" in run.stderr
    assert "could not produce a usable response" not in run.stdout + run.stderr


def test_a_calls_arguments_key_is_an_error_naming_args(tmp_path: Path) -> None:
    run = _run(tmp_path, '{"toolCalls": [{"name": "calc__add", "arguments": {"a": 1}}]}')
    assert run.returncode == 1, run.stdout + run.stderr
    assert "returned toolCalls[0] with unknown key(s) 'arguments'; it reads only id, name, args" in run.stderr
    assert "suggestion: did you mean 'args'?" in run.stderr


def test_the_documented_shapes_still_run(tmp_path: Path) -> None:
    run = _run(tmp_path, '{"text": None, "toolCalls": [{"name": "calc__add", "args": {"a": 1}, "id": "c1"}]}')
    assert (run.returncode, run.stdout) == (0, "done\n"), run.stderr
    run = _run(tmp_path, '{"text": "hi", "finishReason": "stop"}')
    assert (run.returncode, run.stdout) == (0, "hi\n"), run.stderr
