"""An append commit clears events.jsonl without fsync; these tests build the on-disk states a power
loss can leave when that truncation is lost (old committed-turn lines, new lines followed by old
remnants, new bytes over the start of the old content, zeros) and prove that load() gives exactly the
committed conversation plus the pending turn's surviving events - and reports what no crash explains."""

from __future__ import annotations

import json
import os
import signal
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from storage_testkit import build_events, fold, msg, records, reload, run_child, run_turn

from goondan._json import dumps_line
from goondan.errors import StorageError
from goondan.messages import Message, append_event, event_to_record, remove_event
from goondan.storage import FileInstanceStore
from goondan.storage._events import scan_events, tag_line


def encode(events: Sequence[dict[str, Any]], base: int) -> bytes:
    """The bytes the store writes to events.jsonl for ``events`` on top of ``base`` messages."""
    return b"".join(tag_line(dumps_line(event_to_record(e)), base) for e in events)


def overlay(old: bytes, new: bytes) -> bytes:
    """A file whose truncation was lost and whose new bytes (written from offset 0) reached the disk."""
    return new + old[len(new) :]


def appends(prefix: str, n: int, text: str = "") -> list[dict[str, Any]]:
    return [append_event(msg(f"{prefix}{i}", text or f"text of {prefix}{i}")) for i in range(n)]


def committed(tmp_path: Path, *turns: list[dict[str, Any]]) -> tuple[FileInstanceStore, list[Message]]:
    store = FileInstanceStore(tmp_path)
    store.load()
    conv: list[Message] = []
    for events in turns:
        conv = run_turn(store, conv, events)
    return store, conv


def ids(messages: Sequence[Message]) -> list[str]:
    return [m.id for m in messages]


# --- the exact states a lost truncation leaves ----------------------------------------------------


def test_lines_of_a_committed_turn_left_by_a_lost_clear_are_dropped_not_replayed(tmp_path: Path) -> None:
    a, b = appends("a", 2), appends("b", 3)
    store, _ = committed(tmp_path, a, b)
    store.close()
    # power loss: base.jsonl (fsynced) holds a and b, the truncation after b never reached the disk
    store.events_path.write_bytes(encode(b, 2))
    replayed, loaded = reload(tmp_path)
    assert ids(replayed) == ["a0", "a1", "b0", "b1", "b2"]
    assert loaded.events == []
    assert [w["code"] for w in loaded.warnings] == ["E_STORAGE_COMMIT_RECOVERED"]
    assert store.events_path.read_bytes() == b""


def test_part_of_a_committed_turns_lines_left_behind_are_dropped(tmp_path: Path) -> None:
    a, b = appends("a", 1), appends("b", 4)
    store, _ = committed(tmp_path, a, b)
    store.close()
    store.events_path.write_bytes(encode(b[:2], 1))  # only the first lines of b ever reached the disk
    replayed, loaded = reload(tmp_path)
    assert ids(replayed) == ["a0", "b0", "b1", "b2", "b3"] and loaded.events == []


def test_new_lines_followed_by_old_remnants_replay_only_the_new_turn(tmp_path: Path) -> None:
    a, b, c = appends("a", 1), appends("b", 4, "x" * 50), appends("c", 1)
    store, _ = committed(tmp_path, a, b)
    store.close()
    old, new = encode(b, 1), encode(c, 5)
    # the new turn's line, then whole lines of the committed turn
    store.events_path.write_bytes(new + b"".join(old.splitlines(keepends=True)[1:]))
    replayed, loaded = reload(tmp_path)
    assert ids(replayed) == ["a0", "b0", "b1", "b2", "b3", "c0"]
    assert ids(loaded.base) == ["a0", "b0", "b1", "b2", "b3"]
    assert [e["message"].id for e in loaded.events] == ["c0"]
    assert store.events_path.read_bytes() == new


def test_new_bytes_over_the_start_of_old_content_keep_the_new_events(tmp_path: Path) -> None:
    a, b, c = appends("a", 1), appends("b", 3, "y" * 200), appends("c", 2, "q" * 7)
    store, _ = committed(tmp_path, a, b)
    store.close()
    old, new = encode(b, 1), encode(c, 4)
    assert old[len(new) - 1 : len(new)] != b"\n"  # the new bytes end inside an old line
    store.events_path.write_bytes(overlay(old, new))  # the cut old line follows the new ones
    replayed, loaded = reload(tmp_path)
    assert ids(replayed) == ["a0", "b0", "b1", "b2", "c0", "c1"]
    codes = sorted(w["code"] for w in loaded.warnings)
    assert codes == ["E_STORAGE_COMMIT_RECOVERED", "E_STORAGE_TORN_LINE"]
    assert store.events_path.read_bytes() == new
    # and the next turn commits on top of it cleanly
    store2 = FileInstanceStore(tmp_path)
    loaded2 = store2.load()
    run_turn(store2, fold(loaded2.base, loaded2.events), appends("d", 1))
    store2.close()
    replayed, loaded = reload(tmp_path)
    assert ids(replayed)[-3:] == ["c0", "c1", "d0"] and loaded.warnings == [] and loaded.events == []


