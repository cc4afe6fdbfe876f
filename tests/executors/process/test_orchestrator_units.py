"""The IPC wire format and the backoff formula (digest §2.2–2.3)."""

from __future__ import annotations

import asyncio
import socket

import pytest

from goondan.executors.process import MESSAGE_TYPES, STATUSES, ManualClock, backoff_ms
from goondan.executors.process._ipc import HEADER, Connection, IpcError, decode, encode, message


def test_ipc_has_exactly_three_message_types_and_seven_statuses() -> None:
    assert MESSAGE_TYPES == ("event", "shutdown", "shutdown_ack")
    assert set(STATUSES) == {"spawning", "idle", "processing", "draining", "terminated", "crashed", "crashLoopBackOff"}
    with pytest.raises(IpcError):
        message("ready", "a", "orchestrator", {})


def test_frames_are_length_prefixed_json_and_arrive_in_order() -> None:
    frame = encode(message("shutdown", "orchestrator", "a", {"gracePeriodMs": 30000, "reason": "restart"}))
    (size,) = HEADER.unpack(frame[:4])
    assert size == len(frame) - 4
    assert decode(frame[4:]) == {
        "type": "shutdown",
        "from": "orchestrator",
        "to": "a",
        "payload": {"gracePeriodMs": 30000, "reason": "restart"},
    }
    with pytest.raises(IpcError):
        decode(b'{"type": "hello"}')

    async def roundtrip() -> list[object]:
        left, right = socket.socketpair()
        r1, w1 = await asyncio.open_unix_connection(sock=left)
        r2, w2 = await asyncio.open_unix_connection(sock=right)
        a, b = Connection(r1, w1), Connection(r2, w2)
        for i in range(200):
            assert a.send(message("event", "a", "orchestrator", {"n": i, "text": "é" * i}))
        a.close()
        got = []
        while (msg := await b.recv()) is not None:
            got.append(msg["payload"]["n"])
        b.close()
        return got

    assert asyncio.run(roundtrip()) == list(range(200))


def test_backoff_doubles_from_the_threshold_and_is_capped() -> None:
    assert [backoff_ms(c, 5, 1000, 300000) for c in (6, 7, 8, 9)] == [1000, 2000, 4000, 8000]
    assert backoff_ms(30, 5, 1000, 300000) == 300000
    assert [backoff_ms(c, 2, 500, 300000) for c in (3, 4, 5)] == [500, 1000, 2000]


def test_manual_clock_wakes_sleepers_only_when_advanced() -> None:
    async def main() -> list[str]:
        clock = ManualClock()
        order: list[str] = []

        async def sleeper(name: str, ms: float) -> None:
            await clock.sleep_ms(ms)
            order.append(name)

        tasks = [asyncio.ensure_future(sleeper("late", 300)), asyncio.ensure_future(sleeper("early", 100))]
        await asyncio.sleep(0)
        await clock.advance(99)
        assert order == []
        await clock.advance(1)
        assert order == ["early"]
        await clock.advance(200)
        await asyncio.gather(*tasks)
        return order

    assert asyncio.run(main()) == ["early", "late"]
