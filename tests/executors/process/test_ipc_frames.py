"""The IPC framing survives frames above the limit and frames that are not messages: the bad frame
is refused (sender) or skipped (reader), and every later frame on the same stream arrives."""

from __future__ import annotations

import asyncio
import socket
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from goondan.executors.process import _ipc
from goondan.executors.process._ipc import HEADER, Connection, FrameChannel, FrameTooLarge, IpcError, encode, message

LIMIT = 4096


@pytest.fixture(autouse=True)
def small_limit(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(_ipc, "MAX_FRAME", LIMIT)


def test_a_message_above_the_limit_is_refused_by_the_sender_and_the_stream_goes_on() -> None:
    async def main() -> list[Any]:
        left, right = socket.socketpair()
        a = Connection(*await asyncio.open_unix_connection(sock=left))
        b = Connection(*await asyncio.open_unix_connection(sock=right))
        assert a.send(message("event", "a", "orchestrator", {"kind": "x", "n": 1}))
        with pytest.raises(FrameTooLarge) as info:
            a.send(message("event", "a", "orchestrator", {"kind": "turn_done", "text": "y" * LIMIT}))
        assert info.value.kind == "turn_done" and info.value.limit == LIMIT
        assert a.send(message("event", "a", "orchestrator", {"kind": "x", "n": 2}))
        a.close()
        got = []
        while (msg := await b.recv()) is not None:
            got.append(msg["payload"]["n"])
        b.close()
        return got

    assert asyncio.run(main()) == [1, 2]


Frame = tuple[str, int]  # ("ok", n) a valid message; ("big", size) an oversized frame; ("junk", size) not JSON

FRAMES = st.lists(
    st.one_of(
        st.tuples(st.just("ok"), st.integers(0, 100)),
        st.tuples(st.just("big"), st.integers(LIMIT + 1, 3 * LIMIT)),
        st.tuples(st.just("junk"), st.integers(0, 64)),
    ),
    max_size=12,
)


def _raw(frames: list[Frame]) -> bytes:
    raw = b""
    for kind, n in frames:
        if kind == "ok":
            raw += encode(message("event", "a", "b", {"n": n}))
        elif kind == "big":
            raw += HEADER.pack(n) + b"x" * n
        else:
            raw += HEADER.pack(n) + b"\xff" * n
    return raw


@settings(max_examples=60, deadline=None)
@given(FRAMES)
def test_the_reader_skips_oversized_and_malformed_frames_and_keeps_every_valid_one(frames: list[Frame]) -> None:
    raw = _raw(frames)

    async def main() -> list[Frame]:
        reader = asyncio.StreamReader()
        reader.feed_data(raw)
        reader.feed_eof()
        got: list[Frame] = []
        while True:
            try:
                msg = await _ipc.read_message(reader)
            except FrameTooLarge as exc:
                got.append(("big", exc.size))
                continue
            except IpcError:
                got.append(("junk", -1))
                continue
            if msg is None:
                return got
            got.append(("ok", msg["payload"]["n"]))

    expected = [(k, n if k != "junk" else -1) for k, n in frames]
    assert asyncio.run(main()) == expected


def test_a_truncated_oversized_frame_is_end_of_stream() -> None:
    async def main() -> Any:
        reader = asyncio.StreamReader()
        reader.feed_data(HEADER.pack(LIMIT * 2) + b"x" * 10)
        reader.feed_eof()
        return await _ipc.read_message(reader)

    assert asyncio.run(main()) is None


@settings(max_examples=40, deadline=None)
@given(st.lists(st.booleans(), min_size=1, max_size=12))
def test_deferred_messages_keep_the_stream_order_and_a_burst_goes_out_in_one_write(deferred: list[bool]) -> None:
    """An agent process defers its runtime events: whatever mix of deferred and sent messages, the
    peer reads them in the order they were given, and deferred ones of one loop iteration (with the
    send that ends the burst) reach the socket in a single write, which wakes the peer once."""

    async def main() -> tuple[list[int], int]:
        left, right = socket.socketpair()
        a = Connection(*await asyncio.open_unix_connection(sock=left))
        b = Connection(*await asyncio.open_unix_connection(sock=right))
        writes: list[bytes] = []
        real_write = a.writer.write
        a.writer.write = lambda data: (writes.append(bytes(data)), real_write(data))[1]  # type: ignore[method-assign]
        for n, defer in enumerate(deferred):
            msg = message("event", "a", "orchestrator", {"kind": "x", "n": n})
            assert (a.defer if defer else a.send)(msg)
        await asyncio.sleep(0)  # the end of this iteration flushes what is still deferred
        a.close()
        got = []
        while (msg := await b.recv()) is not None:
            got.append(msg["payload"]["n"])
        b.close()
        return got, len(writes)

    got, writes = asyncio.run(main())
    assert got == list(range(len(deferred)))
    # one write per plain send (carrying the deferred ones before it) plus one for a deferred tail
    tail = 1 if deferred[-1] else 0
    assert writes == deferred.count(False) + tail


@settings(max_examples=80, deadline=None)
@given(FRAMES, st.lists(st.integers(1, 2 * LIMIT), max_size=30))
def test_the_frame_channel_yields_each_valid_message_once_in_order_however_the_reads_cut_the_stream(
    frames: list[Frame], cuts: list[int]
) -> None:
    """The agent channel's reader (``FrameChannel``) parses frames in the transport's read callback:
    whatever sizes the reads have, it keeps step past oversized and malformed frames."""
    raw = _raw(frames)

    async def main() -> list[Frame]:
        channel = FrameChannel()
        proto = _ipc._FrameProtocol(channel)
        pos = 0
        for size in cuts:  # reads of these sizes, then the rest in one
            proto.data_received(raw[pos : pos + size])
            pos += size
        proto.data_received(raw[pos:])
        proto.eof_received()
        got: list[Frame] = []

        def bad(exc: IpcError) -> None:
            got.append(("big", exc.size) if isinstance(exc, FrameTooLarge) else ("junk", -1))

        await channel.serve(lambda msg: got.append(("ok", msg["payload"]["n"])), bad)
        return got

    assert asyncio.run(main()) == [(k, n if k != "junk" else -1) for k, n in frames]
