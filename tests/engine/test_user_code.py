"""sys.exit() in a user's middleware, register() or python model fails that work, never the host;
the traceback of a user's failure is kept in the runtime event (issue 11 items 10 and 17)."""

from __future__ import annotations

from pathlib import Path

import pytest

import goondan
import kit as k
from goondan import GoondanError
from kit import agent_doc, extension_doc, scripted, text

EXITING_MIDDLEWARE = """\
import sys


def register(api, config):
    async def step(ctx):
        sys.exit(4)

    api.pipeline.register("step", step)
"""

EXITING_REGISTER = """\
import sys


def register(api, config):
    sys.exit(5)
"""

RAISING_REGISTER = """\
def setup_helper():
    raise KeyError("missing-thing")


def register(api, config):
    setup_helper()
"""


def _bundle(tmp_path: Path, ext: str) -> Path:
    return k.simple_bundle(
        tmp_path,
        agents=[agent_doc("a", extensions=["x"])],
        extensions=[extension_doc("x", "./ext.py")],
        files={"ext.py": ext},
    )


async def _turns(root: Path, state_root: Path, n: int) -> list[goondan.TurnResult]:
    async with goondan.Runtime(root, state_root=state_root, isolation="inline") as rt:
        return [await rt.request(f"hi {i}") for i in range(n)]


def test_sys_exit_in_middleware_fails_the_turn_not_the_host(tmp_path: Path, state_root: Path) -> None:
    k.MODEL = scripted(text("hello"))
    results = k.run(_turns(_bundle(tmp_path, EXITING_MIDDLEWARE), state_root, 2))
    assert [r.error["code"] for r in results if r.error] == ["E_USER_CODE_EXIT", "E_USER_CODE_EXIT"]
    events = [r for p in k.instance_dirs(state_root) for r in k.read_jsonl(p / "messages" / "runtime-events.jsonl")]
    [failed, _] = [r for r in events if r["type"] == "turn.failed"]
    assert "SystemExit: 4" in failed["error"]["traceback"]


def test_sys_exit_in_python_model_fails_the_turn_not_the_host(tmp_path: Path, state_root: Path) -> None:
    def quit_model(request: object) -> None:
        raise SystemExit(2)

    k.MODEL = quit_model
    root = k.simple_bundle(tmp_path)
    results = k.run(_turns(root, state_root, 2))
    assert [r.error["code"] for r in results if r.error] == ["E_MODEL_CALL", "E_MODEL_CALL"]


def test_sys_exit_in_register_is_an_extension_error(tmp_path: Path, state_root: Path) -> None:
    with pytest.raises(GoondanError) as info:
        k.run(_turns(_bundle(tmp_path, EXITING_REGISTER), state_root, 1))
    assert info.value.code == "E_EXT_INIT"
    assert "sys.exit(5)" in info.value.message


def test_register_traceback_is_kept_in_extension_failed_event(tmp_path: Path, state_root: Path) -> None:
    with pytest.raises(GoondanError) as info:
        k.run(_turns(_bundle(tmp_path, RAISING_REGISTER), state_root, 1))
    assert "-v" in (info.value.suggestion or "")
    events = [r for p in k.instance_dirs(state_root) for r in k.read_jsonl(p / "messages" / "runtime-events.jsonl")]
    [failed] = [r for r in events if r["type"] == "extension.failed"]
    assert failed["extensionName"] == "x"
    assert "setup_helper" in failed["error"]["traceback"]


def test_model_traceback_is_kept_in_turn_failed_event_not_sent_anywhere_else(tmp_path: Path, state_root: Path) -> None:
    def failing_model(request: object) -> None:
        raise RuntimeError("model exploded")

    k.MODEL = failing_model
    [result] = k.run(_turns(k.simple_bundle(tmp_path), state_root, 1))
    assert result.error is not None and "traceback" not in result.error
    events = [r for p in k.instance_dirs(state_root) for r in k.read_jsonl(p / "messages" / "runtime-events.jsonl")]
    [failed] = [r for r in events if r["type"] == "turn.failed"]
    assert "failing_model" in failed["error"]["traceback"]
