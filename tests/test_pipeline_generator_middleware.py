"""A middleware written as a generator (``async def mw(ctx): yield await ctx.next()``, or a plain
``def`` with ``yield``) is refused by ``api.pipeline.register`` naming it and its line: ``gdn run``
exits 3 before any turn. Before, it registered and every turn failed with E_PIPELINE_BAD_RESULT
(``returned async_generator``), exit 1. Real ``gdn run`` with both executors."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

import kit

ASYNC_GENERATOR = """\
def register(api):
    async def audit(ctx):
        yield await ctx.next()

    api.pipeline.register("step", audit)
"""

GENERATOR = """\
def register(api):
    def audit(ctx):
        yield ctx.next()

    api.pipeline.register("turn", audit)
"""


@pytest.mark.parametrize("executor", ["inline", "process"])
@pytest.mark.parametrize(("source", "layer"), [(ASYNC_GENERATOR, "step"), (GENERATOR, "turn")], ids=["async", "sync"])
def test_a_generator_middleware_is_refused_at_register(tmp_path: Path, executor: str, source: str, layer: str) -> None:
    docs = [
        kit.package_doc("generator-middleware"),
        kit.python_model_doc(),
        kit.extension_doc("x", "./x.py"),
        kit.agent_doc("a", extensions=["x"]),
        kit.swarm_doc(["a"]),
    ]
    model = 'def generate(request):\n    return {"text": "fine"}\n'
    bundle = kit.write_bundle(tmp_path / "b", *docs, files={"model.py": model, "x.py": source})
    env = {k: v for k, v in os.environ.items() if k != "GOONDAN_STATE_ROOT"}
    env.update({"HOME": str(tmp_path), "NO_COLOR": "1", "GOONDAN_STATE_ROOT": str(tmp_path / "state")})
    command = [sys.executable, "-m", "goondan", "run", str(bundle), "--executor", executor, "--input", "go"]
    run = subprocess.run(command, capture_output=True, text=True, env=env, timeout=120, cwd=tmp_path)
    assert run.returncode == 3, run.stderr
    assert (
        f"[E_EXT_INIT] extension 'x': {layer} middleware audit (x.py:2) is a generator function (it uses `yield`)"
        in run.stderr
    )
    assert "Return instead of yielding: `return await ctx.next()`" in run.stderr
    assert "E_PIPELINE_BAD_RESULT" not in run.stderr
