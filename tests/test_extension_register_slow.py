"""An ``async def register(api)`` that has not returned after 10 s is named on stderr (a warning, the
start goes on waiting): one awaiting a server that never answers held the agent's start, and the
user's request, without a word, for good. Real ``gdn run`` with both executors; the register here
returns after 11 s and the request is then answered."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

import kit

EXTENSION = """\
import asyncio


async def register(api):
    await asyncio.sleep(11)
"""


@pytest.mark.parametrize("executor", ["inline", "process"])
def test_a_register_that_takes_long_is_named_while_the_start_waits(tmp_path: Path, executor: str) -> None:
    docs = [
        kit.package_doc("slow-register"),
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
    assert run.returncode == 0, run.stderr
    assert run.stdout.strip() == "fine"
    assert "extension x: register() has not returned after 10 s; the agent starts only when it does" in run.stderr
