"""A step middleware that edits a catalog item's ``parameters`` in place is told how to change a
tool's schema: the schemas are shared and read-only, so it gives the item a changed copy (which
works: the model sees the new property). Before, the error said ``messages held by the conversation
state are read-only; ... emit a 'replace' event instead``, advice for messages that does not apply.
Real ``gdn run`` with both executors."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

import kit

MODEL = """\
def generate(request):
    (add,) = [t for t in request.tools if t["name"] == "calc__add"]
    return {"text": "properties: " + ",".join(sorted(add["parameters"]["properties"]))}
"""

CALC = 'def add(ctx, args):\n    return args["a"] + args["b"]\n\n\nhandlers = {"add": add}\n'

IN_PLACE = """\
def register(api):
    async def step(ctx):
        for item in ctx.tool_catalog:
            item["parameters"]["properties"]["note"] = {"type": "string"}
        return await ctx.next()

    api.pipeline.register("step", step)
"""

AS_TOLD = """\
def register(api):
    async def step(ctx):
        for item in ctx.tool_catalog:
            schema = item["parameters"]
            item["parameters"] = {**schema, "properties": {**schema["properties"], "note": {"type": "string"}}}
        return await ctx.next()

    api.pipeline.register("step", step)
"""


def _run(tmp_path: Path, executor: str, extension: str) -> subprocess.CompletedProcess[str]:
    docs = [
        kit.package_doc("catalog-schema"),
        kit.python_model_doc(),
        kit.tool_doc("calc", "./calc.py", [kit.export("add", {"a": {"type": "number"}, "b": {"type": "number"}})]),
        kit.extension_doc("x", "./x.py"),
        kit.agent_doc("a", tools=["calc"], extensions=["x"]),
        kit.swarm_doc(["a"]),
    ]
    files = {"model.py": MODEL, "calc.py": CALC, "x.py": extension}
    bundle = kit.write_bundle(tmp_path / "b", *docs, files=files)
    env = {k: v for k, v in os.environ.items() if k != "GOONDAN_STATE_ROOT"}
    env.update({"HOME": str(tmp_path), "NO_COLOR": "1", "GOONDAN_STATE_ROOT": str(tmp_path / "state")})
    command = [sys.executable, "-m", "goondan", "run", str(bundle), "--executor", executor, "--input", "go"]
    return subprocess.run(command, capture_output=True, text=True, env=env, timeout=120, cwd=tmp_path)


@pytest.mark.parametrize("executor", ["inline", "process"])
def test_editing_a_tool_schema_in_place_says_to_give_the_item_a_changed_copy(tmp_path: Path, executor: str) -> None:
    run = _run(tmp_path, executor, IN_PLACE)
    assert run.returncode == 1, run.stderr
    assert "a tool's parameters schema is shared by every step and read-only; give the catalog item a changed copy" in (
        run.stderr
    )
    assert "emit a 'replace' event" not in run.stderr
    told = _run(tmp_path, executor, AS_TOLD)
    assert told.returncode == 0, told.stderr
    assert told.stdout.strip() == "properties: a,b,note"
