"""message-compaction (digest §6, §9.2 extensions-compaction, seed 003 §14.3): limits, pins, retained
tail, summaries (static and from a real summary model), modes, always as message events."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import policy_kit as k
import pytest
from policy_kit import assistant, call, result, system, user

from goondan.base.extensions._compaction_plan import Limits, message_characters, plan_compaction
from goondan.base.extensions._integrity import violations
from goondan.base.extensions.context_message import MARKER
from goondan.conversation import ConversationState
from goondan.errors import ExtensionError


def _history(n: int) -> list[Any]:
    return [user(f"u{i}", f"m{i}") if i % 2 else assistant(f"a{i}", f"m{i}") for i in range(1, n + 1)]


def _limits(max_messages: int = 40, max_characters: int = 12000, retain: int = 8, summary: bool = True) -> Limits:
    return Limits(max_messages, max_characters, retain, summary)


# --- the plan (pure) --------------------------------------------------------------------------------


def test_under_both_limits_nothing_happens() -> None:
    assert plan_compaction(_history(5), "remove", _limits(max_messages=5)) is None


def test_over_max_messages_the_oldest_unprotected_messages_go_leaving_room_for_the_summary() -> None:
    plan = plan_compaction(_history(5), "remove", _limits(max_messages=3, retain=1))
    assert plan is not None and plan.mode == "remove"
    # 5 messages, max 3 including the summary -> keep 2
    assert plan.removed == ["m1", "m2", "m3"]
    assert plan.kept == ["m4", "m5"]
    assert plan.within_limits


def test_over_max_characters_triggers_and_counts_tool_payloads() -> None:
    history = [user("x" * 50, "m1"), call("m2", "c1"), result("m3", "c1", "y" * 500), user("next", "m4")]
    assert message_characters(history[2]) == 500
    plan = plan_compaction(history, "remove", _limits(max_characters=100, retain=1))
    assert plan is not None
    assert plan.removed == ["m1", "m2", "m3"]
    assert plan.removed_characters == sum(message_characters(m) for m in history[:3])


def test_pinned_messages_survive_and_a_call_result_pair_goes_together() -> None:
    history = [
        user("remember: the code word is kiwi", "m1", pinned=True),
        call("m2", "tool-1"),
        result("m3", "tool-1"),
        user("u4", "m4"),
        assistant("a5", "m5"),
    ]
    plan = plan_compaction(history, "remove", _limits(max_messages=3, retain=1))
    assert plan is not None
    assert "m1" in plan.kept
    assert {"m2", "m3"} <= set(plan.removed)


def test_a_pinned_tool_result_keeps_its_call() -> None:
    history = [user("u1", "m1"), call("m2", "c1"), result("m3", "c1", pinned=True), user("u4", "m4"), user("u5", "m5")]
    plan = plan_compaction(history, "remove", _limits(max_messages=3, retain=1))
    assert plan is not None
    assert {"m2", "m3"} <= set(plan.kept)


def test_the_retained_tail_never_starts_with_a_result_cut_from_its_call() -> None:
    history = [user("u1", "m1"), user("u2", "m2"), call("m3", "c1", "c2"), result("m4", "c1"), result("m5", "c2")]
    plan = plan_compaction(history, "remove", _limits(max_messages=4, retain=1))
    assert plan is not None
    assert plan.kept == ["m3", "m4", "m5"]


def test_remove_falls_back_to_truncate_keeping_pins_and_the_current_input() -> None:
    history = [user("p", "m1", pinned=True), *_history(6)[1:], user("now", "m7")]
    plan = plan_compaction(history, "remove", _limits(max_messages=3, retain=6))
    assert plan is not None
    assert plan.mode == "truncate"
    assert plan.kept == ["m1", "m7"]


def test_the_truncate_fallback_keeps_as_much_recent_history_as_fits() -> None:
    history = [user("p", "m1", pinned=True), *_history(6)[1:], user("now", "m7")]
    plan = plan_compaction(history, "remove", _limits(max_messages=5, retain=6))
    assert plan is not None and plan.mode == "truncate"
    assert plan.kept == ["m1", "m5", "m6", "m7"]
    assert plan.within_limits


def test_untriggered_compaction_still_drops_broken_pairs_without_a_summary() -> None:
    history = [user("u1", "m1"), result("m2", "ghost"), assistant("a", "m3")]
    plan = plan_compaction(history, "remove", _limits())
    assert plan is not None and not plan.triggered
    assert plan.removed == ["m2"]


# --- the middleware over a real conversation state ----------------------------------------------------


def test_remove_mode_emits_removes_and_puts_the_summary_where_the_history_was() -> None:
    conversation, seen, _ = k.run_turn("message_compaction", _history(5), {"maxMessages": 3, "retainLastMessages": 1})
    events = k.event_summary(conversation)
    # the summary takes the place of the newest dropped message: where the dropped history ended
    assert events == [("remove", "m1"), ("remove", "m2"), ("replace", "m3")]
    summary = seen[0]
    assert summary.role == "system"
    assert summary.text == "[message-compaction] mode=remove removed=3 chars=6"
    assert summary.source == {"type": "extension", "extensionName": "message-compaction"}
    assert summary.metadata == {
        "compaction.summary": True,
        "compaction.mode": "remove",
        "compaction.removedCount": 3,
        "compaction.removedCharacters": 6,
    }
    assert k.ids(seen[1:]) == ["m4", "m5"]


def test_truncate_mode_emits_truncate_then_the_protected_messages_with_the_summary_where_the_history_was() -> None:
    history = [user("keep me", "m1", pinned=True), *_history(6)[1:]]
    conversation, seen, _ = k.run_turn(
        "message_compaction", history, {"maxMessages": 4, "retainLastMessages": 2, "mode": "truncate"}
    )
    events = k.event_summary(conversation)
    assert events[0] == ("truncate", None)
    assert [e[0] for e in events[1:]] == ["append", "append", "append", "append"]
    # the pin is older than the dropped m2..m4, so it stays ahead of their summary
    assert seen[0].id == "m1" and seen[0].metadata == {"pinned": True}
    assert seen[1].metadata["compaction.mode"] == "truncate"
    assert k.ids(seen[2:]) == ["m5", "m6"]


def _prompt(mid: str, text: str = "You are the ops assistant.") -> Any:
    """A context-message system message (the agent prompt), as that extension writes it."""
    return system(text, mid, **{MARKER: {"promptHash": f"hash-{mid}", "segmentIds": ["agent.prompt.system"]}})


def _chat_with_prompt(n: int) -> list[Any]:
    """The history context-message leaves: the first question, the prompt right after it, then chat."""
    return [user("q1", "m1"), _prompt("p"), *_history(n)[1:]]


def test_the_agent_prompt_is_protected_like_a_pin_in_both_modes() -> None:
    for mode in ("remove", "truncate"):
        plan = plan_compaction(_chat_with_prompt(12), mode, _limits(max_messages=6, retain=2))
        assert plan is not None and plan.within_limits
        assert "p" in plan.kept and "m1" in plan.removed


def test_only_the_newest_context_message_is_protected() -> None:
    history = [_prompt("p-old", "inbound 1"), *_history(8)[:-1], _prompt("p-new", "inbound 2"), user("now", "m9")]
    plan = plan_compaction(history, "truncate", _limits(max_messages=4, retain=1))
    assert plan is not None
    assert "p-old" in plan.removed
    assert plan.kept == ["p-new", "m9"]


def test_truncate_keeps_the_agent_prompt_ahead_of_the_summary() -> None:
    """The prompt cache rule: system messages keep their order across a compaction (prompt, then
    summary), so a provider's cached prefix up to the prompt is still valid."""
    conversation, seen, _ = k.run_turn(
        "message_compaction", _chat_with_prompt(12), {"maxMessages": 6, "retainLastMessages": 2, "mode": "truncate"}
    )
    assert k.event_summary(conversation)[0] == ("truncate", None)
    systems = [m for m in seen if m.role == "system"]
    assert systems[0].id == "p"
    assert systems[1].metadata["compaction.summary"] is True
    assert k.ids(seen) == ["p", systems[1].id, "m11", "m12"]


