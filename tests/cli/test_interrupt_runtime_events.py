"""A Ctrl+C that ends ``gdn run`` at once (a second press, or the bound a loop blocked by synchronous
code gets) still writes the runtime events the engine had buffered: they wait for a flush the
event loop would run once the turn suspends, and the process ends with ``os._exit`` before that.
Real ``gdn run`` subprocesses, inline, with a model whose ``generate`` blocks the event loop right
after the turn recorded ``turn.started`` and ``step.started``."""

from __future__ import annotations

import json
from pathlib import Path

from test_run_interrupt import _bundle, _ctrl_c_mid_turn, _start_input


def _runtime_event_types(state: Path) -> list[str]:
    out: list[str] = []
    for path in state.glob("workspaces/*/instances/*/**/runtime-events.jsonl"):
        out += [json.loads(line)["type"] for line in path.read_text().splitlines() if line.strip()]
    return out


def test_a_second_ctrl_c_keeps_the_runtime_events_the_blocked_turn_recorded(tmp_path: Path) -> None:
    bundle = _bundle(tmp_path)
    state = tmp_path / "state"
    proc = _start_input(tmp_path, bundle, state, "block", executor="inline")
    code, _, stderr = _ctrl_c_mid_turn(state, proc, presses_before=1)
    assert code == 130, stderr
    assert _runtime_event_types(state) == ["turn.started", "step.started"]


def test_a_ctrl_c_the_blocked_loop_never_answers_keeps_the_runtime_events_the_turn_recorded(tmp_path: Path) -> None:
    bundle = _bundle(tmp_path)
    state = tmp_path / "state"
    proc = _start_input(tmp_path, bundle, state, "block", executor="inline")
    code, _, stderr = _ctrl_c_mid_turn(state, proc)
    assert code == 130, stderr
    assert "blocked by synchronous code" in stderr
    assert _runtime_event_types(state) == ["turn.started", "step.started"]
