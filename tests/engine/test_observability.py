"""Runtime events and trace context (digest §2.9, §9.1 e2e/observability, pipeline-registry)."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest

import goondan
import kit as k
from kit import agent_doc, call, export, extension_doc, scripted, text, tool_doc

HEX32 = re.compile(r"^[0-9a-f]{32}$")
HEX16 = re.compile(r"^[0-9a-f]{16}$")
TYPE_RE = re.compile(r"^[a-z]+\.[a-z]+$")

ONE_TOOL_ORDER = [
    "turn.started",
    "step.started",
    "tool.called",
    "tool.completed",
    "step.completed",
    "turn.completed",
]

SUBSCRIBER = """\
import kit

TYPES = [
    "turn.started", "turn.completed", "turn.failed",
    "step.started", "step.completed", "step.failed",
    "tool.called", "tool.completed", "tool.failed",
]


def register(api):
    seen = kit.PROBE.setdefault("ext_events", [])
    for name in TYPES:
        api.events.on(name, seen.append)
"""

TOOL = """\
def noop(ctx, args):
    return "ok"


def fail(ctx, args):
    raise RuntimeError("nope")


handlers = {"noop": noop, "fail": fail}
"""


def bundle(tmp_path: Path, extra_ext: dict[str, str] | None = None) -> Path:
    exts = {"spy": SUBSCRIBER, **(extra_ext or {})}
    files = {"tools/t.py": TOOL, **{f"ext/{n}.py": s for n, s in exts.items()}}
    return k.simple_bundle(
        tmp_path,
        agents=[agent_doc("a", tools=["t"], extensions=list(exts))],
        tools=[tool_doc("t", "./tools/t.py", [export("noop"), export("fail")])],
        extensions=[extension_doc(n, f"./ext/{n}.py") for n in exts],
        files=files,
    )


async def _collect(root: Path, state_root: Path, *inputs: str, **kw: Any) -> list[dict[str, Any]]:
    events: list[dict[str, Any]] = []
    async with goondan.Runtime(root, state_root=state_root, isolation="inline") as rt:
        rt.on_runtime_event(events.append)
        for item in inputs:
            await rt.request(item, **kw)
    return events


def collect(root: Path, state_root: Path, *inputs: str, **kw: Any) -> list[dict[str, Any]]:
    return k.run(_collect(root, state_root, *inputs, **kw))


def test_one_step_one_tool_event_order_is_exact_for_listeners_and_extensions(tmp_path: Path, state_root: Path) -> None:
    # a 1-step turn with a tool call: the step middleware stops the loop after step 0
    k.MODEL = scripted(call("t__noop", {}, text="calling"))
    stop = """\
import dataclasses


def register(api):
    async def step(ctx):
        return dataclasses.replace(await ctx.next(), should_continue=False)

    api.pipeline.register("step", step)
