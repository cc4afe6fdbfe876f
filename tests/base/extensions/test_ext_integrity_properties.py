"""The tool-call/result integrity rule under random histories (issue 4, digest §6 integrity helper).

Random histories of user/assistant text, system messages, assistant messages with 1-3 tool calls
followed by their results, and pins on any message (tool calls and results included) go through
message-window and message-compaction as real middleware over a real conversation state. On the
history the next layer sees (base + the emitted events) we check, with a checker written
independently of ``_integrity``: no result without its call, no call without all its results right
after it, no call split from its results — and the policies' own promises (limits, pins, order).
Damaged histories (messages deleted at random, as a crash or a hand-edited file could leave them)
must come out repaired.
"""

from __future__ import annotations

import asyncio
import dataclasses
from typing import Any

import policy_kit as k
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from goondan.base.extensions._compaction_plan import message_characters
from goondan.base.extensions._integrity import normalize
from goondan.conversation import ConversationState
from goondan.messages import Message, assistant_message, system_message, tool_message, user_message

SETTINGS = settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def pairing_problems(messages: list[Message]) -> list[str]:
    """Independent checker of the provider rule for the CONTRACT §4 message shape."""
    problems: list[str] = []
    pending: set[str] = set()
    for m in messages:
        content = m.data.get("content")
        parts = [p for p in content if isinstance(p, dict)] if isinstance(content, list) else []
        results = [p.get("toolCallId") for p in parts if p.get("type") == "tool-result"]
        if results:
            for rid in results:
                if rid not in pending:
                    problems.append(f"{m.id}: result {rid} without a pending call")
                pending.discard(rid)
            continue
        if pending:
            problems.append(f"{m.id}: follows a call whose results {sorted(pending)} are missing")
            pending = set()
        if m.role == "assistant":
            pending = {p["toolCallId"] for p in parts if p.get("type") == "tool-call"}
    if pending:
        problems.append(f"history ends with unanswered calls {sorted(pending)}")
    return problems


@st.composite
def histories(draw: Any, damaged: bool = False) -> list[Message]:
    counter = {"n": 0}

    def nid(prefix: str) -> str:
        counter["n"] += 1
        return f"{prefix}{counter['n']}"

    def meta() -> dict[str, Any] | None:
        return {"pinned": True} if draw(st.integers(0, 5)) == 0 else None

    out: list[Message] = []
    for kind in draw(st.lists(st.sampled_from(["user", "assistant", "system", "tools"]), max_size=24)):
        text = "x" * draw(st.integers(0, 40))
        if kind == "user":
            out.append(user_message(text, meta(), id=nid("u")))
        elif kind == "assistant":
            out.append(assistant_message(text, meta(), id=nid("a")))
        elif kind == "system":
            out.append(system_message(text, meta(), id=nid("s")))
        else:
            n_calls = draw(st.integers(1, 3))
            call_ids = [nid("call") for _ in range(n_calls)]
            calls = [{"id": c, "name": "t__echo", "args": {"v": text}} for c in call_ids]
            out.append(assistant_message(text or None, meta(), tool_calls=calls, id=nid("a")))
            for c in draw(st.permutations(call_ids)):
                out.append(tool_message(c, "t__echo", {"type": "text", "value": text}, meta(), id=nid("r")))
    out.append(user_message("current input", id=nid("u")))
    if damaged and out:
        doomed = draw(st.sets(st.integers(0, len(out) - 1), max_size=3))
        out = [m for i, m in enumerate(out) if i not in doomed]
    return out


def _pinned_ids(history: list[Message]) -> set[str]:
    """Pins that belong to a well-formed unit (a pin cannot resurrect a broken pair)."""
    broken = set(normalize(history))
    return {m.id for m in history if m.metadata.get("pinned") is True and m.id not in broken}


def _is_subsequence(kept: list[str], original: list[str]) -> bool:
    it = iter(original)
    return all(x in it for x in kept)


def _through_fold(history: list[Message], conversation: ConversationState) -> list[Message]:
    """What the events reproduce when replayed from the log over the same base (recoverability)."""
    replayed = ConversationState(history, list(conversation.events))
    return list(replayed.next_messages)


