"""Middleware registered at the module's top level (``api.pipeline.register(...)`` outside
``register``) fails the import with NameError, and the suggestion says where ``api`` exists:
inside ``register(api)``. The suggestion was the generic "Fix x.py: ... prints the traceback of its
import". Real ``gdn run`` with both executors."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

import kit

EXTENSION = """\
async def audit(ctx):
    return await ctx.next()


api.pipeline.register("turn", audit)


def register(api):
    pass
"""


@pytest.mark.parametrize("executor", ["inline", "process"])
def test_registering_at_import_time_says_api_exists_only_in_register(tmp_path: Path, executor: str) -> None:
    docs = [
        kit.package_doc("register-at-import"),
        kit.python_model_doc(),
        kit.extension_doc("x", "./x.py"),
        kit.agent_doc("a", extensions=["x"]),
        kit.swarm_doc(["a"]),
    ]
    model = 'def generate(request):\n    return {"text": "fine"}\n'
    bundle = kit.write_bundle(tmp_path / "b", *docs, files={"model.py": model, "x.py": EXTENSION})
    env = {k: v for k, v in os.environ.items() if k != "GOONDAN_STATE_ROOT"}
    env.update({"HOME": str(tmp_path), "NO_COLOR": "1", "GOONDAN_STATE_ROOT": str(tmp_path / "state")})
    command = [sys.executable, "-m", "goondan", "run", str(bundle), "--executor", executor, "--input", "go"]
    run = subprocess.run(command, capture_output=True, text=True, env=env, timeout=120, cwd=tmp_path)
    assert run.returncode == 3, run.stderr
    assert (
        "[E_EXT_LOAD] extension x: importing x.py failed at x.py:5: NameError: name 'api' is not defined" in run.stderr
    )
    assert (
        "suggestion: `api` exists only inside register(api): move the api.pipeline/tools/events calls into "
        "`def register(api): ...` in x.py." in run.stderr
    )
