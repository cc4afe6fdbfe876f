"""``ctx.stream(event)``: the connector side of a streamed reply, fed the way the host feeds it
(``connector_delta`` records, then ``connector_reply``), read by a real asyncio consumer."""

from __future__ import annotations

import asyncio
from typing import Any

from goondan.connectors import ConnectorContext, Reply, ReplyDelta
from goondan.executors.process._ipc import ConnectorEvent


def context(sent: list[ConnectorEvent]) -> ConnectorContext:
    return ConnectorContext(
        connection="c", connector="webhook", config={}, secrets={}, send=sent.append, on_ready=lambda: None
    )


EVENT: dict[str, Any] = {"name": "m", "message": {"type": "text", "text": "hi"}, "instanceKey": "k"}


def test_a_streamed_event_asks_for_deltas_and_a_plain_emit_does_not() -> None:
    async def main() -> None:
        sent: list[ConnectorEvent] = []
        ctx = context(sent)
        ctx.emit(EVENT)
        ctx.stream(EVENT)
        assert [(m.id, m.stream) for m in sent] == [("1", False), ("2", True)]
        ctx._delta("1", "ignored: event 1 did not ask", 0)
        ctx._resolve("1", Reply("whole", "text_response"))
        assert ctx._streams["2"]._buffer == []

    asyncio.run(main())


def test_deltas_come_in_order_then_the_iteration_ends_with_the_turn() -> None:
    async def main() -> None:
        sent: list[ConnectorEvent] = []
        ctx = context(sent)
        stream = ctx.stream(EVENT)
        got: list[ReplyDelta] = []

        async def consume() -> None:
            async for delta in stream:
                got.append(delta)

        reader = asyncio.create_task(consume())
        for piece in ("Hel", "lo"):
            ctx._delta("1", piece, 0)
            await asyncio.sleep(0)  # the consumer takes each piece as it comes
        ctx._delta("1", " world", 1)
        await asyncio.sleep(0)
        assert not reader.done()  # no reply yet: the stream stays open
        ctx._resolve("1", Reply("Hello world", "text_response"))
        await asyncio.wait_for(reader, 1)
        assert got == [ReplyDelta("Hel", 0), ReplyDelta("lo", 0), ReplyDelta(" world", 1)]
        assert (await stream.reply).text == "Hello world"

    asyncio.run(main())


def test_a_slow_consumer_gets_the_backlog_joined_per_step_not_one_object_per_token() -> None:
    async def main() -> None:
        ctx = context([])
        stream = ctx.stream(EVENT)
        for _ in range(10_000):
            ctx._delta("1", "ab", 0)
        for _ in range(3):
            ctx._delta("1", "c", 1)
        assert len(stream._buffer) == 2  # bounded by steps, whatever the number of tokens
        ctx._resolve("1", Reply("ccc", "text_response"))
        got = [delta async for delta in stream]
        assert got == [ReplyDelta("ab" * 10_000, 0), ReplyDelta("ccc", 1)]

    asyncio.run(main())


def test_a_closed_stream_drops_its_backlog_and_later_deltas_but_the_reply_still_resolves() -> None:
    async def main() -> None:
        ctx = context([])
        stream = ctx.stream(EVENT)
        ctx._delta("1", "x" * 1000, 0)
        stream.close()
        ctx._delta("1", "y" * 1000, 0)
        assert stream._buffer == []
        assert [d async for d in stream] == []
        ctx._resolve("1", Reply("done", "text_response"))
        assert (await stream.reply).text == "done"

    asyncio.run(main())


def test_a_connector_that_stops_ends_its_open_streams_with_E_CONNECTOR_STOPPED() -> None:
    async def main() -> None:
        ctx = context([])
        stream = ctx.stream(EVENT)
        ctx._delta("1", "part", 0)
        ctx._fail_pending("the connector stopped")
        got = [d async for d in stream]
        assert got == [ReplyDelta("part", 0)]
        reply = await stream.reply
        assert not reply.ok and reply.error is not None and reply.error["code"] == "E_CONNECTOR_STOPPED"

    asyncio.run(main())


def test_a_heartbeat_yields_an_empty_delta_after_silence_only() -> None:
    async def main() -> None:
        ctx = context([])
        stream = ctx.stream(EVENT)
        stream.heartbeat(0.05)
        loop = asyncio.get_running_loop()
        started = loop.time()
        beat = await asyncio.wait_for(anext(stream), 1)
        assert beat == ReplyDelta("", 0) and loop.time() - started >= 0.04
        # deltas closer together than the heartbeat: no empty delta among them
        got: list[ReplyDelta] = []
        for piece in ("a", "b", "c", "d"):
            ctx._delta("1", piece, 2)
            got.append(await asyncio.wait_for(anext(stream), 1))
            await asyncio.sleep(0.02)
        assert got == [ReplyDelta(p, 2) for p in "abcd"]
        assert await asyncio.wait_for(anext(stream), 1) == ReplyDelta("", 2)  # silent again
        ctx._resolve("1", Reply("abcd", "text_response"))
        assert [d async for d in stream] == []
        await asyncio.sleep(0)  # the reply's done callbacks run
        assert stream._timer is None  # the turn ended: no timer left behind

    asyncio.run(main())


def test_write_through_takes_the_first_delta_of_a_loop_iteration_and_the_consumer_joins_the_rest() -> None:
    async def main() -> None:
        ctx = context([])
        stream = ctx.stream(EVENT)
        written: list[ReplyDelta] = []
        stream.write_through(lambda delta: written.append(delta) is None)
        got: list[ReplyDelta] = []

        async def consume() -> None:
            async for delta in stream:
                got.append(delta)

        reader = asyncio.create_task(consume())
        await asyncio.sleep(0)  # the consumer waits with nothing pending
        for piece in ("a", "b", "c"):  # a burst: frames read off the channel together
            ctx._delta("1", piece, 0)
        assert written == [ReplyDelta("a", 0)]  # at once, in the delivering callback
        await asyncio.sleep(0)
        await asyncio.sleep(0)
        assert got == [ReplyDelta("bc", 0)]  # the rest of the burst: one piece, after the first
        ctx._delta("1", "d", 1)  # a later iteration, the consumer waiting again: straight through
        assert written == [ReplyDelta("a", 0), ReplyDelta("d", 1)]
        ctx._resolve("1", Reply("abcd", "text_response"))
        await asyncio.wait_for(reader, 1)
        assert got == [ReplyDelta("bc", 0)]

    asyncio.run(main())


def test_a_delta_the_writer_cannot_take_now_is_buffered_for_the_consumer_in_order() -> None:
    async def main() -> None:
        ctx = context([])
        stream = ctx.stream(EVENT)
        stream.write_through(lambda delta: False)  # a slow client: flow control paused
        got: list[ReplyDelta] = []

        async def consume() -> None:
            async for delta in stream:
                got.append(delta)

        reader = asyncio.create_task(consume())
        await asyncio.sleep(0)
        ctx._delta("1", "x", 0)
        await asyncio.sleep(0)
        ctx._delta("1", "y", 0)
        ctx._resolve("1", Reply("xy", "text_response"))
        await asyncio.wait_for(reader, 1)
        assert got == [ReplyDelta("x", 0), ReplyDelta("y", 0)]

    asyncio.run(main())