def test_new_bytes_that_reached_only_the_tag_do_not_make_an_old_line_pending(tmp_path: Path) -> None:
    """Found by Hypothesis: ``{"base":4`` over ``{"base":3,...`` left a line of a committed turn with
    the pending turn's tag; the checksum covers the tag, so the line does not verify."""
    a, b, c = appends("a", 3), appends("b", 1), appends("c", 1)
    store, _ = committed(tmp_path, a, b)
    store.close()
    old, new = encode(b, 3), encode(c, 4)
    assert old[:9] == b'{"base":3' and new[:9] == b'{"base":4'
    store.events_path.write_bytes(overlay(old, new[:9]))
    replayed, loaded = reload(tmp_path)
    assert ids(replayed) == ["a0", "a1", "a2", "b0"] and loaded.events == []
    assert [w["code"] for w in loaded.warnings] == ["E_STORAGE_TORN_LINE"]


def test_a_pending_line_cut_by_old_bytes_is_a_torn_write_and_the_rest_survives(tmp_path: Path) -> None:
    a, b, c = appends("a", 1), appends("b", 2, "z" * 300), appends("c", 2, "w" * 100)
    store, _ = committed(tmp_path, a, b)
    store.close()
    new = encode(c, 3)
    first = new.index(b"\n") + 1
    # the second new line reached the disk only in part; the old bytes after it are a different line
    store.events_path.write_bytes(overlay(encode(b, 1), new[: first + 40]))
    replayed, loaded = reload(tmp_path)
    assert ids(replayed) == ["a0", "b0", "b1", "c0"]
    assert "E_STORAGE_TORN_LINE" in [w["code"] for w in loaded.warnings]


def test_zeros_after_the_pending_lines_are_dropped(tmp_path: Path) -> None:
    a, c = appends("a", 2), appends("c", 1)
    store, _ = committed(tmp_path, a)
    store.close()
    store.events_path.write_bytes(encode(c, 2) + b"\0" * 4096)
    replayed, loaded = reload(tmp_path)
    assert ids(replayed) == ["a0", "a1", "c0"]
    assert [w["code"] for w in loaded.warnings] == ["E_STORAGE_TORN_LINE"]


def test_a_lost_clear_after_an_unfinished_append_commit_still_recovers(tmp_path: Path) -> None:
    """The process died while appending to base.jsonl (half a line); the events are replayed."""
    a, b = appends("a", 1), appends("b", 3)
    store, _ = committed(tmp_path, a)
    store.close()
    with open(store.base_path, "ab") as f:
        f.write(dumps_line(b[0]["message"].to_record()) + dumps_line(b[1]["message"].to_record())[:9])
    store.events_path.write_bytes(encode(b, 1))
    replayed, loaded = reload(tmp_path)
    assert ids(replayed) == ["a0", "b0", "b1", "b2"] and ids(loaded.base) == ["a0"]
    assert [w["code"] for w in loaded.warnings] == ["E_STORAGE_TORN_LINE", "E_STORAGE_COMMIT_RECOVERED"]


# --- what no crash explains is still reported -----------------------------------------------------


def _corrupt(tmp_path: Path, data: bytes) -> StorageError:
    path = tmp_path / "messages" / "events.jsonl"
    path.write_bytes(data)
    with pytest.raises(StorageError) as info:
        FileInstanceStore(tmp_path).load()
    assert info.value.code == "E_STORAGE_CORRUPT" and info.value.file == str(path)
    assert path.read_bytes() == data  # nothing discarded
    return info.value


def test_a_damaged_pending_line_before_another_pending_line_is_corrupt(tmp_path: Path) -> None:
    store, _ = committed(tmp_path, appends("a", 1))
    store.close()
    good = encode(appends("c", 3), 1).splitlines(keepends=True)
    good[1] = good[1].replace(b"text of", b"TEXT of")  # decodes, but its checksum does not verify
    assert _corrupt(tmp_path, b"".join(good)).line == 2


