"""IPC messages are typed records handled through dispatch tables: every record survives encode →
frame → decode unchanged, and a message no table knows (or a malformed one) is logged and skipped
while the channel keeps serving."""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import socket
import types
import typing
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from goondan.executors.process import _ipc
from goondan.executors.process._ipc import (
    RECORDS,
    Connection,
    Dispatcher,
    Record,
    Sync,
    SyncAck,
    Turn,
    decode,
    decode_record,
    encode,
    message,
)

json_scalar = st.none() | st.booleans() | st.integers(-(2**53), 2**53) | st.text(max_size=8)
json_value = st.recursive(
    json_scalar,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=5), inner, max_size=3),
    max_leaves=8,
)


def _strategy(hint: Any) -> st.SearchStrategy[Any]:
    if hint is Any:
        return json_value
    origin = typing.get_origin(hint)
    if origin in (typing.Union, types.UnionType):
        return st.one_of(*(_strategy(arg) for arg in typing.get_args(hint)))
    base = origin or hint
    simple: dict[Any, st.SearchStrategy[Any]] = {
        type(None): st.none(),
        bool: st.booleans(),
        int: st.integers(-(2**53), 2**53),
        str: st.text(max_size=12),
        dict: st.dictionaries(st.text(max_size=5), json_value, max_size=3),
        list: st.lists(json_value, max_size=3),
    }
    return simple[base]


def _records(cls: type[Record]) -> st.SearchStrategy[Record]:
    hints = typing.get_type_hints(cls)
    fields = {f.name: _strategy(hints[f.name]) for f in dataclasses.fields(cls)}  # type: ignore[arg-type]
    return st.builds(cls, **fields)


any_record = st.sampled_from(sorted(RECORDS.values(), key=lambda c: c.KIND)).flatmap(_records)


@settings(max_examples=300, deadline=None)
@given(any_record, st.text(max_size=6), st.text(max_size=6))
def test_every_record_round_trips_through_encode_and_decode(record: Record, from_: str, to: str) -> None:
    frame = encode(record.message(from_, to))
    msg = decode(frame[_ipc.HEADER.size :])
    assert msg["from"] == from_ and msg["to"] == to
    assert decode_record(msg) == record
    assert decode_record(decode(_ipc.encode_packet(record.message(from_, to)))) == record


@settings(max_examples=200, deadline=None)
@given(
    st.sampled_from(["event", "shutdown", "shutdown_ack"]),
    st.one_of(st.sampled_from(sorted(RECORDS)), st.text(max_size=10)),
    st.dictionaries(st.text(max_size=8), json_value, max_size=4),
)
def test_a_random_message_is_handled_or_logged_never_raised(mtype: str, kind: str, fields: dict[str, Any]) -> None:
    seen: list[Record] = []
    table = Dispatcher("test")
    for cls in RECORDS.values():
        table.on(cls, seen.append)
    table.dispatch(message(mtype, "peer", "me", {**fields, "kind": kind}))
    assert len(seen) <= 1


def test_an_unknown_message_kind_is_logged_and_skipped_and_the_channel_goes_on(
    caplog: pytest.LogCaptureFixture,
) -> None:
    async def main() -> list[str]:
        left, right = socket.socketpair()
        a = Connection(*await asyncio.open_unix_connection(sock=left))
        b = Connection(*await asyncio.open_unix_connection(sock=right))
        got: list[str] = []

        def boom(_rec: SyncAck) -> None:
            raise RuntimeError("handler bug")

        table = Dispatcher("agent a").on(Sync, lambda rec: got.append(rec.id)).on(SyncAck, boom)
        a.send_record(Sync("1"), "orchestrator", "a")
        a.send(message("event", "orchestrator", "a", {"kind": "from_the_future", "x": 1}))
        a.send_record(Turn("t", {}), "orchestrator", "a")  # a real kind this table has no handler for
        a.send(message("event", "orchestrator", "a", {"kind": "sync", "id": 7}))  # wrong field type
        a.send(message("event", "orchestrator", "a", {"kind": "sync"}))  # missing field
        a.send_record(SyncAck("x"), "orchestrator", "a")  # its handler raises
        a.send_record(Sync("2"), "orchestrator", "a")
        a.close()
        while (msg := await b.recv()) is not None:
            await table.dispatch_async(msg)
        b.close()
        return got

    with caplog.at_level(logging.WARNING, logger="goondan.executors.process"):
        assert asyncio.run(main()) == ["1", "2"]
    text = caplog.text
    assert "unknown kind 'from_the_future'" in text and "unknown kind 'turn'" in text
    assert "field 'id' has the wrong type" in text and "field 'id' is missing" in text
    assert "handling a sync_ack message failed" in text and "handler bug" in text


def test_the_module_docstring_lists_every_message_kind_and_its_fields() -> None:
    doc = (_ipc.__doc__ or "").split("Messages (", 1)[1]
    for kind, cls in RECORDS.items():
        starts = [i for i in (doc.find(f"``{kind}`` {{"), doc.find(f"``{kind}`` (type")) if i >= 0]
        assert starts, f"{kind} is not documented with its fields"
        entry = doc[min(starts) : min(starts) + 200]
        for f in cls.FIELDS:
            assert f.wire in entry, (kind, f.wire)


@settings(max_examples=300, deadline=None)
@given(
    kind=st.sampled_from(["turn", "turn_done"]),
    payload=st.one_of(
        json_value,
        st.fixed_dictionaries(
            {}, optional={"ticket": json_value, "event": json_value, "result": json_value, "kind": json_value}
        ),
    ),
)
def test_the_written_out_turn_codecs_agree_with_the_generic_ones(kind: str, payload: Any) -> None:
    cls = RECORDS[kind]
    assert cls.from_payload is not Record.from_payload  # the written-out fast path is in use
    generic = Record.from_payload.__func__  # type: ignore[attr-defined]
    try:
        expected = generic(cls, payload)
    except _ipc.IpcError as exc:
        with pytest.raises(_ipc.IpcError) as raised:
            cls.from_payload(payload)
        assert str(raised.value) == str(exc)
        return
    got = cls.from_payload(payload)
    assert got == expected
    assert got.to_payload() == Record.to_payload(got)
