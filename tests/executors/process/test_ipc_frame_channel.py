"""The agent channel (``FrameChannel``) hands each message to its handler in the transport's read
callback, keeps going when a handler raises, and queues frames above the socket buffer without
blocking (its framing under every cut of the stream into reads: ``test_ipc_frames``)."""

from __future__ import annotations

import asyncio
import socket
from typing import Any

import pytest

from goondan.executors.process import _ipc
from goondan.executors.process._ipc import HEADER, FrameChannel, message

LIMIT = 4096


@pytest.fixture(autouse=True)
def small_limit(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(_ipc, "MAX_FRAME", LIMIT)


def test_serve_hands_over_earlier_messages_first_then_each_one_in_the_read_callback() -> None:
    """Messages that came before ``serve`` are handled first, in order; later ones are handled by
    the time the transport's read callback returns (no loop iteration in between)."""

    async def main() -> tuple[list[int], list[int], list[str]]:
        left, right = socket.socketpair()
        a = await FrameChannel.open(left)
        b = await FrameChannel.open(right)
        for n in range(3):
            assert a.send(message("event", "a", "b", {"kind": "x", "n": n}))
        while b.received < 3:
            await asyncio.sleep(0.001)
        got: list[int] = []
        errors: list[str] = []
        serving = asyncio.get_running_loop().create_task(
            b.serve(lambda msg: got.append(msg["payload"]["n"]), lambda exc: errors.append(type(exc).__name__))
        )
        await asyncio.sleep(0)
        before = list(got)
        assert a.send(message("event", "a", "b", {"kind": "x", "n": 3}))
        left_raw = socket.socket(fileno=left.fileno())  # the same socket: write a bad frame on it
        try:
            left_raw.sendall(HEADER.pack(2) + b"{]")
        finally:
            left_raw.detach()
        assert a.send(message("event", "a", "b", {"kind": "x", "n": 4}))
        a.close()
        await asyncio.wait_for(serving, 5)
        b.close()
        return before, got, errors

    before, got, errors = asyncio.run(main())
    assert before == [0, 1, 2]
    assert got == [0, 1, 2, 3, 4]
    assert errors == ["IpcError"]


def test_a_handler_that_raises_does_not_end_the_channel() -> None:
    async def main() -> list[Any]:
        left, right = socket.socketpair()
        a = await FrameChannel.open(left)
        b = await FrameChannel.open(right)
        got: list[Any] = []

        def handler(msg: dict[str, Any]) -> None:
            got.append(msg["payload"]["n"])
            if msg["payload"]["n"] == 0:
                raise RuntimeError("boom")

        serving = asyncio.get_running_loop().create_task(b.serve(handler, lambda exc: None))
        for n in range(3):
            assert a.send(message("event", "a", "b", {"kind": "x", "n": n}))
            await asyncio.sleep(0.01)
        # and the channel still writes the other way
        assert b.send(message("event", "b", "a", {"kind": "x", "n": 9}))
        reply = await asyncio.wait_for(a.recv(), 5)
        a.close()
        await asyncio.wait_for(serving, 5)
        b.close()
        return [*got, reply["payload"]["n"] if reply else None]

    assert asyncio.run(main()) == [0, 1, 2, 9]


def test_a_frame_larger_than_the_socket_buffer_arrives_whole_and_drain_waits_for_the_peer() -> None:
    """Backpressure: a frame far above the socket buffer is queued on the transport (``send`` never
    blocks), ``drain`` returns once the peer has read enough of it, and the frame arrives intact."""

    async def main() -> int:
        left, right = socket.socketpair()
        a = await FrameChannel.open(left)
        b = await FrameChannel.open(right)
        text = "y" * (LIMIT - 200)
        for _ in range(200):  # ~0.8 MiB queued in one go, far above a Unix socket's buffer
            assert a.send(message("event", "a", "b", {"kind": "x", "text": text}))
        drained = asyncio.get_running_loop().create_task(a.drain())
        count = 0
        while count < 200:
            msg = await asyncio.wait_for(b.recv(), 5)
            assert msg is not None and msg["payload"]["text"] == text
            count += 1
        await asyncio.wait_for(drained, 5)
        a.close()
        assert await b.recv() is None
        b.close()
        return count

    assert asyncio.run(main()) == 200


def test_a_frame_channel_over_tcp_carries_messages_both_ways() -> None:
    """Ray actors on other machines reach the orchestrator over TCP: the same channel, the same
    framing (a real socket pair on 127.0.0.1)."""

    async def main() -> tuple[Any, Any]:
        server = socket.create_server(("127.0.0.1", 0))
        client = socket.create_connection(server.getsockname())
        accepted, _ = server.accept()
        server.close()
        client.setblocking(False)
        accepted.setblocking(False)
        a = await FrameChannel.open(client)
        b = await FrameChannel.open(accepted)
        assert a.send(message("event", "a", "b", {"kind": "x", "n": 1}))
        assert b.send(message("event", "b", "a", {"kind": "x", "n": 2}))
        got_b = await asyncio.wait_for(b.recv(), 5)
        got_a = await asyncio.wait_for(a.recv(), 5)
        a.close()
        assert await asyncio.wait_for(b.recv(), 5) is None
        b.close()
        return got_a, got_b

    got_a, got_b = asyncio.run(main())
    assert got_a is not None and got_a["payload"]["n"] == 2
    assert got_b is not None and got_b["payload"]["n"] == 1
