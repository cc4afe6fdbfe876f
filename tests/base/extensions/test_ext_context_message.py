"""context-message (digest §6, §9.2 extensions-context-message)."""

from __future__ import annotations

import hashlib
from pathlib import Path
from typing import Any

import policy_kit as k
import pytest

from goondan.engine._info import CallInfo, InboundInfo, SwarmInfo
from goondan.errors import ExtensionError
from goondan.messages import system_message, user_message

PROMPT = "You are the coordinator. Answer briefly."
SWARM = SwarmInfo("brain", "coordinator", "coordinator", ("coordinator", "observer", "worker"), ("worker", "observer"))
INBOUND = InboundInfo(
    "evt-7", "agent.request", "agent", "coordinator", "2026-01-01T00:00:00Z", "swarm-shared", {"channel": "ops"}
)
CALL = CallInfo("coordinator", "swarm-shared", "turn-9", "extension-middleware", ("coordinator@swarm-shared",), None)


def _diag_names(state: Any) -> list[str]:
    return [d["name"] for d in state.metadata["extension.events"]]


def _diag(state: Any, name: str) -> list[dict[str, Any]]:
    return [d for d in state.metadata["extension.events"] if d["name"] == name]


def test_by_default_the_prompt_is_appended_once_as_a_system_message_with_its_marker() -> None:
    history = [user_message("hi", id="m1")]
    conversation, seen, state = k.run_turn("context_message", history, {}, k.runtime_info(prompt=PROMPT))
    assert [e["type"] for e in conversation.events] == ["append"]
    message = seen[-1]
    assert message.role == "system"
    assert message.text == PROMPT
    assert message.source == {"type": "extension", "extensionName": "context-message"}
    digest = hashlib.sha256(PROMPT.encode()).hexdigest()
    assert message.metadata["__goondanContextMessage"] == {"promptHash": digest, "segmentIds": ["agent.prompt.system"]}
    assert _diag_names(state) == ["context.segment.resolved"] * 5 + ["context.message.appended"]
    resolved = [d["data"] for d in _diag(state, "context.segment.resolved")]
    assert resolved[0] == {"id": "agent.prompt.system", "included": True}
    assert all(not d["included"] for d in resolved[1:])
    (appended,) = _diag(state, "context.message.appended")
    assert appended["actor"] == "context-message" and appended["at"].endswith("Z")
    assert appended["data"] == {"promptHash": digest, "segmentIds": ["agent.prompt.system"]}


def test_the_swarm_catalog_block() -> None:
    runtime = k.runtime_info(prompt=PROMPT, swarm=SWARM)
    _, seen, _ = k.run_turn("context_message", [user_message("hi", id="m1")], {"includeSwarmCatalog": True}, runtime)
    text = seen[-1].text
    assert text.startswith(PROMPT + "\n\n[runtime_catalog]\n")
    assert "swarm=brain" in text.splitlines()
    assert "entryAgent=coordinator" in text.splitlines()
    assert "availableAgents=coordinator, observer, worker" in text.splitlines()
    assert "callableAgents=worker, observer" in text.splitlines()
    assert "[/runtime_catalog]" in text.splitlines()
    assert seen[-1].metadata["__goondanContextMessage"]["segmentIds"] == [
        "agent.prompt.system",
        "runtime.swarm.catalog",
    ]


def test_inbound_call_and_route_summary_where_the_caller_beats_the_inbound_source() -> None:
    runtime = k.runtime_info(inbound=INBOUND, call=CALL)
    config = {
        "includeAgentPrompt": False,
        "includeInboundContext": True,
        "includeCallContext": True,
        "includeRouteSummary": True,
    }
    _, seen, _ = k.run_turn("context_message", [user_message("hi", id="m1")], config, runtime)
    message = seen[-1]
    assert message.metadata["__goondanContextMessage"]["segmentIds"] == [
        "runtime.inbound",
        "runtime.call",
        "runtime.route.summary",
    ]
    lines = message.text.splitlines()
    for expected in (
        "[runtime_inbound]",
        "eventId=evt-7",
        'eventMetadata={"channel": "ops"}',
        "[runtime_call]",
        "callerAgent=coordinator",
        "callStack=coordinator@swarm-shared",
        "[runtime_route]",
        "precedence=call>inbound",
        "senderKind=agent",
        "senderName=coordinator",
        "senderInstanceKey=swarm-shared",
        "senderTurnId=turn-9",
        "senderSource=extension-middleware",
    ):
        assert expected in lines


