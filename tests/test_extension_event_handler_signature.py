"""``api.events.on`` refuses a handler of a runtime event that cannot be called as ``handler(event)``
(``def h():``), naming it, its line and the call: the runtime passes the event's record. Before, it
subscribed, never ran, and every event logged ``TypeError: h() takes 0 positional arguments but 1
was given`` while ``gdn run`` exited 0. A handler of an event of the extensions' own is left alone
(its arguments are whatever the emitter passes). Real ``gdn run`` with both executors."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

import kit

NO_ARGUMENT = """\
def register(api):
    def counted():
        api.logger.warning("a turn completed")

    api.events.on("turn.completed", counted)
    api.events.on("x.ready", counted)
"""


@pytest.mark.parametrize("executor", ["inline", "process"])
def test_a_runtime_event_handler_that_takes_no_event_is_refused(tmp_path: Path, executor: str) -> None:
    docs = [
        kit.package_doc("handler-signature"),
        kit.python_model_doc(),
        kit.extension_doc("x", "./x.py"),
        kit.agent_doc("a", extensions=["x"]),
        kit.swarm_doc(["a"]),
    ]
    model = 'def generate(request):\n    return {"text": "fine"}\n'
    bundle = kit.write_bundle(tmp_path / "b", *docs, files={"model.py": model, "x.py": NO_ARGUMENT})
    env = {k: v for k, v in os.environ.items() if k != "GOONDAN_STATE_ROOT"}
    env.update({"HOME": str(tmp_path), "NO_COLOR": "1", "GOONDAN_STATE_ROOT": str(tmp_path / "state")})
    command = [sys.executable, "-m", "goondan", "run", str(bundle), "--executor", executor, "--input", "go"]
    run = subprocess.run(command, capture_output=True, text=True, env=env, timeout=120, cwd=tmp_path)
    assert run.returncode == 3, run.stderr
    assert (
        "[E_EVENT_HANDLER_INVALID] extension 'x': 'turn.completed' handler counted() (x.py:2) cannot be called as "
        "counted(event)" in run.stderr
    )
    assert "Define it as `def counted(event): ...` (sync or async)" in run.stderr
