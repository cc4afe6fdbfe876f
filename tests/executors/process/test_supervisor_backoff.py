"""The shared supervisor's crash backoff: doubling from the tolerated crashes, capped, reset after a
stable uptime, given up after too many in a row; the orchestrator's formula is the same policy."""

from __future__ import annotations

import asyncio

from goondan.executors.process import ManualClock, backoff_ms
from goondan.executors.process._supervisor import BackoffPolicy, CrashBackoff


def test_crash_backoff_doubles_is_capped_and_gives_up_after_the_limit() -> None:
    backoff = CrashBackoff(BackoffPolicy(1000, 5000, give_up_after=5), ManualClock())
    backoff.started()
    assert [backoff.crashed() for _ in range(6)] == [1000, 2000, 4000, 5000, 5000, None]


def test_crash_backoff_resets_after_a_stable_uptime() -> None:
    clock = ManualClock()
    backoff = CrashBackoff(BackoffPolicy(1000, 60000, stable_ms=30000), clock)
    backoff.started()
    assert [backoff.crashed(), backoff.crashed(), backoff.crashed()] == [1000, 2000, 4000]
    backoff.started()
    asyncio.run(clock.advance(29999))
    assert backoff.crashed() == 8000  # not stable yet: still the same run of crashes
    backoff.started()
    asyncio.run(clock.advance(30000))
    assert backoff.crashed() == 1000 and backoff.crashes == 1


def test_the_orchestrator_crash_loop_delay_is_the_shared_policy() -> None:
    policy = BackoffPolicy(1000, 300000, threshold=5)
    assert [policy.delay_ms(c) for c in range(1, 6)] == [0, 0, 0, 0, 0]
    assert [backoff_ms(c, 5, 1000, 300000) for c in (6, 7, 8, 30)] == [policy.delay_ms(c) for c in (6, 7, 8, 30)]