def test_remove_keeps_the_agent_prompt_ahead_of_the_summary() -> None:
    conversation, seen, _ = k.run_turn(
        "message_compaction", _chat_with_prompt(12), {"maxMessages": 6, "retainLastMessages": 2}
    )
    assert seen[0].id == "p"
    assert seen[1].metadata["compaction.summary"] is True
    assert k.ids(seen)[2:] == ["m9", "m10", "m11", "m12"]  # 6 with the prompt and the summary
    assert all(e[0] == "remove" for e in k.event_summary(conversation)[:-1])


def test_a_second_compaction_rolls_the_summary_forward_behind_the_prompt() -> None:
    first = [_prompt("p"), system("[message-compaction] mode=truncate removed=9 chars=9", "s1"), *_history(12)]
    for mode in ("remove", "truncate"):
        _, seen, _ = k.run_turn("message_compaction", first, {"maxMessages": 6, "retainLastMessages": 2, "mode": mode})
        assert seen[0].id == "p" and seen[1].id != "s1" and seen[1].metadata["compaction.summary"] is True
        assert "s1" not in k.ids(seen)


def test_without_append_summary_only_removes_are_emitted() -> None:
    conversation, seen, _ = k.run_turn(
        "message_compaction", _history(5), {"maxMessages": 3, "retainLastMessages": 1, "appendSummary": False}
    )
    assert k.event_summary(conversation) == [("remove", "m1"), ("remove", "m2")]
    assert k.ids(seen) == ["m3", "m4", "m5"]


