"""A failed assertion on a turn in which the user's code raised shows that code's traceback, from
the user's own frames (not Goondan's), under the transcript: the test output says which line
raised without `gdn logs -v` on the state root."""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

import pytest

from goondan.testing import AgentRunner, tool_call

ROOT = Path(__file__).resolve().parents[2]

RAISING_CALC = """\
def helper(a, b):
    return a / b


def add(ctx, args):
    return {"sum": helper(args["a"], 0)}


handlers = {"add": add}
"""


def test_a_tool_that_raises_shows_its_traceback_in_the_failed_assertion(tmp_path: Path) -> None:
    bundle = tmp_path / "quickstart"
    shutil.copytree(ROOT / "examples" / "quickstart", bundle)
    (bundle / "tools" / "calc.py").write_text(RAISING_CALC)
    replies: list[Any] = [tool_call("calc__add", {"a": 2, "b": 3}), "The sum is 5."]
    with AgentRunner(bundle, override_models={"scripted": replies}, state_root=tmp_path / "s") as runner:
        turn = runner.request("add 2 and 3")
    with pytest.raises(AssertionError) as info:
        turn.assert_tool_result("calc__add", equals={"sum": 5})
    message = str(info.value)
    assert "calc__add raised:" in message
    assert f'File "{bundle / "tools" / "calc.py"}", line 6, in add' in message
    assert "line 2, in helper\n      return a / b" in message
    assert "ZeroDivisionError: division by zero" in message
    assert "goondan/tools.py" not in message  # Goondan's own frames are left out


def test_an_override_function_that_raises_shows_the_users_frames_only(tmp_path: Path) -> None:
    def helper() -> str:
        raise KeyError("no such reply")

    def model(request: Any) -> Any:
        return {"text": helper()}

    with AgentRunner(ROOT / "examples" / "quickstart", override_models={"scripted": model}) as runner:
        turn = runner.request("hi")
    with pytest.raises(AssertionError) as info:
        turn.assert_text("5")
    message = str(info.value)
    assert "the turn failed in your code:" in message
    assert "in model" in message and "in helper" in message and "KeyError: 'no such reply'" in message
    assert "testing/_models.py" not in message and "/models/model_" not in message
