"""Span trees from runtime events, joined across agent instances (and so across agent processes).

Every runtime event carries ``traceId``, ``spanId`` and ``parentSpanId``: a turn's span is the parent
of its steps, a step's of its tool calls, and the turn an inter-agent request starts in the callee
(another instance, another process, another ``runtime-events.jsonl``) has the caller's tool span as
its parent. So a trace is the union of the events with one ``traceId`` over every instance of the
workspace, and its tree falls out of the parent links; nothing here depends on which process wrote
what. The model call of a step is not an event of its own: ``step.completed`` says when, within the
step, the model was called (``model.start``/``duration``), and it becomes a child span of the step.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from datetime import datetime
from typing import Any

from .._ids import parse_iso

AGENT_TOOL_PREFIX = "agents__"


def epoch_ms(timestamp: object) -> float | None:
    """Milliseconds since the epoch of an ISO-8601 timestamp (``None`` if it is not one)."""
    if not isinstance(timestamp, str):
        return None
    try:
        return parse_iso(timestamp).timestamp() * 1000.0
    except ValueError:
        return None


def _error_of(event: Mapping[str, Any]) -> dict[str, Any] | None:
    error = event.get("error")
    message = event.get("errorMessage")
    if isinstance(error, dict):
        out = {"code": error.get("code"), "message": error.get("message") or message}
        return {k: v for k, v in out.items() if v is not None}
    if isinstance(message, str):
        return {"message": message}
    return None


class _Span:
    __slots__ = ("attrs", "children", "duration", "end", "id", "kind", "name", "parent", "start", "status")

    def __init__(self, span_id: str, kind: str, parent: str | None) -> None:
        self.id = span_id
        self.kind = kind
        self.parent = parent
        self.name = kind
        self.start: float | None = None
        self.end: float | None = None
        self.duration: float | None = None
        self.status = "running"
        self.attrs: dict[str, Any] = {}
        self.children: list[_Span] = []


def _apply(spans: dict[str, _Span], event: Mapping[str, Any]) -> None:
    etype = event.get("type")
    span_id = event.get("spanId")
    if not isinstance(etype, str) or not isinstance(span_id, str) or "." not in etype:
        return
    family, phase = etype.split(".", 1)
    if family == "approval":
        span = spans.get(str(event.get("parentSpanId")))  # noted on the turn it paused
        approvals = span.attrs.setdefault("approvals", []) if span is not None else None
        if approvals is not None:
            approvals.append({k: event.get(k) for k in ("type", "toolName", "approved", "decidedBy", "reason")})
        return
    if family not in ("turn", "step", "tool"):
        return
    parent = event.get("parentSpanId")
    span = spans.get(span_id)
    if span is None:
        span = spans[span_id] = _Span(span_id, family, parent if isinstance(parent, str) else None)
    at = epoch_ms(event.get("timestamp"))
    attrs = span.attrs
    attrs.setdefault("agentName", event.get("agentName"))
    attrs.setdefault("instanceKey", event.get("instanceKey"))
    attrs.setdefault("turnId", event.get("turnId"))
    if family == "turn":
        span.name = f"turn {event.get('agentName', '?')}"
    elif family == "step":
        span.name = f"step {event.get('stepIndex', '?')}"
        attrs["stepIndex"] = event.get("stepIndex")
    else:
        tool = str(event.get("toolName", "?"))
        span.name = tool
        attrs["toolName"] = tool
        attrs["toolCallId"] = event.get("toolCallId")
        if tool.startswith(AGENT_TOOL_PREFIX):
            span.kind = "request"
    if phase in ("started", "called"):
        span.start = at
        if "llmInputMessages" in event:
            attrs["llmInputMessages"] = event["llmInputMessages"]
        return
    duration = event.get("duration")
    if isinstance(duration, int | float):
        span.duration = float(duration)
    span.end = at
    if span.start is None and at is not None and span.duration is not None:
        span.start = at - span.duration
    if phase == "failed" or event.get("status") == "error":
        span.status = "error"
    elif event.get("cancelled"):
        span.status = "cancelled"
    else:
        span.status = "ok"
    error = _error_of(event)
    if error is not None:
        attrs["error"] = error
    for key in ("tokenUsage", "stepCount", "toolCallCount"):
        if key in event:
            attrs[key] = event[key]
    model = event.get("model")
    if family == "step" and isinstance(model, dict):
        attrs["finishReason"] = model.get("finishReason")
        _model_span(spans, span, model, event)


def _model_span(spans: dict[str, _Span], step: _Span, model: Mapping[str, Any], event: Mapping[str, Any]) -> None:
    child = _Span(f"{step.id}:model", "model", step.id)
    child.name = f"model {model.get('provider', '?')}/{model.get('name', '?')}"
    start, duration = model.get("start"), model.get("duration")
    if step.start is not None and isinstance(start, int | float):
        child.start = step.start + float(start)
    if isinstance(duration, int | float):
        child.duration = float(duration)
    child.status = "error" if event.get("type") == "step.failed" and step.attrs.get("error") else "ok"
    child.attrs = {
        "agentName": event.get("agentName"),
        "instanceKey": event.get("instanceKey"),
        "finishReason": model.get("finishReason"),
        "tokenUsage": event.get("tokenUsage"),
        "model": model.get("name"),
        "provider": model.get("provider"),
    }
    spans[child.id] = child


def build_trace(events: Iterable[Mapping[str, Any]], *, now_ms: float | None = None) -> dict[str, Any]:
    """The span tree of one trace's events (from any number of instances), flattened depth-first:
    ``{"traceId", "start", "duration", "spanCount", "agents", "spans": [...]}``. Each span has
    ``id, parent, depth, kind (turn|step|model|tool|request), name, status (ok|error|cancelled|running),
    offset`` (ms after the trace began), ``duration`` (ms; a running span lasts until ``now_ms``)
    and ``attrs`` (agent, instance, token usage, finish reason, error code and message, the model
    input of a step when it was recorded)."""
    ordered = sorted(events, key=lambda e: str(e.get("timestamp", "")))
    spans: dict[str, _Span] = {}
    trace_id = None
    for event in ordered:
        trace_id = trace_id or event.get("traceId")
        _apply(spans, event)
    if now_ms is None:
        now_ms = datetime.now().timestamp() * 1000.0
    for span in spans.values():
        if span.duration is None and span.start is not None:
            span.duration = max(0.0, (span.end if span.end is not None else now_ms) - span.start)
    roots: list[_Span] = []
    for span in spans.values():
        parent = spans.get(span.parent) if span.parent else None
        (parent.children if parent is not None else roots).append(span)
    starts = [s.start for s in spans.values() if s.start is not None]
    origin = min(starts) if starts else 0.0
    ends = [s.start + (s.duration or 0.0) for s in spans.values() if s.start is not None]
    flat: list[dict[str, Any]] = []

    def key(s: _Span) -> tuple[float, str]:
        return (s.start if s.start is not None else float("inf"), s.id)

    def walk(span: _Span, depth: int) -> None:
        flat.append(
            {
                "id": span.id,
                "parent": span.parent,
                "depth": depth,
                "kind": span.kind,
                "name": span.name,
                "status": span.status,
                "offset": round((span.start - origin), 3) if span.start is not None else None,
                "duration": round(span.duration, 3) if span.duration is not None else None,
                "attrs": {k: v for k, v in span.attrs.items() if v is not None},
            }
        )
        for child in sorted(span.children, key=key):
            walk(child, depth + 1)

    for root in sorted(roots, key=key):
        walk(root, 0)
    agents = sorted({str(s["attrs"].get("agentName")) for s in flat if s["attrs"].get("agentName")})
    return {
        "traceId": trace_id,
        "start": origin,
        "duration": round(max(ends) - origin, 3) if ends else 0.0,
        "spanCount": len(flat),
        "agents": agents,
        "spans": flat,
    }


__all__ = ["AGENT_TOOL_PREFIX", "build_trace", "epoch_ms"]
