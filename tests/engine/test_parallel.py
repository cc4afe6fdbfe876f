"""The scheduler of a step's concurrent tool calls (``goondan.engine._parallel.run_jobs``): results in
job order as soon as the prefix is done, the concurrency bound, exclusive jobs alone, failure and
cancellation stop every job."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from goondan.engine._parallel import CONCURRENT, DEFERRED, Job, ready, run_jobs

STEP = object()  # stands for the step whose calls these jobs are


class Probe:
    def __init__(self) -> None:
        self.running = 0
        self.most = 0
        self.log: list[str] = []
        self.flags: dict[str, tuple[object, object]] = {}

    def job(self, tag: str, seconds: float, *, fail: bool = False) -> Callable[[], Awaitable[str]]:
        async def start() -> str:
            self.running += 1
            self.most = max(self.most, self.running)
            self.flags[tag] = (CONCURRENT.get(), DEFERRED.get())
            self.log.append(f"start {tag}")
            try:
                await asyncio.sleep(seconds)
                if fail:
                    raise RuntimeError(tag)
            finally:
                self.running -= 1
                self.log.append(f"end {tag}")
            return tag

        return start


def run(jobs: list[Job[str]], limit: int = 8) -> list[tuple[int, str]]:
    got: list[tuple[int, str]] = []
    asyncio.run(run_jobs(jobs, limit, lambda i, v: got.append((i, v)), STEP))
    return got


def test_results_are_delivered_in_job_order_whatever_order_they_finish_in() -> None:
    probe = Probe()
    got = run([(False, probe.job("slow", 0.05)), (False, probe.job("fast", 0.0)), (False, ready("ready"))])
    assert got == [(0, "slow"), (1, "fast"), (2, "ready")]
    assert probe.log.index("end fast") < probe.log.index("end slow")
    assert probe.flags["slow"] == (STEP, STEP)  # beside others: sync handlers go to threads


def test_no_more_than_limit_jobs_run_at_once() -> None:
    probe = Probe()
    run([(False, probe.job(str(i), 0.01)) for i in range(7)], limit=3)
    assert probe.most == 3


def test_an_exclusive_job_runs_alone_and_in_place() -> None:
    probe = Probe()
    jobs: list[Job[str]] = [
        (False, probe.job("a", 0.02)),
        (False, probe.job("b", 0.01)),
        (True, probe.job("x", 0.01)),
        (False, probe.job("c", 0.0)),
    ]
    assert [v for _, v in run(jobs)] == ["a", "b", "x", "c"]
    at = probe.log.index
    assert max(at("end a"), at("end b")) < at("start x") < at("end x") < at("start c")
    assert probe.flags["x"] == (None, STEP)  # alone: a sync handler runs as a lone call's does


def test_a_job_that_raises_cancels_the_others_and_its_error_propagates() -> None:
    probe = Probe()
    got: list[tuple[int, str]] = []
    jobs: list[Job[str]] = [(False, probe.job("boom", 0.0, fail=True)), (False, probe.job("long", 5))]
    with pytest.raises(RuntimeError, match="boom"):
        asyncio.run(asyncio.wait_for(run_jobs(jobs, 8, lambda i, v: got.append((i, v)), STEP), 2))
    assert got == [] and probe.running == 0 and "end long" in probe.log


def test_cancelling_the_step_cancels_every_running_job() -> None:
    probe = Probe()

    async def main() -> None:
        task = asyncio.ensure_future(run_jobs([(False, probe.job(str(i), 5)) for i in range(3)], 8, print, STEP))
        await asyncio.sleep(0.05)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task

    asyncio.run(asyncio.wait_for(main(), 2))
    assert probe.running == 0 and sorted(probe.log) == sorted([f"{e} {i}" for e in ("start", "end") for i in range(3)])


@settings(max_examples=40, deadline=None)
@given(
    st.lists(st.tuples(st.booleans(), st.integers(0, 3)), min_size=1, max_size=12),
    st.integers(1, 4),
)
def test_any_mix_of_jobs_keeps_order_bound_and_exclusivity(spec: list[tuple[bool, int]], limit: int) -> None:
    probe = Probe()
    spans: dict[int, tuple[int, int]] = {}
    clock = iter(range(10_000))

    def job(i: int, ms: int) -> Callable[[], Awaitable[str]]:
        inner = probe.job(str(i), ms / 1000)

        async def start() -> str:
            begin = next(clock)
            value = await inner()
            spans[i] = (begin, next(clock))
            return value

        return start

    got = run([(exclusive, job(i, ms)) for i, (exclusive, ms) in enumerate(spec)], limit)
    assert got == [(i, str(i)) for i in range(len(spec))]
    assert probe.most <= limit
    for i, (exclusive, _) in enumerate(spec):
        if exclusive:  # nothing else ran while it did: everything before ended first, everything after began later
            begin, end = spans[i]
            assert all(spans[j][1] < begin for j in range(i)) and all(
                spans[j][0] > end for j in range(i + 1, len(spec))
            )
