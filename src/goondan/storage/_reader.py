"""A read-only view of one instance on disk, for viewers that run beside a live writer.

The writer (another process, holding the lease) appends to ``events.jsonl`` during a turn and folds
it into ``base.jsonl`` at commit (see :mod:`goondan.storage`). This reader never takes the lease and
never repairs anything; it reads what is there and copes with the two races a commit can show it:

* An append commit writes the turn to ``base.jsonl`` *then* clears ``events.jsonl``. Reading the
  events first and base second can see the turn in both; the appended messages already at the tail
  of base are dropped from the events (ids are unique), so no message shows twice. Reading in the
  other order could miss a turn for a moment, which is why the events come first.
* A rewrite commit renames a new ``base.jsonl`` into place: the inode changes and the line index is
  rebuilt; replaying the old events on the new base is idempotent for replace/remove.

Paging is by a line index of ``base.jsonl`` (the byte offset of every complete line), extended from
where it stopped while the file only grows, so a page of a 10,000-message history reads only its own
lines. Runtime events are tailed from a byte offset cursor. Only complete (newline-terminated) lines
count: the writer appends whole lines with one ``write``, so a line without its newline is still in
flight.
"""

from __future__ import annotations

import contextlib
import os
from array import array
from collections.abc import Hashable
from pathlib import Path
from typing import Any

import orjson

from ..errors import GoondanError
from ..messages import Message, event_from_record
from ._atomic import READ_FLAGS
from ._events import current_records
from ._instance import BASE_FILE, EVENTS_FILE, METADATA_FILE, RUNTIME_EVENTS_FILE

_CHUNK = 1 << 20


def _stat_key(path: Path) -> tuple[int, int, int]:
    try:
        st = os.stat(path)
    except OSError:
        return (0, 0, 0)
    return (st.st_ino, st.st_size, st.st_mtime_ns)


def _pread_all(fd: int, start: int, end: int) -> bytes:
    parts: list[bytes] = []
    pos = start
    while pos < end:
        chunk = os.pread(fd, min(_CHUNK, end - pos), pos)
        if not chunk:
            break
        parts.append(chunk)
        pos += len(chunk)
    return b"".join(parts)


def _decode_lines(data: bytes) -> list[Any]:
    """The JSON values of the complete lines of ``data``; undecodable lines are skipped (a viewer
    shows what it can; the writer's own load reports damage)."""
    out: list[Any] = []
    loads, error = orjson.loads, orjson.JSONDecodeError
    for line in data.split(b"\n"):
        if not line.strip():
            continue
        try:
            out.append(loads(line))
        except error:
            continue
    return out


def fold_events(messages: list[Message], events: list[dict[str, Any]]) -> list[Message]:
    """``messages`` (changed in place) with parsed ``events`` applied; a missing target is skipped."""
    for e in events:
        kind = e["type"]
        if kind == "append":
            messages.append(e["message"])
        elif kind == "truncate":
            messages = []
        else:
            target = e["targetId"]
            idx = next((i for i, m in enumerate(messages) if m.id == target), None)
            if idx is None:
                continue
            if kind == "replace":
                messages[idx] = e["message"]
            else:
                del messages[idx]
    return messages


