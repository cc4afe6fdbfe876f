"""The line format of ``events.jsonl`` and how :meth:`FileInstanceStore.load` tells the pending turn's
events from what an un-fsynced clear can leave behind.

Why lines are tagged
====================

An append commit makes the turn durable by appending it to ``base.jsonl`` and fsyncing that file, then
empties ``events.jsonl`` - *without* an fsync (one fsync per turn instead of two) - by overwriting
the turn's bytes with newlines (blank lines; a large turn is truncated instead). After a power loss
that clear may be lost in whole or in part, and the next turn's lines (written at offset 0) may have
reached the disk in part or not at all. So the file can hold, in this order:

* lines of the pending turn (written last, from offset 0),
* then what is left of older, already committed turns: whole lines, a line cut anywhere (its head
  overwritten by newer bytes or by newlines), blank lines and blocks of zeros.

Every line therefore names the turn it belongs to and carries a checksum::

    {"base":<N>,"crc":<CRC>,"type":"append","message":{...}}

``base`` is the number of messages ``base.jsonl`` held when the turn started: the events apply on top of
exactly that base. Between two *durable* clears (the rewrite commit and recovery still fsync theirs)
only append commits happen, and each one grows the base, so a committed turn's ``base`` is always
smaller than the current base length, and its appended messages sit in ``base.jsonl`` at index
``base`` and after (message ids are unique random ids). ``crc`` is the CRC-32 of ``<N>,`` followed by
the bytes after the ``"crc":<CRC>,`` prefix up to the newline: a line whose head is new and whose
tail is old (new bytes that reached the disk only in part, over an old line) does not verify, so it
can never pass for an event - not even when only the tag itself was overwritten.

Classification (:func:`scan_events`)
====================================

With ``N`` the number of messages in ``base.jsonl``:

1. The *pending prefix* is the run of verified lines at the start of the file that share the first
   line's tag ``h``. If ``h == N`` these are the pending turn's events. If ``h < N`` and they are
   appends whose first ``N - h`` messages are exactly ``base[h:]`` while the run holds more events
   than that, an append commit was cut short (the process died while writing ``base.jsonl``): those
   base lines are removed and the run is replayed - the recovery the store always did. Otherwise the
   run is made of remnants and checked as below. ``h > N`` cannot come from a crash: corrupt.
2. After the pending prefix only remnants may follow: a verified append line tagged ``t < N`` whose
   message is in ``base.jsonl`` at an index ``>= t`` (provably committed), or an unverifiable line
   (torn, overwritten or zeros - at worst the torn write of the pending turn's next event, which a
   torn final line has always been allowed to lose). Anything else - a pending-turn event after such
   a line (an event before it was lost: replaying would leave a hole), a line of no known turn - is
   ``E_STORAGE_CORRUPT`` naming the file and line; nothing is dropped silently.

Files written before lines were tagged (no ``base`` key) are read exactly as before: every line is
a pending event, and only a torn *final* line may be dropped. The store fsyncs its next clear after
loading such a file, so an untagged line can never become an undetectable remnant.
"""

from __future__ import annotations

import zlib
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import orjson

from ..errors import GoondanError
from ..messages import _EVENT_KEYS, event_from_record
from ._jsonl import corrupt_error

TAG_KEY = "base"
CRC_KEY = "crc"


def _crc(base: int, body: bytes | memoryview) -> int:
    """The checksum covers the tag too: new bytes that reached the disk only as far as ``{"base":N``
    over an old line must not turn that old line into an event of the pending turn."""
    return zlib.crc32(body, zlib.crc32(b"%d," % base))


def tag_line(line: bytes, base: int) -> bytes:
    """``line`` (one encoded record, ``{...}\\n``) with ``base`` and its checksum put in front."""
    body = line[1:]
    crc = _crc(base, body[:-1] if body.endswith(b"\n") else body)
    return b'{"base":%d,"crc":%d,' % (base, crc) + body


def append_seed(base: int) -> int:
    """The CRC of everything an append line's checksum covers before the message (see
    :func:`tag_append_line`); the same for every append of a turn, so the store keeps it."""
    return zlib.crc32(b'%d,"type":"append","message":' % base)


def tag_append_line(record: bytes, base: int, seed: int) -> bytes:
    """The line of an ``append`` event whose message encodes to ``record`` (``{...}``, no newline),
    with ``seed`` = ``append_seed(base)``: the same bytes :func:`tag_line` gives for
    ``{"type":"append","message":<record>}``, built without encoding the event around the message
    (the record is reused for base.jsonl at commit)."""
    crc = zlib.crc32(b"}", zlib.crc32(record, seed))
    return b'{"base":%d,"crc":%d,"type":"append","message":%b}\n' % (base, crc, record)


@dataclass(slots=True)
class _Line:
    lineno: int
    start: int
    end: int  # byte offset after the line's newline (or the end of the file)
    tag: int | None = None  # None: unverifiable (torn, overwritten, zeros, not a tagged record)
    record: dict[str, Any] | None = None


def _parse(raw: bytes) -> tuple[int | None, dict[str, Any] | None, bool]:
    """``(tag, record without tag and crc, legacy)`` of one line; ``tag`` is None for a line that
    does not decode or verify; ``legacy`` for an untagged object with exactly an event's keys
    (whether such a line makes the file a legacy one is decided by :func:`scan_events`)."""
    try:
        value = orjson.loads(raw)
    except orjson.JSONDecodeError:
        return None, None, False
    if not isinstance(value, dict):
        return None, None, False
    if TAG_KEY not in value:
        etype = value.get("type")
        keys = _EVENT_KEYS.get(etype) if isinstance(etype, str) else None
        return None, value, keys is not None and set(value) == keys
    tag, crc = value.pop(TAG_KEY), value.pop(CRC_KEY, None)
    if type(tag) is not int or type(crc) is not int or tag < 0:
        return None, None, False
    prefix = b'{"base":%d,"crc":%d,' % (tag, crc)
    if not raw.startswith(prefix) or _crc(tag, memoryview(raw)[len(prefix) :]) != crc:
        return None, None, False
    return tag, value, False


