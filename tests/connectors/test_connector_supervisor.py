"""Connector processes run under the shared supervisor: a connector host that exits, or whose
``run(ctx)`` raises, is started again after a doubling delay (timed by an injectable clock) and given
up after too many crashes in a row; stopping one goes through shutdown → ack."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from pathlib import Path

import pytest

from goondan.connectors._supervisor import ConnectionPlan, ConnectorProcess
from goondan.executors.process import ManualClock

EXITS = """\
import asyncio, os


async def run(ctx):
    ctx.ready()
    await asyncio.sleep(0.05)
    os._exit(3)
"""

RAISES = """\
import os


async def run(ctx):
    ctx.ready()
    count = os.path.join(os.path.dirname(__file__), "count")
    n = len(open(count).read()) if os.path.exists(count) else 0
    with open(count, "a") as fh:
        fh.write("x")
    raise ValueError(f"the connector broke (attempt {n})")
"""

RAISES_ALWAYS_THE_SAME = """\
async def run(ctx):
    ctx.ready()
    raise PermissionError("the token was rejected")
"""

SERVES = """\
import asyncio


async def run(ctx):
    ctx.ready()
    await asyncio.Event().wait()
"""


class NoRuntime:
    """These connectors never emit: a turn request would be a bug in the test."""

    async def request(self, *args: object, **kwargs: object) -> object:
        raise AssertionError("no turn expected")


def _plan(tmp_path: Path, source: str) -> ConnectionPlan:
    entry = tmp_path / "conn.py"
    entry.write_text(source, encoding="utf-8")
    return ConnectionPlan(name="c1", connector="custom", entry=entry, config={}, secrets={}, rules=())


async def _until(check: Callable[[], bool], timeout: float = 20.0) -> None:
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while not check():
        assert loop.time() < deadline, "timed out"
        await asyncio.sleep(0.01)


def test_a_connector_that_exits_is_restarted_with_doubling_delays_then_given_up(tmp_path: Path) -> None:
    async def main() -> tuple[list[float], int, str | None]:
        clock = ManualClock()
        proc = ConnectorProcess(_plan(tmp_path, EXITS), NoRuntime(), entry_agent="a", clock=clock)
        await proc.start()
        try:
            for n in range(1, 6):
                await _until(lambda n=n: len(proc.delays) == n and clock.sleepers == 1)  # type: ignore[misc]
                await clock.advance(proc.delays[-1])
            await asyncio.wait_for(proc.stopped.wait(), 20)
            return proc.delays, proc.restarts, proc.stop_reason
        finally:
            await proc.stop()

    delays, restarts, reason = asyncio.run(main())
    assert delays == [1000, 2000, 4000, 8000, 16000]
    assert restarts == 5
    assert reason == "failed"


def test_a_connector_whose_run_raises_is_restarted_like_a_crash_and_its_traceback_logged(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    async def main() -> tuple[list[float], int]:
        clock = ManualClock()
        proc = ConnectorProcess(_plan(tmp_path, RAISES), NoRuntime(), entry_agent="a", clock=clock)
        await proc.start()
        try:
            await _until(lambda: len(proc.delays) == 1 and clock.sleepers == 1)
            await clock.advance(proc.delays[-1])
            await _until(lambda: len(proc.delays) == 2 and clock.sleepers == 1)
            return proc.delays, proc.restarts
        finally:
            await proc.stop()

    with caplog.at_level(logging.ERROR, logger="goondan.connectors"):
        delays, restarts = asyncio.run(main())
    assert delays == [1000, 2000] and restarts == 1
    assert "Connection/c1: the connector's run() raised ValueError: the connector broke (attempt 0)" in caplog.text
    assert "Traceback (most recent call last)" in caplog.text
    assert 'raise ValueError(f"the connector broke (attempt {n})")' in caplog.text


def test_a_connector_whose_run_raises_the_same_error_after_a_restart_is_given_up(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    async def main() -> tuple[list[float], int, str | None]:
        clock = ManualClock()
        proc = ConnectorProcess(_plan(tmp_path, RAISES_ALWAYS_THE_SAME), NoRuntime(), entry_agent="a", clock=clock)
        await proc.start()
        try:
            await _until(lambda: len(proc.delays) == 1 and clock.sleepers == 1)
            await clock.advance(proc.delays[-1])
            await asyncio.wait_for(proc.stopped.wait(), 20)
            return proc.delays, proc.restarts, proc.stop_reason
        finally:
            await proc.stop()

    with caplog.at_level(logging.ERROR, logger="goondan.connectors"):
        delays, restarts, reason = asyncio.run(main())
    assert delays == [1000] and restarts == 1 and reason == "failed"
    assert "raised PermissionError: the token was rejected again after a restart; giving up" in caplog.text


def test_stopping_a_connector_is_acknowledged_and_never_restarts_it(tmp_path: Path) -> None:
    async def main() -> tuple[str | None, list[float], int | None]:
        proc = ConnectorProcess(_plan(tmp_path, SERVES), NoRuntime(), entry_agent="a", clock=ManualClock())
        await proc.start()
        loop = asyncio.get_running_loop()
        t0 = loop.time()
        await proc.stop()
        assert loop.time() - t0 < 2.0  # acknowledged: no grace period waited out, no SIGKILL
        return proc.stop_reason, proc.delays, proc.exit_code

    reason, delays, code = asyncio.run(main())
    assert reason == "shutdown" and delays == [] and code == 0
