"""Conversation persistence: commits, recovery of torn/corrupt files and interrupted commits."""

from __future__ import annotations

import os
import time
import zlib
from pathlib import Path
from typing import Any

import orjson
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from storage_testkit import fold, msg, records, reload, run_turn

from goondan.errors import StorageError
from goondan.messages import append_event, remove_event, replace_event, truncate_event
from goondan.storage import FileInstanceStore, LoadedConversation, MemoryInstanceStore


def lines(path: Path) -> list[dict[str, Any]]:
    return [orjson.loads(x) for x in path.read_bytes().splitlines() if x]


def open_store(path: Path) -> FileInstanceStore:
    store = FileInstanceStore(path)
    store.load()
    return store


def test_load_of_new_instance_creates_empty_files(tmp_path: Path) -> None:
    store = FileInstanceStore(tmp_path / "inst")
    loaded = store.load()
    assert loaded == LoadedConversation([], [], [])
    for name in ("base.jsonl", "events.jsonl", "runtime-events.jsonl"):
        assert (tmp_path / "inst" / "messages" / name).read_bytes() == b""
    store.close()


def test_append_event_writes_one_line_immediately(tmp_path: Path) -> None:
    store = open_store(tmp_path)
    m1 = msg("m1")
    store.append_event(append_event(m1))
    [line] = lines(store.events_path)
    assert line.pop("crc") == zlib.crc32(store.events_path.read_bytes().split(b",", 2)[2][:-1], zlib.crc32(b"0,"))
    assert line == {"base": 0, "type": "append", "message": m1.to_record()}
    store.append_event(remove_event("m1"))
    assert store.events_path.read_bytes().count(b"\n") == 2
    store.close()


def test_only_appended_turn_appends_lines_instead_of_rewriting_base(tmp_path: Path) -> None:
    store = open_store(tmp_path)
    m1, m2, m3 = msg("m1"), msg("m2"), msg("m3")
    base = run_turn(store, [], [append_event(m1)])
    inode = os.stat(store.base_path).st_ino
    base = run_turn(store, base, [append_event(m2), append_event(m3)])
    assert os.stat(store.base_path).st_ino == inode  # appended in place, not replaced
    assert [r["id"] for r in lines(store.base_path)] == ["m1", "m2", "m3"]
    assert store.events_path.read_bytes().strip(b"\n") == b""  # cleared: blank lines
    store.close()


def test_replace_remove_truncate_turns_rewrite_base(tmp_path: Path) -> None:
    store = open_store(tmp_path)
    base = run_turn(store, [], [append_event(msg("m1", "Original"))])
    inode = os.stat(store.base_path).st_ino
    base = run_turn(store, base, [replace_event("m1", msg("m1-v2", "Updated"))])
    assert os.stat(store.base_path).st_ino != inode
    assert [(r["id"], r["data"]["content"]) for r in lines(store.base_path)] == [("m1-v2", "Updated")]
    assert not store.marker_path.exists() and not store.tmp_path.exists()
    base = run_turn(store, base, [append_event(msg("m2")), remove_event("m1-v2")])
    assert [r["id"] for r in lines(store.base_path)] == ["m2"]
    run_turn(store, base, [truncate_event()])
    assert store.base_path.read_bytes() == b"" and store.events_path.read_bytes() == b""
    store.close()


def test_delta_commit_with_mismatching_appended_falls_back_to_rewrite(tmp_path: Path) -> None:
    """The store appends only what it can prove; a caller's wrong `appended` cannot duplicate lines."""
    store = open_store(tmp_path)
    m1, m2 = msg("m1"), msg("m2")
    store.append_event(append_event(m1))
    store.append_event(append_event(m2))
    store.commit([m1, m2], [m2])  # inconsistent: claims only m2 was appended
    assert [r["id"] for r in lines(store.base_path)] == ["m1", "m2"]
    store.close()
    assert records(reload(tmp_path)[0]) == records([m1, m2])