"""
    root = bundle(tmp_path / "one", {"stop": stop})
    events = collect(root, state_root, "go")
    assert [e["type"] for e in events] == ONE_TOOL_ORDER
    ext_events = k.PROBE["ext_events"]
    assert [e["type"] for e in ext_events] == ONE_TOOL_ORDER
    assert [e["spanId"] for e in ext_events] == [e["spanId"] for e in events]
    completed = events[-1]
    assert completed["stepCount"] == 1
    assert completed["duration"] >= 0


def test_two_step_turn_events_nest_correctly(tmp_path: Path, state_root: Path) -> None:
    root = bundle(tmp_path)
    k.MODEL = scripted(call("t__noop", {}), text("done"))
    events = collect(root, state_root, "go")
    assert [e["type"] for e in events] == k.ONE_TOOL_TURN_EVENTS
    assert events[-1]["stepCount"] == 2


def test_span_hierarchy_and_ids(tmp_path: Path, state_root: Path) -> None:
    root = bundle(tmp_path)
    k.MODEL = scripted(call("t__noop", {}), text("done"))
    events = collect(root, state_root, "go")
    by_type: dict[str, list[dict[str, Any]]] = {}
    for e in events:
        by_type.setdefault(e["type"], []).append(e)
    trace = events[0]["traceId"]
    assert HEX32.match(trace)
    for e in events:
        assert e["traceId"] == trace
        assert HEX16.match(e["spanId"]), e
        assert TYPE_RE.match(e["type"]), e["type"]
        assert e["agentName"] == "a"
        assert e["instanceKey"] == "default"
        assert isinstance(e["timestamp"], str) and e["timestamp"]
    turn_started = by_type["turn.started"][0]
    turn_span = turn_started["spanId"]
    assert "parentSpanId" not in turn_started or turn_started["parentSpanId"] is None
    assert by_type["turn.completed"][0]["spanId"] == turn_span
    turn_id = turn_started["turnId"]
    for idx, (started, completed) in enumerate(zip(by_type["step.started"], by_type["step.completed"], strict=True)):
        assert started["parentSpanId"] == turn_span
        assert completed["spanId"] == started["spanId"]
        assert completed["parentSpanId"] == turn_span
        assert started["stepIndex"] == idx
        assert started["stepId"] == f"{turn_id}-step-{idx}"
        assert completed["stepId"] == started["stepId"]
    step0_span = by_type["step.started"][0]["spanId"]
    tool_called = by_type["tool.called"][0]
    tool_completed = by_type["tool.completed"][0]
    assert tool_called["parentSpanId"] == step0_span
    assert tool_completed["spanId"] == tool_called["spanId"]
    assert tool_called["stepId"] == f"{turn_id}-step-0"
    assert tool_called["turnId"] == turn_id
    assert tool_completed["status"] == "ok"
    assert tool_completed["duration"] >= 0
    assert by_type["step.completed"][0]["toolCallCount"] == 1
    spans = {e["spanId"] for e in events}
    assert len(spans) == 4  # turn, two steps, one tool call


def test_every_turn_gets_its_own_trace_id(tmp_path: Path, state_root: Path) -> None:
    root = bundle(tmp_path)
    k.MODEL = scripted(text("x"))
    events = collect(root, state_root, "one", "two")
    traces = {e["traceId"] for e in events if e["type"] == "turn.started"}
    assert len(traces) == 2


def test_given_trace_id_is_kept_never_regenerated(tmp_path: Path, state_root: Path) -> None:
    root = bundle(tmp_path)
    k.MODEL = scripted(call("t__noop", {}), text("done"))
    trace = "0af7651916cd43dd8448eb211c80319c"
    events = collect(root, state_root, "go", trace_id=trace)
    assert events and {e["traceId"] for e in events} == {trace}


def test_failing_tool_reports_error_status_on_tool_completed(tmp_path: Path, state_root: Path) -> None:
    root = bundle(tmp_path)
    k.MODEL = scripted(call("t__fail", {}), text("done"))
    events = collect(root, state_root, "go")
    [completed] = [e for e in events if e["type"] == "tool.completed"]
    assert completed["status"] == "error"
    assert not [e for e in events if e["type"] == "tool.failed"]


def test_failed_model_call_emits_step_failed_and_turn_failed(tmp_path: Path, state_root: Path) -> None:
    root = bundle(tmp_path)
    k.MODEL = scripted(RuntimeError("model down"))
    events = collect(root, state_root, "go")
    assert [e["type"] for e in events] == ["turn.started", "step.started", "step.failed", "turn.failed"]
    assert "model down" in events[2]["errorMessage"]
    assert "model down" in events[3]["errorMessage"]
    assert events[3]["spanId"] == events[0]["spanId"]
    assert [e["type"] for e in k.PROBE["ext_events"]] == [e["type"] for e in events]


def test_runtime_events_jsonl_has_one_line_per_event(tmp_path: Path, state_root: Path) -> None:
    root = bundle(tmp_path)
    k.MODEL = scripted(call("t__noop", {}), text("done"))
    events = collect(root, state_root, "go", "again")
    [inst] = k.instance_dirs(state_root)
    path = inst / "messages" / "runtime-events.jsonl"
    lines = path.read_text(encoding="utf-8").splitlines()
    assert len(lines) == len(events)
    stored = k.read_jsonl(path)
    assert [(e["type"], e["spanId"]) for e in stored] == [(e["type"], e["spanId"]) for e in events]


def test_extension_events_unsubscribe_and_raising_handler_isolated(tmp_path: Path, state_root: Path) -> None:
    source = """\
