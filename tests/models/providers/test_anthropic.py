"""The ``anthropic`` provider: the official SDK end to end against a loopback Messages API server."""

from __future__ import annotations

from typing import Any

import pytest

from goondan.errors import ModelError
from goondan.models import ProviderError, create_model_adapter

from .conftest import ADD_TOOL, CONVERSATION, request, run
from .fake_http import Reply, Req, sse_event

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
    run(generate(server.url, request(CONVERSATION, tools=[ADD_TOOL], params=params)))
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
