"""The connectors' HTTP server on 127.0.0.1: the request subset it accepts and what it refuses."""

from __future__ import annotations

import asyncio
import socket
from collections.abc import AsyncIterator

import pytest

from goondan.connectors import HttpRequest, HttpResponse, serve_http


async def _exchange(port: int, raw: bytes) -> bytes:
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    writer.write(raw)
    await writer.drain()
    writer.write_eof()  # a half-closed client still gets its answer
    data = await reader.read()
    writer.close()
    return data


def test_server_parses_requests_and_refuses_what_it_cannot_read_safely() -> None:
    seen: list[HttpRequest] = []

    async def handler(req: HttpRequest) -> HttpResponse:
        seen.append(req)
        if req.path == "/boom":
            raise RuntimeError("handler bug")
        return HttpResponse.json(200, {"path": req.path, "q": req.query, "len": len(req.body)})

    async def main() -> list[bytes]:
        server = await serve_http(handler, "127.0.0.1", 0)
        port = server.sockets[0].getsockname()[1]
        async with server:
            return [
                await _exchange(port, b"POST /a?x=1 HTTP/1.1\r\nHost: h\r\nContent-Length: 3\r\nX-Thing: v\r\n\r\nabc"),
                await _exchange(port, b"garbage\r\n\r\n"),
                await _exchange(
                    port, b"POST /c HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n0\r\n\r\n"
                ),
                await _exchange(port, b"POST / HTTP/1.1\r\nHost: h\r\nContent-Length: 99999999\r\n\r\n"),
                await _exchange(port, b"POST / HTTP/1.1\r\nHost: h\r\nContent-Length: x\r\n\r\n"),
                await _exchange(port, b"GET /boom HTTP/1.1\r\nHost: h\r\n\r\n"),
                await _exchange(port, b"GET / HTTP/1.1\r\n\r\n"),
            ]

    ok, bad_line, chunked, huge, bad_len, boom, no_host = asyncio.run(main())
    assert ok.startswith(b"HTTP/1.1 200 OK") and b'"path": "/a"' in ok and b'"len": 3' in ok
    assert seen[0].header("X-THING") == "v" and seen[0].query == {"x": ["1"]}
    assert bad_line.startswith(b"HTTP/1.1 400")
    assert chunked.startswith(b"HTTP/1.1 200") and b'"len": 3' in chunked  # chunked bodies are read
    assert huge.startswith(b"HTTP/1.1 413")
    assert bad_len.startswith(b"HTTP/1.1 400")
    assert boom.startswith(b"HTTP/1.1 500") and b"handler bug" not in boom  # no internals leak out
    assert no_host.startswith(b"HTTP/1.1 400")  # HTTP/1.1 requires Host (RFC 9112 3.2)
    assert len(seen) == 3  # rejected requests never reach the handler


def test_port_in_use_is_an_error_at_start() -> None:
    async def handler(req: HttpRequest) -> HttpResponse:
        return HttpResponse.text(200, "x")

    with socket.socket() as blocker:
        blocker.bind(("127.0.0.1", 0))
        blocker.listen()
        port = blocker.getsockname()[1]
        with pytest.raises(OSError):
            asyncio.run(serve_http(handler, "127.0.0.1", port))


def test_without_uvicorn_a_webhook_connector_fails_with_what_to_install(monkeypatch: pytest.MonkeyPatch) -> None:
    import sys

    from goondan.errors import GoondanError

    async def handler(req: HttpRequest) -> HttpResponse:
        return HttpResponse.text(200, "x")

    monkeypatch.setitem(sys.modules, "uvicorn", None)  # what an environment without it looks like
    with pytest.raises(GoondanError) as info:
        asyncio.run(serve_http(handler, "127.0.0.1", 0))
    assert info.value.code == "E_CONNECTOR_DEPENDENCY" and "uvicorn" in (info.value.suggestion or "")


def test_closing_lets_a_request_in_flight_finish_then_frees_the_port() -> None:
    async def handler(req: HttpRequest) -> HttpResponse:
        await asyncio.sleep(0.3)
        return HttpResponse.text(200, "finished")

    async def main() -> tuple[bytes, float]:
        server = await serve_http(handler, "127.0.0.1", 0)
        port = server.port
        in_flight = asyncio.create_task(_exchange(port, b"GET / HTTP/1.1\r\nHost: h\r\n\r\n"))
        await asyncio.sleep(0.1)  # the request is being handled
        started = asyncio.get_running_loop().time()
        async with server:
            pass  # leaving the block stops the server
        stopped_after = asyncio.get_running_loop().time() - started
        with pytest.raises(OSError):
            await asyncio.open_connection("127.0.0.1", port)
        return await in_flight, stopped_after

    answer, stopped_after = asyncio.run(main())
    assert answer.startswith(b"HTTP/1.1 200") and answer.endswith(b"finished")
    assert stopped_after < 2.0  # within the shutdown grace, not the keep-alive or read timeouts


def test_the_direct_body_writer_frames_a_chunk_exactly_as_h11s_own_writers_do() -> None:
    from h11._writers import ChunkedWriter, Http10Writer

    from goondan.connectors._http_protocol import _FRAMING

    assert set(_FRAMING) == {ChunkedWriter, Http10Writer}
    for chunk in (b"x", b'event: delta\ndata: {"text":"hi","step":0}\n\n', b"\xff" * 70_000):
        for writer, framing in _FRAMING.items():
            out: list[bytes] = []
            writer().send_data(chunk, out.append)
            assert framing(chunk) == b"".join(out), writer


def test_a_streamed_answer_goes_out_on_a_socket_without_nagle_delay() -> None:
    """TCP_NODELAY on the accepted socket: with Nagle's algorithm a small SSE event written while
    the previous one is unacknowledged waits for the client's delayed ACK (up to 40 ms)."""

    async def main() -> None:
        async def events() -> AsyncIterator[bytes]:
            yield b"event: delta\ndata: {}\n\n"
            await asyncio.sleep(5)

        async def handler(req: HttpRequest) -> HttpResponse:
            return HttpResponse.event_stream(events())

        server = await serve_http(handler, "127.0.0.1", 0)
        async with server:
            reader, writer = await asyncio.open_connection("127.0.0.1", server.port)
            writer.write(b"POST / HTTP/1.1\r\nHost: t\r\nContent-Length: 0\r\n\r\n")
            data = b""
            while b"event: delta" not in data:
                data += await asyncio.wait_for(reader.read(65536), 10)
            (protocol,) = server._server.server_state.connections
            accepted = protocol.transport.get_extra_info("socket")
            assert accepted.getsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY) != 0
            writer.close()

    asyncio.run(main())
