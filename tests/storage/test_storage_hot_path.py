"""The file store's per-turn path: what a turn's status flips, event lines and commit do on disk,
and that the shortcuts taken for speed write exactly what the full encoding would."""

from __future__ import annotations

import os
import signal
from pathlib import Path
from typing import Any

import orjson
import pytest
from storage_testkit import msg, run_child

from goondan.messages import Message, append_event, event_to_record, tool_message
from goondan.storage import FileInstanceStore
from goondan.storage._events import tag_line
from goondan.storage._instance import _metadata_bytes


def _stat_calls(monkeypatch: pytest.MonkeyPatch) -> list[Any]:
    calls: list[Any] = []
    real_fstat, real_stat = os.fstat, os.stat

    def fstat(fd: int) -> os.stat_result:
        calls.append(("fstat", fd))
        return real_fstat(fd)

    def stat(path: Any, *args: Any, **kwargs: Any) -> os.stat_result:
        calls.append(("stat", os.fspath(path)))
        return real_stat(path, *args, **kwargs)

    monkeypatch.setattr(os, "fstat", fstat)
    monkeypatch.setattr(os, "stat", stat)
    return calls


def test_status_flips_never_stat_metadata_json(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A stat marks the inode's timestamps as queried (Linux >= 6.13), which makes the next write
    dirty the inode in the journal: flips write through the kept descriptor without one."""
    store = FileInstanceStore(tmp_path / "inst")
    store.write_metadata(agent_name="a", instance_key="k", status="idle")
    store.write_metadata(agent_name="a", instance_key="k", status="processing")  # opens the descriptor
    calls = _stat_calls(monkeypatch)
    for status in ("idle", "processing", "idle"):
        store.write_metadata(agent_name="a", instance_key="k", status=status)
    assert calls == []
    value = store.read_metadata()
    assert value is not None and value["status"] == "idle"
    store.close()


def test_status_flip_writes_exactly_the_full_encoding(tmp_path: Path) -> None:
    """Flips are built from a cached head per status plus the timestamp: byte for byte what
    encoding the whole record gives."""
    store = FileInstanceStore(tmp_path / "inst")
    store.write_metadata(agent_name="ag\u00e9nt", instance_key='user:"1"', status="idle")
    for status in ("processing", "idle", "processing"):
        store.write_metadata(agent_name="ag\u00e9nt", instance_key='user:"1"', status=status)
        raw = store.metadata_path.read_bytes()
        record = orjson.loads(raw)
        assert record["status"] == status
        assert raw == _metadata_bytes(record)
    store.close()


def test_first_status_write_of_another_store_overwrites_in_place(tmp_path: Path) -> None:
    """A second store of the same instance (the supervisor resetting a crashed one, a new agent
    process) overwrites an existing metadata.json of the same length in place: a descriptor kept
    by a store still open then names the file everyone reads, with no check per flip."""
    first = FileInstanceStore(tmp_path / "inst")
    first.write_metadata(agent_name="a", instance_key="k", status="idle")
    first.write_metadata(agent_name="a", instance_key="k", status="processing")
    created = (first.read_metadata() or {})["createdAt"]
    inode = os.stat(first.metadata_path).st_ino
    second = FileInstanceStore(tmp_path / "inst")
    second.write_metadata(agent_name="a", instance_key="k", status="idle")
    assert os.stat(first.metadata_path).st_ino == inode
    first.write_metadata(agent_name="a", instance_key="k", status="processing")
    value = second.read_metadata()
    assert value is not None and value["status"] == "processing" and value["createdAt"] == created
    assert sorted(os.listdir(tmp_path / "inst")) == ["metadata.json"]
    first.close()
    second.close()


def test_first_status_write_replaces_a_file_of_another_layout(tmp_path: Path) -> None:
    """An existing file that is not the same length (an older layout, a hand edit) is replaced
    atomically, keeping its createdAt."""
    path = tmp_path / "inst"
    path.mkdir()
    (path / "metadata.json").write_text(
        '{"agentName":"a","instanceKey":"k","status":"idle","createdAt":"2020-01-01T00:00:00.000Z"}'
    )
    inode = os.stat(path / "metadata.json").st_ino
    store = FileInstanceStore(path)
    store.write_metadata(agent_name="a", instance_key="k", status="processing")
    value = store.read_metadata()
    assert value is not None and value["createdAt"] == "2020-01-01T00:00:00.000Z"
    assert value["status"] == "processing"
    assert os.stat(path / "metadata.json").st_ino != inode
    store.close()


def _records(path: Path) -> list[dict[str, Any]]:
    return [orjson.loads(x) for x in path.read_bytes().splitlines() if x]


@pytest.mark.parametrize(
    "message",
    [
        msg("m1"),
        msg("m2", 'quotes " and \\ backslashes, \u00e9, \U0001f600, control \x01 and \n newline'),
        tool_message("c", "t", {"type": "json", "value": [1, 2.5, None, {"k": True}]}, {"x": [1]}, id="m3"),
    ],
)
def test_append_line_is_what_tagging_the_encoded_event_gives(tmp_path: Path, message: Message) -> None:
    """The append line is built around the message's own encoding (reused for base.jsonl): it must
    be byte for byte the tagged encoding of the whole event, so load() verifies its checksum."""
    store = FileInstanceStore(tmp_path / "i")
    store.load()
    store.append_event(append_event(message))
    raw = store.events_path.read_bytes()
    expected = tag_line(orjson.dumps(event_to_record(append_event(message)), option=orjson.OPT_APPEND_NEWLINE), 0)
    assert raw == expected
    store.close()
    reloaded = FileInstanceStore(tmp_path / "i")
    loaded = reloaded.load()
    assert loaded.warnings == [] and [e["message"] for e in loaded.events] == [message]
    reloaded.close()


def test_append_commit_writes_the_committed_message_not_an_earlier_object_with_its_id(tmp_path: Path) -> None:
    """The commit reuses an event line's encoding only for the very object it encoded: a message
    handed to commit under the same id but as another object is encoded afresh."""
    store = FileInstanceStore(tmp_path / "i")
    store.load()
    store.append_event(append_event(msg("m1", "as appended")))
    store.append_event(append_event(msg("m2")))
    committed = [msg("m1", "as committed"), msg("m2")]
    store.commit(committed, committed)
    assert [r["data"]["content"] for r in _records(store.base_path)] == ["as committed", "text of m2"]
    store.close()


def test_append_commit_reuses_the_event_lines_message_bytes(tmp_path: Path) -> None:
    store = FileInstanceStore(tmp_path / "i")
    store.load()
    turn = [msg("m1"), msg("m2", "second")]
    for m in turn:
        store.append_event(append_event(m))
    events = store.events_path.read_bytes().splitlines()
    store.commit(turn, turn)
    prefix = b'"type":"append","message":'
    from_events = [line[line.index(prefix) + len(prefix) : -1] for line in events]
    assert store.base_path.read_bytes() == b"\n".join(from_events) + b"\n"
    assert store.events_path.read_bytes().strip(b"\n") == b""
    store.close()


def test_append_commit_clears_events_with_blank_lines_and_the_next_turn_writes_over_them(tmp_path: Path) -> None:
    """No truncation per turn (a freed and reallocated block, two journaled inode changes): the
    turn's bytes become newlines, and the next turn's lines are written from offset 0."""
    store = FileInstanceStore(tmp_path / "i")
    store.load()
    first = [msg("m1", "a longer first turn " * 5), msg("m2")]
    for m in first:
        store.append_event(append_event(m))
    size = store.events_path.stat().st_size
    inode = store.events_path.stat().st_ino
    store.commit(first, first)
    assert store.events_path.read_bytes() == b"\n" * size
    store.append_event(append_event(msg("m3")))
    raw = store.events_path.read_bytes()
    assert store.events_path.stat().st_ino == inode and len(raw) == size
    line, rest = raw.split(b"\n", 1)
    assert orjson.loads(line)["message"]["id"] == "m3" and rest.strip(b"\n") == b""
    store.close()
    reloaded = FileInstanceStore(tmp_path / "i")
    loaded = reloaded.load()
    assert [m.id for m in loaded.base] == ["m1", "m2"] and [e["message"].id for e in loaded.events] == ["m3"]
    assert loaded.warnings == [] and reloaded.events_path.read_bytes() == line + b"\n"
    reloaded.close()


def test_a_turn_too_large_to_blank_is_cleared_by_truncation(tmp_path: Path) -> None:
    store = FileInstanceStore(tmp_path / "i")
    store.load()
    big = [msg("m1", "x" * 70_000)]
    store.append_event(append_event(big[0]))
    store.commit(big, big)
    assert store.events_path.read_bytes() == b""
    store.close()


KILLED_MID_TURN = """
import os, signal, sys
from pathlib import Path
from storage_testkit import msg, run_child
from goondan.messages import append_event
from goondan.storage import FileInstanceStore
store = FileInstanceStore(Path(sys.argv[1]))
store.load()
turn = [msg("a0", "first turn " * 20), msg("a1", "first turn " * 20)]
for m in turn:
    store.append_event(append_event(m))
store.commit(turn, turn)
store.append_event(append_event(msg("b0")))
os.kill(os.getpid(), signal.SIGKILL)
"""


def test_process_killed_after_a_blanked_clear_resumes_the_pending_turn_without_warnings(tmp_path: Path) -> None:
    proc = run_child(KILLED_MID_TURN, str(tmp_path))
    assert proc.returncode == -signal.SIGKILL, proc.stderr
    events_path = tmp_path / "messages" / "events.jsonl"
    line, rest = events_path.read_bytes().split(b"\n", 1)
    assert rest and rest.strip(b"\n") == b""  # the pending line over the blank lines of the last turn
    store = FileInstanceStore(tmp_path)
    loaded = store.load()
    assert [m.id for m in loaded.base] == ["a0", "a1"] and [e["message"].id for e in loaded.events] == ["b0"]
    assert loaded.warnings == []
    assert events_path.read_bytes() == line + b"\n"
    store.close()
