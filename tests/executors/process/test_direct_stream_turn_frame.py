"""The ``turn`` frame's optional ``stream`` target (direct streams): absent from the wire for a
turn without one, so such turns encode exactly as before; carried and checked when present."""

from __future__ import annotations

import orjson

from goondan.executors.process._ipc import ORCHESTRATOR, Dispatcher, Turn, decode_record


def test_a_turn_without_a_stream_target_encodes_without_the_field() -> None:
    payload = Turn("7", {"id": "evt_1"}).to_payload()
    assert payload == {"kind": "turn", "ticket": "7", "event": {"id": "evt_1"}}


def test_a_turn_with_a_stream_target_carries_it_across_the_wire() -> None:
    target = {"address": "@goondan-connector-1-ab", "id": "3"}
    msg = orjson.loads(orjson.dumps(Turn("7", {"id": "evt_1"}, target).message(ORCHESTRATOR, "a")))
    record = decode_record(msg)
    assert isinstance(record, Turn) and record.stream == target and record.event == {"id": "evt_1"}
    assert decode_record(Turn("8", {}).message(ORCHESTRATOR, "a")).stream is None  # type: ignore[attr-defined]


def test_a_stream_target_that_is_not_an_object_is_refused_by_name() -> None:
    got: list[Turn] = []
    table = Dispatcher("test").on(Turn, got.append)
    bad = {
        "type": "event",
        "from": "o",
        "to": "a",
        "payload": {"kind": "turn", "ticket": "1", "event": {}, "stream": 5},
    }
    table.dispatch(bad)
    assert got == []
    try:
        Turn.from_payload(bad["payload"])
    except Exception as exc:
        assert "'stream'" in str(exc)
    else:
        raise AssertionError("a stream target of the wrong type was accepted")
