"""http-fetch refuses internal addresses however they are spelled, after DNS and on every redirect.

Real loopback servers stand in for "internal" services: by default they must be unreachable, and
reachable once the Tool config allow-lists them. Every refusal happens before a byte is sent.
"""

from __future__ import annotations

import ipaddress
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, ClassVar

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from tools_testkit import FakeCtx, run

from goondan.base.tools import http_fetch
from goondan.base.tools._common import ToolExecutionError
from goondan.base.tools._netguard import refusal_reason
from goondan.errors import GoondanError


class _Handler(BaseHTTPRequestHandler):
    hits: ClassVar[list[str]] = []

    def do_GET(self) -> None:
        _Handler.hits.append(self.path)
        if self.path.startswith("/to/"):
            self.send_response(302)
            self.send_header("Location", "http://" + self.path[len("/to/") :])
            self.send_header("Content-Length", "0")
            self.end_headers()
            return
        body = b"internal secret"
        self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format: str, *args: Any) -> None:
        pass


@pytest.fixture(scope="module")
def port() -> Iterator[int]:
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), _Handler)
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    try:
        yield httpd.server_address[1]
    finally:
        httpd.shutdown()
        httpd.server_close()


def _refused(ctx: FakeCtx, url: str) -> ToolExecutionError:
    with pytest.raises(ToolExecutionError) as info:
        run(http_fetch.get, ctx, {"url": url, "timeoutMs": 3000})
    assert info.value.code == "E_TOOL_ADDRESS_REFUSED", info.value
    assert "allowHosts" in (info.value.suggestion or "")
    return info.value


@pytest.mark.parametrize(
    "host", ["127.0.0.1", "localhost", "2130706433", "0x7f.1", "0177.0.0.1", "127.1", "[::ffff:127.0.0.1]"]
)
def test_loopback_in_any_spelling_is_refused_by_default(ctx: FakeCtx, port: int, host: str) -> None:
    _Handler.hits.clear()
    error = _refused(ctx, f"http://{host}:{port}/")
    assert "127.0.0.1" in error.message  # the resolved address is named
    assert _Handler.hits == []  # nothing reached the server


@pytest.mark.parametrize(
    ("host", "named"),
    [
        ("0", "0.0.0.0"),
        ("169.254.169.254", "metadata"),
        ("[fd00:ec2::254]", "metadata"),
        ("[::1]", "::1"),
        ("10.1.2.3", "private"),
        ("100.64.0.1", "CGNAT"),
        ("224.0.0.1", "multicast"),
        ("192.168.0.1", "private"),
    ],
)
def test_internal_addresses_are_refused_before_connecting(ctx: FakeCtx, host: str, named: str) -> None:
    assert named in _refused(ctx, f"http://{host}:9/").message


def test_allow_list_permits_a_host_or_a_network(ctx: FakeCtx, port: int) -> None:
    ctx.config = {"allowHosts": ["127.0.0.0/8"]}
    assert run(http_fetch.get, ctx, {"url": f"http://127.0.0.1:{port}/x"})["body"] == "internal secret"
    ctx.config = {"allowHosts": ["localhost"]}
    assert run(http_fetch.get, ctx, {"url": f"http://localhost:{port}/x"})["status"] == 200
    _refused(ctx, f"http://127.0.0.1:{port}/x")  # the name was allowed, not the address


def test_a_redirect_to_an_internal_address_is_refused_on_that_hop(ctx: FakeCtx, port: int) -> None:
    ctx.config = {"allowHosts": ["localhost"]}
    _Handler.hits.clear()
    error = _refused(ctx, f"http://localhost:{port}/to/127.0.0.1:{port}/secret")
    assert "127.0.0.1" in error.message
    assert _Handler.hits == [f"/to/127.0.0.1:{port}/secret"]  # the secret was never fetched


def test_bad_allow_list_config_is_a_config_error(ctx: FakeCtx) -> None:
    for config in ({"allowHosts": "127.0.0.1"}, {"allowHosts": [1]}, {"allowhosts": []}):
        ctx.config = config
        with pytest.raises(GoondanError) as info:
            run(http_fetch.get, ctx, {"url": "http://example.invalid/"})
        assert info.value.code == "E_TOOL_CONFIG_INVALID"


def _spellings(value: int) -> st.SearchStrategy[str]:
    a, b, c, d = value.to_bytes(4, "big")
    return st.sampled_from(
        [
            f"{a}.{b}.{c}.{d}",
            str(value),
            hex(value),
            f"0{value:o}",
            f"{a}.{(b << 16) | (c << 8) | d}",
            f"{a}.{b}.{(c << 8) | d}",
            f"{hex(a)}.{hex(b)}.{hex(c)}.{hex(d)}",
            f"0{a:o}.0{b:o}.0{c:o}.0{d:o}",
            f"[::ffff:{a}.{b}.{c}.{d}]",
            f"[::ffff:{value >> 16:x}:{value & 0xFFFF:x}]",
        ]
    )


_INTERNAL = [
    ipaddress.ip_network(n)
    for n in (
        "127.0.0.0/8",
        "10.0.0.0/8",
        "172.16.0.0/12",
        "192.168.0.0/16",
        "169.254.0.0/16",
        "100.64.0.0/10",
        "0.0.0.0/8",
        "224.0.0.0/4",
    )
]


@settings(max_examples=80, deadline=None)
@given(data=st.data())
def test_any_spelling_of_an_internal_ipv4_address_is_refused(data: st.DataObject, tmp_path_factory: Any) -> None:
    net = data.draw(st.sampled_from(_INTERNAL))
    value = int(net.network_address) + data.draw(st.integers(0, net.num_addresses - 1))
    host = data.draw(_spellings(value))
    ctx = FakeCtx(workdir=tmp_path_factory.getbasetemp())
    with pytest.raises(ToolExecutionError) as info:
        run(http_fetch.get, ctx, {"url": f"http://{host}:9/", "timeoutMs": 2000})
    assert info.value.code == "E_TOOL_ADDRESS_REFUSED", info.value
    assert str(ipaddress.IPv4Address(value)) in info.value.message


@given(st.integers(0, 2**32 - 1))
def test_refusal_reason_agrees_with_ipv4_mapped_form(value: int) -> None:
    v4 = ipaddress.IPv4Address(value)
    mapped = ipaddress.IPv6Address(f"::ffff:{v4}")
    assert (refusal_reason(v4) is None) == (refusal_reason(mapped) is None)