@SETTINGS
@given(history=histories(), max_messages=st.integers(1, 12))
def test_window_output_satisfies_the_rule_the_limit_and_keeps_a_suffix(
    history: list[Message], max_messages: int
) -> None:
    assert pairing_problems(history) == []
    conversation, seen, _ = k.run_turn("message_window", history, {"maxMessages": max_messages})
    assert pairing_problems(seen) == []
    assert len(seen) <= max_messages
    ids = k.ids(history)
    assert k.ids(seen) == ids[len(ids) - len(seen) :]  # a valid history is only ever cut at the front
    assert all(e["type"] == "remove" for e in conversation.events)
    assert k.ids(_through_fold(history, conversation)) == k.ids(seen)


@SETTINGS
@given(history=histories(damaged=True), max_messages=st.integers(1, 40))
def test_window_repairs_damaged_histories(history: list[Message], max_messages: int) -> None:
    _, seen, _ = k.run_turn("message_window", history, {"maxMessages": max_messages})
    assert pairing_problems(seen) == []
    assert len(seen) <= max_messages
    assert _is_subsequence(k.ids(seen), k.ids(history))


@SETTINGS
@given(
    history=histories(damaged=True),
    mode=st.sampled_from(["remove", "truncate"]),
    max_messages=st.integers(1, 14),
    max_characters=st.integers(1, 600),
    retain=st.integers(0, 6),
    summary=st.booleans(),
)
def test_compaction_output_satisfies_the_rule_keeps_pins_and_order(
    history: list[Message], mode: str, max_messages: int, max_characters: int, retain: int, summary: bool
) -> None:
    config = {
        "mode": mode,
        "maxMessages": max_messages,
        "maxCharacters": max_characters,
        "retainLastMessages": retain,
        "appendSummary": summary,
    }
    conversation, seen, _ = k.run_turn("message_compaction", history, config)
    assert pairing_problems(seen) == []
    original = [m for m in seen if not m.metadata.get("compaction.summary")]
    summaries = [m for m in seen if m.metadata.get("compaction.summary")]
    assert len(summaries) <= 1
    for s in summaries:
        assert s.role == "system" and s.source == {"type": "extension", "extensionName": "message-compaction"}
    assert _is_subsequence(k.ids(original), k.ids(history))
    assert _pinned_ids(history) <= set(k.ids(original))
    if not normalize(history) and not conversation.events:
        assert k.ids(seen) == k.ids(history)  # nothing to do -> nothing emitted
    assert k.ids(_through_fold(history, conversation)) == k.ids(seen)


@SETTINGS
@given(
    history=histories(),
    mode=st.sampled_from(["remove", "truncate"]),
    max_messages=st.integers(2, 14),
    max_characters=st.integers(20, 600),
    retain=st.integers(0, 6),
    summary=st.booleans(),
)
def test_without_pins_compaction_always_gets_within_both_limits(
    history: list[Message], mode: str, max_messages: int, max_characters: int, retain: int, summary: bool
) -> None:
    history = [_unpinned(m) for m in history]
    config = {
        "mode": mode,
        "maxMessages": max_messages,
        "maxCharacters": max_characters,
        "retainLastMessages": retain,
        "appendSummary": summary,
    }
    _, seen, _ = k.run_turn("message_compaction", history, config)
    original = [m for m in seen if not m.metadata.get("compaction.summary")]
    assert len(seen) <= max_messages
    assert sum(message_characters(m) for m in original) <= max_characters
    assert seen[-1].id == history[-1].id or seen[-1].metadata.get("compaction.summary")
    assert history[-1].id in k.ids(seen)  # the current input always survives


def _unpinned(message: Message) -> Message:
    return dataclasses.replace(message, metadata={})


@SETTINGS
@given(history=histories(damaged=True))
def test_normalize_is_idempotent_and_leaves_a_valid_history(history: list[Message]) -> None:
    removed = set(normalize(history))
    rest = [m for m in history if m.id not in removed]
    assert pairing_problems(rest) == []
    assert normalize(rest) == []


def test_the_checker_itself_catches_each_kind_of_break() -> None:
    call = assistant_message(None, tool_calls=[{"id": "c1", "name": "t", "args": {}}, {"id": "c2", "name": "t"}])
    r1 = tool_message("c1", "t", {"type": "text", "value": "1"})
    r2 = tool_message("c2", "t", {"type": "text", "value": "2"})
    u = user_message("hi")
    assert pairing_problems([call, r1, r2, u]) == []
    assert pairing_problems([u, r1])  # orphan result
    assert pairing_problems([call, r1, u])  # call without all results
    assert pairing_problems([call, r1, u, r2])  # split pair
    assert pairing_problems([call, r1, r2, r2])  # answered twice
    _ = asyncio  # the harness runs its own event loops
