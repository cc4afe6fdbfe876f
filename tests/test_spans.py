"""goondan/_spans.py: runtime-event records pair into spans that keep the records' ids.

The property test feeds the records of random trees of turns, steps and tool calls in any order
a set of concurrent instances could produce them (each span's start before its end, a child
inside its parent); every pair must come out as exactly one span with its ids and parent, and
every step with a model call as one more ``chat`` span under it.
"""

from __future__ import annotations

import json
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from goondan._spans import SpanAssembler, model_span_id, timestamp_ns

TRACE = "4bf92f3577b34da6a3ce929d0e0e4736"


def _ts(ms: int) -> str:
    seconds, milli = divmod(ms, 1000)
    minutes, sec = divmod(seconds, 60)
    return f"2026-01-01T00:{minutes:02d}:{sec:02d}.{milli:03d}Z"


def _base(etype: str, span: str, parent: str | None, at: int, **fields: Any) -> dict[str, Any]:
    record: dict[str, Any] = {
        "type": etype,
        "timestamp": _ts(at),
        "agentName": "a",
        "instanceKey": "k",
        "traceId": TRACE,
        "spanId": span,
        "turnId": "turn_1",
        **fields,
    }
    if parent is not None:
        record["parentSpanId"] = parent
    return record


def _model(start: float = 1.0, duration: float = 2.0, **extra: Any) -> dict[str, Any]:
    return {"name": "gpt-x", "provider": "openai", "start": start, "duration": duration, **extra}


def test_a_turn_step_and_tool_keep_the_records_ids_and_parentage() -> None:
    asm = SpanAssembler()
    records = [
        _base("turn.started", "a" * 16, "f" * 16, 0),
        _base("step.started", "b" * 16, "a" * 16, 1, stepIndex=0, stepId="turn_1-step-0"),
        _base("tool.called", "c" * 16, "b" * 16, 5, toolName="t__x", toolCallId="call_1", stepId="s"),
        _base("tool.completed", "c" * 16, "b" * 16, 9, toolName="t__x", toolCallId="call_1", status="ok", duration=4),
        _base(
            "step.completed",
            "b" * 16,
            "a" * 16,
            10,
            stepIndex=0,
            stepId="turn_1-step-0",
            toolCallCount=1,
            duration=9,
            tokenUsage={"promptTokens": 30, "completionTokens": 4, "totalTokens": 34},
            model=_model(finishReason="tool-calls"),
        ),
        _base("turn.completed", "a" * 16, "f" * 16, 12, stepCount=1, duration=12, tokenUsage={"promptTokens": 30}),
    ]
    spans = [s for r in records for s in asm.feed(r)]
    by_id = {s.span_id: s for s in spans}
    assert [s.name for s in spans] == ["execute_tool t__x", "step 0", "chat gpt-x", "invoke_agent a"]
    turn, step, tool = by_id["a" * 16], by_id["b" * 16], by_id["c" * 16]
    chat = by_id[model_span_id("b" * 16)]
    assert (turn.parent_span_id, step.parent_span_id, tool.parent_span_id, chat.parent_span_id) == (
        "f" * 16,
        "a" * 16,
        "b" * 16,
        "b" * 16,
    )
    assert {s.trace_id for s in spans} == {TRACE}
    assert turn.attributes["gen_ai.operation.name"] == "invoke_agent"
    assert turn.attributes["gen_ai.agent.name"] == "a"
    assert turn.attributes["gen_ai.request.model"] == "gpt-x"  # learned from its step
    assert tool.attributes["gen_ai.operation.name"] == "execute_tool"
    assert tool.attributes["gen_ai.tool.call.id"] == "call_1"
    assert chat.kind == "client"
    assert chat.attributes["gen_ai.operation.name"] == "chat"
    assert chat.attributes["gen_ai.provider.name"] == "openai"
    assert chat.attributes["gen_ai.usage.input_tokens"] == 30
    assert chat.attributes["gen_ai.usage.output_tokens"] == 4
    assert chat.attributes["gen_ai.response.finish_reasons"] == ["tool-calls"]
    assert "gen_ai.operation.name" not in step.attributes  # the step is not a GenAI operation itself
    # OpenInference's names, for Phoenix
    kinds = [s.attributes["openinference.span.kind"] for s in (turn, step, chat, tool)]
    assert kinds == ["AGENT", "CHAIN", "LLM", "TOOL"]
    assert (chat.attributes["llm.model_name"], chat.attributes["llm.system"]) == ("gpt-x", "openai")
    assert (chat.attributes["llm.token_count.prompt"], chat.attributes["llm.token_count.completion"]) == (30, 4)
    start = timestamp_ns(_ts(1))
    assert start is not None
    assert (chat.start_ns, chat.end_ns) == (start + 1_000_000, start + 3_000_000)
    assert turn.start_ns == timestamp_ns(_ts(0)) and turn.end_ns == timestamp_ns(_ts(12))
    assert asm.open_count == 0


def test_a_failing_tool_and_a_failing_model_call_carry_their_error_code() -> None:
    asm = SpanAssembler()
    asm.feed(_base("tool.called", "c" * 16, "b" * 16, 0, toolName="t__boom", toolCallId="x"))
    [tool] = asm.feed(
        _base(
            "tool.completed",
            "c" * 16,
            "b" * 16,
            3,
            toolName="t__boom",
            toolCallId="x",
            status="error",
            duration=3,
            error={"code": "E_BOOM", "message": "it broke"},
        )
    )
    assert (tool.error_type, tool.error_message) == ("E_BOOM", "it broke")
    asm.feed(_base("step.started", "b" * 16, "a" * 16, 0, stepIndex=2))
    step, chat = asm.feed(
        _base(
            "step.failed",
            "b" * 16,
            "a" * 16,
            8,
            stepIndex=2,
            duration=8,
            errorMessage="provider said 500",
            error={"code": "E_MODEL_HTTP"},
            model=_model(failed=True),
        )
    )
    assert step.error_type == chat.error_type == "E_MODEL_HTTP"
    assert chat.error_message == "provider said 500"