def test_custom_summary_prefix() -> None:
    _, seen, _ = k.run_turn(
        "message_compaction", _history(5), {"maxMessages": 3, "retainLastMessages": 1, "summaryPrefix": "[ctx]"}
    )
    assert seen[0].text.startswith("[ctx] mode=remove removed=3 ")


def test_events_replayed_from_the_log_reproduce_the_compacted_history() -> None:
    """Recoverability: base + the emitted events, folded from scratch, give the same history."""
    history = [system("be brief", "s0"), *_history(9), call("c", "k1"), result("r", "k1"), user("now", "n")]
    conversation, seen, _ = k.run_turn("message_compaction", history, {"maxMessages": 6, "retainLastMessages": 3})
    replayed = ConversationState(history, list(conversation.events))
    assert k.ids(replayed.next_messages) == k.ids(seen)
    assert violations(seen) == []


def test_when_everything_is_protected_nothing_is_emitted() -> None:
    history = [user(f"pinned {i}", f"m{i}", pinned=True) for i in range(5)]
    for mode in ("remove", "truncate"):
        conversation, seen, _ = k.run_turn("message_compaction", history, {"maxMessages": 2, "mode": mode})
        assert len(conversation.events) == 0
        assert k.ids(seen) == k.ids(history)


@pytest.mark.parametrize(
    "config",
    [
        {"mode": "squash"},
        {"maxCharacters": 0},
        {"retainLastMessages": -1},
        {"summaryModel": {"model": "x"}},
        {"summaryModel": {"provider": "nope"}},
        {"unknownKey": 1},
    ],
)
def test_invalid_config_is_an_extension_config_error(config: dict[str, Any]) -> None:
    with pytest.raises(ExtensionError) as info:
        k.harness("message_compaction", config)
    assert info.value.code == "E_EXT_CONFIG"


# --- the LLM summary --------------------------------------------------------------------------------

SUMMARY_MODEL = """\
import policy_kit


def generate(request):
    policy_kit.PROBE.setdefault("summary_requests", []).append([dict(m) for m in request.messages])
    policy_kit.PROBE["summary_tools"] = list(request.tools)
    transcript = request.messages[-1]["content"]
    return {"text": "SUMMARY(" + str(transcript.count("\\n\\n") + 1) + " messages): user asked about kiwis"}
"""

BROKEN_SUMMARY_MODEL = """\
def generate(request):
    raise RuntimeError("summary backend down")
"""


def _llm_config(entry: str = "./summarizer.py", **extra: Any) -> dict[str, Any]:
    return {
        "maxMessages": 3,
        "retainLastMessages": 1,
        "summaryModel": {"provider": "python", "model": "summarizer-1", "options": {"entry": entry}},
        **extra,
    }


def test_llm_summary_asks_the_configured_model_about_exactly_the_dropped_messages(tmp_path: Path) -> None:
    (tmp_path / "summarizer.py").write_text(SUMMARY_MODEL, encoding="utf-8")
    history = [user("tell me about kiwis", "m1"), call("m2", "c1"), result("m3", "c1", "kiwi facts"), *_history(5)[3:]]
    runtime = k.runtime_info(bundle_root=str(tmp_path))
    _, seen, _ = k.run_turn("message_compaction", history, _llm_config(), runtime=runtime)
    (request,) = k.PROBE["summary_requests"]
    assert request[0]["role"] == "system" and "Summarize" in request[0]["content"]
    transcript = request[1]["content"]
    assert "user: tell me about kiwis" in transcript
    assert '[tool-call t__echo] {"value": "c1"}' in transcript
    assert "[tool-result t__echo] kiwi facts" in transcript
    assert "a4" not in transcript  # kept messages are not summarized
    assert k.PROBE["summary_tools"] == []
    summary = seen[0]
    assert summary.text == (
        "[message-compaction] mode=remove removed=3 chars="
        + str(summary.metadata["compaction.removedCharacters"])
        + "\nSUMMARY(3 messages): user asked about kiwis"
    )
    assert summary.metadata["compaction.summarySource"] == "model"
    assert k.ids(seen[1:]) == ["m4", "m5"]