def test_reload_returns_base_and_residual_events(tmp_path: Path) -> None:
    store = open_store(tmp_path)
    m1, m2 = msg("m1"), msg("m2")
    run_turn(store, [], [append_event(m1)])
    store.append_event(append_event(m2))
    store.close()
    conv, loaded = reload(tmp_path)
    assert [m.id for m in loaded.base] == ["m1"]
    assert [e["message"].id for e in loaded.events] == ["m2"]
    assert loaded.warnings == []
    assert records(conv) == records([m1, m2])


def test_residual_events_fold_into_the_next_commit(tmp_path: Path) -> None:
    store = open_store(tmp_path)
    m1, m2, m3 = msg("m1"), msg("m2"), msg("m3")
    run_turn(store, [], [append_event(m1)])
    store.append_event(append_event(m2))
    store.close()
    store = FileInstanceStore(tmp_path)
    loaded = store.load()
    # the runtime folds residual events and the new turn's events into one commit
    events = [*loaded.events, append_event(m3)]
    store.append_event(events[-1])
    nxt = fold(loaded.base, events)
    store.commit(nxt, [m2, m3])
    store.close()
    _conv, loaded = reload(tmp_path)
    assert records(loaded.base) == records([m1, m2, m3]) and loaded.events == []


def test_torn_final_event_line_is_dropped_with_warning(tmp_path: Path) -> None:
    store = open_store(tmp_path)
    m1 = msg("m1")
    store.append_event(append_event(m1))
    store.close()
    with open(store.events_path, "ab") as f:
        f.write(b'{"type":"append","message":{"id":"m2","da')
    conv, loaded = reload(tmp_path)
    assert records(conv) == records([m1])
    [warning] = loaded.warnings
    assert warning["code"] == "E_STORAGE_TORN_LINE"
    assert warning["file"] == str(store.events_path) and warning["line"] == 2
    assert set(warning) == {"code", "message", "file", "line"}
    # physically truncated: the next append starts on a clean line
    store = open_store(tmp_path)
    store.append_event(append_event(msg("m3")))
    store.close()
    conv, loaded = reload(tmp_path)
    assert [m.id for m in conv] == ["m1", "m3"] and loaded.warnings == []


def test_undecodable_last_line_with_newline_is_treated_as_torn(tmp_path: Path) -> None:
    store = open_store(tmp_path)
    run_turn(store, [], [append_event(msg("m1"))])
    store.close()
    with open(store.base_path, "ab") as f:
        f.write(b"\0\0\0\0\n")
    conv, loaded = reload(tmp_path)
    assert [m.id for m in conv] == ["m1"]
    assert [(w["code"], w["line"]) for w in loaded.warnings] == [("E_STORAGE_TORN_LINE", 2)]
    assert store.base_path.read_bytes().endswith(b"}\n")


@pytest.mark.parametrize("file", ["base.jsonl", "events.jsonl"])
def test_corrupt_middle_line_stops_with_file_and_line(tmp_path: Path, file: str) -> None:
    store = open_store(tmp_path)
    if file == "base.jsonl":
        run_turn(store, [], [append_event(msg("m1")), append_event(msg("m2")), append_event(msg("m3"))])
    else:
        for mid in ("m1", "m2", "m3"):
            store.append_event(append_event(msg(mid)))
    store.close()
    path = tmp_path / "messages" / file
    content = path.read_bytes().split(b"\n")
    content[1] = content[1][:20] + b"#garbage"
    path.write_bytes(b"\n".join(content))
    before = path.read_bytes()
    with pytest.raises(StorageError) as info:
        FileInstanceStore(tmp_path).load()
    err = info.value
    assert err.code == "E_STORAGE_CORRUPT"
    assert err.file == str(path) and err.line == 2
    assert err.suggestion and file in err.suggestion
    assert path.read_bytes() == before  # nothing discarded


def test_invalid_record_in_middle_is_corrupt_not_skipped(tmp_path: Path) -> None:
    store = open_store(tmp_path)
    run_turn(store, [], [append_event(msg("m1")), append_event(msg("m2"))])
    store.close()
    data = store.base_path.read_bytes().split(b"\n")
    data.insert(1, b'{"id": "x", "data": {"role": "robot", "content": "?"}}')
    store.base_path.write_bytes(b"\n".join(data))
    with pytest.raises(StorageError) as info:
        FileInstanceStore(tmp_path).load()
    assert info.value.code == "E_STORAGE_CORRUPT" and info.value.line == 2


