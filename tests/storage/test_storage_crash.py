"""Real crash tests: a child process uses the store and is SIGKILLed at every point of the commit
protocol (or by the parent at a random instant); the parent reloads and checks that the conversation
is exactly the expected fold - nothing lost, nothing applied twice."""

from __future__ import annotations

import json
import random
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from storage_testkit import (
    build_events,
    child_env,
    fold,
    random_turn_specs,
    records,
    reload,
    run_child,
)

# The child runs the given turns (JSON specs) on the instance at argv[1], exactly like the runtime:
# load, replay residual events, append each event, commit the fold.
TURNS_CHILD = """
import json, sys
from pathlib import Path
from storage_testkit import build_events, fold, run_turn
from goondan.storage import FileInstanceStore
store = FileInstanceStore(Path(sys.argv[1]))
loaded = store.load()
conv = fold(loaded.base, loaded.events)
for spec in json.loads(sys.argv[2]):
    conv = run_turn(store, conv, build_events(spec))
store.close()
print("completed")
"""

SETUP = [["append", "a1"], ["append", "a2"]]
APPEND_TURN = [["append", "b1"], ["append", "b2"], ["append", "b3"]]
REWRITE_TURN = [["append", "c1"], ["replace", "a1", "a1v2"], ["remove", "a2"]]
NEXT_TURN = [["append", "n1"], ["remove", "a1v2"]]


def _turns(path: Path, turns: list[list[list[str]]], crash_at: str | None = None) -> int:
    proc = run_child(TURNS_CHILD, str(path), json.dumps(turns), crash_at=crash_at)
    if crash_at is None:
        assert proc.returncode == 0, proc.stderr
        assert proc.stdout.strip() == "completed"
    return proc.returncode


def _expected(*turns: list[list[str]]) -> list[dict[str, object]]:
    conv: list[object] = []
    for spec in turns:
        conv = fold(conv, build_events(spec))  # type: ignore[arg-type]
    return records(conv)  # type: ignore[arg-type]


def _check_leftovers(path: Path) -> None:
    messages = path / "messages"
    assert not (messages / ".commit.json").exists()
    assert not (messages / "base.jsonl.tmp").exists()


@pytest.mark.parametrize(
    ("crash_at", "turn"),
    [
        ("after_base_append_partial", APPEND_TURN),
        ("after_base_append", APPEND_TURN),
        ("after_events_cleared", APPEND_TURN),
        ("after_tmp_written", REWRITE_TURN),
        ("after_marker_written", REWRITE_TURN),
        ("after_rename", REWRITE_TURN),
        ("after_events_cleared", REWRITE_TURN),
    ],
)
def test_process_killed_during_commit_loses_nothing_and_duplicates_nothing(
    tmp_path: Path, crash_at: str, turn: list[list[str]]
) -> None:
    _turns(tmp_path, [SETUP])
    assert _turns(tmp_path, [turn], crash_at=crash_at) == -signal.SIGKILL
    conv, loaded = reload(tmp_path)
    assert records(conv) == _expected(SETUP, turn)
    _check_leftovers(tmp_path)
    # the next process continues on top of it and commits cleanly
    _turns(tmp_path, [NEXT_TURN])
    conv, loaded = reload(tmp_path)
    assert records(loaded.base) == _expected(SETUP, turn, NEXT_TURN)
    assert loaded.events == [] and loaded.warnings == []


def test_process_killed_while_writing_an_event_keeps_every_complete_event(tmp_path: Path) -> None:
    _turns(tmp_path, [SETUP])
    assert _turns(tmp_path, [APPEND_TURN], crash_at="event_append_partial") == -signal.SIGKILL
    conv, loaded = reload(tmp_path)
    # the first event's write was cut in half: it was never acknowledged, everything before survives
    assert records(conv) == _expected(SETUP)
    assert [w["code"] for w in loaded.warnings] == ["E_STORAGE_TORN_LINE"]
    _turns(tmp_path, [APPEND_TURN])
    conv, loaded = reload(tmp_path)
    assert records(loaded.base) == _expected(SETUP, APPEND_TURN) and loaded.warnings == []


STREAM_CHILD = """
import sys
from pathlib import Path
from storage_testkit import msg
from goondan.messages import append_event
from goondan.storage import FileInstanceStore
store = FileInstanceStore(Path(sys.argv[1]))
store.load()
out = sys.stdout
for i in range(10_000_000):
    store.append_event(append_event(msg(f"e{i}")))
    out.write(f"{i}\\n")
    out.flush()
"""


def test_process_killed_mid_stream_keeps_every_acknowledged_event(tmp_path: Path) -> None:
    proc = subprocess.Popen(
        [sys.executable, "-c", STREAM_CHILD, str(tmp_path)],
        env=child_env(),
        stdout=subprocess.PIPE,
        text=True,
    )
    assert proc.stdout is not None
    acked = -1
    try:
        while acked < 2000:
            line = proc.stdout.readline()
            assert line, "child died early"
            acked = int(line)
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=30)
        proc.stdout.close()
    conv, _loaded = reload(tmp_path)
    ids = [m.id for m in conv]
    assert len(ids) >= acked + 1
    assert ids == [f"e{i}" for i in range(len(ids))]  # a gapless prefix, no duplicates


RANDOM_CHILD = """
import sys
from pathlib import Path
from storage_testkit import build_events, fold, random_turn_specs
from goondan.storage import FileInstanceStore
store = FileInstanceStore(Path(sys.argv[1]))
store.load()
out = sys.stdout
conv = []
done = 0
for spec in random_turn_specs(int(sys.argv[2]), 100_000):
    events = build_events(spec)
    for e in events:
        store.append_event(e)
        done += 1
        out.write(f"{done}\\n")
        out.flush()
    nxt = fold(conv, events)
    only_appends = all(e["type"] == "append" for e in events) and len(nxt) == len(conv) + len(events)
    store.commit(nxt, [e["message"] for e in events] if only_appends else None)
    conv = nxt
"""


@pytest.mark.parametrize("seed", [1, 2, 3, 4, 5, 6])
def test_process_killed_at_a_random_instant_recovers_an_exact_prefix(tmp_path: Path, seed: int) -> None:
    rng = random.Random(seed)
    proc = subprocess.Popen(
        [sys.executable, "-c", RANDOM_CHILD, str(tmp_path), str(seed)],
        env=child_env(),
        stdout=subprocess.PIPE,
        text=True,
    )
    assert proc.stdout is not None
    acked = 0
    target = rng.randint(50, 1500)
    deadline = time.monotonic() + 30
    try:
        while acked < target and time.monotonic() < deadline:
            line = proc.stdout.readline()
            assert line, "child died early"
            acked = int(line)
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=30)
        proc.stdout.close()
    conv, _ = reload(tmp_path)
    got = records(conv)
    # The durable state must be the fold of exactly the first j events, for some j >= acked.
    all_events = [e for spec in random_turn_specs(seed, 100_000)[:3000] for e in build_events(spec)]
    state: list[object] = []
    for j, event in enumerate(all_events, start=1):
        state = fold(state, [event])  # type: ignore[arg-type]
        if j >= acked and records(state) == got:  # type: ignore[arg-type]
            break
    else:
        pytest.fail(f"reloaded conversation is not the fold of any prefix >= {acked} events")
