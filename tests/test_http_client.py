"""goondan._http_client: one pooled client, bounded retries that honour Retry-After, only when safe.

Against a real keep-alive HTTP/1.1 server on 127.0.0.1 that answers from a per-test script and
records which connection each request came on.
"""

from __future__ import annotations

import asyncio
import email.utils
import json
import socket
import threading
import time
from collections.abc import Callable, Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from goondan import _http_client as hc

Answer = tuple[int, dict[str, str], bytes]


class Script:
    """What the server answers, request by request (the last answer repeats)."""

    def __init__(self) -> None:
        self.answers: list[Answer] = [(200, {}, b"ok")]
        self.seen: list[tuple[str, str, int]] = []  # (method, path, client port)

    def next(self) -> Answer:
        return self.answers.pop(0) if len(self.answers) > 1 else self.answers[0]


@pytest.fixture
def server() -> Iterator[tuple[str, Script]]:
    script = Script()

    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"  # keep-alive

        def _serve(self) -> None:
            length = int(self.headers.get("Content-Length") or 0)
            self.rfile.read(length)
            script.seen.append((self.command, self.path, self.client_address[1]))
            status, headers, body = script.next()
            self.send_response(status)
            for name, value in headers.items():
                self.send_header(name, value)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        do_GET = do_POST = do_PUT = _serve

        def log_message(self, format: str, *args: Any) -> None:
            pass

    httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{httpd.server_address[1]}", script
    httpd.shutdown()
    httpd.server_close()


def arun(fn: Callable[[], Any]) -> Any:
    async def main() -> Any:
        try:
            return await fn()
        finally:
            await hc.aclose_shared()

    return asyncio.run(main())


def test_429_on_a_get_waits_retry_after_and_retries(server: tuple[str, Script]) -> None:
    url, script = server
    script.answers = [(429, {"Retry-After": "1"}, b"slow down"), (200, {}, b"done")]
    started = time.monotonic()
    resp = arun(lambda: hc.request("GET", f"{url}/x"))
    assert time.monotonic() - started >= 0.95
    assert (resp.status, resp.body, resp.attempts) == (200, b"done", 2)


def test_a_post_is_retried_only_when_marked_safe(server: tuple[str, Script]) -> None:
    url, script = server
    script.answers = [(503, {"Retry-After": "0"}, b""), (200, {}, b"ok")]
    resp = arun(lambda: hc.request("POST", f"{url}/p", json_body={"a": 1}))
    assert resp.status == 503 and len(script.seen) == 1  # a POST may have had effects: not repeated
    script.answers = [(503, {"Retry-After": "0"}, b""), (200, {}, b"ok")]
    resp = arun(lambda: hc.request("POST", f"{url}/p", json_body={"a": 1}, safe=True))
    assert resp.status == 200 and len(script.seen) == 3


def test_retries_are_bounded_and_a_long_retry_after_is_returned_not_waited(server: tuple[str, Script]) -> None:
    url, script = server
    script.answers = [(503, {}, b"down")]
    policy = hc.RetryPolicy(retries=2, base_delay=0.01)
    resp = arun(lambda: hc.request("GET", f"{url}/d", retry=policy))
    assert resp.status == 503 and resp.attempts == 3 and len(script.seen) == 3
    script.seen.clear()
    script.answers = [(429, {"Retry-After": "3600"}, b"")]
    started = time.monotonic()
    resp = arun(lambda: hc.request("GET", f"{url}/d"))
    assert resp.status == 429 and len(script.seen) == 1 and time.monotonic() - started < 1


def test_connections_are_pooled_and_reused(server: tuple[str, Script]) -> None:
    url, script = server

    async def five() -> None:
        for i in range(5):
            assert (await hc.request("GET", f"{url}/{i}")).status == 200

    arun(five)
    assert len({port for _, _, port in script.seen}) == 1  # one keep-alive connection


