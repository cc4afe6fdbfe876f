"""A step middleware that sets ``ctx.tool_catalog`` to something that is not a list of catalog items
fails its turn naming the middleware and what to write. A list of tool names (a filter written as
``[t["name"] for t in ...]``) reached the model: a python model's ``generate()`` was blamed
(``E_MODEL_CALL ... string indices must be integers``); ``None`` gave ``'NoneType' object is not
iterable``. Real ``gdn run`` with both executors."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

import kit

MODEL = 'def generate(request):\n    return {"text": "tools: " + ",".join(t["name"] for t in request.tools)}\n'

CALC = 'def add(ctx, args):\n    return args["a"] + args["b"]\n\n\nhandlers = {"add": add}\n'

EXTENSION = """\
def register(api):
    async def step(ctx):
        ctx.tool_catalog = {value}
        return await ctx.next()

    api.pipeline.register("step", step)
"""


def _run(tmp_path: Path, executor: str, value: str) -> subprocess.CompletedProcess[str]:
    docs = [
        kit.package_doc("tool-catalog"),
        kit.python_model_doc(),
        kit.tool_doc("calc", "./calc.py", [kit.export("add", {"a": {"type": "number"}, "b": {"type": "number"}})]),
        kit.extension_doc("x", "./x.py"),
        kit.agent_doc("a", tools=["calc"], extensions=["x"]),
        kit.swarm_doc(["a"]),
    ]
    files = {"model.py": MODEL, "calc.py": CALC, "x.py": EXTENSION.format(value=value)}
    bundle = kit.write_bundle(tmp_path / "b", *docs, files=files)
    env = {k: v for k, v in os.environ.items() if k != "GOONDAN_STATE_ROOT"}
    env.update({"HOME": str(tmp_path), "NO_COLOR": "1", "GOONDAN_STATE_ROOT": str(tmp_path / "state")})
    command = [sys.executable, "-m", "goondan", "run", str(bundle), "--executor", executor, "--input", "go"]
    return subprocess.run(command, capture_output=True, text=True, env=env, timeout=120, cwd=tmp_path)


@pytest.mark.parametrize("executor", ["inline", "process"])
@pytest.mark.parametrize(
    ("value", "said"),
    [
        (
            '[t["name"] for t in ctx.tool_catalog]',
            "ctx.tool_catalog[0] is str 'calc__add', not a catalog item ({'name', 'description', 'parameters'}); "
            "keep the items you want: ctx.tool_catalog = [t for t in ctx.tool_catalog if t['name'] != ...]",
        ),
        ("None", "ctx.tool_catalog must be a list of catalog items, got NoneType; to offer no tools, set []"),
    ],
    ids=["names", "none"],
)
def test_a_tool_catalog_that_is_no_list_of_items_names_the_middleware(
    tmp_path: Path, executor: str, value: str, said: str
) -> None:
    run = _run(tmp_path, executor, value)
    assert run.returncode == 1, run.stderr
    assert "[E_TURN_FAILED] step middleware register.<locals>.step of extension 'x' raised TypeError: " + said in (
        run.stderr
    )
    assert "E_MODEL_CALL" not in run.stderr


@pytest.mark.parametrize("executor", ["inline", "process"])
def test_a_filtered_tool_catalog_still_works(tmp_path: Path, executor: str) -> None:
    run = _run(tmp_path, executor, '[t for t in ctx.tool_catalog if t["name"] != "calc__sub"]')
    assert run.returncode == 0, run.stderr
    assert run.stdout.strip() == "tools: calc__add"