def test_a_step_answered_by_middleware_has_no_model_span() -> None:
    asm = SpanAssembler()
    asm.feed(_base("step.started", "b" * 16, "a" * 16, 0, stepIndex=0))
    spans = asm.feed(_base("step.completed", "b" * 16, "a" * 16, 1, stepIndex=0, toolCallCount=0, duration=1))
    assert [s.name for s in spans] == ["step 0"]


def test_an_end_without_its_start_goes_back_by_the_recorded_duration() -> None:
    [span] = SpanAssembler().feed(_base("turn.completed", "a" * 16, None, 5000, stepCount=1, duration=250))
    assert span.end_ns - span.start_ns == 250_000_000
    assert span.parent_span_id is None


def test_spans_left_open_are_bounded() -> None:
    asm = SpanAssembler(max_open=3)
    for i in range(10):
        asm.feed(_base("turn.started", f"{i + 1:016x}", None, i))
    assert asm.open_count == 3


def test_model_input_is_captured_only_when_asked() -> None:
    messages = [{"role": "user", "content": "secret"}]

    def run(capture: bool) -> dict[str, Any]:
        asm = SpanAssembler(capture_content=capture)
        asm.feed(_base("step.started", "b" * 16, "a" * 16, 0, stepIndex=0, llmInputMessages=messages))
        _, chat = asm.feed(
            _base("step.completed", "b" * 16, "a" * 16, 4, stepIndex=0, toolCallCount=0, duration=4, model=_model())
        )
        return chat.attributes

    assert "gen_ai.input.messages" not in run(False)
    assert json.loads(str(run(True)["gen_ai.input.messages"])) == messages


def test_approval_records_become_instant_spans_under_their_turn() -> None:
    [span] = SpanAssembler().feed(
        _base("approval.requested", "d" * 16, "a" * 16, 7, approvalId="apr_1", toolName="t__rm", toolCallId="c1")
    )
    assert (span.name, span.parent_span_id, span.start_ns) == ("approval.requested t__rm", "a" * 16, span.end_ns)
    assert span.attributes["goondan.approval.id"] == "apr_1"


def test_model_span_id_is_a_stable_otel_span_id() -> None:
    derived = model_span_id("0123456789abcdef")
    assert derived == model_span_id("0123456789abcdef") != model_span_id("0123456789abcdee")
    assert len(derived) == 16 and int(derived, 16) != 0


# --- property: any valid interleaving of many spans' records ------------------------------------


@st.composite
def _forest(draw: st.DrawFn) -> list[list[dict[str, Any]]]:
    """Per instance, its records in order: turns with steps with tool calls, ids unique."""
    counter = iter(range(1, 10_000))
    instances: list[list[dict[str, Any]]] = []
    for _ in range(draw(st.integers(1, 3))):
        records: list[dict[str, Any]] = []
        clock = 0
        for _ in range(draw(st.integers(1, 3))):
            turn = f"{next(counter):016x}"
            records.append(_base("turn.started", turn, None, clock))
            for index in range(draw(st.integers(0, 3))):
                step = f"{next(counter):016x}"
                records.append(_base("step.started", step, turn, clock, stepIndex=index))
                tools = draw(st.integers(0, 2))
                for _ in range(tools):
                    tool = f"{next(counter):016x}"
                    records.append(_base("tool.called", tool, step, clock, toolName="t"))
                    clock += draw(st.integers(0, 5))
                    failed = draw(st.booleans())
                    records.append(
                        _base(
                            "tool.failed" if failed else "tool.completed", tool, step, clock, toolName="t", duration=1
                        )
                    )
                clock += draw(st.integers(0, 5))
                with_model = draw(st.booleans())
                end = _base("step.completed", step, turn, clock, stepIndex=index, toolCallCount=tools, duration=1)
                if with_model:
                    end["model"] = _model(start=0.5, duration=0.25)
                records.append(end)
            clock += 1
            records.append(_base("turn.completed", turn, None, clock, stepCount=1, duration=1))
        instances.append(records)
    return instances


@given(forest=_forest(), data=st.data())
@settings(max_examples=150, deadline=None)
def test_every_record_pair_becomes_one_span_with_its_ids_in_any_interleaving(
    forest: list[list[dict[str, Any]]], data: st.DataObject
) -> None:
    queues = [list(r) for r in forest]
    merged: list[dict[str, Any]] = []
    while any(queues):
        pick = data.draw(st.sampled_from([i for i, q in enumerate(queues) if q]))
        merged.append(queues[pick].pop(0))
    asm = SpanAssembler()
    spans = [s for record in merged for s in asm.feed(record)]
    ends = [r for r in merged if r["type"].endswith((".completed", ".failed"))]
    expected = {r["spanId"]: r.get("parentSpanId") for r in ends}
    models = {model_span_id(r["spanId"]): r["spanId"] for r in ends if "model" in r}
    got = {s.span_id: s.parent_span_id for s in spans}
    assert len(spans) == len(got)  # no span twice
    assert got == {**expected, **models}
    assert all(s.trace_id == TRACE and s.start_ns <= s.end_ns for s in spans)
    assert asm.open_count == 0
