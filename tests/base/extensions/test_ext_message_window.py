"""message-window (digest §6, §9.2 extensions-message-window): oldest messages go, integrity holds."""

from __future__ import annotations

import asyncio
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import policy_kit as k
import pytest
from policy_kit import assistant, call, result, user

import goondan
from goondan.base.extensions._integrity import violations
from goondan.base.extensions.message_window import window_removals
from goondan.errors import ExtensionError


def _five() -> list[Any]:
    return [user("u1", "m1"), assistant("a1", "m2"), user("u2", "m3"), assistant("a2", "m4"), user("u3", "m5")]


def test_over_the_limit_the_oldest_messages_are_removed() -> None:
    assert window_removals(_five(), 3) == ["m1", "m2"]


def test_under_or_at_the_limit_nothing_is_removed() -> None:
    assert window_removals(_five(), 5) == []
    assert window_removals(_five(), 80) == []


def test_a_cut_through_a_call_and_its_result_removes_the_result_too() -> None:
    history = [user("u1", "m1"), call("m2", "tool-1"), result("m3", "tool-1"), user("u2", "m4"), assistant("a", "m5")]
    # bare count says remove m1, m2; m3 would then answer a call that is gone
    assert window_removals(history, 3) == ["m1", "m2", "m3"]


def test_an_orphan_result_is_removed_even_under_the_limit() -> None:
    history = [user("u1", "m1"), result("m2", "tool-2"), assistant("a", "m3")]
    assert window_removals(history, 80) == ["m2"]


def test_a_call_whose_results_are_incomplete_is_removed_with_its_partial_results() -> None:
    # e.g. a crash between two tool calls left one result behind
    history = [user("u1", "m1"), call("m2", "c1", "c2"), result("m3", "c1"), user("u2", "m4")]
    assert window_removals(history, 80) == ["m2", "m3"]


def test_multi_call_units_survive_whole_when_the_cut_is_before_them() -> None:
    history = [
        user("u1", "m1"),
        call("m2", "c1", "c2", text="working"),
        result("m3", "c1"),
        result("m4", "c2"),
        assistant("done", "m5"),
    ]
    assert window_removals(history, 4) == ["m1"]


def test_upstream_user_carried_tool_results_are_recognised() -> None:
    legacy_result = goondan.messages.user_message(
        [{"type": "tool_result", "tool_use_id": "toolu_1", "content": "42"}], id="m3"
    )
    legacy_call = goondan.messages.assistant_message(
        [{"type": "tool_use", "id": "toolu_1", "name": "calc", "input": {}}], id="m2"
    )
    history = [user("q", "m1"), legacy_call, legacy_result, user("next", "m4")]
    assert window_removals(history, 80) == []
    assert window_removals(history, 2) == ["m1", "m2", "m3"]


def test_the_middleware_emits_one_remove_event_per_message_in_order_before_the_turn_runs() -> None:
    history = [user("u1", "m1"), call("m2", "tool-1"), result("m3", "tool-1"), user("u2", "m4"), assistant("a", "m5")]
    conversation, seen, _ = k.run_turn("message_window", history, {"maxMessages": 3})
    assert k.event_summary(conversation) == [("remove", "m1"), ("remove", "m2"), ("remove", "m3")]
    assert k.ids(seen) == ["m4", "m5"]


@pytest.mark.parametrize("config", [{"maxMessages": 0}, {"maxMessages": "ten"}, {"maxMessage": 3}])
def test_invalid_config_is_an_extension_config_error(config: dict[str, Any]) -> None:
    with pytest.raises(ExtensionError) as info:
        k.harness("message_window", config)
    assert info.value.code == "E_EXT_CONFIG"
    assert info.value.extension_name == "message-window"


# --- inside real turns ------------------------------------------------------------------------


def _as_messages(dicts: list[dict[str, Any]]) -> list[Any]:
    return [SimpleNamespace(id=str(i), data=d) for i, d in enumerate(dicts)]


