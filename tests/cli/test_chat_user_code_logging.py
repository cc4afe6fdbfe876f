"""In a ``gdn run`` chat (requests on stdin), a warning an extension's middleware logs with
``api.logger`` (or a tool with ``ctx.logger``) reaches stderr as it does with ``--input``. With the
inline executor the chat's log lines were written through the proxy that keeps what user code
prints out of the answer: a warning logged while the middleware ran was taken for its output and
shown only with -v, as "turn middleware ... wrote to stderr". Real ``gdn run`` on a piped stdin,
both executors."""

from __future__ import annotations

from pathlib import Path

import pytest
from cli_testkit import gdn

from kit import agent_doc, export, extension_doc, package_doc, python_model_doc, swarm_doc, tool_doc, write_bundle

MODEL = """\
def generate(request):
    if request.messages[-1]["role"] == "tool":
        return {"text": "done"}
    return {"toolCalls": [{"name": "calc__add", "args": {"a": 1, "b": 2}}]}
"""

CALC = """\
def add(ctx, args):
    ctx.logger.warning("tool says %d", args["a"] + args["b"])
    return args["a"] + args["b"]


handlers = {"add": add}
"""

EXTENSION = """\
def register(api):
    async def turn(ctx):
        api.logger.warning("middleware says hello")
        return await ctx.next()

    api.pipeline.register("turn", turn)
"""


@pytest.mark.parametrize("executor", ["inline", "process"])
def test_user_code_warnings_reach_stderr_in_a_chat(tmp_path: Path, executor: str) -> None:
    docs = [
        package_doc("chat-logging"),
        python_model_doc(),
        tool_doc("calc", "./calc.py", [export("add", {"a": {"type": "number"}, "b": {"type": "number"}})]),
        extension_doc("x", "./x.py"),
        agent_doc("a", tools=["calc"], extensions=["x"]),
        swarm_doc(["a"]),
    ]
    bundle = write_bundle(tmp_path / "b", *docs, files={"model.py": MODEL, "calc.py": CALC, "x.py": EXTENSION})
    run = gdn(tmp_path, "run", str(bundle), "--executor", executor, stdin="go\n", timeout=120)
    assert run.returncode == 0, run.stderr
    assert "done" in run.stdout
    assert "WARNING goondan.extension.x: middleware says hello" in run.stderr
    assert "tool says 3" in run.stderr
    assert "wrote to stderr" not in run.stderr