def test_blank_lines_are_ignored(tmp_path: Path) -> None:
    store = open_store(tmp_path)
    run_turn(store, [], [append_event(msg("m1")), append_event(msg("m2"))])
    store.close()
    store.base_path.write_bytes(store.base_path.read_bytes().replace(b"\n", b"\n\n", 1))
    conv, loaded = reload(tmp_path)
    assert [m.id for m in conv] == ["m1", "m2"] and loaded.warnings == []


# --- interrupted commits reproduced by hand (the subprocess crash tests kill real processes) -------


def test_unfinished_append_commit_is_undone_and_replayed(tmp_path: Path) -> None:
    store = open_store(tmp_path)
    m1, m2, m3 = msg("m1"), msg("m2"), msg("m3")
    run_turn(store, [], [append_event(m1)])
    store.append_event(append_event(m2))
    store.append_event(append_event(m3))
    store.close()
    # base got m2 (and half of m3) but events.jsonl was never cleared
    with open(store.base_path, "ab") as f:
        f.write(orjson.dumps(m2.to_record()) + b"\n" + orjson.dumps(m3.to_record())[:10])
    conv, loaded = reload(tmp_path)
    assert [m.id for m in conv] == ["m1", "m2", "m3"]
    assert [m.id for m in loaded.base] == ["m1"]
    codes = [w["code"] for w in loaded.warnings]
    assert codes == ["E_STORAGE_TORN_LINE", "E_STORAGE_COMMIT_RECOVERED"]
    assert [r["id"] for r in lines(store.base_path)] == ["m1"]


def test_base_tail_that_is_not_the_events_prefix_is_left_alone(tmp_path: Path) -> None:
    store = open_store(tmp_path)
    base = run_turn(store, [], [append_event(msg("m1")), append_event(msg("m2"))])
    store.append_event(append_event(msg("m3")))
    store.close()
    conv, loaded = reload(tmp_path)
    assert [m.id for m in conv] == ["m1", "m2", "m3"] and loaded.warnings == []
    assert [m.id for m in base] == ["m1", "m2"]


def _rewrite_leftovers(tmp_path: Path, renamed: bool) -> tuple[FileInstanceStore, list[str]]:
    store = open_store(tmp_path)
    base = run_turn(store, [], [append_event(msg("m1")), append_event(msg("m2"))])
    events = [remove_event("m1"), append_event(msg("m3"))]
    for e in events:
        store.append_event(e)
    store.close()
    new = fold(base, events)
    store.tmp_path.write_bytes(b"".join(orjson.dumps(m.to_record()) + b"\n" for m in new))
    inode = os.stat(store.tmp_path).st_ino
    store.marker_path.write_bytes(orjson.dumps({"mode": "rewrite", "inode": inode}))
    if renamed:
        os.replace(store.tmp_path, store.base_path)
    return store, [m.id for m in new]


def test_rewrite_interrupted_after_rename_is_completed(tmp_path: Path) -> None:
    store, expected = _rewrite_leftovers(tmp_path, renamed=True)
    conv, loaded = reload(tmp_path)
    assert [m.id for m in conv] == expected and loaded.events == []
    assert store.events_path.read_bytes() == b""
    assert not store.marker_path.exists()


def test_rewrite_interrupted_before_rename_is_rolled_back_and_replayed(tmp_path: Path) -> None:
    store, expected = _rewrite_leftovers(tmp_path, renamed=False)
    conv, loaded = reload(tmp_path)
    assert [m.id for m in loaded.base] == ["m1", "m2"] and len(loaded.events) == 2
    assert [m.id for m in conv] == expected
    assert not store.marker_path.exists() and not store.tmp_path.exists()


def test_torn_marker_means_rename_never_happened(tmp_path: Path) -> None:
    store, expected = _rewrite_leftovers(tmp_path, renamed=False)
    store.marker_path.write_bytes(b'{"mode": "rew')
    conv, _ = reload(tmp_path)
    assert [m.id for m in conv] == expected
    assert not store.marker_path.exists() and not store.tmp_path.exists()


