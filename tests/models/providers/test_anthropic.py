"""The ``anthropic`` provider: the official SDK end to end against a loopback Messages API server."""

from __future__ import annotations

import itertools
import json
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import goondan
from goondan.errors import ModelError
from goondan.messages import assistant_message, tool_message
from goondan.models import ModelResponse, ProviderError, create_model_adapter
from goondan.models._anthropic import _StreamAccumulator, mark_cache_breakpoints, parse_message

from .conftest import ADD_TOOL, CONVERSATION, request, run
from .fake_http import (
    CachingMessagesAPI,
    Reply,
    Req,
    ThinkingMessagesAPI,
    anthropic_message,
    cache_control_problem,
    redacted_thinking_block,
    sse_event,
    thinking_block,
)

KEY = "sk-ant-SECRET-abcdef"

TOOL_MESSAGE = {
    "id": "msg_1",
    "type": "message",
    "role": "assistant",
    "model": "test-model",
    "content": [
        {"type": "text", "text": "Let me add."},
        {"type": "tool_use", "id": "toolu_1", "name": "calc__add", "input": {"a": 2, "b": 3}},
    ],
    "stop_reason": "tool_use",
    "stop_sequence": None,
    "usage": {"input_tokens": 20, "output_tokens": 9, "cache_read_input_tokens": 5},
}

TOOL_STREAM = [
    sse_event(
        {
            "type": "message_start",
            "message": {
                **TOOL_MESSAGE,
                "content": [],
                "stop_reason": None,
                "usage": {"input_tokens": 20, "output_tokens": 1, "cache_read_input_tokens": 5},
            },
        },
        "message_start",
    ),
    sse_event(
        {"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}},
        "content_block_start",
    ),
    sse_event({"type": "ping"}, "ping"),
    sse_event(
        {"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": "Let "}},
        "content_block_delta",
    ),
    sse_event(
        {"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": "me add."}},
        "content_block_delta",
    ),
    sse_event({"type": "content_block_stop", "index": 0}, "content_block_stop"),
    sse_event(
        {
            "type": "content_block_start",
            "index": 1,
            "content_block": {"type": "tool_use", "id": "toolu_1", "name": "calc__add", "input": {}},
        },
        "content_block_start",
    ),
    sse_event(
        {"type": "content_block_delta", "index": 1, "delta": {"type": "input_json_delta", "partial_json": '{"a": 2,'}},
        "content_block_delta",
    ),
    sse_event(
        {"type": "content_block_delta", "index": 1, "delta": {"type": "input_json_delta", "partial_json": ' "b": 3}'}},
        "content_block_delta",
    ),
    sse_event({"type": "content_block_stop", "index": 1}, "content_block_stop"),
    sse_event(
        {
            "type": "message_delta",
            "delta": {"stop_reason": "tool_use", "stop_sequence": None},
            "usage": {"output_tokens": 9},
        },
        "message_delta",
    ),
    sse_event({"type": "message_stop"}, "message_stop"),
]


async def generate(url: str, req: Any, **options: Any) -> Any:
    model = create_model_adapter(
        "anthropic", model="test-model", options={"retryBaseDelaySeconds": 0.01, **options}, api_key=KEY, endpoint=url
    )
    try:
        return await model.generate(req)
    finally:
        await model.aclose()


def test_request_puts_every_system_message_in_the_system_slot_and_groups_tool_results(serve: Any) -> None:
    server = serve(
        lambda r: Reply(body={**TOOL_MESSAGE, "content": [{"type": "text", "text": "ok"}], "stop_reason": "end_turn"})
    )
    params = {"temperature": 0.2, "topP": 0.8, "maxTokens": 300, "extra": {"top_k": 5}}
    run(generate(server.url, request(CONVERSATION, tools=[ADD_TOOL], params=params), cacheBreakpoints=[]))
    [sent] = server.requests
    assert (sent.method, sent.path) == ("POST", "/v1/messages")
    # the key travels only in the auth header (x-api-key, or a bearer token in recent SDK releases)
    assert KEY in (sent.headers.get("x-api-key"), sent.headers.get("authorization", "").removeprefix("Bearer "))
    assert "anthropic-version" in sent.headers
    body = sent.json
    assert body["system"] == [
        {"type": "text", "text": "You are terse."},
        {"type": "text", "text": "Summary so far: one addition failed."},
    ]
    assert body["messages"] == [
        {"role": "user", "content": [{"type": "text", "text": "add 2 and 3, then 4 and x"}]},
        {
            "role": "assistant",
            "content": [
                {"type": "text", "text": "Adding."},
                {"type": "tool_use", "id": "call_1", "name": "calc__add", "input": {"a": 2, "b": 3}},
                {"type": "tool_use", "id": "call_2", "name": "calc__add", "input": {"a": 4, "b": "x"}},
            ],
        },
        {
            "role": "user",
            "content": [
                {"type": "tool_result", "tool_use_id": "call_1", "content": "5"},
                {
                    "type": "tool_result",
                    "tool_use_id": "call_2",
                    "content": '{"code": "E_TOOL_INVALID_ARGS", "message": "b must be a number"}',
                    "is_error": True,
                },
                {"type": "text", "text": "so?"},
            ],
        },
    ]
    assert body["tools"] == [
        {"name": "calc__add", "description": "Add two numbers.", "input_schema": ADD_TOOL["parameters"]}
    ]
    assert (body["model"], body["max_tokens"], body["temperature"], body["top_p"], body["top_k"]) == (
        "test-model",
        300,
        0.2,
        0.8,
        5,
    )


