"""inter-agent-response-format (digest §6, §9.2 extensions-inter-agent-response-format)."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import policy_kit as k
import pytest

import goondan
from goondan.conversation import ConversationState
from goondan.errors import ExtensionError
from goondan.messages import user_message
from goondan.pipeline import StepState
from goondan.results import StepResult

MARKER = "__goondanInterAgentResponse"


def _marker(status: str, request_id: str, **extra: Any) -> dict[str, Any]:
    return {
        "kind": "inter_agent_response",
        "version": 1,
        "requestId": request_id,
        "requestEventId": f"evt-{request_id}",
        "fromAgentId": "researcher",
        "toAgentId": "coordinator",
        "async": True,
        "status": status,
        "receivedAt": "2026-01-01T00:00:00Z",
        **extra,
    }


def _response(mid: str, marker: dict[str, Any], payload: dict[str, Any]) -> Any:
    content = {"type": "inter_agent_response", "requestId": marker["requestId"], "status": marker["status"]}
    return user_message(json.dumps({**content, **payload}), {MARKER: marker, "traceId": "t1"}, id=mid)


def _history() -> list[Any]:
    return [
        user_message("plain question", id="m1"),
        _response("m2", _marker("ok", "req-1", requestMetadata={"topic": "memo"}), {"response": {"title": "memo"}}),
        _response(
            "m3",
            _marker("error", "req-2", errorCode="AGENT_REQUEST_TIMEOUT", errorMessage="timed out"),
            {"error": {"code": "AGENT_REQUEST_TIMEOUT", "message": "timed out"}},
        ),
        user_message('{"type": "inter_agent_response"}', {MARKER: {"kind": "inter_agent_response"}}, id="m4"),
    ]


def _step(h: k.Harness, conversation: ConversationState) -> list[Any]:
    seen: list[Any] = []

    async def core(state: StepState) -> StepResult:
        seen.extend(state.turn_state.conversation_state.next_messages)
        return StepResult()

    asyncio.run(h.step(conversation, core))
    return seen


def test_valid_responses_are_replaced_in_order_with_readable_text_before_the_model_call() -> None:
    h = k.harness("inter_agent_response_format")
    conversation = ConversationState(_history())
    seen = _step(h, conversation)
    assert k.event_summary(conversation) == [("replace", "m2"), ("replace", "m3")]
    ok, err = seen[1], seen[2]
    assert ok.id == "m2" and ok.role == "user"
    assert ok.text.splitlines()[0] == "[inter-agent response] researcher -> coordinator status=ok requestId=req-1"
    assert '"title": "memo"' in ok.text
    assert "requestMetadata" not in ok.text
    assert err.text.splitlines() == [
        "[inter-agent response] researcher -> coordinator status=error requestId=req-2",
        "error(AGENT_REQUEST_TIMEOUT): timed out",
    ]
    for message in (ok, err):
        assert message.metadata["__goondanInterAgentResponseFormatted"] is True
        assert message.metadata[MARKER]["kind"] == "inter_agent_response"
        assert message.metadata["traceId"] == "t1"
        assert message.source == {"type": "extension", "extensionName": "inter-agent-response-format"}
    # a plain message and one with an invalid marker are untouched
    assert seen[0].text == "plain question"
    assert seen[3].text == '{"type": "inter_agent_response"}'


def test_a_message_is_formatted_only_once() -> None:
    h = k.harness("inter_agent_response_format")
    conversation = ConversationState(_history())
    _step(h, conversation)
    before = len(conversation.events)
    _step(h, conversation)
    assert len(conversation.events) == before


def test_request_metadata_is_appended_when_enabled() -> None:
    h = k.harness("inter_agent_response_format", {"includeRequestMetadata": True})
    conversation = ConversationState(_history())
    seen = _step(h, conversation)
    assert seen[1].text.splitlines()[-1] == 'requestMetadata={"topic": "memo"}'


def test_error_details_fall_back_from_metadata_to_content_to_defaults() -> None:
    h = k.harness("inter_agent_response_format")
    from_content = _response("m1", _marker("error", "r1"), {"error": {"code": "AGENT_NOT_FOUND", "message": "no"}})
    bare = _response("m2", _marker("timeout", "r2"), {})
    string_response = _response("m3", _marker("ok", "r3"), {"response": "plain text answer"})
    conversation = ConversationState([from_content, bare, string_response])
    seen = _step(h, conversation)
    assert seen[0].text.splitlines()[1] == "error(AGENT_NOT_FOUND): no"
    assert seen[1].text.splitlines() == [
        "[inter-agent response] researcher -> coordinator status=timeout requestId=r2",
        "error(AGENT_REQUEST_ERROR): agent request failed",
    ]
    assert seen[2].text.splitlines()[1] == "plain text answer"


@pytest.mark.parametrize(
    "change",
    [{"version": 2}, {"async": False}, {"status": "weird"}, {"requestId": ""}, {"receivedAt": None}],
)
def test_invalid_markers_are_left_alone(change: dict[str, Any]) -> None:
    h = k.harness("inter_agent_response_format")
    conversation = ConversationState([_response("m1", {**_marker("ok", "r1"), **change}, {"response": "x"})])
    _step(h, conversation)
    assert len(conversation.events) == 0


def test_invalid_config_is_an_extension_config_error() -> None:
    with pytest.raises(ExtensionError) as info:
        k.harness("inter_agent_response_format", {"includeRequestMetadata": "yes"})
    assert info.value.code == "E_EXT_CONFIG"


ASKER = """\
async def register_step(ctx):
    if ctx.step_index == 0:
        await ctx.agents.request("b", "write the memo", async_=True)
    return await ctx.next()


def register(api):
    api.pipeline.register("step", register_step)
"""


def test_in_real_turns_an_async_response_reaches_the_model_formatted(tmp_path: Path) -> None:
    root = k.bundle(
        tmp_path / "b",
        [{"ref": "Extension/asker"}, k.base_ref("inter-agent-response-format")],
        extra_docs=[
            {"apiVersion": k.API, "kind": "Extension", "metadata": {"name": "asker"}, "spec": {"entry": "./asker.py"}}
        ],
        files={"asker.py": ASKER},
        other_agents=["b"],
    )
    steps = {"a": 0}

    async def model(request: Any) -> Any:
        if request.agent_name == "b":
            k.PROBE["b_answered"] = True
            return k.text_reply("memo ready")
        steps["a"] += 1
        if steps["a"] == 1:
            # let the async request to b finish and be delivered before the next step
            for _ in range(200):
                if k.PROBE.get("b_answered"):
                    break
                await asyncio.sleep(0.01)
            await asyncio.sleep(0.05)
            return k.calls_reply("c1")
        return k.text_reply("thanks")

    k.MODEL = model

    async def go() -> Any:
        async with goondan.Runtime(root, state_root=tmp_path / "state", isolation="inline") as rt:
            return await rt.request("ask b")

    assert asyncio.run(go()).text == "thanks"
    a_requests = [r for r in k.REQUESTS if r[0] == {"role": "user", "content": "ask b"}]
    final = a_requests[-1]
    (formatted,) = [m for m in final if str(m["content"]).startswith("[inter-agent response]")]
    assert formatted["role"] == "user"
    head, body = formatted["content"].split("\n", 1)
    assert head.startswith("[inter-agent response] b -> a status=ok requestId=")
    assert body == "memo ready"
