"""The connectors' HTTP server under oversized, malformed and slow requests (real sockets, 127.0.0.1).

Each test speaks raw bytes to the server the way a hostile or broken client would and checks only
what is visible from outside (the status line, timing, other clients being served), so the same
tests hold for any server put behind the connectors later.
"""

from __future__ import annotations

import json
import logging
import socket
import time
from collections.abc import Iterator

import pytest
from cn_testkit import echo_server as server
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st


@pytest.fixture(scope="module")
def shared_port() -> Iterator[int]:
    with server() as port:
        yield port


def exchange(port: int, raw: bytes, *, half_close: bool = True, timeout: float = 5.0) -> bytes:
    with socket.create_connection(("127.0.0.1", port), timeout=timeout) as sock:
        sock.sendall(raw)
        if half_close:
            sock.shutdown(socket.SHUT_WR)
        chunks = []
        while True:
            try:
                chunk = sock.recv(65536)
            except ConnectionResetError:
                break
            if not chunk:
                break
            chunks.append(chunk)
        return b"".join(chunks)


def status(response: bytes) -> int:
    assert response.startswith(b"HTTP/1.1 "), response[:80]
    return int(response[9:12])


def _no_tracebacks(caplog: pytest.LogCaptureFixture) -> None:
    for record in caplog.records:
        assert record.exc_info is None, record.getMessage()
        assert "\n" not in record.getMessage()


def test_header_line_over_64_kib_gets_431_and_one_log_line(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO, logger="goondan.connectors.http")
    with server() as port:
        raw = b"POST / HTTP/1.1\r\nHost: x\r\nX-Big: " + b"a" * 70_000 + b"\r\nContent-Length: 2\r\n\r\nhi"
        assert status(exchange(port, raw, half_close=False)) == 431
        # the server is still fine for the next client
        assert status(exchange(port, b"GET /ok HTTP/1.1\r\nHost: x\r\n\r\n")) == 200
    _no_tracebacks(caplog)
    rejected = [r for r in caplog.records if "431" in r.getMessage()]
    assert len(rejected) == 1 and rejected[0].levelno == logging.WARNING


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        (b"GET /" + b"a" * 70_000 + b" HTTP/1.1\r\nHost: x\r\n\r\n", 414),
        (b"GET / HTTP/1.1\r\nHost: x\r\n" + b"".join(b"X-H%d: v\r\n" % i for i in range(200)) + b"\r\n", 431),
        (
            b"GET / HTTP/1.1\r\nHost: x\r\n"
            + b"X-H: "
            + b"v" * 8000
            + b"\r\n" * 1
            + b"X-I: "
            + b"v" * 8000
            + b"\r\n" * 1
            + b"".join(b"X-J%d: " % i + b"v" * 8000 + b"\r\n" for i in range(4))
            + b"\r\n",
            431,
        ),
        (b"GET / HTTP/1.1\r\nHost: x\r\nNo colon here\r\n\r\n", 400),
        (b"GET / HTTP/1.1\r\nHost: x\r\nBad Name: v\r\n\r\n", 400),
        (b"GET / HTTP/2.0\r\n\r\n", 505),
        (b"GET /\r\n\r\n", 400),
        (b"\x16\x03\x01\x02\x00\x01\x00\x01\xfc\x03\x03\r\n\r\n", 400),  # TLS sent to a plain-HTTP port
        (b"POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 3\r\nContent-Length: 5\r\n\r\nabc", 400),
        (b"POST / HTTP/1.1\r\nHost: x\r\nContent-Length: +3\r\n\r\nabc", 400),
        (b"POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 1_0\r\n\r\nabcdefghij", 400),
        (
            b"POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 3\r\nTransfer-Encoding: chunked\r\n\r\n"
            b"3\r\nabc\r\n0\r\n\r\n",
            400,
        ),
        (b"POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 99999999999999999999999\r\n\r\n", 400),
    ],
)
def test_malformed_or_oversized_requests_get_the_matching_4xx(
    raw: bytes, expected: int, caplog: pytest.LogCaptureFixture
) -> None:
    with server() as port:
        assert status(exchange(port, raw, half_close=False)) == expected
    _no_tracebacks(caplog)


@pytest.mark.parametrize(
    ("raw", "expected", "reason"),
    [
        (b"POST / HTTP/1.1\r\nHost: x\r\nContent-Length: %d\r\n\r\n" % (2 << 20), 413, "body_too_large"),
        (
            b"GET / HTTP/1.1\r\nHost: x\r\n" + b"".join(b"X-H%d: v\r\n" % i for i in range(200)) + b"\r\n",
            431,
            "headers_too_large",
        ),
        (b"GET / HTTP/1.1\r\nHost: x\r\nX-Big: " + b"a" * 70_000 + b"\r\n\r\n", 431, "headers_too_large"),
        (b"GET /" + b"a" * 70_000 + b" HTTP/1.1\r\nHost: x\r\n\r\n", 414, "target_too_long"),
        (b"POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 3\r\nTransfer-Encoding: chunked\r\n\r\n", 400, "bad_request"),
        (b"GET / HTTP/1.1\r\nHost: x\r\nNo colon here\r\n\r\n", 400, "bad_request"),
    ],
)
def test_refusals_answer_json_with_a_reason_code_like_the_connectors_own_errors(
    shared_port: int, raw: bytes, expected: int, reason: str
) -> None:
    response = exchange(shared_port, raw, half_close=False)
    head, _, body = response.partition(b"\r\n\r\n")
    assert status(response) == expected
    assert b"content-type: application/json" in head.lower(), head
    payload = json.loads(body)
    assert payload["ok"] is False and payload["reason"] == reason and payload["error"], payload