def test_stray_tmp_without_marker_is_deleted(tmp_path: Path) -> None:
    store = open_store(tmp_path)
    run_turn(store, [], [append_event(msg("m1"))])
    store.close()
    store.tmp_path.write_bytes(b"garbage")
    conv, _ = reload(tmp_path)
    assert [m.id for m in conv] == ["m1"] and not store.tmp_path.exists()


def test_failed_commit_raises_and_keeps_events(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    store = open_store(tmp_path)
    base = run_turn(store, [], [append_event(msg("m1"))])
    events = [replace_event("m1", msg("m1b"))]
    store.append_event(events[0])
    real_fsync = os.fsync

    def failing_fsync(fd: int) -> None:
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(os, "fsync", failing_fsync)
    with pytest.raises(StorageError) as info:
        store.commit(fold(base, events), None)
    assert info.value.code == "E_STORAGE_WRITE"
    monkeypatch.setattr(os, "fsync", real_fsync)
    assert lines(store.events_path)[0]["type"] == "replace"
    assert not store.tmp_path.exists() and not store.marker_path.exists()
    store.close()
    conv, _ = reload(tmp_path)
    assert [m.id for m in conv] == ["m1b"]


def test_failed_append_commit_never_duplicates_on_retry(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    store = open_store(tmp_path)
    m1, m2 = msg("m1"), msg("m2")
    store.append_event(append_event(m1))
    real_ftruncate, real_pwrite = os.ftruncate, os.pwrite

    def failing_ftruncate(fd: int, size: int) -> None:
        raise OSError(5, "I/O error")

    def failing_blank(fd: int, data: bytes, offset: int) -> int:
        if bytes(data).strip(b"\n") == b"":
            raise OSError(5, "I/O error")
        return real_pwrite(fd, data, offset)

    # base appended, clearing events (a truncation or blank lines over the turn's) fails
    monkeypatch.setattr(os, "ftruncate", failing_ftruncate)
    monkeypatch.setattr(os, "pwrite", failing_blank)
    with pytest.raises(StorageError):
        store.commit([m1], [m1])
    monkeypatch.setattr(os, "ftruncate", real_ftruncate)
    monkeypatch.setattr(os, "pwrite", real_pwrite)
    store.append_event(append_event(m2))
    store.commit([m1, m2], [m1, m2])  # the runtime retries with everything since the last success
    store.close()
    _conv, loaded = reload(tmp_path)
    assert [m.id for m in loaded.base] == ["m1", "m2"] and loaded.events == []


def test_commit_without_load_refuses_to_overwrite_history(tmp_path: Path) -> None:
    store = open_store(tmp_path)
    run_turn(store, [], [append_event(msg("m1"))])
    store.close()
    blind = FileInstanceStore(tmp_path)
    with pytest.raises(StorageError) as info:
        blind.commit([msg("x")], None)
    assert info.value.code == "E_STORAGE_NOT_LOADED"
    fresh = FileInstanceStore(tmp_path / "new")
    fresh.append_event(append_event(msg("a")))  # a brand-new instance needs no explicit load
    fresh.commit([msg("a")], [msg("a")])
    fresh.close()
    assert [m.id for m in reload(tmp_path / "new")[0]] == ["a"]


# --- property: any sequence of turns round-trips -------------------------------------------------

_counter = iter(range(10**9))


@st.composite
def turns(draw: st.DrawFn) -> list[list[dict[str, Any]]]:
    out: list[list[dict[str, Any]]] = []
    ids: list[str] = []
    for _ in range(draw(st.integers(0, 6))):
        turn: list[dict[str, Any]] = []
        for _ in range(draw(st.integers(0, 4))):
            kind = draw(st.sampled_from(["append", "append", "append", "replace", "remove", "truncate"]))
            target = draw(st.sampled_from([*ids, "missing"])) if kind in ("replace", "remove") else ""
            if kind in ("append", "replace"):
                new = msg(f"m{next(_counter)}", draw(st.text(max_size=8)))
                ids.append(new.id)
                turn.append(append_event(new) if kind == "append" else replace_event(target, new))
            elif kind == "remove":
                turn.append(remove_event(target))
            else:
                turn.append(truncate_event())
        out.append(turn)
    return out


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(turns(), st.booleans())
def test_random_turns_reload_equal_the_in_memory_fold(
    tmp_path_factory: pytest.TempPathFactory, all_turns: list[list[dict[str, Any]]], reopen: bool
) -> None:
    path = tmp_path_factory.mktemp("inst")
    store = open_store(path)
    conv: list[Any] = []
    for turn in all_turns:
        conv = run_turn(store, conv, turn)
        if reopen:
            store.close()
            store = open_store(path)
    store.close()
    reloaded, loaded = reload(path)
    assert records(reloaded) == records(conv)
    assert loaded.events == [] and loaded.warnings == []


# --- runtime events, extension state, metadata, fresh start -------------------------------------


def test_runtime_events_are_appended_and_read_tolerantly(tmp_path: Path) -> None:
    store = open_store(tmp_path)
    assert store.read_runtime_events() == []
    store.append_runtime_event({"type": "turn.started", "n": 1})
    store.append_runtime_event({"type": "turn.completed", "n": 2})
    assert store.runtime_events_path.read_bytes().count(b"\n") == 2
    store.close()
    with open(store.runtime_events_path, "ab") as f:
        f.write(b'{"type": "step.sta')
    assert [r["n"] for r in FileInstanceStore(tmp_path).read_runtime_events()] == [1, 2]
    again = FileInstanceStore(tmp_path)
    again.append_runtime_event({"type": "x", "n": 3})  # the torn tail is cut before appending
    again.close()
    assert [r["n"] for r in again.read_runtime_events()] == [1, 2, 3]
    assert len(again.runtime_events_path.read_bytes().splitlines()) == 3


def test_extension_state_round_trip_and_atomic_replace(tmp_path: Path) -> None:
    store = FileInstanceStore(tmp_path)
    assert store.load_extension_state("compaction") is None
    value = {"count": 3, "nested": {"list": [1, "two", None, True, 1.5]}, "uni": "한글"}
    store.save_extension_state("compaction", value)
    path = tmp_path / "extensions" / "compaction.json"
    inode = os.stat(path).st_ino
    assert store.load_extension_state("compaction") == value
    store.save_extension_state("compaction", {"count": 4})
    assert os.stat(path).st_ino != inode  # replaced by rename, never rewritten in place
    assert FileInstanceStore(tmp_path).load_extension_state("compaction") == {"count": 4}
    assert sorted(os.listdir(tmp_path / "extensions")) == ["compaction.json"]  # no temp files left
    store.save_extension_state("@scope/ext", [1])
    assert store.load_extension_state("@scope/ext") == [1]
    assert store.load_extension_state("compaction") == {"count": 4}


def test_extension_state_must_be_json(tmp_path: Path) -> None:
    store = FileInstanceStore(tmp_path)
    with pytest.raises(StorageError) as info:
        store.save_extension_state("x", {"when": object()})
    assert info.value.code == "E_STORAGE_NOT_JSON"
    assert store.load_extension_state("x") is None


def test_corrupt_extension_state_is_reported(tmp_path: Path) -> None:
    store = FileInstanceStore(tmp_path)
    store.save_extension_state("x", {"a": 1})
    store.extension_state_path("x").write_bytes(b"{nope")
    with pytest.raises(StorageError) as info:
        store.load_extension_state("x")
    assert info.value.code == "E_STORAGE_CORRUPT"


def test_metadata_is_pretty_atomic_and_keeps_created_at(tmp_path: Path) -> None:
    store = FileInstanceStore(tmp_path / "inst")
    assert store.read_metadata() is None
    store.write_metadata(agent_name="coder", instance_key="user:1", status="idle")
    first = store.read_metadata()
    assert first is not None and first["status"] == "idle"
    assert set(first) == {"agentName", "instanceKey", "status", "createdAt", "updatedAt"}
    raw = store.metadata_path.read_bytes()
    assert raw.endswith(b"}\n") and b'\n  "agentName": "coder"' in raw
    inode = os.stat(store.metadata_path).st_ino
    time.sleep(0.005)
    store.write_metadata(agent_name="coder", instance_key="user:1", status="processing")
    second = store.read_metadata()
    assert second is not None
    assert second["createdAt"] == first["createdAt"] and second["status"] == "processing"
    assert second["updatedAt"] >= first["updatedAt"]
    # status flips rewrite the file in place at the same length (no rename flush per turn)
    assert os.stat(store.metadata_path).st_ino == inode
    assert len(store.metadata_path.read_bytes()) == len(raw)
    assert sorted(os.listdir(tmp_path / "inst")) == ["metadata.json"]


def test_status_flip_after_another_writer_replaced_metadata_lands_in_the_new_file(tmp_path: Path) -> None:
    """The flip's descriptor is kept between turns; a file renamed into place by another writer (the
    supervisor resetting a crashed instance) must not leave it writing to the unlinked old inode."""
    child = FileInstanceStore(tmp_path / "inst")
    child.write_metadata(agent_name="a", instance_key="k", status="idle")
    child.write_metadata(agent_name="a", instance_key="k", status="processing")  # opens and keeps it
    parent = FileInstanceStore(tmp_path / "inst")
    parent.write_metadata(agent_name="a", instance_key="k", status="idle")  # first write: a new file
    child.write_metadata(agent_name="a", instance_key="k", status="processing")
    value = parent.read_metadata()
    assert value is not None and value["status"] == "processing"
    child.close()


def test_base_descriptor_kept_across_commits_follows_a_rewrite(tmp_path: Path) -> None:
    store = open_store(tmp_path)
    base = run_turn(store, [], [append_event(msg("m1"))])
    base = run_turn(store, base, [append_event(msg("m2"))])  # append commit: descriptor kept
    base = run_turn(store, base, [remove_event("m1")])  # rewrite: base.jsonl is a new file
    base = run_turn(store, base, [append_event(msg("m3"))])  # must append to the new file
    store.close()
    conv, _ = reload(tmp_path)
    assert [m.id for m in conv] == ["m2", "m3"] == [m.id for m in base]


def test_invalid_metadata_reads_as_none(tmp_path: Path) -> None:
    store = FileInstanceStore(tmp_path)
    store.metadata_path.write_bytes(b"[1, 2]")
    assert store.read_metadata() is None
    store.metadata_path.write_bytes(b"{broken")
    assert store.read_metadata() is None


def test_fresh_start_clears_conversation_and_extension_state(tmp_path: Path) -> None:
    store = open_store(tmp_path)
    run_turn(store, [], [append_event(msg("m1"))])
    store.append_event(append_event(msg("m2")))
    store.append_runtime_event({"type": "x"})
    store.save_extension_state("e", {"k": 1})
    store.clear_history()
    assert store.read_runtime_events() == []
    run_turn(store, [], [append_event(msg("m3"))])  # usable right away
    store.close()
    conv, _ = reload(tmp_path)
    assert [m.id for m in conv] == ["m3"]
    assert FileInstanceStore(tmp_path).load_extension_state("e") is None
    assert list((tmp_path / "extensions").iterdir()) == []


def test_fresh_start_of_the_memory_store_clears_extension_state() -> None:
    store = MemoryInstanceStore()
    store.save_extension_state("e", {"k": 1})
    store.clear_history()
    assert store.load_extension_state("e") is None


def test_memory_store_keeps_the_conversation_and_touches_no_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    store = MemoryInstanceStore()
    assert store.load() == LoadedConversation()
    m1 = msg("m1")
    store.append_event(append_event(m1))
    store.commit([m1], [m1])
    assert store.load().base == [m1]
    value = {"a": [1]}
    store.save_extension_state("e", value)
    value["a"].append(2)
    assert store.load_extension_state("e") == {"a": [1]}  # a JSON copy, as if stored
    assert store.load_extension_state("other") is None
    store.write_metadata(agent_name="a", instance_key="k", status="idle")
    meta = store.read_metadata()
    assert meta is not None and meta["status"] == "idle"
    store.append_runtime_event({"type": "t"})
    assert store.read_runtime_events() == [{"type": "t"}]
    store.clear_history()
    store.close()
    assert os.listdir(tmp_path) == []


def test_load_of_100k_lines_is_fast(tmp_path: Path) -> None:
    store = open_store(tmp_path)
    many = [msg(f"m{i}", "hello world " * 4) for i in range(100_000)]
    store.commit(many, None)
    store.close()
    start = time.perf_counter()
    loaded = FileInstanceStore(tmp_path).load()
    elapsed = time.perf_counter() - start
    assert len(loaded.base) == 100_000
    assert elapsed < 2.0, f"load took {elapsed:.2f}s"


# --- ordering of durable operations --------------------------------------------------------------


def _trace_io(monkeypatch: pytest.MonkeyPatch) -> list[tuple[str, str]]:
    if not os.path.isdir("/proc/self/fd"):
        pytest.skip("needs /proc to name file descriptors")
    ops: list[tuple[str, str]] = []
    real_fsync, real_ftruncate, real_replace, real_pwrite = os.fsync, os.ftruncate, os.replace, os.pwrite

    def name(fd: int) -> str:
        return os.path.basename(os.readlink(f"/proc/self/fd/{fd}"))

    def fsync(fd: int) -> None:
        ops.append(("fsync", name(fd)))
        real_fsync(fd)

    def ftruncate(fd: int, size: int) -> None:
        ops.append(("ftruncate", name(fd)))
        real_ftruncate(fd, size)

    def replace(src: Any, dst: Any) -> None:
        ops.append(("rename", f"{os.path.basename(src)}->{os.path.basename(dst)}"))
        real_replace(src, dst)

    def pwrite(fd: int, data: bytes, offset: int) -> int:
        if bytes(data).strip(b"\n") == b"":  # the clear of events.jsonl: blank lines
            ops.append(("blank", name(fd)))
        return real_pwrite(fd, data, offset)

    monkeypatch.setattr(os, "fsync", fsync)
    monkeypatch.setattr(os, "ftruncate", ftruncate)
    monkeypatch.setattr(os, "replace", replace)
    monkeypatch.setattr(os, "pwrite", pwrite)
    return ops


def test_append_commit_fsyncs_once_and_clears_events_only_after_base_is_durable(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """One fsync per turn: the clear of events.jsonl (blank lines over the turn's, no truncation) is
    not fsynced (a lost clear leaves lines that load() proves committed; see
    test_storage_lost_clear.py)."""
    store = open_store(tmp_path / "i")
    ops = _trace_io(monkeypatch)
    store.append_event(append_event(msg("m1")))
    store.append_event(append_event(msg("m2")))
    assert ops == []  # no fsync on the hot path
    store.commit([msg("m1"), msg("m2")], [msg("m1"), msg("m2")])
    assert ops == [("fsync", "base.jsonl"), ("blank", "events.jsonl")]
    store.close()


def test_rewrite_commit_orders_tmp_marker_rename_clear_unmark(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    store = open_store(tmp_path / "i")
    base = run_turn(store, [], [append_event(msg("m1"))])
    ops = _trace_io(monkeypatch)
    run_turn(store, base, [remove_event("m1")])
    assert ops == [
        ("fsync", "base.jsonl.tmp"),
        ("fsync", ".commit.json"),
        ("fsync", "messages"),
        ("rename", "base.jsonl.tmp->base.jsonl"),
        ("fsync", "messages"),
        ("ftruncate", "events.jsonl"),
        ("fsync", "events.jsonl"),
        ("fsync", "messages"),  # after unlinking the marker
    ]
    assert not store.marker_path.exists()
    store.close()


def test_memory_store_runtime_events_are_snapshots_unless_handed_over() -> None:
    """A record someone still holds is encoded at once, so changing it later changes nothing;
    a handed-over (owned) record is kept as is; readers always get copies."""
    store = MemoryInstanceStore()
    shared = {"type": "shared", "data": {"n": 1}}
    store.append_runtime_event(shared)
    shared["data"]["n"] = 2
    store.append_runtime_event({"type": "owned", "data": {"n": 3}}, owned=True)
    first = store.read_runtime_events()
    assert first == [{"type": "shared", "data": {"n": 1}}, {"type": "owned", "data": {"n": 3}}]
    first[1]["data"]["n"] = 99
    assert store.read_runtime_events()[1] == {"type": "owned", "data": {"n": 3}}