@dataclass(slots=True)
class EventsScan:
    """What :func:`scan_events` decided (see the module docstring)."""

    legacy: bool = False
    events: list[dict[str, Any]] = field(default_factory=list)
    #: the base lines from this index on are an unfinished append commit of the pending events
    cut_base_to: int | None = None
    #: bytes of the file to keep: the pending prefix (everything after it is dropped)
    keep_size: int = 0
    size: int = 0
    #: the kept last line is a complete record without its newline
    unterminated: bool = False
    remnants: int = 0
    torn_line: int | None = None


def split_lines(data: bytes) -> list[tuple[int, int, int, bytes]]:
    """``(lineno, start, end, raw)`` of the non-blank lines of ``data``."""
    out: list[tuple[int, int, int, bytes]] = []
    pos = 0
    size = len(data)
    lineno = 0
    while pos < size:
        nl = data.find(b"\n", pos)
        end = size if nl < 0 else nl + 1
        lineno += 1
        raw = data[pos : end - 1] if nl >= 0 else data[pos:end]
        if raw.strip():
            out.append((lineno, pos, end, raw))
        pos = end
    return out


def scan_events(path: Path, data: bytes, base_ids: Sequence[str]) -> EventsScan:
    """Classify the lines of ``events.jsonl`` (``data``) against the ids of ``base.jsonl``'s messages.

    Returns ``legacy=True`` (and nothing else) for a file with an untagged record: the caller reads
    it the old way. Raises ``E_STORAGE_CORRUPT`` for what no crash can explain.
    """
    scan = EventsScan(size=len(data))
    lines: list[_Line] = []
    untagged = verified = False
    for lineno, start, end, raw in split_lines(data):
        tag, record, legacy = _parse(raw)
        if legacy and not lines:
            return EventsScan(legacy=True, size=len(data))
        untagged = untagged or legacy
        verified = verified or tag is not None
        lines.append(_Line(lineno, start, end, tag, None if legacy or tag is None else record))
    if untagged and not verified:
        # Older writers' lines start at offset 0 (and are cleared durably before tagged lines can
        # become remnants), so a file of them is read the old way, which reports damage before
        # the last line. An untagged event after tagged lines is a remnant's cut tail that happens
        # to decode (a new ``{`` over an old line's ``"type":...``): unverifiable, like a torn line.
        return EventsScan(legacy=True, size=len(data))
    n = len(base_ids)
    pending: list[_Line] = []
    if lines and lines[0].tag is not None:
        head = lines[0].tag
        for line in lines:
            if line.tag != head:
                break
            pending.append(line)
        if head > n:
            raise corrupt_error(
                path,
                lines[0].lineno,
                f"the event applies on top of {head} messages but base.jsonl holds {n}",
            )
        if head < n:
            ids = [_append_id(line) for line in pending]
            if len(ids) > n - head and None not in ids and list(base_ids[head:]) == ids[: n - head]:
                scan.cut_base_to = head
            else:
                pending = []
    current = n if scan.cut_base_to is None else scan.cut_base_to
    positions: dict[str, int] | None = None
    first_bad: _Line | None = None
    for line in lines[len(pending) :]:
        if line.tag is None:
            first_bad = first_bad or line
            continue
        mid = _append_id(line)
        if line.tag < current and mid is not None:
            if positions is None:
                positions = {mid_: i for i, mid_ in enumerate(base_ids)}
            if positions.get(mid, -1) >= line.tag:
                scan.remnants += 1
                continue
        if first_bad is not None:
            raise corrupt_error(path, first_bad.lineno, "damaged line followed by an event of the pending turn")
        if line.tag == current:
            detail = "an event of the pending turn follows lines of older turns (events before it were lost)"
        else:
            detail = f"the event (on top of {line.tag} messages) belongs to no pending or committed turn"
        raise corrupt_error(path, line.lineno, detail)
    events = scan.events
    for line in pending:
        try:
            events.append(event_from_record(line.record))
        except GoondanError as exc:
            raise corrupt_error(path, line.lineno, exc.message) from None
    scan.keep_size = pending[-1].end if pending else 0
    scan.torn_line = first_bad.lineno if first_bad is not None else None
    scan.unterminated = bool(pending) and scan.keep_size == len(data) and not data.endswith(b"\n")
    return scan


def _append_id(line: _Line) -> str | None:
    """The message id of an append event's line (``None`` for other events)."""
    record = line.record
    if record is None or record.get("type") != "append":
        return None
    message = record.get("message")
    mid = message.get("id") if isinstance(message, dict) else None
    return mid if isinstance(mid, str) else None


def current_records(data: bytes, base_count: int) -> list[dict[str, Any]]:
    """For viewers (no repair, no errors): the records of ``data`` that are events of the turn on top
    of a base of ``base_count`` messages, without tag and checksum; untagged (older) records as they
    are. Lines of committed turns and damaged lines are left out."""
    out: list[dict[str, Any]] = []
    for _lineno, _start, _end, raw in split_lines(data):
        tag, record, legacy = _parse(raw)
        if record is not None and (legacy or tag == base_count):
            out.append(record)
    return out


__all__ = [
    "CRC_KEY",
    "TAG_KEY",
    "EventsScan",
    "append_seed",
    "current_records",
    "scan_events",
    "split_lines",
    "tag_append_line",
    "tag_line",
]