import kit


def register(api):
    got = kit.PROBE.setdefault("got", [])

    def boom(event):
        raise RuntimeError("handler failure")

    api.events.on("turn.completed", boom)
    api.events.on("turn.completed", lambda e: got.append(("kept", e["type"])))
    off = api.events.on("turn.completed", lambda e: got.append(("removed", e["type"])))
    off()
    api.events.on("custom.ping", lambda payload: got.append(("custom", payload)))

    async def turn(ctx):
        api.events.emit("custom.ping", {"x": 1})
        return await ctx.next()

    api.pipeline.register("turn", turn)
"""
    root = bundle(tmp_path, {"sub": source})
    k.MODEL = scripted(text("done"))
    events = collect(root, state_root, "go")
    assert events[-1]["type"] == "turn.completed"
    assert k.PROBE["got"] == [("custom", {"x": 1}), ("kept", "turn.completed")]


def test_step_started_carries_the_llm_input_messages_when_tracing_is_on(
    tmp_path: Path, state_root: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """digest §2.5 step 5 / §2.9 and the upstream pipeline-registry test: with
    GOONDAN_TRACE_LLM_INPUT=1 the core records the model input in step metadata
    ``runtime.llmInputMessages`` and ``step.started`` carries it (off by default: it costs as much
    as the rest of the step)."""
    monkeypatch.setenv("GOONDAN_TRACE_LLM_INPUT", "1")
    root = bundle(tmp_path)
    k.MODEL = scripted(call("t__noop", {}), text("done"))
    events = collect(root, state_root, "look at this")
    started = [e for e in events if e["type"] == "step.started"]
    first = started[0].get("llmInputMessages")
    assert isinstance(first, list), started[0]
    assert [m["role"] for m in first] == ["user"]
    assert first[0]["content"] == "look at this"
    second = started[1]["llmInputMessages"]
    assert [m["role"] for m in second] == ["user", "assistant", "tool"]


def test_step_started_has_no_llm_input_messages_by_default(tmp_path: Path, state_root: Path) -> None:
    root = bundle(tmp_path)
    k.MODEL = scripted(text("done"))
    events = collect(root, state_root, "hi")
    (started,) = [e for e in events if e["type"] == "step.started"]
    assert "llmInputMessages" not in started


def test_in_memory_runtime_events_survive_listeners_that_edit_their_records(tmp_path: Path, state_root: Path) -> None:
    """persist=False keeps runtime events in memory; a listener scribbling on the records it gets
    must not change what was recorded, and without listeners the same events are recorded."""
    k.MODEL = scripted(call("t__noop", {}), text("done"))
    root = bundle(tmp_path)

    async def scenario(vandal: bool) -> list[dict[str, Any]]:
        async with goondan.Runtime(root, state_root=state_root, isolation="inline", persist=False) as rt:
            if vandal:
                rt.on_runtime_event(lambda record: record.update(type="vandalised", traceId="x"))
            await rt.request("go")
            instance = await rt.get_instance(rt.entry_agent, rt.swarm_instance_key)
            return instance.store.read_runtime_events()

    for vandal in (True, False):
        k.MODEL = scripted(call("t__noop", {}), text("done"))
        recorded = k.run(scenario(vandal))
        assert [e["type"] for e in recorded] == k.ONE_TOOL_TURN_EVENTS
        assert all(HEX32.match(e["traceId"]) for e in recorded)
