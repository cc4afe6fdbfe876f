"""``iso()`` keeps recent results; a cached text must still be the one for that exact instant."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta, timezone
from typing import Any

from goondan._ids import iso


def test_iso_of_equal_instants_in_other_zones_is_the_same_utc_text() -> None:
    utc = datetime(2025, 1, 2, 3, 4, 5, 678000, tzinfo=UTC)
    seoul = utc.astimezone(timezone(timedelta(hours=9)))
    assert iso(seoul) == "2025-01-02T03:04:05.678Z"  # first: formatted from the +09:00 value
    assert iso(utc) == "2025-01-02T03:04:05.678Z"


def test_iso_cache_never_returns_another_instants_text() -> None:
    start = datetime(2025, 1, 2, 3, 4, 5, tzinfo=UTC)
    moments = [start + timedelta(milliseconds=i) for i in range(1000)]  # more than the cache holds
    for _ in range(2):
        for m in moments:
            assert iso(m) == m.strftime("%Y-%m-%dT%H:%M:%S.") + f"{m.microsecond // 1000:03d}Z"


class _Clock:
    """A settable ``time.time_ns`` for goondan._ids (the caches key on the clock's millisecond)."""

    def __init__(self) -> None:
        self.ns = 0

    def time_ns(self) -> int:
        return self.ns


def _reference(ms: int) -> datetime:
    return datetime.fromtimestamp(ms // 1000, UTC).replace(microsecond=(ms % 1000) * 1000)


def test_now_iso_and_utc_now_follow_the_clock_across_second_day_and_year_boundaries(monkeypatch: Any) -> None:
    from goondan import _ids

    clock = _Clock()
    monkeypatch.setattr(_ids, "time", clock)
    # each moment twice (a cache hit), then its neighbours: a millisecond, a second, a day, a year apart
    edges = [1704067199998, 1704067199999, 1704067200000, 1704067200001, 1704153599999, 1704153600000]
    for ms in [*edges, 0, 999, 1000, 951782399999, 951782400000, 4102444799999, 1704067200001, 1704067199999]:
        for extra_ns in (0, 999_999):
            clock.ns = ms * 1_000_000 + extra_ns
            ref = _reference(ms)
            assert _ids.now_iso() == ref.isoformat(timespec="milliseconds")[:-6] + "Z"
            moment = _ids.utc_now()
            assert moment == ref and moment.tzinfo is UTC
            assert iso(moment) == ref.strftime("%Y-%m-%dT%H:%M:%S.") + f"{ms % 1000:03d}Z"
