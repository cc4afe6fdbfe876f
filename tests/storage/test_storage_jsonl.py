"""JSON-lines reading: only a line that fails to parse is a torn write; a complete record whose
trailing newline is missing is data and is kept (and the file repaired before the next append)."""

from __future__ import annotations

import shutil
import tempfile
from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from storage_testkit import msg, records, reload, run_turn

from goondan._json import dumps_line
from goondan.messages import append_event
from goondan.storage import FileInstanceStore


def _write_base(store: FileInstanceStore, data: bytes) -> None:
    store.base_path.parent.mkdir(parents=True, exist_ok=True)
    store.base_path.write_bytes(data)


def test_valid_last_line_without_newline_is_kept(tmp_path: Path) -> None:
    m1, m2 = msg("m1"), msg("m2")
    store = FileInstanceStore(tmp_path)
    _write_base(store, dumps_line(m1.to_record()) + dumps_line(m2.to_record())[:-1])
    loaded = store.load()
    assert records(loaded.base) == records([m1, m2])
    assert loaded.warnings == []
    # the next append must not be glued onto the unterminated line
    m3 = msg("m3")
    run_turn(store, loaded.base, [append_event(m3)])
    store.close()
    conv, again = reload(tmp_path)
    assert records(conv) == records([m1, m2, m3]) and again.warnings == []


def test_valid_last_event_without_newline_is_kept_and_replayed(tmp_path: Path) -> None:
    store = FileInstanceStore(tmp_path)
    store.load()
    store.append_event(append_event(msg("e1")))
    store.append_event(append_event(msg("e2")))
    store.close()
    data = store.events_path.read_bytes()
    store.events_path.write_bytes(data[:-1])  # drop only the final newline
    store = FileInstanceStore(tmp_path)
    loaded = store.load()
    assert [e["message"].id for e in loaded.events] == ["e1", "e2"] and loaded.warnings == []
    store.append_event(append_event(msg("e3")))
    store.close()
    _conv, again = reload(tmp_path)
    assert [e["message"].id for e in again.events] == ["e1", "e2", "e3"]


def test_valid_last_runtime_event_without_newline_is_kept(tmp_path: Path) -> None:
    store = FileInstanceStore(tmp_path)
    store.load()
    store.close()
    store.runtime_events_path.write_bytes(b'{"type":"a"}\n{"type":"b"}')
    store = FileInstanceStore(tmp_path)
    store.append_runtime_event({"type": "c"})
    assert [e["type"] for e in store.read_runtime_events()] == ["a", "b", "c"]
    store.close()


texts = st.lists(st.text(max_size=20), min_size=1, max_size=8)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(texts=texts, terminated=st.booleans(), torn=st.one_of(st.none(), st.integers(min_value=1)))
def test_only_a_line_that_fails_to_parse_is_torn(texts: list[str], terminated: bool, torn: int | None) -> None:
    """Any prefix of a record that is shorter than the record is dropped as torn; a whole record is
    kept whether or not its newline made it to disk."""
    tmp = Path(tempfile.mkdtemp(prefix="goondan-jsonl-"))
    try:
        messages = [msg(f"m{i}", text) for i, text in enumerate(texts)]
        lines = [dumps_line(m.to_record()) for m in messages]
        kept = messages
        if torn is not None:
            # cut the last record somewhere inside its JSON text: it can never parse
            last = lines[-1]
            cut = 1 + torn % (len(last) - 2)
            data = b"".join(lines[:-1]) + last[:cut]
            kept = messages[:-1]
        elif terminated:
            data = b"".join(lines)
        else:
            data = b"".join(lines)[:-1]
        store = FileInstanceStore(tmp)
        _write_base(store, data)
        loaded = store.load()
        assert records(loaded.base) == records(kept)
        assert [w["code"] for w in loaded.warnings] == (["E_STORAGE_TORN_LINE"] if torn is not None else [])
        extra = msg("extra")
        run_turn(store, loaded.base, [append_event(extra)])
        store.close()
        conv, again = reload(tmp)
        assert records(conv) == records([*kept, extra]) and again.warnings == []
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