def test_in_real_turns_the_model_never_sees_more_than_max_messages_nor_a_broken_pair(
    tmp_path: Path,
) -> None:
    root = k.bundle(tmp_path / "b", [k.base_ref("message-window", {"maxMessages": 3})])
    # every turn: one tool call, then a text answer -> 4 new messages per turn
    k.MODEL = k.scripted(*[r for i in range(6) for r in (k.calls_reply(f"c{i}"), k.text_reply(f"answer {i}"))])

    async def go() -> list[str | None]:
        async with goondan.Runtime(root, state_root=tmp_path / "state", isolation="inline") as rt:
            return [(await rt.request(f"question {i}")).text for i in range(6)]

    texts = asyncio.run(go())
    assert texts == [f"answer {i}" for i in range(6)]
    for request in k.REQUESTS:
        assert violations(_as_messages(request)) == []
    # the first model call of every turn sees the window: at most 3 messages, ending with the question
    firsts = k.REQUESTS[0::2]
    for i, request in enumerate(firsts):
        assert len(request) <= 3
        assert request[-1] == {"role": "user", "content": f"question {i}"}
    # [q0, call, result, answer0, q1] -> the cut (2 oldest) splits call from result: the result goes too
    assert firsts[1] == [{"role": "assistant", "content": "answer 0"}, {"role": "user", "content": "question 1"}]


def test_the_window_persists_its_removals_across_a_restart(tmp_path: Path) -> None:
    root = k.bundle(tmp_path / "b", [k.base_ref("message-window", {"maxMessages": 2})])
    k.MODEL = k.scripted(*[k.text_reply(f"answer {i}") for i in range(4)])
    state_root = tmp_path / "state"

    async def go(questions: list[str]) -> None:
        async with goondan.Runtime(root, state_root=state_root, isolation="inline") as rt:
            for q in questions:
                await rt.request(q)

    asyncio.run(go(["q0", "q1"]))
    asyncio.run(go(["q2"]))
    # the restarted instance starts from the committed (windowed) history
    assert k.REQUESTS[-1] == [
        {"role": "assistant", "content": "answer 1"},
        {"role": "user", "content": "q2"},
    ]


# --- a crash between a tool call and its result ----------------------------------------------------


def _instance_dir(state_root: Path) -> Path:
    (meta,) = list(state_root.glob("workspaces/*/instances/*/metadata.json"))
    return meta.parent


@pytest.mark.parametrize(
    "policy",
    [
        k.base_ref("message-window", {"maxMessages": 50}),
        k.base_ref("message-compaction", {"maxMessages": 50}),
    ],
    ids=["window", "compaction"],
)
def test_a_call_left_without_its_result_by_a_crash_never_reaches_the_model(tmp_path: Path, policy: Any) -> None:
    root = k.bundle(tmp_path / "b", [policy])
    state_root = tmp_path / "state"
    k.MODEL = k.scripted(k.text_reply("first answer"), k.text_reply("second answer"))

    async def go(question: str) -> None:
        async with goondan.Runtime(root, state_root=state_root, isolation="inline") as rt:
            await rt.request(question)

    asyncio.run(go("q1"))
    # what a process killed inside a tool call leaves behind: the assistant's tool call is durable in
    # events.jsonl (it is written when emitted), its result never is
    dangling = goondan.messages.assistant_message(
        "let me check", tool_calls=[{"id": "c-crash", "name": "t__echo", "args": {"value": "x"}}]
    )
    events = _instance_dir(state_root) / "messages" / "events.jsonl"
    with events.open("a", encoding="utf-8") as f:
        f.write(k.dumps({"type": "append", "message": dangling.to_record()}) + "\n")
    asyncio.run(go("q2"))
    last = k.REQUESTS[-1]
    assert violations(_as_messages(last)) == []
    # the runtime answers the interrupted call with an E_TOOL_INTERRUPTED result on restart, so the
    # pair is whole and the policy keeps it
    assert [m["role"] for m in last] == ["user", "assistant", "assistant", "tool", "user"]
    assert last[3]["content"][0]["output"]["value"]["code"] == "E_TOOL_INTERRUPTED"
    assert last[-1] == {"role": "user", "content": "q2"}


def test_an_invalid_config_fails_the_request_with_an_extension_error(tmp_path: Path) -> None:
    root = k.bundle(tmp_path / "b", [k.base_ref("message-window", {"maxMessages": -5})])
    k.MODEL = k.scripted(k.text_reply("never"))

    async def go() -> None:
        async with goondan.Runtime(root, state_root=tmp_path / "state", isolation="inline") as rt:
            await rt.request("q")

    with pytest.raises(ExtensionError) as info:
        asyncio.run(go())
    assert info.value.code == "E_EXT_CONFIG"
    assert "maxMessages" in info.value.message
    assert k.REQUESTS == []
