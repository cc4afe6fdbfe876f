"""``api.state.get()`` / ``api.state.set()`` without ``await``: the first week's usual slip.

``api.state.set(value)`` without ``await`` was a coroutine nobody ran: the state was silently not
saved (no word at all with the process executor). ``api.state.get()`` without ``await`` failed with
``'coroutine' object does not support item assignment`` (and, inline, Python's "coroutine was never
awaited" warning). Now set() stores the value when called, and get()'s result says it must be
awaited. Real ``gdn run`` with both executors, run twice on one state root."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

import kit

MODEL = 'def generate(request):\n    return {"text": "fine"}\n'

COUNTER = """\
def register(api):
    async def turn(ctx):
        state = await api.state.get() or {"n": 0}
        state["n"] += 1
        api.state.set(state)  # no await
        result = await ctx.next()
        api.logger.warning("turns=%d", state["n"])
        return result

    api.pipeline.register("turn", turn)
"""

GET_NOT_AWAITED = """\
def register(api):
    async def turn(ctx):
        state = api.state.get()  # no await
        state["n"] = 1
        return await ctx.next()

    api.pipeline.register("turn", turn)
"""


def _bundle(tmp_path: Path, source: str) -> Path:
    docs = [
        kit.package_doc("state-await"),
        kit.python_model_doc(),
        kit.extension_doc("x", "./x.py"),
        kit.agent_doc("a", extensions=["x"]),
        kit.swarm_doc(["a"]),
    ]
    return kit.write_bundle(tmp_path / "b", *docs, files={"model.py": MODEL, "x.py": source})


def _run(tmp_path: Path, bundle: Path, executor: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k != "GOONDAN_STATE_ROOT"}
    env.update({"HOME": str(tmp_path), "NO_COLOR": "1", "GOONDAN_STATE_ROOT": str(tmp_path / "state")})
    command = [sys.executable, "-m", "goondan", "run", str(bundle), "--executor", executor, "--input", "go"]
    return subprocess.run(command, capture_output=True, text=True, env=env, timeout=120, cwd=tmp_path)


@pytest.mark.parametrize("executor", ["inline", "process"])
def test_state_set_without_await_is_still_saved(tmp_path: Path, executor: str) -> None:
    bundle = _bundle(tmp_path, COUNTER)
    first = _run(tmp_path, bundle, executor)
    assert first.returncode == 0, first.stderr
    assert "turns=1" in first.stderr
    second = _run(tmp_path, bundle, executor)
    assert second.returncode == 0, second.stderr
    assert "turns=2" in second.stderr, second.stderr  # the first run's state was saved
    assert "never awaited" not in first.stderr + second.stderr


@pytest.mark.parametrize("executor", ["inline", "process"])
def test_state_get_without_await_says_to_await_it(tmp_path: Path, executor: str) -> None:
    run = _run(tmp_path, _bundle(tmp_path, GET_NOT_AWAITED), executor)
    assert run.returncode == 1, run.stderr
    assert "api.state.get() must be awaited: write `value = await api.state.get()`" in run.stderr
    assert "turn middleware register.<locals>.turn of extension 'x' raised TypeError" in run.stderr
    assert "never awaited" not in run.stderr
    assert "Traceback" not in run.stderr
