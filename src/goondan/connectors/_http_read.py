"""Reading one HTTP/1.1 request off a stream, refusing anything outside a strict, bounded subset.

Every way a request can be too big or malformed maps to the status a real server would send, raised
as :class:`Rejected`, so the server can answer it and log one line instead of dying with a
traceback: 414 for a request line over :data:`MAX_LINE`, 431 for a header line over
:data:`MAX_LINE`, more than :data:`MAX_HEADER_LINES` headers or more than :data:`MAX_HEADER_BYTES`
in all, 413 for a body over the limit, 411 for chunked bodies, 505 for HTTP/2+, 400 for everything
else malformed. Header parsing is strict on purpose (no obsolete line folding, no blanks inside
names, one ``Content-Length``): lenient parsing is how request-smuggling gaps open between proxies
and servers.
"""

from __future__ import annotations

import asyncio
import re
from collections.abc import Awaitable, Callable
from dataclasses import dataclass

MAX_LINE = 8192
MAX_HEADER_LINES = 100
MAX_HEADER_BYTES = 32 * 1024
MAX_BODY = 1 << 20

_TOKEN = re.compile(rb"^[!#$%&'*+\-.^_`|~0-9A-Za-z]+$")
_VERSION = re.compile(rb"^HTTP/(\d)\.(\d)$")
_BAD_VALUE_BYTES = re.compile(rb"[\x00-\x08\x0a-\x1f\x7f]")


class Rejected(Exception):
    """The request cannot be served; ``status`` is what to answer, ``detail`` what to log."""

    def __init__(self, status: int, detail: str) -> None:
        super().__init__(detail)
        self.status = status
        self.detail = detail


@dataclass(slots=True)
class RawRequest:
    method: str
    target: str
    headers: dict[str, str]  # lower-cased names
    body: bytes


async def _line(reader: asyncio.StreamReader, status: int, what: str) -> bytes:
    """One CRLF- (or LF-) terminated line without its terminator; over :data:`MAX_LINE` is ``status``."""
    try:
        raw = await reader.readuntil(b"\n")
    except asyncio.LimitOverrunError:
        raise Rejected(status, f"{what} longer than {MAX_LINE} bytes") from None
    if len(raw) > MAX_LINE + 2:
        raise Rejected(status, f"{what} longer than {MAX_LINE} bytes")
    return raw[:-2] if raw.endswith(b"\r\n") else raw[:-1]


def _request_line(line: bytes) -> tuple[str, str]:
    parts = line.split(b" ")
    if len(parts) != 3 or not _TOKEN.match(parts[0]) or not parts[1] or b"\t" in parts[1]:
        raise Rejected(400, "malformed request line")
    version = _VERSION.match(parts[2])
    if version is None:
        raise Rejected(400, "malformed request line")
    if version.group(1) != b"1":
        raise Rejected(505, f"unsupported version {parts[2].decode('latin-1')}")
    if any(b < 0x21 or b == 0x7F for b in parts[1]):
        raise Rejected(400, "control characters in the request target")
    return parts[0].decode("ascii").upper(), parts[1].decode("latin-1")


async def _headers(reader: asyncio.StreamReader) -> dict[str, str]:
    headers: dict[str, str] = {}
    total = 0
    count = 0
    while True:
        line = await _line(reader, 431, "header line")
        if not line:
            return headers
        count += 1
        total += len(line) + 2
        if count > MAX_HEADER_LINES:
            raise Rejected(431, f"more than {MAX_HEADER_LINES} header lines")
        if total > MAX_HEADER_BYTES:
            raise Rejected(431, f"headers larger than {MAX_HEADER_BYTES} bytes")
        if line[:1] in (b" ", b"\t"):
            raise Rejected(400, "obsolete header line folding")
        name, colon, value = line.partition(b":")
        if not colon or not _TOKEN.match(name):
            raise Rejected(400, "malformed header line")
        value = value.strip(b" \t")
        if _BAD_VALUE_BYTES.search(value):
            raise Rejected(400, "control characters in a header value")
        key = name.decode("ascii").lower()
        text = value.decode("latin-1")
        if key == "content-length" and key in headers and headers[key] != text:
            raise Rejected(400, "conflicting Content-Length headers")
        headers[key] = f"{headers[key]}, {text}" if key in headers and key != "content-length" else text


def _body_length(headers: dict[str, str], max_body: int) -> int:
    if "transfer-encoding" in headers:
        raise Rejected(411, "Transfer-Encoding is not supported; send Content-Length")
    raw = headers.get("content-length", "0")
    if not raw.isascii() or not raw.isdigit() or len(raw) > 19:
        raise Rejected(400, "malformed Content-Length")
    length = int(raw)
    if length > max_body:
        raise Rejected(413, f"body of {length} bytes is over the {max_body}-byte limit")
    return length


async def read_request(
    reader: asyncio.StreamReader,
    *,
    max_body: int = MAX_BODY,
    send_continue: Callable[[], Awaitable[None]] | None = None,
) -> RawRequest | None:
    """Read one request; ``None`` when the client closed before sending anything.

    Raises :class:`Rejected` for requests to refuse and ``asyncio.IncompleteReadError`` when the
    client hung up halfway. ``send_continue`` answers ``Expect: 100-continue`` (curl sends it for
    bodies over 1 KiB and would otherwise wait a second before sending the body).
    """
    try:
        first = await _line(reader, 414, "request line")
    except asyncio.IncompleteReadError as exc:
        if not exc.partial:
            return None
        raise
    method, target = _request_line(first)
    headers = await _headers(reader)
    length = _body_length(headers, max_body)
    if length and send_continue is not None and headers.get("expect", "").lower() == "100-continue":
        await send_continue()
    body = await reader.readexactly(length) if length else b""
    return RawRequest(method, target, headers, body)


__all__ = ["MAX_BODY", "MAX_HEADER_BYTES", "MAX_HEADER_LINES", "MAX_LINE", "RawRequest", "Rejected", "read_request"]
