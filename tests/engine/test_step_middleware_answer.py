"""A step middleware that answers without the model (it emits an assistant message and returns its
own ``StepResult()``, the extension guide's "a step middleware may answer without the model") gives
the turn that message as its answer: ``gdn run`` prints it and the TurnResult's text is it. The turn
ended with no text (``"text": null``) and ``gdn run`` printed nothing. A later turn the model answers
is unaffected. Real ``gdn run`` with both executors."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

import kit

EXTENSION = """\
from goondan.messages import assistant_message
from goondan.results import StepResult


def register(api):
    async def cache(ctx):
        if ctx.input_event.get("input") != "cached?":
            return await ctx.next()
        ctx.emit_message_event({"type": "append", "message": assistant_message("from the cache")})
        return StepResult()

    api.pipeline.register("step", cache)
"""


def _run(tmp_path: Path, bundle: Path, executor: str, text: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k != "GOONDAN_STATE_ROOT"}
    env.update({"HOME": str(tmp_path), "NO_COLOR": "1", "GOONDAN_STATE_ROOT": str(tmp_path / "state")})
    command = [sys.executable, "-m", "goondan", "run", str(bundle), "--executor", executor, "--input", text]
    return subprocess.run([*command, "--json"], capture_output=True, text=True, env=env, timeout=120, cwd=tmp_path)


@pytest.mark.parametrize("executor", ["inline", "process"])
def test_a_step_middleware_that_answers_without_the_model_is_the_turns_answer(tmp_path: Path, executor: str) -> None:
    docs = [
        kit.package_doc("step-answer"),
        kit.python_model_doc(),
        kit.extension_doc("x", "./x.py"),
        kit.agent_doc("a", extensions=["x"]),
        kit.swarm_doc(["a"]),
    ]
    model = 'def generate(request):\n    return {"text": "from the model"}\n'
    bundle = kit.write_bundle(tmp_path / "b", *docs, files={"model.py": model, "x.py": EXTENSION})
    cached = _run(tmp_path, bundle, executor, "cached?")
    assert cached.returncode == 0, cached.stderr
    result = json.loads(cached.stdout)
    assert (result["finishReason"], result["text"]) == ("text_response", "from the cache")
    assert result["responseMessage"]["data"] == {"role": "assistant", "content": "from the cache"}
    asked = _run(tmp_path, bundle, executor, "hello")
    assert asked.returncode == 0, asked.stderr
    assert json.loads(asked.stdout)["text"] == "from the model"
