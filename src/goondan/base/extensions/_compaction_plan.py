"""The pure half of message-compaction: given a history and the limits, decide what goes.

Kept apart from the extension so it can be unit- and property-tested without a runtime. The plan
works on *units* (``_integrity.units``): an assistant message with tool calls and its results are
kept or dropped together, pins and the retained tail protect their whole unit, and broken units
already in the history are always dropped.

The agent's prompt (the newest message carrying context-message's ``__goondanContextMessage``
marker) is protected like a pin. It is configuration, not history: dropping it only makes
context-message append it again *after* the new summary, and since a provider reads the system
messages in order (Anthropic puts them all in one ``system`` slot ahead of the messages), the
prompt's prefix would change on every compaction and the prompt cache would miss on the whole
request. Older context messages (a prompt superseded by a changed runtime context) are history like
any other. The plan also names the ``summary_anchor``: the newest message compaction itself drops,
whose place the summary takes, so the summary follows every message it stands for and every kept
message older than them (the prompt first).
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Sequence
from typing import Any, Literal

from goondan.base.extensions._integrity import MessageLike, close_over_units, normalize, units
from goondan.base.extensions.context_message import MARKER as CONTEXT_MESSAGE_MARKER

Mode = Literal["remove", "truncate"]


@dataclasses.dataclass(frozen=True, slots=True)
class Limits:
    max_messages: int
    max_characters: int
    retain_last: int
    summary_slot: bool  # a summary message will be added and must fit under max_messages


@dataclasses.dataclass(slots=True)
class Plan:
    """``mode='remove'``: remove ``removed`` (history order), the rest stays in place.
    ``mode='truncate'``: clear the history, then re-append ``kept`` (history order).
    ``summary_anchor``: the removed message a summary takes the place of (the newest one compaction
    dropped to meet the limits; an integrity repair's only when nothing else went)."""

    mode: Mode
    removed: list[str]
    kept: list[str]
    removed_characters: int
    within_limits: bool
    triggered: bool
    summary_anchor: str | None = None

    @property
    def removed_count(self) -> int:
        return len(self.removed)


def message_characters(message: MessageLike) -> int:
    """Size of a message as the model will read it: its text plus the JSON of tool-call inputs and
    tool-result outputs (results are usually the bulk of a long history, so they must count)."""
    content = message.data.get("content")
    if isinstance(content, str):
        return len(content)
    total = 0
    if isinstance(content, list):
        for part in content:
            if not isinstance(part, dict):
                continue
            kind = part.get("type")
            if kind == "text":
                total += len(str(part.get("text", "")))
            elif kind in ("tool-call", "tool_call", "tool_use"):
                total += _json_len(part.get("input", part.get("args")))
            elif kind in ("tool-result", "tool_result"):
                output = part.get("output", part.get("content"))
                if isinstance(output, dict) and "value" in output:
                    output = output["value"]
                total += len(output) if isinstance(output, str) else _json_len(output)
    return total


def _json_len(value: Any) -> int:
    if value is None:
        return 0
    try:
        return len(json.dumps(value, ensure_ascii=False, default=str))
    except (TypeError, ValueError):
        return len(str(value))


def is_pinned(message: Any) -> bool:
    metadata = getattr(message, "metadata", None)
    return isinstance(metadata, dict) and metadata.get("pinned") is True


def is_agent_prompt(message: Any) -> bool:
    """Whether ``message`` is a context-message system message (the agent's prompt and context)."""
    metadata = getattr(message, "metadata", None)
    return isinstance(metadata, dict) and isinstance(metadata.get(CONTEXT_MESSAGE_MARKER), dict)


def _newest_prompt(messages: Sequence[MessageLike]) -> list[int]:
    for i in range(len(messages) - 1, -1, -1):
        if is_agent_prompt(messages[i]):
            return [i]
    return []


def _anchor(messages: Sequence[MessageLike], gone: set[int], broken: set[str]) -> str | None:
    """The newest message in ``gone`` that compaction dropped (not an integrity repair's), else the
    newest in ``gone``."""
    order = sorted(gone, reverse=True)
    chosen = next((i for i in order if messages[i].id not in broken), order[0] if order else None)
    return None if chosen is None else messages[chosen].id


def _over(count: int, chars: int, limits: Limits) -> bool:
    return count > limits.max_messages or chars > limits.max_characters


def tail_never_fits(limits: Limits) -> bool:
    """Whether the protected tail alone is over ``max_messages`` whatever the history: the newest
    ``retain_last`` messages (at least the current input) plus the summary message when one is added.
    Every triggered compaction then ends as the fallback ``truncate`` of :func:`plan_compaction`, which
    keeps fewer than ``retain_last`` messages: the setting can never be honoured. (Equal counts fit:
    ``remove`` stops once the history is back within ``max_messages``.)"""
    return max(limits.retain_last, 1) + (1 if limits.summary_slot else 0) > limits.max_messages


def tail_never_fits_message(limits: Limits) -> str:
    """The warning for :func:`tail_never_fits`, the same in ``gdn validate`` and at the agent's start."""
    summary = " plus the summary message (appendSummary)" if limits.summary_slot else ""
    return (
        f"retainLastMessages ({limits.retain_last}){summary} cannot fit in maxMessages ({limits.max_messages}): "
        "every compaction falls back to truncate and keeps fewer messages than retainLastMessages"
    )


def plan_compaction(messages: Sequence[MessageLike], mode: Mode, limits: Limits) -> Plan | None:
    """What compaction does to ``messages``, or ``None`` when it leaves them alone.

    Triggered when the history has more than ``max_messages`` messages or more than
    ``max_characters`` characters. Untriggered, only broken tool units are dropped (a pure integrity
    repair, no summary). ``remove`` falls back to ``truncate`` when removing every unprotected unit
    is still not enough: it then keeps the pins, the last unit (the current input) and the newest
    whole units that still fit.
    """
    n = len(messages)
    sizes = [message_characters(m) for m in messages]
    broken = set(normalize(messages))
    triggered = _over(n, sum(sizes), limits)
    if not triggered:
        if not broken:
            return None
        removed = [m.id for m in messages if m.id in broken]
        chars = sum(s for m, s in zip(messages, sizes, strict=True) if m.id in broken)
        return Plan("remove", removed, [m.id for m in messages if m.id not in broken], chars, True, False)
    pinned = [i for i, m in enumerate(messages) if is_pinned(m)]
    # the last unit is the turn's current input: without it the model would answer nothing; the
    # agent prompt keeps its place ahead of the summary (module docstring)
    essential = close_over_units(messages, [*pinned, *_newest_prompt(messages), n - 1])
    protected = essential | close_over_units(messages, range(max(0, n - limits.retain_last), n))
    if mode == "remove":
        plan = _plan_remove(messages, sizes, broken, protected, limits)
        if plan.within_limits:
            return plan
    else:
        plan = _plan_truncate(messages, sizes, broken, protected, limits)
        if plan.within_limits:
            return plan
    # even the protected messages are too many: keep the pins, the current input and as much of the
    # recent history as still fits
    return _plan_truncate(messages, sizes, broken, _fit_tail(messages, sizes, broken, essential, limits), limits)


def _fit_tail(
    messages: Sequence[MessageLike], sizes: list[int], broken: set[str], keep: set[int], limits: Limits
) -> set[int]:
    """``keep`` plus the newest whole units that fit the limits together with it."""
    keep = set(keep)
    slot = 1 if limits.summary_slot else 0
    count = sum(1 for i in keep if messages[i].id not in broken)
    chars = sum(sizes[i] for i in keep if messages[i].id not in broken)
    for unit in reversed(units(messages)):
        fresh = [i for i in unit if i not in keep and messages[i].id not in broken]
        if not fresh:
            continue
        if _over(count + len(fresh) + slot, chars + sum(sizes[i] for i in fresh), limits):
            break
        keep.update(unit)
        count += len(fresh)
        chars += sum(sizes[i] for i in fresh)
    return keep


def _plan_remove(
    messages: Sequence[MessageLike], sizes: list[int], broken: set[str], protected: set[int], limits: Limits
) -> Plan:
    gone = {i for i, m in enumerate(messages) if m.id in broken}
    count = len(messages) - len(gone)
    chars = sum(s for i, s in enumerate(sizes) if i not in gone)
    slot = 1 if limits.summary_slot else 0
    for unit in units(messages):
        if not _over(count + slot, chars, limits):
            break
        if protected.intersection(unit) or gone.intersection(unit):
            continue
        gone.update(unit)
        count -= len(unit)
        chars -= sum(sizes[i] for i in unit)
    removed = [m.id for i, m in enumerate(messages) if i in gone]
    kept = [m.id for i, m in enumerate(messages) if i not in gone]
    removed_chars = sum(sizes[i] for i in gone)
    within = not _over(count + (slot if removed else 0), chars, limits)
    return Plan("remove", removed, kept, removed_chars, within, True, _anchor(messages, gone, broken))


def _plan_truncate(
    messages: Sequence[MessageLike], sizes: list[int], broken: set[str], protected: set[int], limits: Limits
) -> Plan:
    keep_positions = [i for i in sorted(protected) if messages[i].id not in broken]
    kept_messages = [messages[i] for i in keep_positions]
    still_broken = set(normalize(kept_messages))
    kept = [m.id for m in kept_messages if m.id not in still_broken]
    kept_set = set(kept)
    removed = [m.id for m in messages if m.id not in kept_set]
    removed_chars = sum(s for m, s in zip(messages, sizes, strict=True) if m.id not in kept_set)
    kept_chars = sum(s for m, s in zip(messages, sizes, strict=True) if m.id in kept_set)
    slot = 1 if limits.summary_slot else 0
    within = not _over(len(kept) + slot, kept_chars, limits)
    gone = {i for i, m in enumerate(messages) if m.id not in kept_set}
    return Plan("truncate", removed, kept, removed_chars, within, True, _anchor(messages, gone, broken | still_broken))


__all__ = ["Limits", "Plan", "is_agent_prompt", "is_pinned", "message_characters", "plan_compaction"]
