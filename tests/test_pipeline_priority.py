"""``api.pipeline.register(type, fn, priority)``: the priority may be passed by position, and one
that is not a number (the v0.9 ``{"priority": 5}``) is refused naming the extension, the layer and
the number to pass. Before, a third positional argument was ``TypeError: ExtensionPipeline.register()
takes 3 positional arguments but 4 were given``, reported as an error raised inside register().
Real ``gdn run`` with both executors."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

import kit

BY_POSITION = """\
def register(api):
    async def inner(ctx):
        api.logger.warning("inner")
        return await ctx.next()

    async def outer(ctx):
        api.logger.warning("outer")
        return await ctx.next()

    api.pipeline.register("turn", inner, 10)
    api.pipeline.register("turn", outer, -10)
"""

V09_OPTIONS = """\
def register(api):
    async def audit(ctx):
        return await ctx.next()

    api.pipeline.register("step", audit, {"priority": 5})
"""


def _run(tmp_path: Path, executor: str, extension: str) -> subprocess.CompletedProcess[str]:
    docs = [
        kit.package_doc("priority"),
        kit.python_model_doc(),
        kit.extension_doc("x", "./x.py"),
        kit.agent_doc("a", extensions=["x"]),
        kit.swarm_doc(["a"]),
    ]
    model = 'def generate(request):\n    return {"text": "fine"}\n'
    bundle = kit.write_bundle(tmp_path / "b", *docs, files={"model.py": model, "x.py": extension})
    env = {k: v for k, v in os.environ.items() if k != "GOONDAN_STATE_ROOT"}
    env.update({"HOME": str(tmp_path), "NO_COLOR": "1", "GOONDAN_STATE_ROOT": str(tmp_path / "state")})
    command = [sys.executable, "-m", "goondan", "run", str(bundle), "--executor", executor, "--input", "go"]
    return subprocess.run(command, capture_output=True, text=True, env=env, timeout=120, cwd=tmp_path)


@pytest.mark.parametrize("executor", ["inline", "process"])
def test_a_priority_passed_by_position_orders_the_middlewares(tmp_path: Path, executor: str) -> None:
    run = _run(tmp_path, executor, BY_POSITION)
    assert run.returncode == 0, run.stderr
    assert run.stdout.strip() == "fine"
    lines = [line for line in run.stderr.splitlines() if line.endswith(("outer", "inner"))]
    assert [line.rsplit(" ", 1)[-1] for line in lines] == ["outer", "inner"], run.stderr


@pytest.mark.parametrize("executor", ["inline", "process"])
def test_a_priority_that_is_no_number_names_the_number_to_pass(tmp_path: Path, executor: str) -> None:
    run = _run(tmp_path, executor, V09_OPTIONS)
    assert run.returncode == 3, run.stderr
    assert "[E_EXT_INIT] extension 'x': step middleware priority must be a number, got {'priority': 5}" in run.stderr
    assert "api.pipeline.register('step', audit, priority=5)" in run.stderr
    assert "Traceback" not in run.stderr