def test_max_tokens_defaults_because_the_api_requires_it(serve: Any) -> None:
    server = serve(lambda r: Reply(body=TOOL_MESSAGE))
    run(generate(server.url, request([{"role": "user", "content": "hi"}])))
    run(generate(server.url, request([{"role": "user", "content": "hi"}]), defaultMaxTokens=64))
    assert [r.json["max_tokens"] for r in server.requests] == [4096, 64]
    assert "system" not in server.requests[0].json and "tools" not in server.requests[0].json


def test_response_maps_text_tool_use_cached_usage_and_stop_reason(serve: Any) -> None:
    server = serve(lambda r: Reply(body=TOOL_MESSAGE))
    out = run(generate(server.url, request([{"role": "user", "content": "add"}], tools=[ADD_TOOL])))
    assert out.text == "Let me add."
    assert [(c.id, c.name, c.args) for c in out.tool_calls] == [("toolu_1", "calc__add", {"a": 2, "b": 3})]
    assert out.usage == {"promptTokens": 25, "completionTokens": 9, "totalTokens": 34}
    assert (out.finish_reason, out.raw_finish_reason) == ("tool-calls", "tool_use")


@pytest.mark.parametrize(
    ("raw", "normal"),
    [
        ("end_turn", "stop"),
        ("stop_sequence", "stop"),
        ("max_tokens", "length"),
        ("refusal", "content-filter"),
        ("pause_turn", "other"),
    ],
)
def test_stop_reasons_are_normalised(serve: Any, raw: str, normal: str) -> None:
    server = serve(
        lambda r: Reply(body={**TOOL_MESSAGE, "content": [{"type": "text", "text": "x"}], "stop_reason": raw})
    )
    out = run(generate(server.url, request([{"role": "user", "content": "hi"}])))
    assert (out.finish_reason, out.raw_finish_reason) == (normal, raw)


def test_streaming_delivers_deltas_and_returns_what_the_plain_call_returns(serve: Any) -> None:
    def handler(req: Req) -> Reply:
        return Reply(sse=TOOL_STREAM) if req.json.get("stream") else Reply(body=TOOL_MESSAGE)

    server = serve(handler)
    deltas: list[str] = []
    msgs = [{"role": "user", "content": "add"}]
    streamed = run(generate(server.url, request(msgs, tools=[ADD_TOOL], on_text_delta=deltas.append)))
    plain = run(generate(server.url, request(msgs, tools=[ADD_TOOL])))
    assert deltas == ["Let ", "me add."]
    assert streamed == plain
    assert server.requests[0].json["stream"] is True and "stream" not in server.requests[1].json