def test_a_pending_event_after_old_lines_is_corrupt_not_a_turn_with_a_hole(tmp_path: Path) -> None:
    b = appends("b", 2)
    store, _ = committed(tmp_path, appends("a", 1), b)
    store.close()
    assert _corrupt(tmp_path, encode(b, 1) + encode(appends("c", 1), 3)).line == 3


def test_an_event_on_top_of_more_messages_than_base_holds_is_corrupt(tmp_path: Path) -> None:
    store, _ = committed(tmp_path, appends("a", 1))
    store.close()
    assert _corrupt(tmp_path, encode(appends("c", 1), 7)).line == 1


def test_an_old_turns_line_whose_message_is_not_in_base_is_corrupt(tmp_path: Path) -> None:
    store, _ = committed(tmp_path, appends("a", 2))
    store.close()
    assert _corrupt(tmp_path, encode(appends("c", 1), 2) + encode(appends("x", 1), 1)).line == 2


def test_an_old_turns_non_append_line_is_corrupt(tmp_path: Path) -> None:
    store, _ = committed(tmp_path, appends("a", 2))
    store.close()
    assert _corrupt(tmp_path, encode([remove_event("a0")], 1)).line == 1


# --- files written before lines were tagged --------------------------------------------------------


def test_untagged_events_are_read_as_before_and_the_next_clear_is_fsynced(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    store, _ = committed(tmp_path, appends("a", 1))
    store.close()
    b = appends("b", 3)
    store.events_path.write_bytes(b"".join(dumps_line(event_to_record(e)) for e in b[:2]))
    store = FileInstanceStore(tmp_path)
    loaded = store.load()
    assert [e["message"].id for e in loaded.events] == ["b0", "b1"] and loaded.warnings == []
    store.append_event(b[2])  # a tagged line after untagged ones: the same pending turn
    store.close()
    store = FileInstanceStore(tmp_path)
    loaded = store.load()
    assert [e["message"].id for e in loaded.events] == ["b0", "b1", "b2"] and loaded.warnings == []
    synced: list[str] = []
    real_fsync = os.fsync

    def fsync(fd: int) -> None:
        synced.append(os.path.basename(os.readlink(f"/proc/self/fd/{fd}")))
        real_fsync(fd)

    monkeypatch.setattr(os, "fsync", fsync)
    conv = fold(loaded.base, loaded.events)
    store.commit(conv, [e["message"] for e in loaded.events])  # an append commit
    # untagged lines must never survive a lost clear as remnants nobody can tell from a pending turn
    assert synced == ["base.jsonl", "events.jsonl"]
    synced.clear()
    run_turn(store, conv, appends("c", 1))
    assert synced == ["base.jsonl"]  # back to one fsync per turn
    store.close()


# --- a real process, killed, then the clear of its last commit lost ----------------------------------

KILLED_CHILD = """
import json, os, signal, sys
from pathlib import Path
from storage_testkit import build_events, fold, run_turn
from goondan.storage import FileInstanceStore
store = FileInstanceStore(Path(sys.argv[1]))
loaded = store.load()
conv = fold(loaded.base, loaded.events)
turns = json.loads(sys.argv[2])
for spec in turns[:-1]:
    conv = run_turn(store, conv, build_events(spec))
for e in build_events(turns[-1]):
    store.append_event(e)
os.kill(os.getpid(), signal.SIGKILL)
"""


@pytest.mark.parametrize("pending", [1, 3])
def test_killed_process_with_a_lost_clear_resumes_the_pending_turn_exactly(tmp_path: Path, pending: int) -> None:
    setup = [["append", "a0"], ["append", "a1"]]
    turn = [["append", f"b{i}"] for i in range(4)]
    nxt = [["append", f"c{i}"] for i in range(pending)]
    proc = run_child(KILLED_CHILD, str(tmp_path), json.dumps([setup, turn, nxt]))
    assert proc.returncode == -signal.SIGKILL, proc.stderr
    events_path = tmp_path / "messages" / "events.jsonl"
    written = events_path.read_bytes()
    new = encode(build_events(nxt), 6)
    # the pending lines over the blank lines that cleared `turn` (all its bytes, nothing else)
    assert written == new + b"\n" * (len(encode(build_events(turn), 2)) - len(new))
    # then the power went out, and the clear after `turn` had not reached the disk
    events_path.write_bytes(overlay(encode(build_events(turn), 2), new))
    conv, loaded = reload(tmp_path)
    expected = fold(fold(fold([], build_events(setup)), build_events(turn)), build_events(nxt))
    assert records(conv) == records(expected)
    assert [e["message"].id for e in loaded.events] == [f"c{i}" for i in range(pending)]


# --- property: whatever mix of old and new bytes reached the disk ------------------------------------

_turn = st.lists(st.integers(0, 120), min_size=1, max_size=4)  # text lengths of a turn's appends


@st.composite
def lost_clears(draw: st.DrawFn) -> tuple[list[str], bytes, list[dict[str, Any]], bytes, int]:
    """``(base ids, on-disk events.jsonl, pending events, pending bytes, persisted prefix)`` after a
    history of committed append turns whose clears were each lost or not, then a pending turn of which
    only a prefix of bytes reached the disk (written over what the lost clears left)."""
    base: list[str] = []
    disk = b""
    for t, lengths in enumerate(draw(st.lists(_turn, min_size=1, max_size=4))):
        events = [append_event(msg(f"t{t}m{i}", "x" * n)) for i, n in enumerate(lengths)]
        data = encode(events, len(base))
        disk = overlay(disk, data[: draw(st.integers(0, len(data)))])
        base += [e["message"].id for e in events]
        clear = draw(st.sampled_from(["lost", "blanked", "truncated"]))
        if clear == "blanked":  # the newlines over the turn's bytes reached the disk, or a prefix of them
            disk = overlay(disk, b"\n" * draw(st.integers(0, len(data))))
        elif clear == "truncated":  # a durable clear, or a turn too large to blank
            disk = b""
    lengths = draw(st.lists(st.integers(0, 120), max_size=4))
    pending = [append_event(msg(f"p{i}", "y" * n)) for i, n in enumerate(lengths)]
    pending += [remove_event("t0m0")] if draw(st.booleans()) else []
    data = encode(pending, len(base))
    persisted = draw(st.integers(0, len(data)))
    disk = overlay(disk, data[:persisted])
    if draw(st.booleans()):
        disk += b"\0" * draw(st.integers(1, 300))  # the size grew, the data never came
    return base, disk, pending, data, persisted


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(lost_clears())
def test_load_keeps_exactly_the_surviving_prefix_of_the_pending_turn(
    case: tuple[list[str], bytes, list[dict[str, Any]], bytes, int],
) -> None:
    base, disk, pending, data, persisted = case
    scan = scan_events(Path("events.jsonl"), disk, base)
    assert scan.cut_base_to is None and not scan.legacy
    complete = data[:persisted].count(b"\n")  # pending lines fully on disk
    got = [event_to_record(e) for e in scan.events]
    want = [event_to_record(e) for e in pending]
    assert got == want[: len(got)]  # only pending events, in order, no hole
    assert complete <= len(got) <= complete + 1  # at most a byte-identical last line beyond them
    assert disk[: scan.keep_size] == data[: scan.keep_size]


@st.composite
def block_mixes(draw: st.DrawFn) -> tuple[list[str], bytes, list[dict[str, Any]]]:
    """Like :func:`lost_clears`, but each 64-byte block of the file comes from the new or the old
    content independently (a filesystem that persisted some blocks of the new writes and not others)."""
    old_events = [append_event(msg(f"o{i}", "x" * n)) for i, n in enumerate(draw(_turn))]
    base = ["a0"] + [e["message"].id for e in old_events]
    old = encode(old_events, 1)
    pending = [append_event(msg(f"p{i}", "y" * n)) for i, n in enumerate(draw(_turn))]
    new = overlay(old, encode(pending, len(base)))
    # the old lines, the newlines that cleared them (the clear is not fsynced), the new lines
    states = [new, old.ljust(len(new), b"\0"), (b"\n" * len(old)).ljust(len(new), b"\0")]
    mixed = b"".join(states[draw(st.integers(0, 2))][i : i + 64] for i in range(0, len(new), 64))
    return base, mixed, pending


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(block_mixes())
def test_any_block_mix_yields_a_prefix_of_the_pending_turn_or_a_corrupt_error(
    case: tuple[list[str], bytes, list[dict[str, Any]]],
) -> None:
    base, disk, pending = case
    try:
        scan = scan_events(Path("events.jsonl"), disk, base)
    except StorageError as exc:
        assert exc.code == "E_STORAGE_CORRUPT"
        return
    got = [event_to_record(e) for e in scan.events]
    assert got == [event_to_record(e) for e in pending][: len(got)]
