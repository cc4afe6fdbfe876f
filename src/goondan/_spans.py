"""Runtime-event records → spans: pure, standard library only.

A turn, a step and a tool call each leave a pair of records in ``runtime-events.jsonl`` (``*.started``
/ ``tool.called``, then ``*.completed`` / ``*.failed``) carrying OpenTelemetry-sized ``traceId``,
``spanId`` and ``parentSpanId``. :class:`SpanAssembler` pairs them into :class:`Span` values that
keep those ids exactly, so a span seen in a tracing backend (goondan.telemetry) or a trace view is
the same span ``gdn logs`` shows, one trace across every agent process of a request.

Attributes follow the OpenTelemetry GenAI semantic conventions (v1.37+: ``gen_ai.operation.name``
``invoke_agent`` for a turn, ``chat`` for a model call, ``execute_tool`` for a tool call;
``gen_ai.provider.name``, ``gen_ai.request.model``, ``gen_ai.usage.*``, ``gen_ai.tool.*``,
``error.type``), plus OpenInference's ``openinference.span.kind`` and ``llm.*`` names, which Phoenix
reads. A step has no GenAI operation of its own: it is the model call plus the tool calls
it asked for, so it is a plain ``step N`` span whose model call becomes a ``chat`` child (from the
``model`` field of the step's end record). That child is the one span without a record of its own;
its id is :func:`model_span_id` of the step's span id, so every reader derives the same one.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
from collections import OrderedDict
from collections.abc import Mapping
from datetime import datetime
from typing import Any, Literal

AttrValue = str | bool | int | float | list[str]

#: ``gen_ai.provider.name`` of our ``Model.spec.provider`` values; others are used as they are
PROVIDER_NAMES = {"openai": "openai", "anthropic": "anthropic", "google": "gcp.gemini"}

_START_TYPES = frozenset({"turn.started", "step.started", "tool.called"})
_END_TYPES = frozenset(
    {"turn.completed", "turn.failed", "step.completed", "step.failed", "tool.completed", "tool.failed"}
)
_INSTANT_TYPES = frozenset({"approval.requested", "approval.decided"})
#: OpenInference's span kind (AGENT, CHAIN, LLM, TOOL): Phoenix groups and draws spans by it
OI_KIND = "openinference.span.kind"


@dataclasses.dataclass(slots=True)
class Span:
    """One finished span. Times are nanoseconds since the epoch; ``error_type`` (our ``E_`` code)
    marks a failed span, ``error_message`` says why."""

    trace_id: str
    span_id: str
    parent_span_id: str | None
    name: str
    kind: Literal["internal", "client"]
    start_ns: int
    end_ns: int
    attributes: dict[str, AttrValue]
    error_type: str | None = None
    error_message: str | None = None


def model_span_id(step_span_id: str) -> str:
    """The span id of a step's model call: derived from the step's, so it is the same everywhere."""
    digest = hashlib.sha256(f"{step_span_id}:model".encode()).hexdigest()[:16]
    return digest if digest != "0" * 16 else "0" * 15 + "1"


def timestamp_ns(value: object) -> int | None:
    """``2026-01-02T03:04:05.678Z`` → nanoseconds since the epoch (None when not a timestamp)."""
    if not isinstance(value, str):
        return None
    try:
        moment = datetime.fromisoformat(value)
    except ValueError:
        return None
    if moment.tzinfo is None:
        return None
    seconds = int(moment.timestamp())
    return seconds * 1_000_000_000 + moment.microsecond * 1000


class SpanAssembler:
    """Pairs start and end records into spans as they arrive (from one process or many: records of
    one span always come from the same instance, in order). ``feed`` returns the spans a record
    finished. At most ``max_open`` spans wait for their end record; beyond that the oldest is
    forgotten (an instance that died mid-turn never sends it). ``capture_content`` adds the model
    input of a step (``llmInputMessages``, recorded with ``GOONDAN_TRACE_LLM_INPUT=1``) to its model
    call span as ``gen_ai.input.messages``; off by default, since messages may hold private data."""

    def __init__(self, *, capture_content: bool = False, max_open: int = 4096) -> None:
        self.capture_content = capture_content
        self.max_open = max_open
        self._open: OrderedDict[str, dict[str, Any]] = OrderedDict()
        # what a turn's spans learned for the turn span: model and provider of its steps
        self._turn_model: OrderedDict[str, tuple[str, str]] = OrderedDict()

    @property
    def open_count(self) -> int:
        return len(self._open)

    def feed(self, record: Mapping[str, Any]) -> list[Span]:
        etype = record.get("type")
        span_id = record.get("spanId")
        trace_id = record.get("traceId")
        if not isinstance(span_id, str) or not isinstance(trace_id, str):
            return []
        if etype in _START_TYPES:
            self._open[span_id] = dict(record)
            if len(self._open) > self.max_open:
                self._open.popitem(last=False)
            return []
        if etype in _END_TYPES:
            start = self._open.pop(span_id, None)
            return self._finish(start, record)
        if etype in _INSTANT_TYPES:
            return [self._instant(record)]
        return []

    # --- building spans -------------------------------------------------------------------------

    def _finish(self, start: Mapping[str, Any] | None, end: Mapping[str, Any]) -> list[Span]:
        etype = str(end["type"])
        end_ns = timestamp_ns(end.get("timestamp")) or 0
        duration = end.get("duration")
        start_ns = timestamp_ns(start.get("timestamp")) if start is not None else None
        if start_ns is None:  # the start came before we listened: go back by the recorded duration
            start_ns = end_ns - int(duration if isinstance(duration, int | float) else 0) * 1_000_000
        end_ns = max(end_ns, start_ns)
        kind = etype.split(".", 1)[0]
        parent = end.get("parentSpanId")
        if not isinstance(parent, str) and start is not None:
            parent = start.get("parentSpanId")
        span = Span(
            trace_id=str(end["traceId"]),
            span_id=str(end["spanId"]),
            parent_span_id=parent if isinstance(parent, str) else None,
            name="",
            kind="internal",
            start_ns=start_ns,
            end_ns=end_ns,
            attributes=_common(end),
        )
        if etype.endswith(".failed"):
            error = end.get("error")
            code = error.get("code") if isinstance(error, Mapping) else None
            span.error_type = str(code) if code else "_OTHER"
            span.error_message = str(end.get("errorMessage") or "") or None
        if kind == "turn":
            self._turn_span(span, start, end)
            return [span]
        if kind == "step":
            return self._step_spans(span, start, end)
        self._tool_span(span, end)
        return [span]

    def _turn_span(self, span: Span, start: Mapping[str, Any] | None, end: Mapping[str, Any]) -> None:
        attrs = span.attributes
        agent = str(end.get("agentName") or "")
        span.name = f"invoke_agent {agent}"
        attrs["gen_ai.operation.name"] = "invoke_agent"
        attrs[OI_KIND] = "AGENT"
        model = self._turn_model.pop(span.span_id, None)
        if model is not None:
            _model_attrs(attrs, *model)
        _usage(attrs, end.get("tokenUsage"))
        if isinstance(end.get("stepCount"), int):
            attrs["goondan.turn.step_count"] = end["stepCount"]
        if end.get("cancelled") is True:
            attrs["goondan.turn.cancelled"] = True
        if start is not None and start.get("resumed") is True:
            attrs["goondan.turn.resumed"] = True

    def _step_spans(self, span: Span, start: Mapping[str, Any] | None, end: Mapping[str, Any]) -> list[Span]:
        attrs = span.attributes
        index = end.get("stepIndex")
        span.name = f"step {index}"
        attrs[OI_KIND] = "CHAIN"
        if isinstance(index, int):
            attrs["goondan.step.index"] = index
        if isinstance(end.get("stepId"), str):
            attrs["goondan.step.id"] = end["stepId"]
        if isinstance(end.get("toolCallCount"), int):
            attrs["goondan.step.tool_call_count"] = end["toolCallCount"]
        call = end.get("model")
        if not isinstance(call, Mapping):
            return [span]
        name, provider = str(call.get("name") or ""), str(call.get("provider") or "")
        parent = span.parent_span_id
        if parent is not None:
            self._turn_model[parent] = (name, provider)
            if len(self._turn_model) > self.max_open:
                self._turn_model.popitem(last=False)
        offset = call.get("start")
        took = call.get("duration")
        begin = span.start_ns + int((offset if isinstance(offset, int | float) else 0) * 1_000_000)
        begin = min(max(begin, span.start_ns), span.end_ns)
        finish = begin + int((took if isinstance(took, int | float) else 0) * 1_000_000)
        chat = Span(
            trace_id=span.trace_id,
            span_id=model_span_id(span.span_id),
            parent_span_id=span.span_id,
            name=f"chat {name}".rstrip(),
            kind="client",
            start_ns=begin,
            end_ns=min(max(finish, begin), max(span.end_ns, begin)),
            attributes=_common(end),
        )
        chat.attributes["gen_ai.operation.name"] = "chat"
        _model_attrs(chat.attributes, name, provider)
        _usage(chat.attributes, end.get("tokenUsage"))
        _openinference_llm(chat.attributes, name, provider, end.get("tokenUsage"))
        reason = call.get("finishReason")
        if isinstance(reason, str) and reason:
            chat.attributes["gen_ai.response.finish_reasons"] = [reason]
        if span.error_type is not None and call.get("failed") is True:
            # the step failed and its model call had not returned: the call is what failed
            chat.error_type, chat.error_message = span.error_type, span.error_message
        if self.capture_content and start is not None and start.get("llmInputMessages") is not None:
            chat.attributes["gen_ai.input.messages"] = json.dumps(start["llmInputMessages"], ensure_ascii=False)
        return [span, chat]

    def _tool_span(self, span: Span, end: Mapping[str, Any]) -> None:
        attrs = span.attributes
        tool = str(end.get("toolName") or "")
        span.name = f"execute_tool {tool}"
        attrs["gen_ai.operation.name"] = "execute_tool"
        attrs["gen_ai.tool.name"] = tool
        attrs[OI_KIND] = "TOOL"
        attrs["tool.name"] = tool
        attrs["gen_ai.tool.type"] = "function"
        if isinstance(end.get("toolCallId"), str):
            attrs["gen_ai.tool.call.id"] = end["toolCallId"]
        if end.get("status") == "error":
            error = end.get("error")
            code = error.get("code") if isinstance(error, Mapping) else None
            span.error_type = str(code) if code else "_OTHER"
            message = error.get("message") if isinstance(error, Mapping) else None
            span.error_message = str(message) if message else None

    def _instant(self, record: Mapping[str, Any]) -> Span:
        at = timestamp_ns(record.get("timestamp")) or 0
        attrs = _common(record)
        etype = str(record["type"])
        tool = str(record.get("toolName") or "")
        for key, attr in (
            ("approvalId", "goondan.approval.id"),
            ("toolName", "gen_ai.tool.name"),
            ("toolCallId", "gen_ai.tool.call.id"),
            ("decidedBy", "goondan.approval.decided_by"),
        ):
            if isinstance(record.get(key), str):
                attrs[attr] = record[key]
        if isinstance(record.get("approved"), bool):
            attrs["goondan.approval.approved"] = record["approved"]
        parent = record.get("parentSpanId")
        return Span(
            trace_id=str(record["traceId"]),
            span_id=str(record["spanId"]),
            parent_span_id=parent if isinstance(parent, str) else None,
            name=f"{etype} {tool}".rstrip(),
            kind="internal",
            start_ns=at,
            end_ns=at,
            attributes=attrs,
        )


def _common(record: Mapping[str, Any]) -> dict[str, AttrValue]:
    attrs: dict[str, AttrValue] = {}
    agent = record.get("agentName")
    if isinstance(agent, str):
        attrs["gen_ai.agent.name"] = agent
    key = record.get("instanceKey")
    if isinstance(key, str):
        attrs["gen_ai.conversation.id"] = key
        attrs["goondan.instance.key"] = key
    turn = record.get("turnId")
    if isinstance(turn, str):
        attrs["goondan.turn.id"] = turn
    return attrs


def _model_attrs(attrs: dict[str, AttrValue], name: str, provider: str) -> None:
    if name:
        attrs["gen_ai.request.model"] = name
    if provider:
        system = PROVIDER_NAMES.get(provider, provider)
        attrs["gen_ai.provider.name"] = system
        attrs["gen_ai.system"] = system  # the name before semantic conventions v1.37; older backends read it


def _openinference_llm(attrs: dict[str, AttrValue], name: str, provider: str, usage: object) -> None:
    """The OpenInference names of a model call, which Phoenix reads to show model, cost and tokens."""
    attrs[OI_KIND] = "LLM"
    if name:
        attrs["llm.model_name"] = name
    if provider:
        attrs["llm.system"] = PROVIDER_NAMES.get(provider, provider)
    if isinstance(usage, Mapping):
        for key, attr in (
            ("promptTokens", "llm.token_count.prompt"),
            ("completionTokens", "llm.token_count.completion"),
            ("totalTokens", "llm.token_count.total"),
        ):
            value = usage.get(key)
            if isinstance(value, int):
                attrs[attr] = value


def _usage(attrs: dict[str, AttrValue], usage: object) -> None:
    if not isinstance(usage, Mapping):
        return
    for key, attr in (
        ("promptTokens", "gen_ai.usage.input_tokens"),
        ("completionTokens", "gen_ai.usage.output_tokens"),
    ):
        value = usage.get(key)
        if isinstance(value, int):
            attrs[attr] = value


__all__ = ["OI_KIND", "PROVIDER_NAMES", "AttrValue", "Span", "SpanAssembler", "model_span_id", "timestamp_ns"]