def test_no_answer_is_an_os_error_after_retrying_the_connect() -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    policy = hc.RetryPolicy(retries=2, base_delay=0.01)
    with pytest.raises(hc.HttpClientError) as info:
        arun(lambda: hc.request("POST", f"http://127.0.0.1:{port}/bot123:SECRET/sendMessage", retry=policy))
    assert isinstance(info.value, OSError)
    assert "SECRET" not in str(info.value)  # Telegram's token sits in the path


def test_max_bytes_stops_the_download(server: tuple[str, Script]) -> None:
    url, script = server
    script.answers = [(200, {}, b"x" * 5000)]
    with pytest.raises(hc.ResponseTooLarge):
        arun(lambda: hc.request("GET", f"{url}/big", max_bytes=1000))
    assert arun(lambda: hc.request("GET", f"{url}/big", max_bytes=5000)).body == b"x" * 5000


@pytest.mark.parametrize(
    ("headers", "body", "expected"),
    [
        ({"retry-after": "7"}, b"", 7.0),
        ({"retry-after": "1.5"}, b"", 1.5),
        ({}, b'{"ok": false, "parameters": {"retry_after": 3}}', 3.0),
        ({}, b'{"ok": false}', None),
        ({"retry-after": "soon"}, b"", None),
        ({}, b"not json", None),
    ],
)
def test_retry_after_is_read_from_the_header_or_telegrams_body(
    headers: dict[str, str], body: bytes, expected: float | None
) -> None:
    assert hc.retry_after_seconds(headers, body) == expected


def test_retry_after_as_an_http_date() -> None:
    when = email.utils.formatdate(time.time() + 30, usegmt=True)
    wait = hc.retry_after_seconds({"retry-after": when}, b"")
    assert wait is not None and 25 <= wait <= 31


def test_no_module_sends_http_with_urllib() -> None:
    src = Path(hc.__file__).parent
    users = [p for p in src.rglob("*.py") if "urllib.request" in p.read_text(encoding="utf-8")]
    assert users == []


def test_without_httpx_the_error_says_what_to_install(monkeypatch: pytest.MonkeyPatch) -> None:
    import sys

    from goondan.errors import GoondanError

    monkeypatch.setitem(sys.modules, "httpx", None)  # what an environment without httpx looks like
    with pytest.raises(GoondanError) as info:
        arun(lambda: hc.request("GET", "http://127.0.0.1:9/"))
    assert info.value.code == "E_HTTPX_MISSING" and "pip install httpx" in (info.value.suggestion or "")


@settings(max_examples=200, deadline=None)
@given(header=st.text(max_size=40), body=st.binary(max_size=80), seconds=st.integers(0, 10**6))
def test_retry_after_never_fails_and_never_goes_negative(header: str, body: bytes, seconds: int) -> None:
    wait = hc.retry_after_seconds({"retry-after": header}, body)
    assert wait is None or wait >= 0
    assert hc.retry_after_seconds({"retry-after": str(seconds)}, body) == seconds
    telegram = json.dumps({"ok": False, "parameters": {"retry_after": seconds}}).encode()
    assert hc.retry_after_seconds({}, telegram) == seconds


def test_a_lost_answer_is_retried_only_for_idempotent_methods_even_when_safe() -> None:
    """A server that reads the request and hangs up: it may have acted, so a POST is not repeated."""
    listener = socket.create_server(("127.0.0.1", 0))
    received: list[bytes] = []

    def serve() -> None:
        while True:
            try:
                conn, _ = listener.accept()
            except OSError:
                return
            with conn:
                received.append(conn.recv(65536).split(b" ", 1)[0])

    threading.Thread(target=serve, daemon=True).start()
    url = f"http://127.0.0.1:{listener.getsockname()[1]}/x"
    policy = hc.RetryPolicy(retries=2, base_delay=0.01)
    try:
        with pytest.raises(hc.HttpClientError):
            arun(lambda: hc.request("POST", url, json_body={}, safe=True, retry=policy))
        assert received == [b"POST"]
        with pytest.raises(hc.HttpClientError):
            arun(lambda: hc.request("GET", url, retry=policy))
        assert received == [b"POST", b"GET", b"GET", b"GET"]
    finally:
        listener.close()