def test_route_summary_without_inbound_or_call_context_is_left_out() -> None:
    runtime = k.runtime_info(prompt=PROMPT, inbound=INBOUND, call=CALL)
    _, seen, _ = k.run_turn("context_message", [user_message("hi", id="m1")], {"includeRouteSummary": True}, runtime)
    assert seen[-1].text == PROMPT


def test_an_existing_message_with_the_same_hash_means_no_event_and_a_duplicate_diagnostic() -> None:
    digest = hashlib.sha256(PROMPT.encode()).hexdigest()
    earlier = system_message("older copy", {"__goondanContextMessage": {"promptHash": digest, "segmentIds": []}})
    history = [earlier, user_message("hi", id="m1")]
    conversation, _, state = k.run_turn("context_message", history, {}, k.runtime_info(prompt=PROMPT))
    assert len(conversation.events) == 0
    (duplicate,) = _diag(state, "context.message.duplicate")
    assert duplicate["data"] == {"promptHash": digest}


def test_an_identical_unmarked_message_from_this_extension_also_counts_as_present() -> None:
    twin = system_message(PROMPT, source={"type": "extension", "extensionName": "context-message"})
    conversation, _, _ = k.run_turn(
        "context_message", [twin, user_message("hi", id="m1")], {}, k.runtime_info(prompt=PROMPT)
    )
    assert len(conversation.events) == 0


def test_everything_disabled_means_no_message_and_an_empty_diagnostic() -> None:
    conversation, _, state = k.run_turn(
        "context_message", [user_message("hi", id="m1")], {"includeAgentPrompt": False}, k.runtime_info(prompt=PROMPT)
    )
    assert len(conversation.events) == 0
    assert _diag_names(state)[-1] == "context.message.empty"
    assert "context.message.appended" not in _diag_names(state)


def test_no_prompt_and_defaults_means_no_message() -> None:
    conversation, _, state = k.run_turn("context_message", [user_message("hi", id="m1")], {}, k.runtime_info())
    assert len(conversation.events) == 0
    assert _diag_names(state)[-1] == "context.message.empty"


def test_invalid_config_is_an_extension_config_error() -> None:
    with pytest.raises(ExtensionError) as info:
        k.harness("context_message", {"includeSwarmCatalog": "yes"})
    assert info.value.code == "E_EXT_CONFIG"


def test_in_real_turns_the_prompt_reaches_the_model_once_and_returns_after_a_window_drops_it(
    tmp_path: Path,
) -> None:
    root = k.bundle(
        tmp_path / "b",
        [k.base_ref("message-window", {"maxMessages": 3}), k.base_ref("context-message")],
        prompt=PROMPT,
    )
    k.MODEL = k.scripted(*[k.text_reply(f"answer {i}") for i in range(3)])

    k.ask(root, tmp_path / "state", [f"q{i}" for i in range(3)])
    first, second, third = k.REQUESTS
    system = {"role": "system", "content": PROMPT}
    assert first == [{"role": "user", "content": "q0"}, system]
    # the window dropped q0 but the prompt is still there: not injected again
    assert second == [system, {"role": "assistant", "content": "answer 0"}, {"role": "user", "content": "q1"}]
    # the window dropped the prompt: it comes back right after the current input
    assert third == [
        {"role": "user", "content": "q1"},
        {"role": "assistant", "content": "answer 1"},
        {"role": "user", "content": "q2"},
        system,
    ]
