"""An event handler that emits the event it handles is stopped 32 levels deep with E_EVENT_RECURSION,
logged once as that handler's failure, and the turn is answered. Before, the emits nested until
RecursionError, caught and logged at every level near the stack's limit, where logging itself
failed: inline printed a few RecursionError lines, and with the process executor the agent process
stopped answering and ``gdn run`` hung. Real ``gdn run`` with both executors."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

import kit

EXTENSION = """\
def register(api):
    def again(*args):
        api.events.emit("x.ping")

    api.events.on("x.ping", again)

    async def turn(ctx):
        api.events.emit("x.ping")
        return await ctx.next()

    api.pipeline.register("turn", turn)
"""


@pytest.mark.parametrize("executor", ["inline", "process"])
def test_a_handler_emitting_its_own_event_is_stopped_and_the_turn_answers(tmp_path: Path, executor: str) -> None:
    docs = [
        kit.package_doc("event-recursion"),
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
    run = subprocess.run(command, capture_output=True, text=True, env=env, timeout=60, cwd=tmp_path)
    assert run.returncode == 0, run.stderr
    assert run.stdout.strip() == "fine"
    errors = [line for line in run.stderr.splitlines() if line.startswith("ERROR")]
    assert len(errors) == 1, run.stderr
    assert "[E_EVENT_RECURSION] extension 'x' emitted 'x.ping' 32 levels deep from event handlers" in errors[0]
    assert "RecursionError" not in run.stderr