def test_a_stream_error_event_is_a_provider_error(serve: Any) -> None:
    events = [
        *TOOL_STREAM[:2],
        sse_event({"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}}, "error"),
    ]
    server = serve(lambda r: Reply(sse=events))
    with pytest.raises(ProviderError) as info:
        run(generate(server.url, request([{"role": "user", "content": "a"}], on_text_delta=lambda d: None)))
    assert info.value.provider == "anthropic" and "overloaded_error" in info.value.message


def test_429_retry_after_then_overloaded_529_then_success(serve: Any) -> None:
    replies = [
        Reply(429, {"type": "error", "error": {"type": "rate_limit_error", "message": "slow"}}, {"retry-after": "1"}),
        Reply(529, {"type": "error", "error": {"type": "overloaded_error", "message": "busy"}}),
        Reply(body=TOOL_MESSAGE),
    ]
    server = serve(lambda r: replies.pop(0))
    out = run(generate(server.url, request([{"role": "user", "content": "a"}])))
    assert out.text == "Let me add." and len(server.requests) == 3
    assert server.requests[1].at - server.requests[0].at >= 0.95


def test_exhausted_retries_name_status_and_request_id(serve: Any) -> None:
    server = serve(
        lambda r: Reply(
            500, {"type": "error", "error": {"type": "api_error", "message": "internal"}}, {"request-id": "req_ant_7"}
        )
    )
    with pytest.raises(ProviderError) as info:
        run(generate(server.url, request([{"role": "user", "content": "a"}]), maxRetries=1))
    err = info.value
    assert (err.provider, err.status, err.request_id, err.attempts) == ("anthropic", 500, "req_ant_7", 2)
    assert "api_error: internal" in err.message and KEY not in str(err)


def test_malformed_message_is_a_clear_error(serve: Any) -> None:
    server = serve(lambda r: Reply(body={"type": "message", "content": "not a list"}))
    with pytest.raises(ModelError) as info:
        run(generate(server.url, request([{"role": "user", "content": "a"}])))
    assert info.value.code == "E_MODEL_BAD_RESPONSE"


def test_missing_key_is_a_clear_error(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("ANTHROPIC_API_KEY", raising=False)
    model = create_model_adapter("anthropic", model="m", options={})
    with pytest.raises(ModelError) as info:
        run(model.generate(request([{"role": "user", "content": "a"}])))
    assert info.value.code == "E_MODEL_AUTH" and "ANTHROPIC_API_KEY" in (info.value.suggestion or "")


# --- extended thinking in tool loops -------------------------------------------------------------

THINK = thinking_block("The user wants 2 + 3; calc__add does exactly that, so call it with a=2, b=3.")
REDACTED = redacted_thinking_block(
    "EmwKAhgBEgy3va3pzix/LafPsn4aDFIT2Xlxh0L5L8rLVyIwxtE3rAFBa8cr3qpPkNRj2YfWXGmKDxH4mPnZ"
)
TOOL_USE = {"type": "tool_use", "id": "toolu_1", "name": "calc__add", "input": {"a": 2, "b": 3}}
THINKING_PARAMS = {"maxTokens": 2048, "extra": {"thinking": {"type": "enabled", "budget_tokens": 1024}}}


def text(value: str) -> dict[str, Any]:
    return {"type": "text", "text": value}


def follow_up(first: ModelResponse, *, keep_metadata: bool = True) -> list[dict[str, Any]]:
    """The conversation after ``first`` as the runtime stores it: the assistant message (text, then one
    tool-call part per call with ModelToolCall.metadata as providerMetadata), then one tool message per
    call."""
    calls = [
        {"id": c.id, "name": c.name, "args": c.args}
        | ({"providerMetadata": c.metadata} if c.metadata and keep_metadata else {})
        for c in first.tool_calls
    ]
    return [
        {"role": "user", "content": "add 2 and 3"},
        assistant_message(first.text, tool_calls=calls).data,
        *(tool_message(c.id, c.name, {"type": "json", "value": {"sum": 5}}).data for c in first.tool_calls),
    ]


def thinking_loop(
    serve: Any, replies: list[list[dict[str, Any]]], *, streaming: bool
) -> tuple[Any, ThinkingMessagesAPI, ModelResponse, list[str]]:
    api = ThinkingMessagesAPI(replies)
    server = serve(api)
    deltas: list[str] = []
    listener = deltas.append if streaming else None
    first = run(
        generate(
            server.url,
            request(
                [{"role": "user", "content": "add 2 and 3"}],
                tools=[ADD_TOOL],
                params=THINKING_PARAMS,
                on_text_delta=listener,
            ),
        )
    )
    return server, api, first, deltas


@pytest.mark.parametrize("streaming", [False, True])
def test_thinking_before_a_tool_call_is_sent_back_first_and_unchanged(serve: Any, streaming: bool) -> None:
    server, api, first, deltas = thinking_loop(
        serve, [[THINK, text("Let me add."), TOOL_USE], [text("The sum is 5.")]], streaming=streaming
    )
    # thinking is never the assistant's text, streamed or not
    assert first.text == "Let me add."
    assert "".join(deltas) == ("Let me add." if streaming else "")
    assert first.tool_calls[0].metadata == {"anthropic": {"thinkingBlocks": [THINK]}}
    second = run(generate(server.url, request(follow_up(first), tools=[ADD_TOOL], params=THINKING_PARAMS)))
    assert api.rejections == [] and second.text == "The sum is 5."
    assert server.requests[1].json["messages"][1] == {
        "role": "assistant",
        "content": [THINK, text("Let me add."), TOOL_USE],
    }
    assert server.requests[0].json["thinking"] == {"type": "enabled", "budget_tokens": 1024}


@pytest.mark.parametrize("streaming", [False, True])
def test_redacted_thinking_round_trips_in_its_original_order(serve: Any, streaming: bool) -> None:
    server, api, first, deltas = thinking_loop(serve, [[THINK, REDACTED, TOOL_USE], [text("5.")]], streaming=streaming)
    assert first.text is None and deltas == []
    assert first.tool_calls[0].metadata == {"anthropic": {"thinkingBlocks": [THINK, REDACTED]}}
    run(generate(server.url, request(follow_up(first), tools=[ADD_TOOL], params=THINKING_PARAMS)))
    assert api.rejections == []
    assert server.requests[1].json["messages"][1]["content"] == [THINK, REDACTED, TOOL_USE]


def test_streamed_and_plain_thinking_responses_are_identical(serve: Any) -> None:
    replies = [[THINK, REDACTED, text("Let me add."), TOOL_USE, {**TOOL_USE, "id": "toolu_2"}]]
    _, _, streamed, _ = thinking_loop(serve, replies, streaming=True)
    _, _, plain, _ = thinking_loop(serve, replies, streaming=False)
    assert streamed == plain
    # the blocks travel with the first call only: one message, one copy
    assert [c.metadata for c in plain.tool_calls] == [{"anthropic": {"thinkingBlocks": [THINK, REDACTED]}}, None]


@pytest.mark.parametrize(
    ("tamper", "error"),
    [
        ("drop", "must start with a thinking block"),
        ("edit", "Invalid `signature` in `thinking` block"),
    ],
)
def test_the_fake_rejects_a_tool_loop_whose_thinking_was_lost_or_edited(serve: Any, tamper: str, error: str) -> None:
    """The check the replay tests rely on: without the exact blocks the API answers 400."""
    server, _, first, _ = thinking_loop(serve, [[THINK, TOOL_USE], [text("5.")]], streaming=False)
    if tamper == "edit":
        [block] = first.tool_calls[0].metadata["anthropic"]["thinkingBlocks"]
        block["thinking"] += " "
    messages = follow_up(first, keep_metadata=tamper != "drop")
    with pytest.raises(ProviderError) as info:
        run(generate(server.url, request(messages, tools=[ADD_TOOL], params=THINKING_PARAMS)))
    assert (info.value.code, info.value.status) == ("E_MODEL_BAD_REQUEST", 400)
    assert error in info.value.message


def test_a_merged_assistant_message_still_opens_with_its_thinking(serve: Any) -> None:
    """Consecutive assistant messages (a retried step's text, then the response) become one API
    message; the thinking blocks must still come first in it."""
    server, api, first, _ = thinking_loop(serve, [[THINK, TOOL_USE], [text("5.")]], streaming=False)
    [user, assistant, result] = follow_up(first)
    earlier = assistant_message("Checking the calculator.").data
    run(generate(server.url, request([user, earlier, assistant, result], tools=[ADD_TOOL], params=THINKING_PARAMS)))
    assert api.rejections == []
    assert server.requests[1].json["messages"][1]["content"] == [THINK, text("Checking the calculator."), TOOL_USE]


def test_without_thinking_requests_and_tool_calls_are_unchanged(serve: Any) -> None:
    server, api, first, _ = thinking_loop(serve, [[text("Let me add."), TOOL_USE], [text("5.")]], streaming=False)
    assert first.tool_calls[0].metadata is None
    # another provider's metadata on a call (a conversation started with gemini) is not ours to send
    messages = follow_up(first)
    part = messages[1]["content"][1] | {"providerMetadata": {"google": {"thoughtSignature": "c2ln"}}}
    messages[1] = {"role": "assistant", "content": [messages[1]["content"][0], part]}
    run(generate(server.url, request(messages, tools=[ADD_TOOL])))
    sent = server.requests[1].json
    assert sent["messages"][1] == {"role": "assistant", "content": [text("Let me add."), TOOL_USE]}
    assert "thinking" not in sent and api.rejections == []


@pytest.mark.parametrize(
    "stored",
    ["not a list", [{"type": "text", "text": "hi"}], [THINK, "oops"]],
)
def test_tampered_stored_thinking_is_a_clear_error_before_any_request(serve: Any, stored: Any) -> None:
    server = serve(ThinkingMessagesAPI([]))
    call = {"id": "toolu_1", "name": "calc__add", "args": {"a": 2, "b": 3}}
    messages = [
        {"role": "user", "content": "add"},
        assistant_message(
            None, tool_calls=[call | {"providerMetadata": {"anthropic": {"thinkingBlocks": stored}}}]
        ).data,
    ]
    with pytest.raises(ModelError) as info:
        run(generate(server.url, request(messages)))
    assert info.value.code == "E_MODEL_UNSUPPORTED_CONTENT"
    assert "toolu_1" in info.value.message and "thinkingBlocks" in info.value.message
    assert info.value.suggestion and server.requests == []


def _pieces(value: str, cuts: list[int]) -> list[str]:
    points = sorted({c % (len(value) + 1) for c in cuts} | {0, len(value)})
    return [value[a:b] for a, b in itertools.pairwise(points) if value[a:b]]


@settings(max_examples=150, deadline=None)
@given(
    thought=st.text(max_size=60),
    signature=st.text(alphabet="ABCDEFabcdef0123456789+/=", min_size=1, max_size=80),
    said=st.text(max_size=30),
    cuts=st.lists(st.integers(min_value=0, max_value=200), max_size=6),
    signature_cuts=st.lists(st.integers(min_value=0, max_value=200), max_size=3),
)
def test_thinking_deltas_assemble_into_the_block_the_plain_call_returns(
    thought: str, signature: str, said: str, cuts: list[int], signature_cuts: list[int]
) -> None:
    block: dict[str, Any] = {"type": "thinking", "thinking": thought, "signature": signature}
    content = [block, text(said), TOOL_USE] if said else [block, TOOL_USE]
    message = anthropic_message(content)
    events: list[dict[str, Any]] = [{"type": "message_start", "message": {**message, "content": []}}]
    events.append(
        {"type": "content_block_start", "index": 0, "content_block": {**block, "thinking": "", "signature": ""}}
    )
    events += [
        {"type": "content_block_delta", "index": 0, "delta": {"type": "thinking_delta", "thinking": p}}
        for p in _pieces(thought, cuts)
    ]
    events += [
        {"type": "content_block_delta", "index": 0, "delta": {"type": "signature_delta", "signature": p}}
        for p in _pieces(signature, signature_cuts)
    ]
    events.append({"type": "content_block_stop", "index": 0})
    for index, other in enumerate(content[1:], 1):
        events.append({"type": "content_block_start", "index": index, "content_block": other})
        events.append({"type": "content_block_stop", "index": index})
    events.append({"type": "message_delta", "delta": {"stop_reason": "tool_use"}, "usage": {"output_tokens": 9}})
    events.append({"type": "message_stop"})
    emitted: list[str] = []
    acc = _StreamAccumulator()
    for event in events:
        acc.add(event, emitted.append)
    streamed = acc.result()
    assert streamed == parse_message(message)
    assert streamed.tool_calls[0].metadata == {"anthropic": {"thinkingBlocks": [block]}}
    assert "".join(emitted) == said  # no thinking in the text stream


# --- inside real Goondan turns, across a restart ------------------------------------------------

BUNDLE = """\
apiVersion: goondan.ai/v1
kind: Package
metadata: {{name: thinking-e2e}}
spec: {{version: 0.1.0}}
---
apiVersion: goondan.ai/v1
kind: Model
metadata: {{name: claude}}
spec:
  provider: anthropic
  model: claude-test
  endpoint: {endpoint}
  apiKey: {{valueFrom: {{env: TEST_ANTHROPIC_KEY}}}}
  options: {{retryBaseDelaySeconds: 0.01}}
---
apiVersion: goondan.ai/v1
kind: Tool
metadata: {{name: calc}}
spec:
  entry: ./calc.py
  exports:
    - name: add
      description: Add two numbers.
      parameters:
        type: object
        properties: {{a: {{type: number}}, b: {{type: number}}}}
        required: [a, b]
---
apiVersion: goondan.ai/v1
kind: Agent
metadata: {{name: helper}}
spec:
  modelConfig:
    modelRef: Model/claude
    params:
      maxTokens: 2048
      extra: {{thinking: {{type: enabled, budget_tokens: 1024}}}}
  tools: [{{ref: Tool/calc}}]
---
apiVersion: goondan.ai/v1
kind: Swarm
metadata: {{name: default}}
spec:
  entryAgent: Agent/helper
  agents: [{{ref: Agent/helper}}]
"""


def turn(bundle: Path, state: Path, text_in: str, deltas: list[str] | None) -> Any:
    async def main() -> Any:
        async with goondan.Runtime(bundle, state_root=state, isolation="inline", env={"TEST_ANTHROPIC_KEY": KEY}) as rt:
            if deltas is not None:
                rt.on_text_delta(lambda event: deltas.append(event["delta"]))
            return await rt.request(text_in)

    return run(main())


@pytest.mark.parametrize("streaming", [False, True])
def test_a_persisted_thinking_tool_loop_replays_its_blocks_after_a_restart(
    serve: Any, tmp_path: Path, streaming: bool
) -> None:
    api = ThinkingMessagesAPI([[THINK, text("Let me add."), TOOL_USE], [text("The sum is 5.")], [text("Still 5.")]])
    server = serve(api)
    bundle = tmp_path / "bundle"
    bundle.mkdir()
    (bundle / "goondan.yaml").write_text(BUNDLE.format(endpoint=server.url), encoding="utf-8")
    (bundle / "calc.py").write_text("handlers = {'add': lambda ctx, args: {'sum': args['a'] + args['b']}}\n")
    deltas: list[str] | None = [] if streaming else None
    first = turn(bundle, tmp_path / "state", "what is 2 + 3?", deltas)
    assert first.finish_reason == "text_response" and first.text == "The sum is 5.", first.error
    if deltas is not None:
        assert "".join(deltas) == "Let me add.The sum is 5."
    # a new Runtime reads the conversation back from disk
    second = turn(bundle, tmp_path / "state", "and again?", None)
    assert second.text == "Still 5." and api.rejections == []

    def tool_turn(req: Req) -> str:
        [message] = [m for m in req.json["messages"] if any(b["type"] == "tool_use" for b in m["content"])]
        return json.dumps(message)

    in_loop, after_restart = tool_turn(server.requests[1]), tool_turn(server.requests[2])
    assert json.loads(in_loop)["content"] == [THINK, text("Let me add."), TOOL_USE]
    assert after_restart == in_loop  # the same bytes on the wire: thinking and prompt-cache prefix intact
    assert ("stream" in server.requests[0].json) is streaming


def test_parallel_tool_calls_false_disables_parallel_tool_use_in_tool_choice(serve: Any) -> None:
    server = serve(
        lambda r: Reply(body={**TOOL_MESSAGE, "content": [{"type": "text", "text": "ok"}], "stop_reason": "end_turn"})
    )
    hi = [{"role": "user", "content": "hi"}]
    run(generate(server.url, request(hi, tools=[ADD_TOOL]), parallelToolCalls=False))
    run(generate(server.url, request(hi, tools=[ADD_TOOL]), parallelToolCalls=True))
    run(generate(server.url, request(hi, tools=[ADD_TOOL])))
    sent = [r.json.get("tool_choice", "absent") for r in server.requests]
    assert sent == [{"type": "auto", "disable_parallel_tool_use": True}, "absent", "absent"]


def test_parallel_tool_calls_option_must_be_a_boolean() -> None:
    with pytest.raises(ModelError) as info:
        create_model_adapter("anthropic", model="m", options={"parallelToolCalls": 0}, api_key=KEY)
    assert info.value.code == "E_MODEL_CONFIG" and "parallelToolCalls" in info.value.message


# --- prompt caching ------------------------------------------------------------------------------


def marked(body: dict[str, Any]) -> list[str]:
    """Where ``body`` carries cache_control marks, as API paths, in prefix order."""
    places = [(f"tools.{i}", b) for i, b in enumerate(body.get("tools") or [])]
    places += [(f"system.{i}", b) for i, b in enumerate(body.get("system") or [])]
    for i, message in enumerate(body["messages"]):
        places += [(f"messages.{i}.content.{j}", b) for j, b in enumerate(message["content"])]
    return [path for path, block in places if "cache_control" in block]


def ok_reply(body: dict[str, Any]) -> list[dict[str, Any]]:
    return [text("ok")]


@pytest.mark.parametrize(
    ("conversation", "expected"),
    [
        # messages: 0 = user "add ...", 1 = assistant with the calls, 2 = the results + "so?"; two system
        # blocks (prompt + summary): the prompt's mark (which covers the tools) outranks the tools' own
        (CONVERSATION, ["system.0", "system.1", "messages.0.content.0", "messages.2.content.2"]),
        # one system block: prompt and system are the same block, so the tools get the fourth mark
        (
            [m for m in CONVERSATION if "Summary" not in str(m)],
            ["tools.0", "system.0", "messages.0.content.0", "messages.2.content.2"],
        ),
    ],
    ids=["prompt-and-summary", "one-system-block"],
)
def test_requests_mark_the_newest_message_the_previous_step_system_prompt_and_tools(
    serve: Any, conversation: list[dict[str, Any]], expected: list[str]
) -> None:
    api = CachingMessagesAPI(ok_reply)
    server = serve(api)
    run(generate(server.url, request(conversation, tools=[ADD_TOOL])))
    body = server.requests[0].json
    assert marked(body) == expected
    assert body["messages"][2]["content"][2]["cache_control"] == {"type": "ephemeral"}
    assert api.rejections == [] and len(api.uses) == 1  # the API would accept these marks


def tool_step(n: int, first: int) -> list[dict[str, Any]]:
    """One assistant message with ``n`` parallel calls and its ``n`` results, as the runtime stores them."""
    ids = [f"call_{first + i}" for i in range(n)]
    calls = [{"type": "tool-call", "toolCallId": c, "toolName": "calc__add", "input": {"a": 1, "b": 2}} for c in ids]
    results = [
        {"role": "tool", "content": [{"type": "tool-result", "toolCallId": c, "toolName": "calc__add", "output": 3}]}
        for c in ids
    ]
    return [{"role": "assistant", "content": calls}, *results]


def conversation_requests() -> list[list[dict[str, Any]]]:
    """The histories of five successive requests of one instance: a tool step, a new turn, and a
    step with twelve parallel calls (25 new blocks, more than the API looks back from a mark)."""
    h1 = [{"role": "system", "content": "You add numbers. " * 40}, {"role": "user", "content": "add 1 and 2"}]
    h2 = h1 + tool_step(1, 0)
    h3 = [*h2, {"role": "assistant", "content": "3"}, {"role": "user", "content": "now twelve of them"}]
    h4 = h3 + tool_step(12, 1)
    h5 = [*h4, {"role": "assistant", "content": "all 3"}, {"role": "user", "content": "thanks"}]
    return [h1, h2, h3, h4, h5]


@pytest.mark.parametrize(
    ("places", "hits"),
    [
        (None, [False, True, True, True, True]),
        # without the previousStep mark the 25 new blocks hide the previous request from the lookback
        (["tools", "system", "history"], [False, True, True, False, True]),
    ],
)
def test_each_request_reads_the_whole_previous_request_from_the_cache(
    serve: Any, places: list[str] | None, hits: list[bool]
) -> None:
    api = CachingMessagesAPI(ok_reply, min_tokens=1)
    server = serve(api)
    options = {} if places is None else {"cacheBreakpoints": places}
    for history in conversation_requests():
        run(generate(server.url, request(history, tools=[ADD_TOOL]), **options))
    assert api.rejections == []
    totals = [u.total for u in api.uses]
    reads = [u.cache_read_input_tokens for u in api.uses]
    assert [reads[i] == totals[i - 1] for i in range(len(reads))] == [False, *hits[1:]]
    assert reads[0] == 0
    # a miss still reads the stable tools + system prefix, never less
    assert all(r > 0 for r in reads[1:])


def test_usage_counts_cached_tokens_in_prompt_tokens(serve: Any) -> None:
    api = CachingMessagesAPI(ok_reply, min_tokens=1)
    server = serve(api)
    histories = conversation_requests()
    outs = [run(generate(server.url, request(h, tools=[ADD_TOOL]))) for h in histories[:2]]
    assert [o.usage["promptTokens"] for o in outs] == [u.total for u in api.uses]
    assert api.uses[1].cache_read_input_tokens > 0


def test_cache_breakpoints_and_ttl_are_configurable(serve: Any) -> None:
    server = serve(CachingMessagesAPI(ok_reply))
    run(generate(server.url, request(CONVERSATION, tools=[ADD_TOOL]), cacheBreakpoints=[]))
    run(generate(server.url, request(CONVERSATION, tools=[ADD_TOOL]), cacheBreakpoints=["history"], cacheTtl="1h"))
    off, one = (r.json for r in server.requests)
    assert marked(off) == []
    assert marked(one) == ["messages.2.content.2"]
    assert one["messages"][2]["content"][2]["cache_control"] == {"type": "ephemeral", "ttl": "1h"}


@pytest.mark.parametrize(
    "options",
    [{"cacheBreakpoints": ["tools", "tools"]}, {"cacheBreakpoints": ["everything"]}, {"cacheBreakpoints": "system"}],
)
def test_invalid_cache_options_are_config_errors(options: dict[str, Any]) -> None:
    with pytest.raises(ModelError) as info:
        create_model_adapter("anthropic", model="m", options=options, api_key=KEY, endpoint="http://127.0.0.1:9")
    assert info.value.code == "E_MODEL_CONFIG" and "cacheBreakpoints" in info.value.message
    with pytest.raises(ModelError) as info:
        create_model_adapter(
            "anthropic", model="m", options={"cacheTtl": "1d"}, api_key=KEY, endpoint="http://127.0.0.1:9"
        )
    assert "cacheTtl" in info.value.message


def test_a_mark_never_lands_on_a_thinking_block() -> None:
    body: dict[str, Any] = {
        "system": [{"type": "text", "text": "s"}],
        "messages": [
            {"role": "user", "content": [{"type": "text", "text": "hi"}]},
            {"role": "assistant", "content": [thinking_block("hm"), redacted_thinking_block("xx")]},
        ],
    }
    mark_cache_breakpoints(body, ("system", "history", "previousStep"), {"type": "ephemeral"})
    assert marked(body) == ["system.0", "messages.0.content.0"]  # history and previousStep: the same block
    assert cache_control_problem(body) is None


def _mark(block: dict[str, Any], ttl: str | None = None) -> dict[str, Any]:
    return {**block, "cache_control": {"type": "ephemeral", **({"ttl": ttl} if ttl else {})}}


INVALID_MARKS = {
    "five marks": (
        {"messages": [{"role": "user", "content": [_mark(text(str(i))) for i in range(5)]}]},
        "A maximum of 4 blocks with cache_control may be provided. Found 5.",
    ),
    "on thinking": (
        {
            "messages": [
                {"role": "user", "content": [text("q")]},
                {"role": "assistant", "content": [_mark(thinking_block("t")), text("a")]},
            ]
        },
        "messages.1.content.0.thinking.cache_control: Extra inputs are not permitted",
    ),
    "on empty text": (
        {"messages": [{"role": "user", "content": [text("q"), _mark({"type": "text", "text": ""})]}]},
        "cache_control cannot be set for empty text blocks",
    ),
    "on a whole message": (
        {"messages": [{"role": "user", "content": [text("q")], "cache_control": {"type": "ephemeral"}}]},
        "messages.0.cache_control: Extra inputs are not permitted",
    ),
    "inside a tool result": (
        {
            "messages": [
                {"role": "assistant", "content": [{"type": "tool_use", "id": "t1", "name": "f", "input": {}}]},
                {
                    "role": "user",
                    "content": [{"type": "tool_result", "tool_use_id": "t1", "content": [_mark(text("r"))]}],
                },
            ]
        },
        "messages.1.content.0.content.0.cache_control: Extra inputs are not permitted",
    ),
    "not ephemeral": (
        {"messages": [{"role": "user", "content": [{**text("q"), "cache_control": {"type": "persistent"}}]}]},
        "messages.0.content.0.cache_control.type: Input should be 'ephemeral'",
    ),
    "1h after 5m": (
        {"system": [_mark(text("s"))], "messages": [{"role": "user", "content": [_mark(text("q"), "1h")]}]},
        "a ttl='1h' cache_control block must not come after a ttl='5m' cache_control block",
    ),
}


@pytest.mark.parametrize("case", list(INVALID_MARKS))
def test_the_fake_api_rejects_invalid_cache_marks_as_the_api_does(serve: Any, case: str) -> None:
    """Sent raw through the SDK, so the fake's verdict is what a client of the real API would see."""
    import anthropic

    body, message = INVALID_MARKS[case]
    api = CachingMessagesAPI(ok_reply)
    server = serve(api)

    async def send() -> None:
        client = anthropic.AsyncAnthropic(api_key=KEY, base_url=server.url, max_retries=0)
        try:
            await client.messages.create(model="test-model", max_tokens=10, **body)
        finally:
            await client.close()

    with pytest.raises(anthropic.BadRequestError) as info:
        run(send())
    assert message in str(info.value)
    assert api.uses == []
