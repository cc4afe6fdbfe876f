"""An async handler of an event an extension emits (``api.events.emit``) finishes before the instance
closes: at the end of ``gdn run --input`` it was cancelled without a word, so what it was writing
(an audit record after the turn) was lost. One that never ends is cancelled after 5 s with a warning
naming it, and ``gdn run`` ends. Real ``gdn run`` with both executors."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

import kit

EXTENSION = """\
import asyncio
import pathlib


def register(api, config):
    async def record(text):
        await asyncio.sleep(config["sleep"])
        pathlib.Path(config["out"]).write_text(text)

    api.events.on("x.done", record)

    async def turn(ctx):
        result = await ctx.next()
        api.events.emit("x.done", result.text)
        return result

    api.pipeline.register("turn", turn)
"""


def _run(tmp_path: Path, executor: str, sleep: float) -> tuple[subprocess.CompletedProcess[str], Path]:
    out = tmp_path / "audit.txt"
    docs = [
        kit.package_doc("event-drain"),
        kit.python_model_doc(),
        kit.extension_doc("x", "./x.py", config={"sleep": sleep, "out": str(out)}),
        kit.agent_doc("a", extensions=["x"]),
        kit.swarm_doc(["a"]),
    ]
    model = 'def generate(request):\n    return {"text": "fine"}\n'
    bundle = kit.write_bundle(tmp_path / "b", *docs, files={"model.py": model, "x.py": EXTENSION})
    env = {k: v for k, v in os.environ.items() if k != "GOONDAN_STATE_ROOT"}
    env.update({"HOME": str(tmp_path), "NO_COLOR": "1", "GOONDAN_STATE_ROOT": str(tmp_path / "state")})
    command = [sys.executable, "-m", "goondan", "run", str(bundle), "--executor", executor, "--input", "go"]
    return subprocess.run(command, capture_output=True, text=True, env=env, timeout=120, cwd=tmp_path), out


@pytest.mark.parametrize("executor", ["inline", "process"])
def test_an_emitted_events_async_handler_finishes_before_the_run_ends(tmp_path: Path, executor: str) -> None:
    run, out = _run(tmp_path, executor, 0.5)
    assert run.returncode == 0, run.stderr
    assert run.stdout.strip() == "fine"
    assert out.read_text() == "fine"
    assert "cancelled" not in run.stderr


@pytest.mark.parametrize("executor", ["inline", "process"])
def test_a_handler_that_never_ends_is_cancelled_with_a_warning(tmp_path: Path, executor: str) -> None:
    run, out = _run(tmp_path, executor, 3600)
    assert run.returncode == 0, run.stderr
    assert run.stdout.strip() == "fine"
    assert "extension x: handler of 'x.done' still ran 5 s after its instance began closing: cancelled" in run.stderr
    assert not out.exists()
