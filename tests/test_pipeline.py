"""Onion middleware chains: ordering, next() semantics, shared mutable state, removed v0.9 API."""

from __future__ import annotations

import asyncio
import dataclasses

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from goondan import ExtensionError, GoondanError, StepResult, ToolCallResult
from goondan.pipeline import ExtensionPipeline, PipelineRegistry, StepState, ToolCallState, Turn, TurnState


def _turn_state() -> TurnState:
    return TurnState(
        agent_name="a",
        instance_key="k",
        turn_id="t1",
        trace_id="0" * 31 + "1",
        input_event={"id": "e"},
        conversation_state=None,  # type: ignore[arg-type]
        emit_message_event=lambda e: None,
        agents=object(),
        runtime=None,
        turn=Turn("t1", "a", {"id": "e"}),
    )


def _run_step(registry: PipelineRegistry, core, catalog=None) -> StepResult:
    state = StepState(_turn_state(), 0, catalog if catalog is not None else [])
    return asyncio.run(registry.chain("step", core).run(state))


def _tracer(trace: list[str], name: str):
    async def mw(ctx):
        trace.append(f"{name}:pre")
        result = await ctx.next()
        trace.append(f"{name}:post")
        return result

    return mw


def test_step_middlewares_run_outer_first_by_priority_then_registration():
    trace: list[str] = []
    reg = PipelineRegistry()
    reg.register("step", _tracer(trace, "A"), priority=10)
    reg.register("step", _tracer(trace, "B"), priority=5)
    reg.register("step", _tracer(trace, "C"), priority=10)

    async def core(state):
        trace.append("core")
        return StepResult()

    _run_step(reg, core)
    assert trace == ["B:pre", "A:pre", "C:pre", "core", "C:post", "A:post", "B:post"]


@settings(max_examples=150, deadline=None)
@given(st.lists(st.integers(-3, 3), min_size=0, max_size=8))
def test_onion_order_follows_priority_then_registration_for_random_registrations(priorities):
    trace: list[str] = []
    reg = PipelineRegistry()
    for i, p in enumerate(priorities):
        reg.register("step", _tracer(trace, str(i)), priority=p)

    async def core(state):
        trace.append("core")
        return StepResult()

    _run_step(reg, core)
    expected_order = [str(i) for i, _ in sorted(enumerate(priorities), key=lambda x: (x[1], x[0]))]
    pre = [t.split(":")[0] for t in trace if t.endswith(":pre")]
    post = [t.split(":")[0] for t in trace if t.endswith(":post")]
    assert pre == expected_order
    assert post == list(reversed(expected_order))
    assert trace[len(priorities)] == "core"


def test_next_may_be_called_at_most_once():
    reg = PipelineRegistry()

    async def twice(ctx):
        await ctx.next()
        return await ctx.next()

    reg.register("step", twice)

    async def core(state):
        return StepResult()

    with pytest.raises(GoondanError) as info:
        _run_step(reg, core)
    assert info.value.code == "E_PIPELINE_NEXT_TWICE"


def test_middleware_skipping_next_skips_inner_layers_and_core():
    calls: list[str] = []
    reg = PipelineRegistry()

    async def short_circuit(ctx):
        calls.append("outer")
        return StepResult(metadata={"short": True})

    reg.register("step", short_circuit)
    reg.register("step", _tracer(calls, "inner"))

    async def core(state):
        calls.append("core")
        return StepResult()

    result = _run_step(reg, core)
    assert calls == ["outer"]
    assert result.metadata == {"short": True}


def test_tool_catalog_replaced_in_middleware_reaches_the_core():
    reg = PipelineRegistry()

    async def filt(ctx):
        ctx.tool_catalog = [t for t in ctx.tool_catalog if t["name"] != "x__hidden"]
        return await ctx.next()

    reg.register("step", filt)
    seen: list[list[str]] = []

    async def core(state):
        seen.append([t["name"] for t in state.tool_catalog])
        return StepResult()

    _run_step(reg, core, [{"name": "x__hidden"}, {"name": "x__ok"}])
    assert seen == [["x__ok"]]


def test_args_changed_in_tool_call_middleware_reach_the_core():
    reg = PipelineRegistry()

    async def rewrite(ctx):
        ctx.args = {**ctx.args, "command": ctx.args["command"][:3]}
        return await ctx.next()

    reg.register("toolCall", rewrite)
    seen = []

    async def core(state):
        seen.append(state.args)
        return ToolCallResult(state.tool_call_id, state.tool_name, "ok")

    step = StepState(_turn_state(), 0, [])
    state = ToolCallState(step, "bash__exec", "c1", {"command": "echo hi"})
    asyncio.run(reg.chain("toolCall", core).run(state))
    assert seen == [{"command": "ech"}]


def test_tool_call_context_has_no_agents_but_step_context_does():
    reg = PipelineRegistry()
    seen = {}

    async def tool_mw(ctx):
        seen["tool"] = hasattr(ctx, "agents")
        return await ctx.next()

    async def step_mw(ctx):
        seen["step"] = hasattr(ctx, "agents")
        return await ctx.next()

    reg.register("toolCall", tool_mw)
    reg.register("step", step_mw)

    async def tool_core(state):
        return ToolCallResult(state.tool_call_id, state.tool_name)

    async def step_core(state):
        return StepResult()

    step = StepState(_turn_state(), 0, [])
    asyncio.run(reg.chain("toolCall", tool_core).run(ToolCallState(step, "t__x", "c", {})))
    _run_step(reg, step_core)
    assert seen == {"tool": False, "step": True}


