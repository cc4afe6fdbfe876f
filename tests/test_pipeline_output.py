"""What middlewares print (goondan._usercode): kept from the answer stream and logged as the output of
the middleware that printed it; what the chain's core prints passes through."""

from __future__ import annotations

import asyncio
import contextlib
import io
import logging
import sys
from collections.abc import Iterator

import pytest

from goondan._usercode import install
from goondan.pipeline import PipelineRegistry, StepState
from goondan.results import StepResult
from test_pipeline import _turn_state


def _step_state() -> StepState:
    return StepState(_turn_state(), 0, [])


def _printing(name: str):
    async def mw(ctx):
        print(f"{name} before")
        result = await ctx.next()
        print(f"{name} after")
        return result

    mw.__qualname__ = name
    return mw


def _run(reg: PipelineRegistry, core) -> StepResult:
    return asyncio.run(reg.chain("step", core).run(_step_state()))


@contextlib.contextmanager
def answer_stream() -> Iterator[tuple[io.StringIO, io.StringIO]]:
    """sys.stdout and sys.stderr replaced by buffers, then by the runtime's proxies around them (as
    in gdn run). Inside the test's body: pytest puts its own streams back between setup and call."""
    saved = sys.stdout, sys.stderr
    out, err = io.StringIO(), io.StringIO()
    sys.stdout, sys.stderr = out, err
    install()
    try:
        yield out, err
    finally:
        sys.stdout, sys.stderr = saved


def test_each_middleware_print_is_logged_as_its_own_and_the_core_print_passes_through(
    caplog: pytest.LogCaptureFixture,
) -> None:
    reg = PipelineRegistry()
    reg.register("step", _printing("outer"), priority=0)
    reg.register("step", _printing("inner"), priority=1)

    async def core(state):
        print("core answer")
        return StepResult()

    with caplog.at_level(logging.INFO, logger="goondan"), answer_stream() as (out, _):
        _run(reg, core)
    assert out.getvalue() == "core answer\n"
    logged = {
        r.getMessage().split(" wrote to ")[0]: r.getMessage() for r in caplog.records if "wrote to" in r.getMessage()
    }
    assert set(logged) == {"step middleware outer", "step middleware inner"}
    assert "outer before" in logged["step middleware outer"] and "outer after" in logged["step middleware outer"]
    assert "inner" not in logged["step middleware outer"].split(":", 1)[1]
    assert "inner before" in logged["step middleware inner"] and "outer" not in logged["step middleware inner"]


def test_a_log_handler_on_stderr_reports_an_inner_middleware_once_not_again_as_the_outer_ones_output() -> None:
    # a handler created after the proxies are in place writes to the proxy: while a middleware's
    # output is reported, nothing may capture that line (it would come back as another middleware's)
    with answer_stream() as (out, err):
        _report_with_handler_on_stderr()
    text = err.getvalue()
    assert text.count("step middleware inner wrote to stdout") == 1
    assert text.count("step middleware outer wrote to stdout") == 1
    outer_report = text[text.index("step middleware outer wrote to stdout") :]
    assert "inner" not in outer_report
    assert out.getvalue() == ""


def _report_with_handler_on_stderr() -> None:
    handler = logging.StreamHandler(sys.stderr)
    logger = logging.getLogger("goondan.pipeline")
    logger.addHandler(handler)
    logger.setLevel(logging.INFO)
    try:
        reg = PipelineRegistry()
        reg.register("step", _printing("outer"), priority=0)
        reg.register("step", _printing("inner"), priority=1)

        async def core(state):
            return StepResult()

        _run(reg, core)
    finally:
        logger.removeHandler(handler)
        logger.setLevel(logging.NOTSET)


def test_a_task_a_middleware_started_prints_into_the_log_not_the_answer_even_while_the_core_runs(
    caplog: pytest.LogCaptureFixture,
) -> None:
    core_running = asyncio.Event()
    reg = PipelineRegistry()
    tasks: list[asyncio.Task[None]] = []

    async def spawner(ctx):
        async def background() -> None:
            await core_running.wait()
            print("background noise")

        tasks.append(asyncio.get_running_loop().create_task(background()))
        return await ctx.next()

    spawner.__qualname__ = "spawner"
    reg.register("step", spawner)

    async def core(state):
        core_running.set()
        await asyncio.sleep(0.01)  # the background task prints now, while the core runs
        print("core answer")
        return StepResult()

    async def main() -> None:
        await reg.chain("step", core).run(_step_state())
        await asyncio.gather(*tasks)
        await reg.chain("step", core).run(_step_state())  # reported with the middleware's next call

    with caplog.at_level(logging.INFO, logger="goondan"), answer_stream() as (out, _):
        asyncio.run(main())
    assert "background noise" not in out.getvalue()
    assert out.getvalue() == "core answer\ncore answer\n"
    assert any("background noise" in r.getMessage() for r in caplog.records)