def test_body_over_the_limit_gets_413_even_while_it_is_being_sent(caplog: pytest.LogCaptureFixture) -> None:
    body = b"x" * (3 << 20)
    with server() as port:
        raw = b"POST / HTTP/1.1\r\nHost: x\r\nContent-Length: %d\r\n\r\n" % len(body)
        with socket.create_connection(("127.0.0.1", port), timeout=5) as sock:
            sock.sendall(raw)
            try:
                sock.sendall(body)  # the server refuses early; sending may fail once it has closed
            except (BrokenPipeError, ConnectionResetError):
                pass
            response = sock.recv(4096)
        assert status(response) == 413
    _no_tracebacks(caplog)


def test_a_chunked_body_is_cut_off_at_the_limit_while_it_streams(caplog: pytest.LogCaptureFixture) -> None:
    chunk = b"x" * 65536
    with server() as port, socket.create_connection(("127.0.0.1", port), timeout=5) as sock:
        sock.sendall(b"POST / HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n")
        sent = 0
        sock.settimeout(0.01)
        response = b""
        while not response and sent < (8 << 20):  # keep streaming until the server answers
            try:
                sock.sendall(b"10000\r\n" + chunk + b"\r\n")
                sent += len(chunk)
                response = sock.recv(4096)
            except TimeoutError:
                continue
            except (BrokenPipeError, ConnectionResetError):
                break
        sock.settimeout(5)
        response = response or sock.recv(4096)
    assert status(response) == 413
    assert (1 << 20) <= sent < (5 << 20)  # refused soon after the 1 MiB limit, not after the whole body
    _no_tracebacks(caplog)


def test_slow_client_gets_408_and_does_not_delay_other_clients(caplog: pytest.LogCaptureFixture) -> None:
    with server(read_timeout=0.6) as port:
        slow = socket.create_connection(("127.0.0.1", port), timeout=5)
        try:
            slow.sendall(b"POST / HTTP/1.1\r\nHost: x\r\nContent-Le")  # ... and then nothing
            started = time.monotonic()
            assert status(exchange(port, b"GET /fast HTTP/1.1\r\nHost: x\r\n\r\n")) == 200
            assert time.monotonic() - started < 0.5
            response = slow.recv(4096)
            assert status(response) == 408
            assert time.monotonic() - started >= 0.5
        finally:
            slow.close()
    _no_tracebacks(caplog)


def test_client_hanging_up_midway_is_not_an_error(caplog: pytest.LogCaptureFixture) -> None:
    with server() as port:
        assert exchange(port, b"POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 10\r\n\r\nabc") == b""
        assert exchange(port, b"") == b""
        assert status(exchange(port, b"GET / HTTP/1.1\r\nHost: x\r\n\r\n")) == 200
    _no_tracebacks(caplog)
    assert not [r for r in caplog.records if r.levelno >= logging.ERROR]


def test_expect_100_continue_is_answered_before_the_body() -> None:
    with server() as port, socket.create_connection(("127.0.0.1", port), timeout=5) as sock:
        sock.sendall(
            b"POST /up HTTP/1.1\r\nHost: x\r\nConnection: close\r\nContent-Length: 4\r\nExpect: 100-continue\r\n\r\n"
        )
        assert sock.recv(4096).startswith(b"HTTP/1.1 100 Continue\r\n\r\n")
        sock.sendall(b"data")
        reply = b""
        while chunk := sock.recv(4096):
            reply += chunk
        assert status(reply) == 200 and b'"len": 4' in reply


_STATUS_LINE = st.sampled_from([b"GET / HTTP/1.1", b"POST /p HTTP/1.1", b"GET", b"", b"X / HTTP/1.0"])
_HEADER = st.tuples(
    st.binary(min_size=0, max_size=40), st.sampled_from([b":", b": ", b""]), st.binary(min_size=0, max_size=60)
).map(lambda t: t[0] + t[1] + t[2])


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    head=_STATUS_LINE,
    headers=st.lists(_HEADER, max_size=6),
    tail=st.binary(max_size=200),
    newline=st.sampled_from([b"\r\n", b"\n"]),
)
def test_any_bytes_get_a_status_line_or_a_clean_close_never_a_traceback(
    head: bytes, headers: list[bytes], tail: bytes, newline: bytes, caplog: pytest.LogCaptureFixture, shared_port: int
) -> None:
    raw = newline.join([head, *headers]) + newline + newline + tail
    response = exchange(shared_port, raw)  # one server for all examples: it must survive every one
    assert response == b"" or (response.startswith(b"HTTP/1.1 ") and response[9:12].isdigit()), response[:100]
    _no_tracebacks(caplog)