def test_a_failing_summary_model_falls_back_to_the_static_summary(tmp_path: Path) -> None:
    (tmp_path / "broken.py").write_text(BROKEN_SUMMARY_MODEL, encoding="utf-8")
    runtime = k.runtime_info(bundle_root=str(tmp_path))
    _, seen, _ = k.run_turn("message_compaction", _history(5), _llm_config("./broken.py"), runtime=runtime)
    summary = seen[0]
    assert summary.text == "[message-compaction] mode=remove removed=3 chars=6"
    assert summary.metadata["compaction.summarySource"] == "static"
    assert "summary backend down" in summary.metadata["compaction.summaryError"]
    assert k.ids(seen[1:]) == ["m4", "m5"]


SLOW_SUMMARY_MODEL = """\
import asyncio


async def generate(request):
    await asyncio.sleep(30)
    return {"text": "too late"}
"""


def test_a_summary_model_that_times_out_falls_back_to_the_static_summary(tmp_path: Path) -> None:
    (tmp_path / "slow.py").write_text(SLOW_SUMMARY_MODEL, encoding="utf-8")
    runtime = k.runtime_info(bundle_root=str(tmp_path))
    config = _llm_config("./slow.py", summaryTimeoutSeconds=0.2)
    _, seen, _ = k.run_turn("message_compaction", _history(5), config, runtime=runtime)
    assert seen[0].text == "[message-compaction] mode=remove removed=3 chars=6"
    assert "TimeoutError" in seen[0].metadata["compaction.summaryError"]


def test_a_missing_api_key_variable_fails_at_registration(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("GOONDAN_TEST_SUMMARY_KEY", raising=False)
    config = {"summaryModel": {"provider": "openai", "model": "gpt", "apiKeyEnv": "GOONDAN_TEST_SUMMARY_KEY"}}
    with pytest.raises(ExtensionError) as info:
        k.harness("message_compaction", config)
    assert info.value.code == "E_EXT_CONFIG"
    assert "GOONDAN_TEST_SUMMARY_KEY" in info.value.message


def test_in_real_turns_the_llm_summary_replaces_old_history_for_the_agent_model(tmp_path: Path) -> None:
    root = k.bundle(
        tmp_path / "b",
        [k.base_ref("message-compaction", _llm_config(maxMessages=4, retainLastMessages=2))],
        files={"summarizer.py": SUMMARY_MODEL},
    )
    k.MODEL = k.scripted(*[k.text_reply(f"answer {i}") for i in range(4)])

    k.ask(root, tmp_path / "state", [f"question {i}" for i in range(4)])
    # turn 3 starts with 5 messages (> 4): three oldest summarized, then the retained tail
    third = k.REQUESTS[2]
    assert third[0]["role"] == "system"
    assert third[0]["content"].startswith("[message-compaction] mode=remove removed=")
    assert "SUMMARY(" in third[0]["content"]
    assert third[-1] == {"role": "user", "content": "question 2"}
    assert len(third) <= 4
    assert len(k.PROBE["summary_requests"]) >= 1


def test_in_real_turns_the_model_sees_the_prompt_first_and_the_summary_after_it(tmp_path: Path) -> None:
    """The implicit context-message (runs after compaction) and a truncating compaction: once the
    history is compacted the prompt is still the model's first system message, unchanged, and the
    summary follows it, so the provider's cached prompt prefix stays valid."""
    prompt = "You are the ops assistant. Answer briefly."
    config = {"maxMessages": 4, "retainLastMessages": 1, "mode": "truncate"}
    root = k.bundle(tmp_path / "b", [k.base_ref("message-compaction", config)], prompt=prompt)
    k.MODEL = k.scripted(*[k.text_reply(f"answer {i}") for i in range(5)])

    k.ask(root, tmp_path / "state", [f"question {i}" for i in range(5)])
    compacted = [r for r in k.REQUESTS if any(str(m["content"]).startswith("[message-compaction]") for m in r)]
    assert compacted, "the history never reached the compaction limit"
    for request in compacted:
        systems = [m["content"] for m in request if m["role"] == "system"]
        assert systems[0] == prompt
        assert systems[1].startswith("[message-compaction] mode=truncate")
        assert request[-1]["role"] == "user"
