"""The tool-call / tool-result integrity rule shared by the message policies.

Every provider rejects a request (HTTP 400) whose history contains a tool result without the tool
call that asked for it, or an assistant tool call whose results do not all follow it directly. Any
policy that drops messages (window, compaction) must therefore treat an assistant message with tool
calls and the result messages answering it as one indivisible *unit*: kept whole or removed whole.

Shape (docs/architecture.md#messages): an assistant message holds ``tool-call`` parts ``{toolCallId, toolName, input}``;
each result is a ``role: tool`` message holding ``tool-result`` parts ``{toolCallId, toolName,
output}``. Upstream spellings (``tool_call``/``tool_use`` parts, ``id``/``tool_use_id`` keys, results
carried by ``user`` messages) are recognised too, so histories imported from elsewhere are handled.

A unit is *well-formed* when its result messages directly follow the assistant message and together
answer every one of its calls, and answer nothing else. Everything here is pure: functions take a
sequence of messages and return message ids, so the same code serves the extensions and the tests.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any, Protocol

_CALL_TYPES = frozenset({"tool-call", "tool_call", "tool_use"})
_RESULT_TYPES = frozenset({"tool-result", "tool_result"})


class MessageLike(Protocol):
    """What the rule reads from a message (``goondan.messages.Message`` satisfies it)."""

    @property
    def id(self) -> str: ...

    @property
    def data(self) -> dict[str, Any]: ...


def _parts(message: MessageLike) -> list[dict[str, Any]]:
    content = message.data.get("content")
    if not isinstance(content, list):
        return []
    return [p for p in content if isinstance(p, dict)]


def _part_id(part: dict[str, Any], *keys: str) -> str | None:
    for key in keys:
        value = part.get(key)
        if isinstance(value, str) and value:
            return value
    return None


def call_ids(message: MessageLike) -> list[str]:
    """Ids of the tool calls an assistant message makes (empty for every other message)."""
    if message.data.get("role") != "assistant":
        return []
    out: list[str] = []
    for part in _parts(message):
        if part.get("type") in _CALL_TYPES:
            cid = _part_id(part, "toolCallId", "id")
            if cid is not None:
                out.append(cid)
    return out


def result_ids(message: MessageLike) -> list[str]:
    """Ids of the tool calls a message answers (``tool`` messages, or legacy ``user`` carriers)."""
    if message.data.get("role") not in ("tool", "user"):
        return []
    out: list[str] = []
    for part in _parts(message):
        if part.get("type") in _RESULT_TYPES:
            cid = _part_id(part, "toolCallId", "tool_use_id", "id")
            out.append(cid if cid is not None else "")
    return out


def is_result_carrier(message: MessageLike) -> bool:
    return bool(result_ids(message))


def units(messages: Sequence[MessageLike]) -> list[list[int]]:
    """Partition positions into units: an assistant message with tool calls plus the result
    messages directly after it that answer only its calls; every other message alone.

    The partition is purely positional; whether a unit is well-formed is :func:`broken_units`'s job.
    """
    out: list[list[int]] = []
    i, n = 0, len(messages)
    while i < n:
        calls = set(call_ids(messages[i]))
        unit = [i]
        i += 1
        if calls:
            while i < n:
                answered = result_ids(messages[i])
                if not answered or not set(answered) <= calls:
                    break
                unit.append(i)
                i += 1
        out.append(unit)
    return out


def _unit_ok(messages: Sequence[MessageLike], unit: list[int]) -> bool:
    head = messages[unit[0]]
    calls = call_ids(head)
    if not calls:
        # a lone message is fine unless it answers a call it is not attached to
        return not is_result_carrier(head)
    answered: list[str] = []
    for pos in unit[1:]:
        answered.extend(result_ids(messages[pos]))
    # every call answered exactly once (a duplicate answer is as invalid as a missing one)
    return sorted(answered) == sorted(set(calls)) and len(set(calls)) == len(calls)


def broken_units(messages: Sequence[MessageLike]) -> list[list[int]]:
    """The units of ``messages`` that violate the rule (orphan results, unanswered calls)."""
    return [u for u in units(messages) if not _unit_ok(messages, u)]


def violations(messages: Sequence[MessageLike]) -> list[str]:
    """Human-readable problems of ``messages`` (empty when the history is valid)."""
    problems: list[str] = []
    for unit in broken_units(messages):
        head = messages[unit[0]]
        if call_ids(head):
            problems.append(f"assistant message {head.id} has tool calls without exactly one result each")
        else:
            problems.append(f"message {head.id} holds a tool result whose tool call does not precede it")
    return problems


def normalize(messages: Sequence[MessageLike], removed: Iterable[str] = ()) -> list[str]:
    """Ids to remove so that ``messages`` minus ``removed`` satisfies the rule: ``removed`` itself,
    plus every message of every unit that is broken in what remains, repeated until nothing breaks
    (removing a unit can expose a new neighbour). Returned in history order."""
    gone = set(removed)
    while True:
        remaining = [m for m in messages if m.id not in gone]
        broken = broken_units(remaining)
        if not broken:
            break
        for unit in broken:
            gone.update(remaining[pos].id for pos in unit)
    return [m.id for m in messages if m.id in gone]


def close_over_units(messages: Sequence[MessageLike], keep: Iterable[int]) -> set[int]:
    """Positions of every unit that contains at least one of ``keep`` (so keeping one part of a
    call/result unit keeps all of it)."""
    wanted = set(keep)
    out: set[int] = set()
    for unit in units(messages):
        if wanted.intersection(unit):
            out.update(unit)
    return out


__all__ = [
    "MessageLike",
    "broken_units",
    "call_ids",
    "close_over_units",
    "is_result_carrier",
    "normalize",
    "result_ids",
    "units",
    "violations",
]
