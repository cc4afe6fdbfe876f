"""What one turn did, read back the way a user would check it, with assertions that explain failures.

Everything here comes from what the runtime really produced: the :class:`~goondan.TurnResult`, the
runtime events delivered while the turn ran, and the conversation as the store holds it after the
turn (re-read from disk, so a test sees what a restart would). An assertion that fails raises
``AssertionError`` whose message says what was expected and shows a compact transcript of the turn.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..messages import Message
from ..results import PendingApproval, TurnResult


@dataclass(frozen=True)
class CallRecord:
    """A tool call the model made during the turn."""

    id: str
    name: str
    args: Any


@dataclass(frozen=True)
class ResultRecord:
    """A tool result the turn recorded: ``value`` is the output's value (text or JSON); for errors,
    ``error`` is ``{code, message, suggestion?}``."""

    tool_call_id: str
    name: str
    status: str
    value: Any
    error: dict[str, Any] | None = None


def is_subset(expected: Any, actual: Any) -> bool:
    """``expected`` is contained in ``actual``: dict keys recursively, lists item by item (same length),
    anything else by equality."""
    if isinstance(expected, Mapping):
        return isinstance(actual, Mapping) and all(k in actual and is_subset(v, actual[k]) for k, v in expected.items())
    if isinstance(expected, list | tuple):
        return (
            isinstance(actual, list | tuple)
            and len(expected) == len(actual)
            and all(is_subset(e, a) for e, a in zip(expected, actual, strict=True))
        )
    return bool(expected == actual)


_GOONDAN_DIR = str(Path(__file__).resolve().parents[1]) + os.sep
# the module an override function is called through (testing/_models.py writes it to a scratch dir)
_OVERRIDE_MODULE = re.compile(r"goondan-test-[^/\\]+[/\\]models[/\\]")
_FRAME = re.compile(r'^  File "(?P<file>[^"]+)", line \d+')


def user_frames(traceback_text: str) -> str:
    """``traceback_text`` without the frames of Goondan's own files: the header, the user's
    frames (each with its source lines) and the exception. A chained traceback keeps its parts."""
    kept: list[str] = []
    skipping = False
    for line in traceback_text.splitlines():
        frame = _FRAME.match(line)
        if frame is not None:
            path = frame.group("file")
            skipping = path.startswith(_GOONDAN_DIR) or _OVERRIDE_MODULE.search(path) is not None
        elif not line.startswith("    "):
            skipping = False  # the exception line, a header, the text between chained tracebacks
        if not skipping:
            kept.append("  " + line)
    return "\n".join(kept)


def _short(value: Any, limit: int = 160) -> str:
    text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False, sort_keys=True, default=str)
    return text if len(text) <= limit else text[: limit - 1] + "…"


@dataclass
class Turn:
    """One finished turn: ``result``, the runtime ``events`` seen while it ran, and ``conversation``,
    the agent instance's stored messages after it."""

    result: TurnResult
    agent: str
    instance_key: str
    events: list[dict[str, Any]] = field(default_factory=list)
    conversation: list[Message] = field(default_factory=list)
    latency_ms: float = 0.0
    text_deltas: list[str] = field(default_factory=list)
    """The streamed text, chunk by chunk (``request(..., stream=True)`` only)."""

    # --- what happened ---------------------------------------------------------------------------

    @property
    def turn_id(self) -> str:
        return self.result.turn_id

    @property
    def text(self) -> str | None:
        return self.result.text

    @property
    def output(self) -> Any:
        return self.result.output

    @property
    def finish_reason(self) -> str:
        return str(self.result.finish_reason)

    @property
    def pending_approvals(self) -> list[PendingApproval]:
        """The calls the turn waits on (``finish_reason == "awaiting_approval"``); decide one with
        ``runner.approve(turn.pending_approvals[0])``."""
        return list(self.result.pending_approvals)

    @property
    def messages(self) -> list[Message]:
        """The messages of this turn in the stored conversation (its assistant steps and their tool
        results), oldest first."""
        prefix = self.turn_id + "-"
        ids: set[str] = set()
        out: list[Message] = []
        for message in self.conversation:
            source = message.source
            if source.get("type") == "assistant" and str(source.get("stepId", "")).startswith(prefix):
                out.append(message)
                ids.update(str(p.get("toolCallId")) for p in _parts(message, "tool-call"))
            elif message.role == "tool" and any(
                str(p.get("toolCallId")) in ids for p in _parts(message, "tool-result")
            ):
                out.append(message)
        return out

    @property
    def tool_calls(self) -> list[CallRecord]:
        return [
            CallRecord(str(p.get("toolCallId")), str(p.get("toolName")), p.get("input"))
            for m in self.messages
            if m.role == "assistant"
            for p in _parts(m, "tool-call")
        ]

    @property
    def tool_results(self) -> list[ResultRecord]:
        out: list[ResultRecord] = []
        for message in self.messages:
            if message.role != "tool":
                continue
            for part in _parts(message, "tool-result"):
                output = part.get("output") or {}
                is_error = output.get("type") == "error-json"
                value = output.get("value")
                out.append(
                    ResultRecord(
                        str(part.get("toolCallId")),
                        str(part.get("toolName")),
                        "error" if is_error else "ok",
                        value,
                        value if is_error and isinstance(value, dict) else None,
                    )
                )
        return out

    @property
    def completed_event(self) -> dict[str, Any] | None:
        return next(
            (e for e in self.events if e.get("type") == "turn.completed" and e.get("turnId") == self.turn_id), None
        )

    @property
    def steps(self) -> int:
        """How many steps (model calls) the turn took."""
        event = self.completed_event
        if event is not None and isinstance(event.get("stepCount"), int):
            return int(event["stepCount"])
        return sum(1 for e in self.events if e.get("type") == "step.started" and e.get("turnId") == self.turn_id)

    @property
    def token_usage(self) -> dict[str, int]:
        """``{promptTokens, completionTokens, totalTokens}`` as the model reported them (zeros when it
        reported none)."""
        event = self.completed_event or {}
        usage = event.get("tokenUsage") or {}
        return {k: int(usage.get(k) or 0) for k in ("promptTokens", "completionTokens", "totalTokens")}

    def transcript(self, limit: int = 40, *, header: bool = True) -> str:
        """The turn in a few lines: its messages, tool calls and results, and how it finished
        (``header=False`` leaves out the line with ids, e.g. for a judge model)."""
        lines = (
            [f"turn {self.turn_id} of {self.agent}@{self.instance_key}: {self.finish_reason}, {self.steps} step(s)"]
            if header
            else []
        )
        for message in self.messages[:limit]:
            if message.role == "assistant":
                if message.text:
                    lines.append(f"  assistant: {_short(message.text)}")
                for p in _parts(message, "tool-call"):
                    lines.append(f"  assistant -> {p.get('toolName')}({_short(p.get('input'))})")
            else:
                for p in _parts(message, "tool-result"):
                    output = p.get("output") or {}
                    label = "error" if output.get("type") == "error-json" else "result"
                    lines.append(f"  tool {p.get('toolName')} {label}: {_short(output.get('value'))}")
        if len(self.messages) > limit:
            lines.append(f"  ... {len(self.messages) - limit} more message(s)")
        for item in self.result.pending_approvals:
            lines.append(f"  waiting for approval: {item.tool_name}({_short(item.args)}) {item.approval_id}")
        error = self.result.error
        if isinstance(error, dict) and isinstance(error.get("message"), str):
            # why the turn failed, whole: cut to 160 characters of sorted JSON it showed the code and
            # the help link and lost the message ("... returned int; expected ...")
            lines.append(f"  error: [{error.get('code')}] {error['message']}")
            if error.get("suggestion"):
                lines.append(f"    suggestion: {error['suggestion']}")
        elif error:
            lines.append(f"  error: {_short(error)}")
        if self.text is not None and not any(m.role == "assistant" and m.text == self.text for m in self.messages):
            lines.append(f"  final text: {_short(self.text)}")
        return "\n".join(lines)

    def _fail(self, message: str) -> AssertionError:
        return AssertionError(f"{message}\n\n{self.transcript()}{self._raised()}")

    def _raised(self) -> str:
        """The tracebacks of the user's code that raised during the turn (a tool, an extension, a
        python model or an override function), as stored with the failure's runtime event.

        The transcript says only ``E_TOOL_ERROR: division by zero``; the line that raised was in
        the event, which a failing test did not show, so finding it took ``gdn logs -v`` on the
        state root. Frames of Goondan itself (and of the module the runner writes for an override
        function) are left out: what is left starts in the user's file."""
        seen: set[str] = set()
        out: list[str] = []
        for event in self.events:
            error = event.get("error")
            tb = error.get("traceback") if isinstance(error, dict) else None
            if not isinstance(tb, str) or tb in seen:
                continue
            seen.add(tb)  # step.failed and turn.failed carry the same one
            where = event.get("toolName") or event.get("extensionName")
            what = f"{where} raised" if where else "the turn failed in your code"
            out.append(f"\n\n{what}:\n{user_frames(tb)}")
        return "".join(out)

    # --- assertions --------------------------------------------------------------------------------

    def assert_tool_called(self, name: str, args: Mapping[str, Any] | None = None, *, times: int | None = None) -> None:
        """``name`` was called (with arguments containing ``args``); exactly ``times`` times if given."""
        calls = [c for c in self.tool_calls if c.name == name]
        matching = [c for c in calls if args is None or is_subset(dict(args), c.args)]
        if times is not None and len(matching) != times:
            raise self._fail(f"expected {name} to be called {times} time(s){_with(args)}, got {len(matching)}")
        if not matching:
            if calls:
                seen = "; ".join(_short(c.args) for c in calls)
                raise self._fail(f"{name} was called but never{_with(args)}; its arguments were: {seen}")
            names = sorted({c.name for c in self.tool_calls})
            raise self._fail(f"expected a call to {name}{_with(args)}; tools called: {', '.join(names) or 'none'}")

    def assert_not_called(self, name: str | None = None) -> None:
        """No tool (or not ``name``) was called."""
        calls = [c for c in self.tool_calls if name is None or c.name == name]
        if calls:
            what = name or "any tool"
            raise self._fail(f"expected no call to {what}; got {len(calls)}: {', '.join(c.name for c in calls)}")

    def assert_tool_result(
        self,
        name: str,
        *,
        status: str = "ok",
        contains: str | None = None,
        equals: Any = None,
        code: str | None = None,
    ) -> None:
        """A result of ``name`` has ``status`` and (optionally) text containing ``contains``, a value
        containing ``equals`` (subset match) or an error ``code``."""
        results = [r for r in self.tool_results if r.name == name]
        if not results:
            raise self._fail(f"expected a result of {name}; there is none")
        for r in results:
            if r.status != status:
                continue
            if contains is not None and contains not in _short(r.value, 1 << 20):
                continue
            if equals is not None and not is_subset(equals, r.value):
                continue
            if code is not None and (r.error or {}).get("code") != code:
                continue
            return
        wanted = ", ".join(
            f"{k}={v!r}"
            for k, v in {"status": status, "contains": contains, "equals": equals, "code": code}.items()
            if v is not None
        )
        seen = "; ".join(f"{r.status}: {_short(r.value)}" for r in results)
        raise self._fail(f"no result of {name} with {wanted}; its results: {seen}")

    def assert_text(self, contains: str | None = None, *, regex: str | None = None, equals: str | None = None) -> None:
        """The final text contains ``contains``, matches ``regex`` (search) or equals ``equals``."""
        text = self.text
        if text is None:
            raise self._fail("expected final text; the turn ended without any")
        if contains is not None and contains not in text:
            raise self._fail(f"expected the final text to contain {contains!r}; it is {text!r}")
        if regex is not None and re.search(regex, text) is None:
            raise self._fail(f"expected the final text to match /{regex}/; it is {text!r}")
        if equals is not None and text != equals:
            raise self._fail(f"expected the final text {equals!r}; it is {text!r}")

    def assert_output(self, expected: Any = None, *, schema: Mapping[str, Any] | None = None) -> None:
        """The structured output contains ``expected`` (subset match) and/or validates against ``schema``."""
        output = self.output
        if output is None:
            raise self._fail("expected structured output; the turn has none (does the agent set spec.output?)")
        if expected is not None and not is_subset(expected, output):
            raise self._fail(f"expected the output to contain {_short(expected)}; it is {_short(output)}")
        if schema is not None:
            import jsonschema

            errors = list(jsonschema.Draft202012Validator(dict(schema)).iter_errors(output))
            if errors:
                raise self._fail(f"the output does not match the schema: {errors[0].message}")

    def assert_finished(self, reason: str = "text_response") -> None:
        if self.finish_reason != reason:
            raise self._fail(f"expected the turn to finish with {reason!r}; it finished with {self.finish_reason!r}")

    def assert_max_steps(self, limit: int) -> None:
        if self.steps > limit:
            raise self._fail(f"expected at most {limit} step(s); the turn took {self.steps}")

    def assert_conversation(self, roles: Sequence[str] | None = None, *, contains: str | None = None) -> None:
        """The stored conversation has exactly these ``roles`` in order (system messages included), and/or
        a message whose text contains ``contains``."""
        stored = [m.role for m in self.conversation]
        if roles is not None and stored != list(roles):
            raise self._fail(f"expected the stored conversation to have roles {list(roles)}; it has {stored}")
        if contains is not None and not any(contains in m.text for m in self.conversation):
            raise self._fail(f"no stored message contains {contains!r} (the conversation has {len(stored)} messages)")

    def assert_event(self, event_type: str, **fields: Any) -> dict[str, Any]:
        """A runtime event of ``event_type`` whose fields contain ``fields`` was emitted; returns it."""
        candidates = [e for e in self.events if e.get("type") == event_type]
        for event in candidates:
            if is_subset(fields, event):
                return event
        types = sorted({str(e.get("type")) for e in self.events})
        detail = f" with {_short(fields)}" if fields else ""
        raise self._fail(
            f"expected a {event_type} event{detail}; got {len(candidates)} of that type; "
            f"event types seen: {', '.join(types) or 'none'}"
        )


def _with(args: Mapping[str, Any] | None) -> str:
    return f" with arguments containing {_short(dict(args))}" if args is not None else ""


def _parts(message: Message, kind: str) -> Sequence[dict[str, Any]]:
    content = message.data.get("content")
    if not isinstance(content, list):
        return []
    return [p for p in content if isinstance(p, dict) and p.get("type") == kind]


__all__ = ["CallRecord", "ResultRecord", "Turn", "is_subset"]
