"""wait and self-restart (digest §4.4, §9.2 tools)."""

from __future__ import annotations

import asyncio
import time

import pytest
from tools_testkit import FakeCtx, run

from goondan.base.tools import self_restart, wait
from goondan.base.tools._common import ToolInputError


def test_wait_reports_seconds_and_milliseconds(ctx: FakeCtx) -> None:
    started = time.monotonic()
    assert run(wait.wait_seconds, ctx, {"seconds": 0.15}) == {"waitedSeconds": 0.15, "waitedMs": 150}
    assert time.monotonic() - started >= 0.14
    assert run(wait.wait_seconds, ctx, {"seconds": 0}) == {"waitedSeconds": 0, "waitedMs": 0}


def test_wait_one_and_a_half_seconds_reports_1500_ms(ctx: FakeCtx, monkeypatch: pytest.MonkeyPatch) -> None:
    slept: list[float] = []

    async def fake_sleep(seconds: float) -> None:
        slept.append(seconds)

    monkeypatch.setattr(wait.asyncio, "sleep", fake_sleep)
    assert run(wait.wait_seconds, ctx, {"seconds": 1.5}) == {"waitedSeconds": 1.5, "waitedMs": 1500}
    assert slept == [1.5]


def test_wait_does_not_block_the_event_loop(ctx: FakeCtx) -> None:
    async def main() -> int:
        ticks = 0

        async def ticker() -> None:
            nonlocal ticks
            while True:
                await asyncio.sleep(0.01)
                ticks += 1

        task = asyncio.ensure_future(ticker())
        await wait.wait_seconds(ctx, {"seconds": 0.2})
        task.cancel()
        return ticks

    assert asyncio.run(main()) >= 8


@pytest.mark.parametrize(
    ("value", "message"),
    [
        (301, "'seconds' must be less than or equal to 300"),
        (-1, "'seconds' must be greater than or equal to 0"),
        ("5", "'seconds' must be a finite number"),
        (None, "'seconds' must be a finite number"),
    ],
)
def test_wait_rejects_out_of_range_seconds(ctx: FakeCtx, value: object, message: str) -> None:
    with pytest.raises(ToolInputError, match=message):
        run(wait.wait_seconds, ctx, {"seconds": value})


def test_self_restart_payload(ctx: FakeCtx) -> None:
    assert run(self_restart.request, ctx, {}) == {
        "ok": True,
        "restartRequested": True,
        "restartReason": "tool:self-restart",
    }
    assert run(self_restart.request, ctx, {"reason": "reload tools"})["restartReason"] == "reload tools"
    with pytest.raises(ToolInputError, match="unexpected argument"):
        run(self_restart.request, ctx, {"why": "x"})