def test_should_continue_can_be_overridden_in_post_processing():
    reg = PipelineRegistry()

    async def force(ctx):
        result = await ctx.next()
        return dataclasses.replace(result, should_continue=True)

    reg.register("step", force)

    async def core(state):
        return StepResult(should_continue=False)

    assert _run_step(reg, core).should_continue is True


def test_middleware_returning_wrong_type_fails_with_named_error():
    reg = PipelineRegistry()

    async def forgot_return(ctx):
        await ctx.next()

    reg.register("step", forgot_return, extension="sloppy")

    async def core(state):
        return StepResult()

    with pytest.raises(GoondanError) as info:
        _run_step(reg, core)
    assert info.value.code == "E_PIPELINE_BAD_RESULT"
    assert "sloppy" in info.value.message


def test_sync_middleware_returning_next_awaitable_is_supported():
    reg = PipelineRegistry()
    reg.register("step", lambda ctx: ctx.next())

    async def core(state):
        return StepResult(metadata={"core": 1})

    assert _run_step(reg, core).metadata == {"core": 1}


def test_metadata_is_shared_between_layers():
    reg = PipelineRegistry()

    async def outer(ctx):
        ctx.metadata["outer"] = 1
        result = await ctx.next()
        assert ctx.metadata["inner"] == 2
        return result

    async def inner(ctx):
        ctx.metadata["inner"] = 2
        return await ctx.next()

    reg.register("step", outer)
    reg.register("step", inner)

    async def core(state):
        return StepResult(metadata=dict(state.metadata))

    assert _run_step(reg, core).metadata == {"outer": 1, "inner": 2}


@pytest.mark.parametrize("mtype", ["turn.pre", "step.llmCall", "toolCall.exec", "afterTurn"])
def test_unknown_middleware_type_fails_with_compat_error(mtype):
    with pytest.raises(ExtensionError) as info:
        ExtensionPipeline(PipelineRegistry(), "old-ext").register(mtype, lambda ctx: ctx.next())
    assert info.value.code == "E_EXT_COMPAT"
    assert info.value.extension_name == "old-ext"
    assert info.value.suggestion


@pytest.mark.parametrize("method", ["mutate", "wrap"])
def test_removed_mutate_and_wrap_fail_with_compat_error(method):
    pipeline = ExtensionPipeline(PipelineRegistry(), "old-ext")
    with pytest.raises(ExtensionError) as info:
        getattr(pipeline, method)("step.pre", lambda ctx: None)
    assert info.value.code == "E_EXT_COMPAT"
    assert "register" in (info.value.suggestion or "")


def test_a_chains_runner_is_its_core_without_middleware_and_runs_the_layers_with_them():
    trace: list[str] = []

    async def core(state):
        trace.append("core")
        return StepResult()

    reg = PipelineRegistry()
    assert reg.chain("step", core).runner() is core  # nothing registered: no call in between
    reg.register("step", _tracer(trace, "A"))
    runner = reg.chain("step", core).runner()
    assert runner is not core
    asyncio.run(runner(StepState(_turn_state(), 0, [])))
    assert trace == ["A:pre", "core", "A:post"]


async def _pass_through(ctx):
    return await ctx.next()


def _raised_in_chain(*middlewares, core):
    """Run a step chain of ``(extension, middleware)`` pairs (outermost first) around ``core`` and
    return what :func:`goondan.pipeline.raised_in` says of the exception it raises."""
    from goondan.pipeline import raised_in

    reg = PipelineRegistry()
    for extension, fn in middlewares:
        reg.register("step", fn, extension=extension)
    with pytest.raises(Exception) as raised:
        _run_step(reg, core)
    return raised_in(raised.value)


async def _unreachable_core(state):
    raise AssertionError("not reached")


def test_exception_is_named_after_the_innermost_middleware_it_came_out_of_never_the_core():
    """What fails a turn names the middleware that raised (pipeline.raised_in): the innermost layer
    it passed, not the outer ones it passes next; and an exception of the core is no middleware's."""

    async def guard(ctx):
        raise ValueError("quota")

    async def core(state):
        raise RuntimeError("the runtime's own")

    named = _raised_in_chain(("a", _pass_through), ("b", guard), core=core)
    assert named == (f"step middleware {guard.__qualname__} of extension 'b'", "b")
    assert _raised_in_chain(("a", _pass_through), core=core) is None


@pytest.mark.parametrize("fault", ["sys.exit", "bad result"])
def test_errors_made_for_a_middleware_are_named_after_it_not_the_layer_around_it(fault):
    """sys.exit() and a wrong return value become Goondan errors raised after the layer's own except
    clause; the layer around it must not take them for its own."""
    import sys

    async def inner(ctx):
        if fault == "sys.exit":
            sys.exit(3)
        return "not a StepResult"

    named = _raised_in_chain(("a", _pass_through), ("b", inner), core=_unreachable_core)
    assert named == (f"step middleware {inner.__qualname__} of extension 'b'", "b")