class FileInstanceReader:
    """:class:`~goondan.storage.InstanceReader` of the filesystem store (module docstring)."""

    def __init__(self, path: str | os.PathLike[str], *, agent_name: str, instance_key: str) -> None:
        self.path = Path(path)
        self.agent_name = agent_name
        self.instance_key = instance_key
        messages_dir = self.path / "messages"
        self.base_path = messages_dir / BASE_FILE
        self.events_path = messages_dir / EVENTS_FILE
        self.runtime_events_path = messages_dir / RUNTIME_EVENTS_FILE
        self.metadata_path = self.path / METADATA_FILE
        # line index of base.jsonl: offsets of the starts of complete non-blank lines, plus the end
        self._base_ino = -1
        self._starts: array[int] = array("q")
        self._ends: array[int] = array("q")
        self._scanned = 0
        self._runtime_ino = -1

    # ------------------------------------------------------------------ cheap checks

    def metadata(self) -> dict[str, Any] | None:
        try:
            value = orjson.loads(self.metadata_path.read_bytes())
        except (OSError, orjson.JSONDecodeError):
            return None
        return value if isinstance(value, dict) else None

    def version(self) -> Hashable:
        return (
            _stat_key(self.base_path),
            _stat_key(self.events_path),
            _stat_key(self.runtime_events_path),
            _stat_key(self.metadata_path),
        )

    # ------------------------------------------------------------------ conversation

    def _index_base(self, fd: int) -> int:
        """Bring the line index up to date with the open ``base.jsonl``; returns the line count."""
        st = os.fstat(fd)
        if st.st_ino != self._base_ino or st.st_size < self._scanned:
            self._base_ino = st.st_ino
            self._starts = array("q")
            self._ends = array("q")
            self._scanned = 0
        pos = self._scanned
        size = st.st_size
        starts, ends = self._starts, self._ends
        while pos < size:
            chunk = os.pread(fd, min(_CHUNK, size - pos), pos)
            if not chunk:
                break
            last_nl = chunk.rfind(b"\n")
            if last_nl < 0:
                if len(chunk) == size - pos:
                    break  # an unterminated (in-flight) last line
                # a line longer than one chunk: read it whole
                end = self._find_newline(fd, pos + len(chunk), size)
                if end < 0:
                    break
                chunk = os.pread(fd, end + 1 - pos, pos)
                last_nl = len(chunk) - 1
            line_start = 0
            while line_start <= last_nl:
                nl = chunk.find(b"\n", line_start)
                if chunk[line_start:nl].strip():
                    starts.append(pos + line_start)
                    ends.append(pos + nl)
                line_start = nl + 1
            pos += last_nl + 1
        self._scanned = pos
        return len(starts)

    @staticmethod
    def _find_newline(fd: int, pos: int, size: int) -> int:
        while pos < size:
            chunk = os.pread(fd, min(_CHUNK, size - pos), pos)
            if not chunk:
                return -1
            i = chunk.find(b"\n")
            if i >= 0:
                return pos + i
            pos += len(chunk)
        return -1

    def _base_messages(self, fd: int, first: int, last: int) -> list[Message]:
        """Decoded base lines ``[first, last)`` (by index)."""
        if first >= last:
            return []
        data = _pread_all(fd, self._starts[first], self._ends[last - 1] + 1)
        out: list[Message] = []
        for record in _decode_lines(data):
            with contextlib.suppress(GoondanError):
                out.append(Message.from_record(record))
        return out

    def _events_bytes(self) -> bytes:
        """The complete lines of ``events.jsonl`` (the last one may still be in flight)."""
        try:
            data = self.events_path.read_bytes()
        except OSError:
            return b""
        return data[: data.rfind(b"\n") + 1]

    def _open_base(self) -> tuple[int | None, int]:
        """``base.jsonl`` opened, with its line index brought up to date, and its line count."""
        try:
            fd: int | None = os.open(self.base_path, READ_FLAGS)
        except OSError:
            fd = None
        count = self._index_base(fd) if fd is not None else 0
        if fd is None:
            self._starts, self._ends, self._scanned, self._base_ino = array("q"), array("q"), 0, -1
        return fd, count

    def _snapshot(self) -> tuple[int | None, int, list[dict[str, Any]], list[Message] | None]:
        """``(fd, base line count, pending events, full fold or None)``: the events are read before
        base (module docstring) and only those tagged with base's line count are pending (lines of
        a turn committed meanwhile, or left by an interrupted clear, are already in base); untagged
        appends already at base's tail are dropped; a turn that also replaced, removed or truncated
        is folded in full (rare, and only while such a turn runs)."""
        data = self._events_bytes()
        fd, count = self._open_base()
        events: list[dict[str, Any]] = []
        for record in current_records(data, count):
            with contextlib.suppress(GoondanError):
                events.append(event_from_record(record))
        if not events:
            return fd, count, [], None
        if all(e["type"] == "append" for e in events):
            tail = self._base_messages(fd, max(0, count - len(events)), count) if fd is not None else []
            in_base = {m.id for m in tail}
            return fd, count, [e for e in events if e["message"].id not in in_base], None
        base = self._base_messages(fd, 0, count) if fd is not None else []
        return fd, count, events, fold_events(base, events)

    def message_count(self) -> int:
        fd, count, events, folded = self._snapshot()
        if fd is not None:
            os.close(fd)
        return len(folded) if folded is not None else count + len(events)

    def messages(self, offset: int = 0, limit: int | None = None) -> list[Message]:
        offset = max(0, offset)
        fd, count, events, folded = self._snapshot()
        try:
            if folded is not None:
                return folded[offset:] if limit is None else folded[offset : offset + max(0, limit)]
            total = count + len(events)
            stop = total if limit is None else min(total, offset + max(0, limit))
            out = self._base_messages(fd, offset, min(stop, count)) if fd is not None else []
            if stop > count:
                out.extend(e["message"] for e in events[max(0, offset - count) : stop - count])
            return out
        finally:
            if fd is not None:
                os.close(fd)

    def message_events(self) -> list[dict[str, Any]]:
        data = self._events_bytes()
        fd, count = self._open_base()
        if fd is not None:
            os.close(fd)
        return current_records(data, count)

    # ------------------------------------------------------------------ runtime events

    def runtime_events(self, after: int = 0, limit: int | None = None) -> tuple[list[dict[str, Any]], int]:
        try:
            fd = os.open(self.runtime_events_path, READ_FLAGS)
        except OSError:
            return [], 0
        try:
            st = os.fstat(fd)
            if st.st_ino != self._runtime_ino or after > st.st_size:
                # another file (a fresh start recreated it) or a shorter one: start from the first
                if self._runtime_ino != -1 or after > st.st_size:
                    after = 0
                self._runtime_ino = st.st_ino
            data = _pread_all(fd, max(0, after), st.st_size)
        finally:
            os.close(fd)
        end = data.rfind(b"\n")
        if end < 0:
            return [], after
        data = data[: end + 1]
        if limit is None:
            return [r for r in _decode_lines(data) if isinstance(r, dict)], after + end + 1
        out: list[dict[str, Any]] = []
        pos = 0
        loads, error = orjson.loads, orjson.JSONDecodeError
        while pos < len(data) and len(out) < limit:
            nl = data.index(b"\n", pos)
            line = data[pos:nl]
            pos = nl + 1
            if not line.strip():
                continue
            try:
                value = loads(line)
            except error:
                continue
            if isinstance(value, dict):
                out.append(value)
        return out, after + pos

    def close(self) -> None:
        self._starts, self._ends, self._scanned, self._base_ino = array("q"), array("q"), 0, -1
        self._runtime_ino = -1


__all__ = ["FileInstanceReader", "fold_events"]
