"""Span trees from runtime events (goondan.studio._trace): the tree follows parentSpanId across
instances whatever order the events come in, and every span carries what the waterfall shows."""

from __future__ import annotations

import random
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from goondan.studio._trace import build_trace

T0 = "2026-01-01T00:00:00.000Z"


def ts(ms: int) -> str:
    return f"2026-01-01T00:00:{ms // 1000:02d}.{ms % 1000:03d}Z"


def ev(kind: str, span: str, parent: str | None, at: int, agent: str = "lead", **extra: Any) -> dict[str, Any]:
    record = {
        "type": kind,
        "timestamp": ts(at),
        "agentName": agent,
        "instanceKey": "k",
        "traceId": "t" * 32,
        "spanId": span,
        "turnId": f"turn-{agent}",
        **extra,
    }
    if parent is not None:
        record["parentSpanId"] = parent
    return record


def delegation_events() -> list[dict[str, Any]]:
    """lead: turn > step > agents__request > (helper: turn > step > calc__add); two processes."""
    return [
        ev("turn.started", "T1", None, 0),
        ev("step.started", "S1", "T1", 1, stepIndex=0),
        ev("tool.called", "R1", "S1", 5, toolName="agents__request", toolCallId="c1"),
        ev("turn.started", "T2", "R1", 6, agent="helper"),
        ev(
            "step.started",
            "S2",
            "T2",
            7,
            agent="helper",
            stepIndex=0,
            llmInputMessages=[{"role": "user", "content": "add"}],
        ),
        ev("tool.called", "C1", "S2", 8, agent="helper", toolName="calc__add", toolCallId="c2"),
        ev(
            "tool.completed",
            "C1",
            "S2",
            9,
            agent="helper",
            toolName="calc__add",
            status="error",
            duration=1,
            error={"code": "E_CALC", "message": "bad numbers"},
        ),
        ev(
            "step.completed",
            "S2",
            "T2",
            10,
            agent="helper",
            stepIndex=0,
            toolCallCount=1,
            duration=3,
            model={"name": "m", "provider": "python", "start": 0.5, "duration": 0.25, "finishReason": "tool-calls"},
            tokenUsage={"promptTokens": 3, "completionTokens": 2, "totalTokens": 5},
        ),
        ev("turn.completed", "T2", "R1", 11, agent="helper", stepCount=1, duration=5),
        ev("tool.completed", "R1", "S1", 12, toolName="agents__request", status="ok", duration=7),
        ev("step.completed", "S1", "T1", 13, stepIndex=0, toolCallCount=1, duration=12),
        ev("turn.failed", "T1", None, 14, duration=14, errorMessage="boom", error={"code": "E_MODEL"}),
    ]


def test_a_delegated_turn_in_another_instance_nests_under_the_callers_request_span() -> None:
    trace = build_trace(delegation_events())
    rows = [(s["depth"], s["kind"], s["name"]) for s in trace["spans"]]
    assert rows == [
        (0, "turn", "turn lead"),
        (1, "step", "step 0"),
        (2, "request", "agents__request"),
        (3, "turn", "turn helper"),
        (4, "step", "step 0"),
        (5, "model", "model python/m"),
        (5, "tool", "calc__add"),
    ]
    assert trace["spanCount"] == 7 and trace["agents"] == ["helper", "lead"] and trace["duration"] == 14.0


def test_spans_carry_durations_usage_finish_reasons_errors_and_the_recorded_model_input() -> None:
    spans = {s["name"] + "@" + s["attrs"]["agentName"]: s for s in build_trace(delegation_events())["spans"]}
    lead, step, tool = spans["turn lead@lead"], spans["step 0@helper"], spans["calc__add@helper"]
    assert lead["status"] == "error" and lead["attrs"]["error"] == {"code": "E_MODEL", "message": "boom"}
    assert tool["status"] == "error" and tool["attrs"]["error"] == {"code": "E_CALC", "message": "bad numbers"}
    assert step["attrs"]["tokenUsage"]["totalTokens"] == 5 and step["attrs"]["finishReason"] == "tool-calls"
    assert step["attrs"]["llmInputMessages"] == [{"role": "user", "content": "add"}]
    model = spans["model python/m@helper"]
    assert (model["offset"], model["duration"]) == (7.5, 0.25)  # step start + model.start
    assert (spans["agents__request@lead"]["offset"], spans["agents__request@lead"]["duration"]) == (5.0, 7.0)


def test_a_span_still_running_lasts_until_now() -> None:
    events = delegation_events()[:4]
    spans = build_trace(events, now_ms=build_trace(events)["start"] + 100)["spans"]
    assert {s["name"]: (s["status"], s["duration"]) for s in spans} == {
        "turn lead": ("running", 100.0),
        "step 0": ("running", 99.0),
        "agents__request": ("running", 95.0),
        "turn helper": ("running", 94.0),
    }


@st.composite
def span_trees(draw: st.DrawFn) -> list[dict[str, Any]]:
    """Random turn/step/tool trees over a few agents, turns nested under request spans."""
    n = draw(st.integers(1, 25))
    events: list[dict[str, Any]] = []
    spans: list[tuple[str, str]] = []  # (id, kind)
    for i in range(n):
        candidates = [s for s in spans if s[1] != "tool"]
        if not spans:
            parent, kind = None, "turn"
        else:
            parent_id, parent_kind = draw(st.sampled_from(candidates)) if candidates else (None, "tool")
            parent = parent_id
            kind = {"turn": "step", "step": draw(st.sampled_from(["tool", "request"])), "request": "turn"}.get(
                parent_kind, "turn"
            )
        sid = f"s{i:03d}"
        agent = f"agent{draw(st.integers(0, 2))}"
        tool = {"toolName": "agents__request" if kind == "request" else "t__x", "toolCallId": sid}
        start_type = {"turn": "turn.started", "step": "step.started"}.get(kind, "tool.called")
        end_type = {"turn": "turn.completed", "step": "step.completed"}.get(kind, "tool.completed")
        extra = tool if kind in ("tool", "request") else {}
        events.append(ev(start_type, sid, parent, i, agent, **extra))
        events.append(ev(end_type, sid, parent, 100 + i, agent, duration=100, **extra))
        spans.append((sid, kind))
    return events


@given(span_trees(), st.randoms())
@settings(max_examples=60, deadline=None)
def test_any_tree_flattens_each_span_once_under_its_parent_whatever_the_event_order(
    events: list[dict[str, Any]], rnd: random.Random
) -> None:
    shuffled = list(events)
    rnd.shuffle(shuffled)
    flat = build_trace(shuffled)["spans"]
    ids = [s["id"] for s in flat]
    assert sorted(ids) == sorted({e["spanId"] for e in events})
    depth = {}
    for s in flat:
        if s["parent"] is None:
            assert s["depth"] == 0
        else:
            assert s["parent"] in depth, "a parent comes before its children"
            assert s["depth"] == depth[s["parent"]] + 1
        depth[s["id"]] = s["depth"]
