"""Identifier helpers. Trace and span ids follow W3C Trace Context / OpenTelemetry sizes so that the
runtime events can be shipped to any OTel-compatible backend unchanged."""

from __future__ import annotations

import os
import time
from datetime import UTC, datetime

_POOL_SIZE = 4096
_pool = ""
_pos = 0


def _reset_pool() -> None:
    global _pool, _pos
    _pool, _pos = "", 0


# A forked child must never hand out the ids its parent's buffer still holds (agent processes are forked).
os.register_at_fork(after_in_child=_reset_pool)


def _random_hex(nbytes: int) -> str:
    """``nbytes`` random bytes from the OS as hex. A turn needs about a dozen ids, so the bytes come
    from a 4 KiB buffer refilled with one ``os.urandom`` call instead of a syscall per id."""
    global _pool, _pos
    start = _pos
    end = start + 2 * nbytes
    if end > len(_pool):
        _pool = os.urandom(_POOL_SIZE).hex()
        start, end = 0, 2 * nbytes
    _pos = end
    return _pool[start:end]


def new_trace_id() -> str:
    """32 lowercase hex characters, never all zeros."""
    while True:
        value = _random_hex(16)
        if value != "0" * 32:
            return value


def new_span_id() -> str:
    """16 lowercase hex characters, never all zeros."""
    while True:
        value = _random_hex(8)
        if value != "0" * 16:
            return value


def new_id(prefix: str) -> str:
    return f"{prefix}_{_random_hex(12)}"


def is_trace_id(value: object) -> bool:
    return isinstance(value, str) and len(value) == 32 and _is_hex(value) and value != "0" * 32


def is_span_id(value: object) -> bool:
    return isinstance(value, str) and len(value) == 16 and _is_hex(value) and value != "0" * 16


def _is_hex(value: str) -> bool:
    try:
        int(value, 16)
    except ValueError:
        return False
    return value == value.lower()


# The second the caches below were last refreshed for: its datetime fields and its text up to the
# milliseconds ("2026-11-24T10:11:12."). The clock's second changes once a second; its millisecond
# changes during most turns (a turn takes a fraction of one), so a new millisecond is formatted from
# these: about 0.2 µs instead of 1.0-2.6 µs with datetime.replace and isoformat (timeit, this VM).
_sec = -1
_sec_fields: tuple[int, int, int, int, int, int] = (1970, 1, 1, 0, 0, 0)
_sec_text = "1970-01-01T00:00:00."


def _set_second(sec: int) -> None:
    global _sec, _sec_fields, _sec_text
    moment = datetime.fromtimestamp(sec, UTC)
    _sec_fields = (moment.year, moment.month, moment.day, moment.hour, moment.minute, moment.second)
    _sec_text = moment.isoformat()[:19] + "."
    _sec = sec


# the clock readings (ns) of the millisecond _last_dt and _last_iso are for: [_ms_from, _ms_until)
_ms_from = _ms_until = 0
_last_dt = datetime.fromtimestamp(0, UTC)
_last_iso = ""


def _new_millisecond(ns: int) -> None:
    """Both cached forms of the millisecond that clock reading ``ns`` falls in: the datetime
    :func:`utc_now` hands out (its :func:`iso` text stored with it: messages are encoded, and it
    costs a fifth of a miss) and the text :func:`now_iso` hands out."""
    global _ms_from, _ms_until, _last_dt, _last_iso
    ms = ns // 1_000_000
    sec, milli = divmod(ms, 1000)
    if sec != _sec:
        _set_second(sec)
    text = f"{_sec_text}{milli:03d}Z"
    moment = datetime(*_sec_fields, milli * 1000, UTC)
    if len(_iso_cache) >= 256:
        _iso_cache.clear()
    _iso_cache[moment] = text
    _last_dt, _last_iso = moment, text
    _ms_from = ms * 1_000_000
    _ms_until = _ms_from + 1_000_000


def utc_now() -> datetime:
    """The current UTC time at millisecond precision (what every record stores). Every message gets
    one, so the datetime object is reused while the millisecond does not change (it is immutable).
    The clock reading is compared with the millisecond's bounds rather than divided: a division of
    a nanosecond count (a two-digit integer) is the costliest step of a hit."""
    ns = time.time_ns()
    if not _ms_from <= ns < _ms_until:
        _new_millisecond(ns)
    return _last_dt


_iso_cache: dict[datetime, str] = {}


def iso(dt: datetime) -> str:
    """ISO-8601 with milliseconds and a ``Z`` suffix, the format every record on disk uses.

    A message's ``createdAt`` is formatted each time it is encoded (its event line, then its base
    line at commit, and IPC in between), so recent results are kept: a dict hit costs ~0.1 µs, the
    formatting ~3 µs. Equal aware datetimes are the same instant, hence the same UTC text."""
    text = _iso_cache.get(dt)
    if text is None:
        utc = dt if dt.tzinfo is UTC else dt.astimezone(UTC)
        text = utc.isoformat(timespec="milliseconds")[:-6] + "Z"
        if len(_iso_cache) >= 256:
            _iso_cache.clear()
        _iso_cache[dt] = text
    return text


def now_iso() -> str:
    """The current time as ISO-8601 with milliseconds. Called ~10 times per turn, so the formatted
    string is reused while the clock stays within its millisecond (see :func:`utc_now`)."""
    ns = time.time_ns()
    if not _ms_from <= ns < _ms_until:
        _new_millisecond(ns)
    return _last_iso


def parse_iso(value: str) -> datetime:
    if value.endswith("Z"):
        value = value[:-1] + "+00:00"
    dt = datetime.fromisoformat(value)
    if dt.tzinfo is None:
        dt = dt.replace(tzinfo=UTC)
    return dt
