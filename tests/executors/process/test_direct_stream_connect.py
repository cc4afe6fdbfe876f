"""An agent process reaches a connector host whose accept backlog is full for a moment (many agent
processes making their first streamed turn at once) by waiting briefly for room, instead of
streaming nothing to that turn's client; a backlog that stays full gives up after a bound."""

from __future__ import annotations

import asyncio
import socket
import subprocess
import sys
import threading
import time

from goondan.executors.process._direct_stream import CONNECT_WAIT_SECONDS, DirectStreams, decode


def _full_listener() -> tuple[socket.socket, str, list[socket.socket]]:
    """A SEQPACKET listener whose backlog is already full: one connection queued, none accepted."""
    name = f"goondan-test-backlog-{time.time_ns()}"
    srv = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    srv.bind("\0" + name)
    srv.listen(0)
    queued: list[socket.socket] = []
    while True:
        c = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        c.setblocking(False)
        try:
            c.connect("\0" + name)
        except BlockingIOError:
            c.close()
            return srv, "@" + name, queued
        queued.append(c)


def test_a_full_accept_backlog_is_waited_out_and_the_deltas_arrive() -> None:
    srv, address, queued = _full_listener()
    accepted: list[socket.socket] = []

    def accept_later() -> None:  # the connector host's loop gets to its accepts 0.2 s later
        time.sleep(0.2)
        for _ in range(len(queued) + 1):
            accepted.append(srv.accept()[0])

    acceptor = threading.Thread(target=accept_later, daemon=True)
    acceptor.start()

    async def main() -> bool:
        agent = DirectStreams()
        turn = agent.begin({"address": address, "id": "ev1"}, "t1")
        assert turn.ok
        agent.listener({"traceId": "t1", "delta": "hello", "stepIndex": 0})
        ok = await agent.end(turn, "t1")
        agent.close()
        return ok

    assert asyncio.run(main())
    acceptor.join(5)
    ours = accepted[-1]  # accepted in order: ours came after the ones that filled the backlog
    ours.settimeout(2)
    assert decode(ours.recv(65536)) == ("ev1", "hello", 0)
    assert decode(ours.recv(65536)) == ("ev1", None, 0)
    for s in [*queued, *accepted, srv]:
        s.close()


def test_a_backlog_that_stays_full_gives_up_after_the_bound() -> None:
    srv, address, queued = _full_listener()

    async def main() -> tuple[bool, bool]:
        agent = DirectStreams()
        started = time.monotonic()
        turn = agent.begin({"address": address, "id": "ev1"}, "t1")
        waited = time.monotonic() - started
        assert CONNECT_WAIT_SECONDS * 0.8 <= waited < CONNECT_WAIT_SECONDS + 2
        return turn.ok, await agent.end(turn, "t1")

    assert asyncio.run(main()) == (False, False)
    for s in [*queued, srv]:
        s.close()


NO_DESCRIPTORS = """\
import asyncio, os, resource
from goondan.executors.process._direct_stream import DirectStreams

async def main():
    sent = []
    agent = DirectStreams(sent.append)
    resource.setrlimit(resource.RLIMIT_NOFILE, (64, 64))
    held = []
    try:
        while True:
            held.append(os.open(os.devnull, os.O_RDONLY))
    except OSError:
        pass
    turn = agent.begin({"address": "@goondan-anything", "id": "ev1"}, "t1")  # socket() itself fails
    agent.listener({"traceId": "t1", "delta": "hello", "stepIndex": 0})
    print(turn.ok, await agent.end(turn, "t1"), sent)

asyncio.run(main())
"""


def test_no_file_descriptor_for_the_socket_falls_back_instead_of_failing_the_turn() -> None:
    """socket() failing (EMFILE) raised out of begin(), before the turn's try: the turn never
    answered and the run hung."""
    out = subprocess.run([sys.executable, "-c", NO_DESCRIPTORS], capture_output=True, text=True, timeout=30)
    assert out.returncode == 0, out.stderr
    assert (
        out.stdout.strip()
        == "False False [{'traceId': 't1', 'delta': 'hello', 'stepIndex': 0, 'directStream': 'fallback'}]"
    )
    assert "cannot be opened (OSError: [Errno 24] Too many open files)" in out.stderr
