"""http-fetch against a real HTTP server on 127.0.0.1 (digest §4.4)."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest
from tools_testkit import FakeCtx, run

from goondan.base.tools import http_fetch
from goondan.base.tools._common import ToolExecutionError, ToolInputError


class _Handler(BaseHTTPRequestHandler):
    def log_message(self, format: str, *args: object) -> None:
        pass

    def _send(self, status: int, body: bytes, ctype: str = "text/plain; charset=utf-8", **headers: str) -> None:
        self.send_response(status)
        self.send_header("Content-Type", ctype)
        self.send_header("Content-Length", str(len(body)))
        for k, v in headers.items():
            self.send_header(k.replace("_", "-"), v)
        self.end_headers()
        self.wfile.write(body)

    def do_GET(self) -> None:
        if self.path == "/hello":
            self._send(200, b"hello world", X_Custom="yes")
        elif self.path == "/headers":
            self._send(200, json.dumps(dict(self.headers)).encode(), "application/json")
        elif self.path == "/missing":
            self._send(404, b"no such thing")
        elif self.path == "/big":
            self._send(200, b"x" * 200_000)
        elif self.path == "/latin1":
            self._send(200, "café".encode("latin-1"), "text/plain; charset=latin-1")
        elif self.path == "/slow":
            time.sleep(1.5)
            self._send(200, b"late")
        elif self.path == "/short":
            self.send_response(200)
            self.send_header("Content-Length", "100")
            self.end_headers()
            self.wfile.write(b"only ten b")
            self.close_connection = True
        elif self.path == "/hangup":
            self.close_connection = True  # no status line at all
        elif self.path == "/redirect":
            self.send_response(302)
            self.send_header("Location", "/hello")
            self.send_header("Content-Length", "0")
            self.end_headers()
        elif self.path == "/redirect-ftp":
            self.send_response(302)
            self.send_header("Location", "ftp://127.0.0.1/secret")
            self.send_header("Content-Length", "0")
            self.end_headers()
        else:
            self._send(500, b"unexpected path")

    def do_POST(self) -> None:
        length = int(self.headers.get("Content-Length") or 0)
        body = self.rfile.read(length).decode()
        echo = {"contentType": self.headers.get("Content-Type"), "body": body, "auth": self.headers.get("X-Auth")}
        self._send(201, json.dumps(echo).encode(), "application/json")


class _QuietServer(ThreadingHTTPServer):
    daemon_threads = True

    def handle_error(self, request: object, client_address: object) -> None:
        pass  # the client hung up on /slow on purpose


@pytest.fixture
def ctx(workdir: Path) -> FakeCtx:
    """Loopback is refused by default; these tests talk to a server on 127.0.0.1, so allow it."""
    return FakeCtx(workdir=workdir, config={"allowHosts": ["127.0.0.1"]})


@pytest.fixture(scope="module")
def server() -> Iterator[str]:
    httpd = _QuietServer(("127.0.0.1", 0), _Handler)
    thread = threading.Thread(target=httpd.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{httpd.server_address[1]}"
    finally:
        httpd.shutdown()
        httpd.server_close()


def test_get_returns_status_headers_and_body(ctx: FakeCtx, server: str) -> None:
    out = run(http_fetch.get, ctx, {"url": f"{server}/hello"})
    assert out["status"] == 200
    assert out["statusText"] == "OK"
    assert out["method"] == "GET"
    assert out["url"] == f"{server}/hello"
    assert out["body"] == "hello world"
    assert out["truncated"] is False
    assert out["headers"]["x-custom"] == "yes"
    assert out["headers"]["content-type"].startswith("text/plain")
    assert isinstance(out["durationMs"], int)


def test_get_sends_custom_headers(ctx: FakeCtx, server: str) -> None:
    out = run(http_fetch.get, ctx, {"url": f"{server}/headers", "headers": {"X-Token": "abc", "X-N": 3}})
    seen = json.loads(out["body"])
    assert seen["X-Token"] == "abc"
    assert seen["X-N"] == "3"
    assert seen["User-Agent"].startswith("goondan-http-fetch")


def test_http_error_status_is_a_normal_result(ctx: FakeCtx, server: str) -> None:
    out = run(http_fetch.get, ctx, {"url": f"{server}/missing"})
    assert out["status"] == 404
    assert out["statusText"] == "Not Found"
    assert out["body"] == "no such thing"


def test_max_bytes_truncates_the_body(ctx: FakeCtx, server: str) -> None:
    out = run(http_fetch.get, ctx, {"url": f"{server}/big", "maxBytes": 1000})
    assert out["truncated"] is True
    assert out["body"] == "x" * 1000
    full = run(http_fetch.get, ctx, {"url": f"{server}/big"})
    assert full["truncated"] is False
    assert len(full["body"]) == 200_000


def test_body_is_decoded_with_the_declared_charset(ctx: FakeCtx, server: str) -> None:
    assert run(http_fetch.get, ctx, {"url": f"{server}/latin1"})["body"] == "café"


def test_timeout_is_a_tool_error_with_code(ctx: FakeCtx, server: str) -> None:
    started = time.monotonic()
    with pytest.raises(ToolExecutionError) as info:
        run(http_fetch.get, ctx, {"url": f"{server}/slow", "timeoutMs": 200})
    assert time.monotonic() - started < 1.4
    assert info.value.code == "E_HTTP_TIMEOUT"
    assert "200ms" in info.value.message


def test_redirects_are_followed_but_only_to_http(ctx: FakeCtx, server: str) -> None:
    out = run(http_fetch.get, ctx, {"url": f"{server}/redirect"})
    assert out["status"] == 200
    assert out["url"] == f"{server}/hello"
    with pytest.raises(ToolExecutionError) as info:
        run(http_fetch.get, ctx, {"url": f"{server}/redirect-ftp"})
    assert info.value.code == "E_HTTP_REDIRECT_REFUSED"


def test_post_object_body_is_sent_as_json(ctx: FakeCtx, server: str) -> None:
    out = run(http_fetch.post, ctx, {"url": f"{server}/echo", "body": {"a": [1, "é"]}, "headers": {"X-Auth": "t"}})
    assert out["status"] == 201
    assert out["method"] == "POST"
    echo = json.loads(out["body"])
    assert echo["contentType"] == "application/json"
    assert json.loads(echo["body"]) == {"a": [1, "é"]}
    assert echo["auth"] == "t"


def test_post_body_string_keeps_an_explicit_content_type(ctx: FakeCtx, server: str) -> None:
    out = run(http_fetch.post, ctx, {"url": f"{server}/echo", "bodyString": "a=1", "headers": {"content-type": "x/y"}})
    echo = json.loads(out["body"])
    assert echo == {"contentType": "x/y", "body": "a=1", "auth": None}
    plain = json.loads(run(http_fetch.post, ctx, {"url": f"{server}/echo", "bodyString": "hi"})["body"])
    assert plain["contentType"] == "text/plain; charset=utf-8"


def test_broken_responses_are_request_failed_errors(ctx: FakeCtx, server: str) -> None:
    for path, fragment in (("/short", "reading the body failed"), ("/hangup", "failed")):
        with pytest.raises(ToolExecutionError) as info:
            run(http_fetch.get, ctx, {"url": f"{server}{path}", "timeoutMs": 3000})
        assert info.value.code == "E_HTTP_REQUEST_FAILED", path
        assert fragment in info.value.message
        assert info.value.suggestion


def test_connection_refused_is_a_tool_error(ctx: FakeCtx) -> None:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    with pytest.raises(ToolExecutionError) as info:
        run(http_fetch.get, ctx, {"url": f"http://127.0.0.1:{port}/", "timeoutMs": 2000})
    assert info.value.code == "E_HTTP_REQUEST_FAILED"


@pytest.mark.parametrize("url", ["file:///etc/passwd", "ftp://example.com/x", "example.com", "http://"])
def test_only_absolute_http_urls_are_accepted(ctx: FakeCtx, url: str) -> None:
    with pytest.raises(ToolInputError, match="'url' must be an absolute http or https URL"):
        run(http_fetch.get, ctx, {"url": url})


def test_post_input_errors(ctx: FakeCtx, server: str) -> None:
    with pytest.raises(ToolInputError, match="either 'body' or 'bodyString'"):
        run(http_fetch.post, ctx, {"url": server, "body": {}, "bodyString": "x"})
    with pytest.raises(ToolInputError, match="'url' must be a non-empty string"):
        run(http_fetch.get, ctx, {"url": ""})
    with pytest.raises(ToolInputError, match="cannot send this request"):
        run(http_fetch.get, ctx, {"url": server, "headers": {"X-Evil": "a\r\nInjected: 1"}})
    with pytest.raises(ToolInputError, match="unexpected argument\\(s\\) 'body'"):
        run(http_fetch.get, ctx, {"url": server, "body": {}})
