"""The read-only reader of the filesystem store (goondan.storage._reader) between and inside commits:
a page is always the reference fold, whatever the page split, and a commit interrupted between its
two files (the turn in base.jsonl and still in events.jsonl) never shows a message twice."""

from __future__ import annotations

import json
import signal
import tempfile
from pathlib import Path

from hypothesis import given, settings
from hypothesis import strategies as st
from storage_testkit import build_events, fold, msg, random_turn_specs, records, run_child, run_turn

from goondan.storage import FileInstanceReader, FileInstanceStore

CHILD = """
import json, sys
from goondan.storage import FileInstanceStore
from storage_testkit import build_events, run_turn
store = FileInstanceStore(sys.argv[1])
base = store.load().base
run_turn(store, base, build_events(json.loads(sys.argv[2])))
"""


@given(st.integers(0, 10_000), st.integers(1, 25), st.data())
@settings(max_examples=30, deadline=None)
def test_any_page_of_any_history_is_the_reference_fold(seed: int, n_turns: int, data: st.DataObject) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        store = FileInstanceStore(Path(tmp) / "inst")
        store.load()
        conv: list = []
        for spec in random_turn_specs(seed, n_turns):
            conv = run_turn(store, conv, build_events(spec))
        # a turn in progress, with ids of its own (message ids are unique)
        pending = build_events([[item[0], *(f"p-{x}" for x in item[1:])] for item in random_turn_specs(seed + 1, 1)[0]])
        for e in pending:
            store.append_event(e)
        want = records(fold(conv, pending))
        reader = FileInstanceReader(Path(tmp) / "inst", agent_name="a", instance_key="k")
        assert reader.message_count() == len(want)
        offset = data.draw(st.integers(0, len(want) + 2))
        limit = data.draw(st.integers(0, 12))
        assert records(reader.messages(offset, limit)) == want[offset : offset + limit]
        assert records(reader.messages()) == want
        store.close()


def test_a_commit_cut_between_base_and_events_shows_each_message_once(tmp_path: Path) -> None:
    path = tmp_path / "inst"
    store = FileInstanceStore(path)
    store.load()
    run_turn(store, [], build_events([["append", "a1"], ["append", "a2"]]))
    store.close()
    reader = FileInstanceReader(path, agent_name="a", instance_key="k")
    assert [m.id for m in reader.messages()] == ["a1", "a2"]  # the reader's index is warm
    turn = [["append", "b1"], ["append", "b2"]]
    proc = run_child(CHILD, str(path), json.dumps(turn), crash_at="after_base_append")
    assert proc.returncode == -signal.SIGKILL, proc.stderr
    # the writer died with the turn durable in base.jsonl and still in events.jsonl
    assert (path / "messages" / "events.jsonl").read_bytes().count(b"\n") == 2
    assert [m.id for m in reader.messages()] == ["a1", "a2", "b1", "b2"]
    assert reader.message_count() == 4 and [m.id for m in reader.messages(3, 5)] == ["b2"]
    assert [m.id for m in FileInstanceReader(path, agent_name="a", instance_key="k").messages()] == [
        "a1",
        "a2",
        "b1",
        "b2",
    ]
    assert records(reader.messages()) == records([msg("a1"), msg("a2"), msg("b1"), msg("b2")])


def test_a_torn_last_line_is_not_shown_until_it_is_whole(tmp_path: Path) -> None:
    path = tmp_path / "inst"
    store = FileInstanceStore(path)
    store.load()
    run_turn(store, [], build_events([["append", "a1"]]))
    store.append_runtime_event({"type": "turn.started", "n": 1})
    store.close()
    rt = path / "messages" / "runtime-events.jsonl"
    with rt.open("ab") as f:
        f.write(b'{"type": "turn.comp')  # a writer mid-write
    reader = FileInstanceReader(path, agent_name="a", instance_key="k")
    events, cursor = reader.runtime_events()
    assert [e["n"] for e in events] == [1]
    with rt.open("ab") as f:
        f.write(b'leted", "n": 2}\n')
    assert [e["n"] for e in reader.runtime_events(cursor)[0]] == [2]
    with (path / "messages" / "base.jsonl").open("ab") as f:
        f.write(b'{"id": "half')
    assert [m.id for m in reader.messages()] == ["a1"] and reader.message_count() == 1
