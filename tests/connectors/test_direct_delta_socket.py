"""The two ends of a direct stream on real sockets, in one event loop: the agent process's
:class:`DirectStreams` and the connector host's :class:`DeltaSocket` with a real
:class:`ConnectorContext` stream. Nothing is yielded to the loop between the agent's sends and the
reply where the test says so: what the host hands over then, it read itself before the reply."""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import os
import socket
from typing import Any

import pytest

from goondan.connectors._context import ConnectorContext, Reply, ReplyStream
from goondan.connectors._direct import DeltaSocket
from goondan.executors.process._direct_stream import MAX_DATAGRAM, DirectStreams


def context() -> ConnectorContext:
    return ConnectorContext(
        connection="hook", connector="webhook", config={}, secrets={}, send=lambda _e: None, on_ready=lambda: None
    )


def streamed(ctx: ConnectorContext) -> tuple[str, ReplyStream]:
    stream = ctx.stream({"name": "msg", "message": "hi", "instanceKey": "k"})
    event_id = next(i for i, s in ctx._streams.items() if s is stream)
    return event_id, stream


def delta(trace: str, text: str, step: int = 0) -> dict[str, Any]:
    return {"type": "text.delta", "traceId": trace, "stepIndex": step, "delta": text}


async def text_of(stream: ReplyStream) -> str:
    return "".join([d.text async for d in stream])


def ends() -> tuple[ConnectorContext, DeltaSocket, DirectStreams]:
    """A connector's context with its delta socket, and an agent process's end."""
    ctx = context()
    host = DeltaSocket.open(ctx)
    assert host is not None and host.address.startswith("@")
    return ctx, host, DirectStreams()


def test_a_direct_reply_is_handed_over_after_every_delta_sent_before_it_in_order() -> None:
    async def main() -> None:
        ctx, host, agent = ends()
        event_id, stream = streamed(ctx)
        turn = agent.begin({"address": host.address, "id": event_id}, "t1")
        pieces = [f"piece {i}, " for i in range(50)]
        for piece in pieces:
            agent.listener(delta("t1", piece))
        agent.listener(delta("t-other", "not this turn's"))
        assert await agent.end(turn, "t1")
        # no loop iteration since the sends: the host's reader has not run, the reply reads them first
        host.reply(event_id, Reply("whole"), direct=True)
        assert stream.reply.done()
        assert await text_of(stream) == "".join(pieces)
        agent.close()
        host.close()

    asyncio.run(main())


def test_a_direct_reply_waits_for_the_end_marker_or_for_the_connection_to_close() -> None:
    async def main() -> None:
        ctx, host, agent = ends()
        first, first_stream = streamed(ctx)
        turn = agent.begin({"address": host.address, "id": first}, "t1")
        agent.listener(delta("t1", "a"))
        host.reply(first, Reply("a"), direct=True)
        assert not first_stream.reply.done()  # held: its end marker has not come
        assert await agent.end(turn, "t1")
        await asyncio.sleep(0.05)
        assert first_stream.reply.done() and await text_of(first_stream) == "a"

        second, second_stream = streamed(ctx)
        agent.begin({"address": host.address, "id": second}, "t2")
        agent.listener(delta("t2", "b"))
        host.reply(second, Reply("b"), direct=True)
        assert not second_stream.reply.done()
        agent.close()  # the agent process is gone: nothing more comes on that connection
        await asyncio.sleep(0.05)
        assert second_stream.reply.done() and await text_of(second_stream) == "b"

        # not direct (the stream broke): handed over at once, with what arrived
        third, third_stream = streamed(ctx)
        host.reply(third, Reply("c"), direct=False)
        assert third_stream.reply.done()
        host.close()

    asyncio.run(main())


def test_a_large_delta_goes_in_datagrams_the_socket_takes_and_arrives_whole() -> None:
    async def main() -> None:
        ctx, host, agent = ends()
        event_id, stream = streamed(ctx)
        turn = agent.begin({"address": host.address, "id": event_id}, "t1")
        big = "가나다\u0001" * 60_000  # 3 bytes per syllable, 6 per escaped control char: ~900 KB of JSON
        assert len(big.encode()) > 4 * MAX_DATAGRAM
        agent.listener(delta("t1", big))
        assert await agent.end(turn, "t1")
        host.reply(event_id, Reply("big"), direct=True)
        assert await text_of(stream) == big
        agent.close()
        host.close()

    asyncio.run(main())


