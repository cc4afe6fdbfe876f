"""A PostgreSQL server that stops answering (a host that drops packets, a hung server) fails the
store's operations in about the connect timeout once, then at once while that failure is
remembered, instead of each waiting the whole ``pool_timeout`` (10 s); the store works again on its
own once the server answers. A real TCP relay on 127.0.0.1 in front of a real server: it forwards,
or it accepts connections and never says anything (and cuts the ones it was forwarding)."""

from __future__ import annotations

import contextlib
import socket
import threading
import time
from collections.abc import Iterator

import pytest

from goondan.errors import GoondanError
from goondan.storage import open_store


class Relay:
    """``127.0.0.1:port`` -> the server, until :meth:`hang`; :meth:`forward` resumes."""

    def __init__(self, upstream: tuple[str, int]) -> None:
        self.upstream = upstream
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.port = int(self.listener.getsockname()[1])
        self.hanging = False
        self.open: list[socket.socket] = []
        self.lock = threading.Lock()
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while True:
            try:
                client, _ = self.listener.accept()
            except OSError:
                return
            with self.lock:
                self.open.append(client)
                if self.hanging:
                    continue  # held open, never answered: a connect that times out
            server = socket.create_connection(self.upstream)
            with self.lock:
                self.open.append(server)
            for a, b in ((client, server), (server, client)):
                threading.Thread(target=self._pump, args=(a, b), daemon=True).start()

    @staticmethod
    def _pump(src: socket.socket, dst: socket.socket) -> None:
        with contextlib.suppress(OSError):
            while data := src.recv(65536):
                dst.sendall(data)
        for s in (src, dst):
            with contextlib.suppress(OSError):
                s.shutdown(socket.SHUT_RDWR)

    def hang(self) -> None:
        with self.lock:
            self.hanging = True
            cut, self.open = self.open, []
        for s in cut:
            with contextlib.suppress(OSError):
                s.shutdown(socket.SHUT_RDWR)

    def forward(self) -> None:
        with self.lock:
            self.hanging = False

    def close(self) -> None:
        self.hang()
        self.listener.close()


@pytest.fixture
def relay(postgres_url: str) -> Iterator[tuple[Relay, str]]:
    host_port, database = postgres_url.split("@", 1)[1].split("/", 1)
    host, port = host_port.rsplit(":", 1)
    r = Relay((host, int(port)))
    try:
        yield r, f"{postgres_url.split('@', 1)[0]}@127.0.0.1:{r.port}/{database}"
    finally:
        r.close()


def _timed_failure(backend: object) -> tuple[float, str]:
    started = time.monotonic()
    with pytest.raises(GoondanError) as info:
        backend.list_workspaces()  # type: ignore[attr-defined]
    return time.monotonic() - started, info.value.code


def test_a_server_that_stops_answering_fails_in_the_connect_timeout_then_at_once_and_recovers(
    relay: tuple[Relay, str],
) -> None:
    proxy, url = relay  # the default pool_timeout: 10 s
    backend = open_store(url, state_root="/nonexistent")
    try:
        assert backend.list_workspaces() == []
        proxy.hang()
        first, code = _timed_failure(backend)
        assert code == "E_STORE_UNAVAILABLE"
        assert first < 4, first  # half a second for the pool, 2 s to connect directly; was 10 s
        rest = [_timed_failure(backend) for _ in range(5)]
        assert all(code == "E_STORE_UNAVAILABLE" and took < 0.2 for took, code in rest), rest  # remembered
        proxy.forward()
        deadline = time.monotonic() + 15
        while True:
            try:
                assert backend.list_workspaces() == []
                break
            except GoondanError:
                assert time.monotonic() < deadline, "the store did not come back"
                time.sleep(0.2)
    finally:
        backend.close()


def test_a_busy_pool_is_waited_for_and_not_taken_for_a_server_that_is_down(postgres_url: str) -> None:
    backend = open_store(postgres_url + "?pool_size=1", state_root="/nonexistent")
    db = backend._db  # type: ignore[attr-defined]
    held = threading.Event()

    def hold() -> None:
        with db.connection("hold the only connection") as conn:
            held.set()
            conn.execute("SELECT pg_sleep(1.5)")

    try:
        holder = threading.Thread(target=hold)
        holder.start()
        assert held.wait(10)
        started = time.monotonic()
        results = []
        waiters = [threading.Thread(target=lambda: results.append(backend.list_workspaces())) for _ in range(4)]
        for t in waiters:
            t.start()
        for t in [holder, *waiters]:
            t.join(30)
        # each waited past the half second after which the server is asked directly, and got through
        assert results == [[]] * 4 and time.monotonic() - started > 1.0
    finally:
        backend.close()
