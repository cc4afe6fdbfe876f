"""``iso()`` keeps recent results; a cached text must still be the one for that exact instant."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta, timezone

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
