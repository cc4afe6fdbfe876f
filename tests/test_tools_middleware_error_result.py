"""A toolCall middleware that answers a call itself with ``ToolCallResult(..., status="error",
error="denied")`` (the error as text, not a ``{code, message}`` dict) gives the model that text as
the call's error, and ``gdn logs`` shows it. It failed the whole turn with ``[E_TURN_FAILED]
AttributeError: 'str' object has no attribute 'get'``, naming no middleware. Real ``gdn run`` with
both executors."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

import kit

MODEL = """\
import json


def generate(request):
    last = request.messages[-1]
    if last["role"] == "tool":
        return {"text": json.dumps(last["content"][0]["output"], sort_keys=True)}
    return {"toolCalls": [{"name": "calc__add", "args": {"a": 1, "b": 2}}]}
"""

CALC = 'def add(ctx, args):\n    return args["a"] + args["b"]\n\n\nhandlers = {"add": add}\n'

EXTENSION = """\
from goondan.results import ToolCallResult


def register(api):
    async def deny(ctx):
        return ToolCallResult(ctx.tool_call_id, ctx.tool_name, status="error", error="denied by policy")

    api.pipeline.register("toolCall", deny)
"""


@pytest.mark.parametrize("executor", ["inline", "process"])
def test_an_error_result_with_a_text_error_reaches_the_model(tmp_path: Path, executor: str) -> None:
    docs = [
        kit.package_doc("error-result"),
        kit.python_model_doc(),
        kit.tool_doc("calc", "./calc.py", [kit.export("add", {"a": {"type": "number"}, "b": {"type": "number"}})]),
        kit.extension_doc("x", "./x.py"),
        kit.agent_doc("a", tools=["calc"], extensions=["x"]),
        kit.swarm_doc(["a"]),
    ]
    files = {"model.py": MODEL, "calc.py": CALC, "x.py": EXTENSION}
    bundle = kit.write_bundle(tmp_path / "b", *docs, files=files)
    env = {k: v for k, v in os.environ.items() if k != "GOONDAN_STATE_ROOT"}
    env.update({"HOME": str(tmp_path), "NO_COLOR": "1", "GOONDAN_STATE_ROOT": str(tmp_path / "state")})
    command = [sys.executable, "-m", "goondan", "run", str(bundle), "--executor", executor, "--input", "go"]
    run = subprocess.run(command, capture_output=True, text=True, env=env, timeout=120, cwd=tmp_path)
    assert run.returncode == 0, run.stderr
    assert json.loads(run.stdout) == {
        "type": "error-json",
        "value": {"code": "E_TOOL_ERROR", "message": "denied by policy"},
    }
    logs = subprocess.run(
        [sys.executable, "-m", "goondan", "logs", str(bundle), "--json"],
        capture_output=True,
        text=True,
        env=env,
        timeout=60,
        cwd=tmp_path,
    )
    records = [json.loads(line) for line in logs.stdout.splitlines()]
    (completed,) = [r for r in records if r["type"] == "tool.completed"]
    assert completed["status"] == "error"
    assert completed["error"] == {"code": "E_TOOL_ERROR", "message": "denied by policy"}
