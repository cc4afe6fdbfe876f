"""Helpers shared by the storage tests: a reference fold, a turn driver and ``gdn`` as a user runs it."""

from __future__ import annotations

import dataclasses
import os
import random
import subprocess
import sys
from collections.abc import Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import goondan.storage
from goondan.messages import (
    Message,
    append_event,
    remove_event,
    replace_event,
    truncate_event,
    user_message,
)
from goondan.storage import FileInstanceStore

SRC_DIR = str(Path(goondan.storage.__file__).resolve().parents[2])
TESTS_DIR = str(Path(__file__).resolve().parent)
FIXED_TIME = datetime(2025, 1, 2, 3, 4, 5, 678000, tzinfo=UTC)


def msg(mid: str, text: str | None = None) -> Message:
    """A message with a fixed id and timestamp, so records compare equal across processes."""
    m = user_message(text if text is not None else f"text of {mid}", id=mid)
    return dataclasses.replace(m, created_at=FIXED_TIME)


def build_events(spec: Sequence[Sequence[str]]) -> list[dict[str, Any]]:
    """Events from a JSON-friendly spec: ["append", id] | ["replace", target, id] | ["remove", target]
    | ["truncate"]."""
    out: list[dict[str, Any]] = []
    for item in spec:
        if item[0] == "append":
            out.append(append_event(msg(item[1])))
        elif item[0] == "replace":
            out.append(replace_event(item[1], msg(item[2])))
        elif item[0] == "remove":
            out.append(remove_event(item[1]))
        else:
            out.append(truncate_event())
    return out


def random_turn_specs(seed: int, n_turns: int) -> list[list[list[str]]]:
    """Deterministic random turns (mostly appends, some replace/remove/truncate)."""
    rng = random.Random(seed)
    ids: list[str] = []
    turns: list[list[list[str]]] = []
    counter = 0
    for _ in range(n_turns):
        turn: list[list[str]] = []
        for _ in range(rng.randint(1, 4)):
            roll = rng.random()
            counter += 1
            new = f"r{counter}"
            if roll < 0.75 or not ids:
                turn.append(["append", new])
                ids.append(new)
            elif roll < 0.87:
                turn.append(["replace", rng.choice(ids), new])
                ids.append(new)
            elif roll < 0.98:
                turn.append(["remove", rng.choice(ids)])
            else:
                turn.append(["truncate"])
        turns.append(turn)
    return turns


def fold(base: Sequence[Message], events: Sequence[dict[str, Any]]) -> list[Message]:
    """Reference fold: append -> end; replace -> swap by id; remove -> delete by id; truncate -> empty;
    a missing target is skipped."""
    out = list(base)
    for e in events:
        kind = e["type"]
        if kind == "append":
            out.append(e["message"])
        elif kind == "truncate":
            out = []
        else:
            idx = next((i for i, m in enumerate(out) if m.id == e["targetId"]), None)
            if idx is None:
                continue
            if kind == "replace":
                out[idx] = e["message"]
            else:
                del out[idx]
    return out


def records(messages: Sequence[Message]) -> list[dict[str, Any]]:
    return [m.to_record() for m in messages]


def run_turn(store: FileInstanceStore, base: Sequence[Message], events: Sequence[dict[str, Any]]) -> list[Message]:
    """Append the events, then commit the fold the way the runtime does (delta when only appends)."""
    for e in events:
        store.append_event(e)
    nxt = fold(base, events)
    only_appends = all(e["type"] == "append" for e in events) and len(nxt) == len(base) + len(events)
    store.commit(nxt, [e["message"] for e in events] if only_appends else None)
    return nxt


def reload(path: Path) -> tuple[list[Message], Any]:
    """Open a fresh store on ``path`` and return (base folded with residual events, loaded)."""
    store = FileInstanceStore(path)
    try:
        loaded = store.load()
    finally:
        store.close()
    return fold(loaded.base, loaded.events), loaded


def child_env(crash_at: str | None = None) -> dict[str, str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = (
        SRC_DIR + os.pathsep + TESTS_DIR + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
    )
    env.pop("GOONDAN_STORAGE_CRASH_AT", None)
    if crash_at is not None:
        env["GOONDAN_STORAGE_CRASH_AT"] = crash_at
    return env


def run_child(code: str, *args: str, crash_at: str | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", code, *args],
        env=child_env(crash_at),
        capture_output=True,
        text=True,
        timeout=60,
    )


def gdn(tmp_path: Path, *args: str, **env: str) -> subprocess.CompletedProcess[str]:
    """``gdn --state-root TMP/state ARGS`` as a subprocess, without this shell's GOONDAN_STATE_ROOT,
    GOONDAN_STORE or libpq PG* variables (a test names its store itself)."""
    full = {k: v for k, v in os.environ.items() if k not in ("GOONDAN_STATE_ROOT", "GOONDAN_STORE")}
    full = {k: v for k, v in full.items() if not k.startswith("PG")}
    full.update({"HOME": str(tmp_path), "NO_COLOR": "1", "GOONDAN_ISOLATION": "inline", **env})
    return subprocess.run(
        [sys.executable, "-m", "goondan", "--state-root", str(tmp_path / "state"), *args],
        capture_output=True,
        text=True,
        env=full,
        timeout=120,
        cwd=tmp_path,
        stdin=subprocess.DEVNULL,
    )
