"""The webhook server keeps answering well-behaved clients quickly while hostile ones hammer it.

Real sockets on 127.0.0.1: the server runs on its own event loop (as in a connector host), the
attackers on another, a good client (httpx, keep-alive) in the test thread. Slow-loris clients send
a header a byte at a time, uploaders push bodies far over the limit (with Content-Length and
chunked), others send garbage. The good client's latency is measured before and during the attack;
the figures are printed (``pytest -s``) and bounded loosely enough for a shared CI machine.
"""

from __future__ import annotations

import asyncio
import os
import socket
import statistics
import threading
import time
from collections import Counter

import httpx
from cn_testkit import echo_server

ATTACK_SECONDS = 4.0
READ_TIMEOUT = 1.5


async def _status_of(reader: asyncio.StreamReader) -> int | None:
    try:
        line = await asyncio.wait_for(reader.readline(), 5)
    except (TimeoutError, ConnectionError, OSError):
        return None
    return int(line[9:12]) if line.startswith(b"HTTP/1.1 ") and line[9:12].isdigit() else None


async def _slow_loris(port: int, stop: asyncio.Event, seen: Counter[int | None]) -> None:
    while not stop.is_set():
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        try:
            writer.write(b"POST / HTTP/1.1\r\nHost: x\r\nX-Slow: ")
            while not stop.is_set() and not reader.at_eof():
                writer.write(b"a")  # a byte every 0.2 s: never a whole header
                await writer.drain()
                try:
                    seen[await asyncio.wait_for(_status_of(reader), 0.2)] += 1
                    break
                except TimeoutError:
                    continue
        except (ConnectionError, OSError):
            seen[None] += 1
        finally:
            writer.close()


async def _uploader(port: int, stop: asyncio.Event, seen: Counter[int | None], chunked: bool) -> None:
    chunk = os.urandom(64 * 1024)
    while not stop.is_set():
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        head = "Transfer-Encoding: chunked" if chunked else f"Content-Length: {50 << 20}"
        writer.write(f"POST / HTTP/1.1\r\nHost: x\r\n{head}\r\n\r\n".encode())
        answer = asyncio.create_task(_status_of(reader))  # read while sending, as curl does
        try:
            for _ in range(200):  # up to 12.5 MB, as fast as the server takes it
                if answer.done():
                    break
                writer.write(b"10000\r\n" + chunk + b"\r\n" if chunked else chunk)
                await writer.drain()
        except (ConnectionError, OSError):
            pass
        seen[await answer] += 1
        writer.close()


async def _garbage(port: int, stop: asyncio.Event, seen: Counter[int | None]) -> None:
    while not stop.is_set():
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        try:
            writer.write(os.urandom(300) + b"\r\n\r\n")
            await writer.drain()
            seen[await _status_of(reader)] += 1
        except (ConnectionError, OSError):
            seen[None] += 1
        finally:
            writer.close()


def _attack(port: int, stop: threading.Event, seen: Counter[int | None]) -> None:
    async def main() -> None:
        done = asyncio.Event()
        tasks = [asyncio.create_task(_slow_loris(port, done, seen)) for _ in range(30)]
        tasks += [asyncio.create_task(_uploader(port, done, seen, chunked=i % 2 == 1)) for i in range(4)]
        tasks += [asyncio.create_task(_garbage(port, done, seen)) for _ in range(3)]
        while not stop.is_set():
            await asyncio.sleep(0.05)
        done.set()
        await asyncio.wait(tasks, timeout=5)
        for task in tasks:
            task.cancel()

    asyncio.run(main())


def _client() -> httpx.Client:
    # a well-behaved client: keep-alive, and no Nagle delay between its head and body writes
    nodelay = [(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)]
    return httpx.Client(transport=httpx.HTTPTransport(socket_options=nodelay), trust_env=False, timeout=5)


def _latencies(client: httpx.Client, url: str, count: int) -> list[float]:
    out = []
    for i in range(count):
        body = b"x" * (1000 + i)
        started = time.perf_counter()
        resp = client.post(url, content=body)
        out.append(time.perf_counter() - started)
        assert resp.status_code == 200 and resp.json() == {"path": "/good", "len": len(body)}
    return out


def _summary(values: list[float]) -> str:
    ordered = sorted(values)
    p99 = ordered[int(len(ordered) * 0.99) - 1]
    return f"p50 {statistics.median(ordered) * 1000:.2f} ms, p99 {p99 * 1000:.2f} ms, max {ordered[-1] * 1000:.2f} ms"


def test_slow_oversized_and_malformed_clients_do_not_slow_down_well_behaved_ones() -> None:
    with echo_server(read_timeout=READ_TIMEOUT) as port, _client() as client:
        url = f"http://127.0.0.1:{port}/good"
        baseline = _latencies(client, url, 100)
        stop = threading.Event()
        seen: Counter[int | None] = Counter()
        attackers = threading.Thread(target=_attack, args=(port, stop, seen), daemon=True)
        attackers.start()
        time.sleep(0.5)  # the attackers are connected and sending
        under_attack: list[float] = []
        deadline = time.monotonic() + ATTACK_SECONDS
        while time.monotonic() < deadline:
            under_attack += _latencies(client, url, 20)
        stop.set()
        attackers.join(10)
    print(f"\nbaseline ({len(baseline)} requests): {_summary(baseline)}")
    print(f"under attack ({len(under_attack)} requests): {_summary(under_attack)}")
    print(f"attackers' answers: {dict(seen)}")
    # the attack happened and was refused the way the limits say
    assert seen[408] >= 30, seen  # every slow-loris connection timed out at least once
    assert seen[413] >= 4, seen  # every uploader was cut off at the body limit
    assert seen[400] >= 3, seen  # garbage got 400s
    # good clients were served all along, and fast
    assert len(under_attack) >= 100
    assert statistics.median(under_attack) < 0.1
    assert max(under_attack) < 2.0
