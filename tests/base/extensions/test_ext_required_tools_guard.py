"""required-tools-guard (digest §6, §9.2 extensions-required-tools-guard)."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import policy_kit as k
import pytest

import goondan
from goondan.conversation import ConversationState
from goondan.errors import ExtensionError
from goondan.messages import user_message
from goondan.pipeline import StepState, ToolCallState, TurnState
from goondan.results import StepResult, ToolCall, ToolCallResult, TurnResult

CATALOG = [{"name": "t__echo", "description": "", "parameters": {"type": "object"}}]
REMINDER = "Before you finish, you must call at least one of these tools: t__echo, t__other"


def _run_turn(h: k.Harness, conversation: ConversationState, plan: list[tuple[str, str] | None]) -> list[bool]:
    """Drive the real turn/step/toolCall chains: each ``plan`` item is one step that calls one tool
    with a given status, or ``None`` for a step that ends with text. Returns should_continue per step."""
    outcomes: list[bool] = []

    async def tool_core(state: ToolCallState) -> ToolCallResult:
        status = state.metadata["status"]
        return ToolCallResult(state.tool_call_id, state.tool_name, "x", status, None)

    async def step_core(state: StepState) -> StepResult:
        item = plan[state.step_index]
        if item is None:
            return StepResult("completed", False, [], [], {})
        name, status = item
        tc_state = ToolCallState(state, name, f"call-{state.step_index}", {})
        tc_state.metadata["status"] = status
        res = await h.registry.chain("toolCall", tool_core).run(tc_state)
        return StepResult("completed", True, [ToolCall(res.tool_call_id, name, {})], [res], {})

    async def turn_core(state: TurnState) -> TurnResult:
        for index in range(len(plan)):
            step_state = StepState(state, index, list(CATALOG))
            result = await h.registry.chain("step", step_core).run(step_state)
            outcomes.append(result.should_continue)
            if not result.should_continue:
                break
        return TurnResult(state.turn_id, None, "text_response", None, None)

    asyncio.run(h.registry.chain("turn", turn_core).run(h.turn_state(conversation, None)))
    return outcomes


def _guard(**config: Any) -> k.Harness:
    return k.harness("required_tools_guard", {"requiredTools": ["t__echo", "t__other"], **config})


def test_a_turn_that_ends_without_a_required_tool_is_continued_with_a_user_reminder() -> None:
    h = _guard()
    conversation = ConversationState([user_message("hi", id="m1")])
    assert _run_turn(h, conversation, [None, ("t__echo", "ok"), None]) == [True, True, False]
    (reminder,) = [m for m in conversation.next_messages if m.id != "m1"]
    assert reminder.role == "user"
    assert reminder.text == REMINDER
    assert reminder.source == {"type": "extension", "extensionName": "required-tools-guard"}


def test_a_success_in_the_same_turn_lets_it_end() -> None:
    h = _guard()
    conversation = ConversationState([user_message("hi", id="m1")])
    assert _run_turn(h, conversation, [("t__echo", "ok"), None]) == [True, False]
    assert len(conversation.events) == 0


def test_a_success_does_not_leak_into_the_next_turn_even_with_the_same_turn_id() -> None:
    h = _guard()
    conversation = ConversationState([user_message("hi", id="m1")])
    _run_turn(h, conversation, [("t__other", "ok"), None])
    # the harness reuses turn id "turn-1" for every turn
    assert _run_turn(h, conversation, [None, None]) == [True, True]


def test_a_failed_call_of_a_required_tool_does_not_satisfy_the_guard() -> None:
    h = _guard()
    conversation = ConversationState([user_message("hi", id="m1")])
    assert _run_turn(h, conversation, [("t__echo", "error"), None, None]) == [True, True, True]


def test_a_custom_error_message_is_used_verbatim_and_blank_means_default() -> None:
    h = _guard(errorMessage="Call t__echo first!")
    conversation = ConversationState([user_message("hi", id="m1")])
    _run_turn(h, conversation, [None, ("t__echo", "ok"), None])
    assert conversation.next_messages[-1].text == "Call t__echo first!"
    h = _guard(errorMessage="   ")
    conversation = ConversationState([user_message("hi", id="m1")])
    _run_turn(h, conversation, [None, ("t__echo", "ok"), None])
    assert conversation.next_messages[-1].text == REMINDER


def test_an_empty_list_registers_nothing() -> None:
    h = k.harness("required_tools_guard", {"requiredTools": []})
    assert h.registry.describe("step") == [] and h.registry.describe("turn") == []


def test_a_required_tool_missing_from_the_catalog_does_not_trap_the_turn() -> None:
    h = k.harness("required_tools_guard", {"requiredTools": ["x__y"]})
    conversation = ConversationState([user_message("hi", id="m1")])
    assert _run_turn(h, conversation, [None]) == [False]


@pytest.mark.parametrize("config", [{"requiredTools": "t__echo"}, {"requiredTools": [""]}, {"other": 1}])
def test_invalid_config_is_an_extension_config_error(config: dict[str, Any]) -> None:
    with pytest.raises(ExtensionError) as info:
        k.harness("required_tools_guard", config)
    assert info.value.code == "E_EXT_CONFIG"


def test_in_real_turns_the_model_is_sent_back_until_it_calls_the_tool(tmp_path: Path) -> None:
    root = k.bundle(tmp_path / "b", [k.base_ref("required-tools-guard", {"requiredTools": ["t__echo"]})])
    k.MODEL = k.scripted(k.text_reply("lazy answer"), k.calls_reply("c1"), k.text_reply("done"))

    async def go() -> Any:
        async with goondan.Runtime(root, state_root=tmp_path / "state", isolation="inline") as rt:
            return await rt.request("do it")

    result = asyncio.run(go())
    assert result.text == "done"
    assert k.REQUESTS[1][-2:] == [
        {"role": "assistant", "content": "lazy answer"},
        {"role": "user", "content": "Before you finish, you must call at least one of these tools: t__echo"},
    ]
    assert len(k.REQUESTS) == 3


def test_in_real_turns_max_steps_still_ends_a_turn_whose_model_never_complies(tmp_path: Path) -> None:
    root = k.bundle(tmp_path / "b", [k.base_ref("required-tools-guard", {"requiredTools": ["t__echo"]})], max_steps=3)
    k.MODEL = k.scripted(k.text_reply("no"))

    async def go() -> Any:
        async with goondan.Runtime(root, state_root=tmp_path / "state", isolation="inline") as rt:
            return await rt.request("do it")

    result = asyncio.run(go())
    assert result.finish_reason == "max_steps"
    assert len(k.REQUESTS) == 3
