"""Reading JSON-lines files written by an append-only writer that may have been killed mid-write.

The writer appends each record as one ``os.write`` of ``json + "\\n"``. The only damage a crash (or a
full disk) can do is therefore at the *end* of the file: a final line without its newline, or - after a
power loss on some filesystems - trailing garbage such as zero bytes. Such a torn tail never held an
acknowledged record, so it is dropped (and reported). Anything wrong *before* the last line cannot come
from a crash; it means the file was damaged or edited, and silently skipping it could discard committed
messages, so it is an error that names the file and line.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import orjson

from ..errors import StorageError
from ._atomic import READ_FLAGS

CODE_CORRUPT = "E_STORAGE_CORRUPT"
CODE_TORN = "E_STORAGE_TORN_LINE"


@dataclass(slots=True)
class JsonlScan:
    """The decoded lines of one file.

    ``records[i]`` came from 1-based line ``line_numbers[i]``, which starts at byte ``offsets[i]``.
    ``torn_line`` is the 1-based number of a dropped torn final line (``None`` if the file ended
    cleanly) and ``good_size`` the byte length of the file without it - the size to truncate to so
    that later appends start on a fresh line.
    """

    records: list[Any]
    line_numbers: list[int]
    offsets: list[int]
    size: int
    good_size: int
    torn_line: int | None


def corrupt_error(path: Path, line: int, detail: str) -> StorageError:
    return StorageError(
        CODE_CORRUPT,
        f"{path}:{line}: {detail}",
        file=str(path),
        line=line,
        suggestion=(
            f"Line {line} of {path.name} is damaged and is not the last line, so it is not a torn write "
            "from a crash. Fix or remove that line by hand (keep a backup), or start over with "
            "`gdn restart --fresh` to discard this conversation."
        ),
    )


def scan_jsonl(path: Path, data: bytes) -> JsonlScan:
    """Decode ``data`` (the whole content of ``path``) line by line.

    Blank lines are ignored. A torn tail (last line without a newline, or an undecodable last line) is
    reported via ``torn_line``; an undecodable line anywhere else raises ``E_STORAGE_CORRUPT``.
    """
    lines = data.split(b"\n")
    tail = lines.pop()  # b"" when the file ends with a newline (or is empty)
    loads = orjson.loads
    records: list[Any] = []
    linenos: list[int] = []
    offsets: list[int] = []
    off = 0
    bad: int | None = None  # index of the first undecodable line, torn if nothing follows it
    bad_detail = ""
    bad_start = 0
    for i, line in enumerate(lines):
        start = off
        off += len(line) + 1
        try:
            value = loads(line)
        except orjson.JSONDecodeError as exc:
            if not line.strip():
                continue
            if bad is not None:
                raise corrupt_error(path, bad + 1, bad_detail) from None
            bad = i
            bad_start = start
            bad_detail = f"invalid JSON ({exc})"
            continue
        if bad is not None:
            raise corrupt_error(path, bad + 1, bad_detail)
        records.append(value)
        linenos.append(i + 1)
        offsets.append(start)
    size = len(data)
    if tail:
        if bad is not None:
            raise corrupt_error(path, bad + 1, bad_detail)
        return JsonlScan(records, linenos, offsets, size, size - len(tail), len(lines) + 1)
    if bad is not None:
        return JsonlScan(records, linenos, offsets, size, bad_start, bad + 1)
    return JsonlScan(records, linenos, offsets, size, size, None)


def read_bytes(path: Path) -> bytes:
    """The whole file in one read (``b""`` if it does not exist)."""
    try:
        fd = os.open(path, READ_FLAGS)
    except FileNotFoundError:
        return b""
    try:
        size = os.fstat(fd).st_size
        chunks: list[bytes] = []
        remaining = size
        while True:
            chunk = os.read(fd, max(remaining, 65536))
            if not chunk:
                break
            chunks.append(chunk)
            remaining -= len(chunk)
        return chunks[0] if len(chunks) == 1 else b"".join(chunks)
    finally:
        os.close(fd)


def torn_warning(path: Path, line: int, dropped: int) -> dict[str, Any]:
    return {
        "code": CODE_TORN,
        "message": (
            f"{path.name}:{line}: dropped an incomplete final line ({dropped} bytes) left by an "
            "interrupted write; it was never acknowledged"
        ),
        "file": str(path),
        "line": line,
    }


def truncate_file(path: Path, size: int, *, durable: bool = True) -> None:
    fd = os.open(path, os.O_WRONLY | getattr(os, "O_CLOEXEC", 0))
    try:
        os.ftruncate(fd, size)
        if durable:
            os.fsync(fd)
    finally:
        os.close(fd)


def repair_tail(fd: int) -> None:
    """Cut a torn final line off an append-only file opened as ``fd`` (read/write).

    Used before appending to files whose readers are tolerant (runtime events): without it the next
    record would be glued onto the torn one, damaging a complete record too.
    """
    size = os.fstat(fd).st_size
    if size == 0 or os.pread(fd, 1, size - 1) == b"\n":
        return
    pos = size
    while pos > 0:
        start = max(0, pos - 65536)
        chunk = os.pread(fd, pos - start, start)
        nl = chunk.rfind(b"\n")
        if nl != -1:
            os.ftruncate(fd, start + nl + 1)
            return
        pos = start
    os.ftruncate(fd, 0)


__all__ = [
    "CODE_CORRUPT",
    "CODE_TORN",
    "JsonlScan",
    "corrupt_error",
    "read_bytes",
    "repair_tail",
    "scan_jsonl",
    "torn_warning",
    "truncate_file",
]