def test_a_backlog_the_socket_cannot_take_is_written_in_order_before_the_turn_ends() -> None:
    async def main() -> None:
        ctx, host, agent = ends()
        event_id, stream = streamed(ctx)
        turn = agent.begin({"address": host.address, "id": event_id}, "t1")
        pieces = [f"{i:05d}" + "x" * 4000 for i in range(2000)]  # 8 MB: far past the socket's buffer
        for piece in pieces:
            agent.listener(delta("t1", piece))
        link = turn.link
        assert link is not None and link._queue, "the socket took everything: no backlog to test"
        assert await agent.end(turn, "t1")  # the host reads while the agent waits for its backlog
        host.reply(event_id, Reply("done"), direct=True)
        assert stream.reply.done()
        assert await text_of(stream) == "".join(pieces)
        agent.close()
        host.close()

    asyncio.run(main())


def test_an_unreachable_address_reports_the_stream_broken_without_streaming(caplog: pytest.LogCaptureFixture) -> None:
    async def main() -> None:
        agent = DirectStreams()
        changes: list[bool] = []
        agent.on_change = lambda: changes.append(bool(agent.active))
        turn = agent.begin({"address": "@goondan-no-such-connector", "id": "1"}, "t1")
        assert not agent.active and changes == []  # the model call is not made to stream for nothing
        assert not await agent.end(turn, "t1")

    with caplog.at_level(logging.INFO, logger="goondan.executors.process"):
        asyncio.run(main())
    assert "cannot be opened" in caplog.text and "are not streamed" in caplog.text


def test_a_datagram_that_is_not_a_delta_is_skipped_and_the_connection_goes_on(
    caplog: pytest.LogCaptureFixture,
) -> None:
    async def main() -> None:
        ctx = context()
        host = DeltaSocket.open(ctx)
        assert host is not None
        event_id, stream = streamed(ctx)
        raw = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        raw.connect("\0" + host.address[1:])
        raw.send(b"not json")
        raw.send(b'["%s", 5, 0]' % event_id.encode())
        raw.send(b'["%s", "ok", 0]' % event_id.encode())
        raw.send(b'["%s"]' % event_id.encode())
        await asyncio.sleep(0.05)
        host.reply(event_id, Reply("ok"), direct=True)
        assert await text_of(stream) == "ok"
        raw.close()
        host.close()

    with caplog.at_level(logging.WARNING, logger="goondan.connectors"):
        asyncio.run(main())
    assert caplog.text.count("skipped a datagram that is not a delta") == 2


def test_a_connector_host_that_goes_away_drops_the_cached_link_and_a_restarted_one_is_reached_anew() -> None:
    async def main() -> None:
        ctx, host, agent = ends()
        event_id, stream = streamed(ctx)
        turn = agent.begin({"address": host.address, "id": event_id}, "t1")
        agent.listener(delta("t1", "a"))
        assert await agent.end(turn, "t1")
        host.reply(event_id, Reply("a"), direct=True)
        assert await text_of(stream) == "a"
        assert len(agent._links) == 1
        host.close()  # the connector host stopped (or was restarted: it gets a new address)
        await asyncio.sleep(0.05)
        assert agent._links == {}, "a link to a closed host stayed cached"
        again = DeltaSocket.open(ctx)
        assert again is not None and again.address != host.address
        event_id, stream = streamed(ctx)
        turn = agent.begin({"address": again.address, "id": event_id}, "t2")
        agent.listener(delta("t2", "b"))
        assert await agent.end(turn, "t2")
        again.reply(event_id, Reply("b"), direct=True)
        assert await text_of(stream) == "b"
        agent.close()
        again.close()

    asyncio.run(main())


def test_another_users_process_cannot_write_into_a_stream() -> None:
    if os.getuid() != 0:
        pytest.skip("running a process as another user needs root")

    async def main() -> None:
        ctx, host, _agent = ends()
        event_id, stream = streamed(ctx)
        datagram = json.dumps([event_id, "injected", 0]).encode()
        pid = os.fork()
        if pid == 0:  # the intruder: another user, connecting to the abstract name anyone can see
            code = 1
            try:
                os.setuid(65534)
                intruder = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
                intruder.connect("\0" + host.address[1:])
                with contextlib.suppress(OSError):  # refused after the connect: what we want
                    intruder.send(datagram)
                code = 0
            finally:
                os._exit(code)
        assert os.waitpid(pid, 0)[1] == 0
        await asyncio.sleep(0.05)
        host.reply(event_id, Reply("mine"), direct=False)
        assert await text_of(stream) == ""  # nothing of the other user's reached the stream
        host.close()

    asyncio.run(main())
