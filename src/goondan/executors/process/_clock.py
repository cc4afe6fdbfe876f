"""Time as the orchestrator sees it, injectable so that backoff, grace periods and idle eviction are
tested by advancing a manual clock instead of sleeping."""

from __future__ import annotations

import asyncio
import heapq
import itertools
import time
from typing import Protocol


class Clock(Protocol):
    def now_ms(self) -> float:
        """Milliseconds on a monotonic scale."""

    async def sleep_ms(self, ms: float) -> None:
        """Return after ``ms`` milliseconds of this clock have passed."""


class RealClock:
    def now_ms(self) -> float:
        return time.monotonic() * 1000.0

    async def sleep_ms(self, ms: float) -> None:
        await asyncio.sleep(max(0.0, ms) / 1000.0)


class ManualClock:
    """A clock that only moves when :meth:`advance` is called; sleepers wake in deadline order."""

    def __init__(self, start_ms: float = 0.0) -> None:
        self._now = start_ms
        self._sleepers: list[tuple[float, int, asyncio.Future[None]]] = []
        self._seq = itertools.count()

    def now_ms(self) -> float:
        return self._now

    async def sleep_ms(self, ms: float) -> None:
        if ms <= 0:
            await asyncio.sleep(0)
            return
        fut: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        heapq.heappush(self._sleepers, (self._now + ms, next(self._seq), fut))
        await fut

    @property
    def sleepers(self) -> int:
        return sum(1 for _, _, f in self._sleepers if not f.done())

    async def advance(self, ms: float) -> None:
        """Move time forward by ``ms`` and let every woken sleeper run."""
        self._now += ms
        while self._sleepers and self._sleepers[0][0] <= self._now:
            _, _, fut = heapq.heappop(self._sleepers)
            if not fut.done():
                fut.set_result(None)
        for _ in range(5):
            await asyncio.sleep(0)


__all__ = ["Clock", "ManualClock", "RealClock"]
