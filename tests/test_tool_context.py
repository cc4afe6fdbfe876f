"""``ToolContext.runtime`` is typed as always present, so a context built without one (a handler's
unit test) must say so clearly instead of handing back ``None``."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest

from goondan.errors import GoondanError
from goondan.tools import ToolContext


def _ctx(tmp_path: Path) -> ToolContext:
    return ToolContext(
        agent_name="a",
        instance_key="k",
        turn_id="t",
        trace_id="x",
        tool_call_id="c",
        message=None,
        workdir=tmp_path,
        logger=logging.getLogger("t"),
    )


def test_tool_context_without_a_runtime_is_a_clear_error(tmp_path: Path) -> None:
    with pytest.raises(GoondanError) as info:
        _ = _ctx(tmp_path).runtime
    assert info.value.code == "E_TOOL_RUNTIME_UNAVAILABLE"
    assert info.value.suggestion


def test_tool_context_runtime_factory_runs_once_on_first_use(tmp_path: Path) -> None:
    made: list[object] = []

    def factory() -> object:
        made.append(object())
        return made[-1]

    ctx = ToolContext(
        agent_name="a",
        instance_key="k",
        turn_id="t",
        trace_id="x",
        tool_call_id="c",
        message=None,
        workdir=tmp_path,
        logger=logging.getLogger("t"),
        runtime_factory=factory,  # type: ignore[arg-type]
    )
    assert made == []
    assert ctx.runtime is ctx.runtime is made[0]
