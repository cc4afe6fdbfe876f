"""Reading JSON-lines files written by an append-only writer that may have been killed mid-write.

The writer appends each record as one ``os.write`` of ``json + "\\n"``. The only damage a crash (or a
full disk) can do is therefore at the *end* of the file: a final line cut short, or - after a power loss
on some filesystems - trailing garbage such as zero bytes. Such a torn tail, a final line that does not
decode, never held a whole record, so it is dropped (and reported); a final line that decodes is kept
even when its newline is missing. Anything wrong *before* the last line cannot come
from a crash; it means the file was damaged or edited, and silently skipping it could discard committed
messages, so it is an error that names the file and line.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import orjson

from ..errors import StorageError
from ._atomic import READ_FLAGS

CODE_CORRUPT = "E_STORAGE_CORRUPT"
CODE_TORN = "E_STORAGE_TORN_LINE"


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


#: Bytes read per ``os.read`` while streaming a file: large enough that the per-chunk cost vanishes,
#: small enough that the raw text never exists next to the decoded records as a whole.
CHUNK_SIZE = 1 << 20


class JsonlReader:
    """Streams the records of one JSON-lines file, one decoded record at a time.

    Iterating yields ``(line_number, offset, record)`` (1-based line, byte offset of its start) for
    every non-blank line that decodes. Nothing but one chunk of raw bytes is held at a time, so
    loading a long history never keeps the file text, its split lines and the decoded values all at
    once (a million-message history used to need all three).

    After the iteration: ``torn_line`` is the 1-based number of a dropped torn final line (``None``
    if the file ended cleanly), ``good_size`` the byte length without it (the size to truncate to so
    that later appends start on a fresh line), and ``unterminated`` tells that the last line is a
    complete record whose newline is missing - data to keep, but the file needs a ``\\n`` before the
    next append or that record would be glued to the next one.

    Only a line that fails to decode is torn: a writer killed mid-``write`` leaves a strict prefix of
    a record, which never decodes (records are JSON objects). A complete record without its newline
    was written in full and may even have been acknowledged, so dropping it would lose data.
    """

    def __init__(self, path: Path) -> None:
        self.path = path
        self.size = 0
        self.good_size = 0
        self.torn_line: int | None = None
        self.unterminated = False

    def __iter__(self) -> Iterator[tuple[int, int, Any]]:
        try:
            fd = os.open(self.path, READ_FLAGS)
        except FileNotFoundError:
            return
        try:
            yield from self._scan(fd)
        finally:
            os.close(fd)

    def _scan(self, fd: int) -> Iterator[tuple[int, int, Any]]:
        path = self.path
        loads = orjson.loads
        decode_error = orjson.JSONDecodeError
        lineno = 0
        offset = 0  # byte offset of the next line to look at
        rest = b""
        bad: int | None = None  # line number of the first undecodable line, torn if nothing follows it
        bad_detail = ""
        bad_start = 0
        while True:
            chunk = os.read(fd, CHUNK_SIZE)
            if not chunk:
                break
            lines = (rest + chunk).split(b"\n") if rest else chunk.split(b"\n")
            rest = lines.pop()
            for line in lines:
                lineno += 1
                start = offset
                offset += len(line) + 1
                try:
                    value = loads(line)
                except decode_error as exc:
                    if not line.strip():
                        continue
                    if bad is not None:
                        raise corrupt_error(path, bad, bad_detail) from None
                    bad, bad_start, bad_detail = lineno, start, f"invalid JSON ({exc})"
                    continue
                if bad is not None:
                    raise corrupt_error(path, bad, bad_detail)
                yield lineno, start, value
            del lines
        self.size = offset + len(rest)
        self.good_size = self.size
        if rest.strip():
            lineno += 1
            try:
                value = loads(rest)
            except decode_error:
                if bad is not None:
                    raise corrupt_error(path, bad, bad_detail) from None
                self.torn_line, self.good_size = lineno, offset
                return
            if bad is not None:
                raise corrupt_error(path, bad, bad_detail)
            self.unterminated = True
            yield lineno, offset, value
        elif rest:
            # trailing blanks without a newline: harmless, but the next append must start a new line
            self.unterminated = bad is None
        if bad is not None:
            self.torn_line, self.good_size = bad, bad_start
            self.unterminated = False


def scan_jsonl(path: Path) -> tuple[list[Any], JsonlReader]:
    """All records of ``path`` at once (for small files); the reader tells about the tail."""
    reader = JsonlReader(path)
    return [value for _line, _offset, value in reader], reader


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


def terminate_line(path: Path, *, durable: bool = True) -> None:
    """Append the missing ``\\n`` after a complete final record (see :class:`JsonlReader`)."""
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | getattr(os, "O_CLOEXEC", 0))
    try:
        os.write(fd, b"\n")
        if durable:
            os.fsync(fd)
    finally:
        os.close(fd)


def repair_tail(fd: int) -> None:
    """Make an append-only file opened as ``fd`` (read/write, ``O_APPEND``) end on a line boundary.

    Used before appending to files whose readers are tolerant (runtime events): without it the next
    record would be glued onto the last one. A final line that decodes is a complete record that only
    lacks its newline, which is added; one that does not is a torn write and is cut off.
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
            _finish_tail(fd, start + nl + 1, size)
            return
        pos = start
    _finish_tail(fd, 0, size)


def _finish_tail(fd: int, line_start: int, size: int) -> None:
    last = os.pread(fd, size - line_start, line_start)
    try:
        orjson.loads(last)
    except orjson.JSONDecodeError:
        if last.strip():
            os.ftruncate(fd, line_start)
            return
    os.write(fd, b"\n")


__all__ = [
    "CHUNK_SIZE",
    "CODE_CORRUPT",
    "CODE_TORN",
    "JsonlReader",
    "corrupt_error",
    "read_bytes",
    "repair_tail",
    "scan_jsonl",
    "terminate_line",
    "torn_warning",
    "truncate_file",
]
