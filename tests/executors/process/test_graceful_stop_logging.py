"""graceful_stop's SIGKILL of a child that never acknowledged its shutdown: a warning when the stop
was a graceful one nobody forced (a restart, the end of ``gdn run``), since the child should have
stopped by itself; an INFO line when it was an interrupt (Ctrl+C), whose outcome the kill is.
A real child process that ignores the shutdown message, killed by a real signal."""

from __future__ import annotations

import asyncio
import logging
import sys

import pytest

from goondan.executors.process._clock import RealClock
from goondan.executors.process._supervisor import graceful_stop


async def _stop_a_child_that_never_acks(interrupt: bool) -> int:
    proc = await asyncio.create_subprocess_exec(sys.executable, "-c", "import time; time.sleep(30)")
    loop = asyncio.get_running_loop()
    acked: asyncio.Future[None] = loop.create_future()
    exited: asyncio.Future[int] = loop.create_future()
    waiter = loop.create_task(proc.wait())
    waiter.add_done_callback(lambda t: exited.set_result(t.result()))
    await graceful_stop(
        name="a:k",
        send_shutdown=lambda: None,  # the child never reads it, like one whose loop is blocked
        acked=acked,
        exited=exited,
        kill=proc.send_signal,
        grace_ms=200,
        clock=RealClock(),
        interrupt=interrupt,
    )
    return await exited


@pytest.mark.parametrize(("interrupt", "level"), [(False, logging.WARNING), (True, logging.INFO)])
def test_a_sigkill_after_no_ack_warns_only_when_the_stop_was_not_an_interrupt(
    interrupt: bool, level: int, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG, logger="goondan.executors.process")
    assert asyncio.run(_stop_a_child_that_never_acks(interrupt)) == -9
    kills = [r for r in caplog.records if "SIGKILL" in r.getMessage()]
    assert [r.levelno for r in kills] == [level], [(r.levelname, r.getMessage()) for r in kills]
