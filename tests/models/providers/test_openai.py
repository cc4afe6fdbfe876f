"""The ``openai`` provider: the official SDK end to end against a loopback Chat Completions server."""

from __future__ import annotations

import asyncio
import time
from typing import Any

import pytest

from goondan.errors import ModelError
from goondan.models import ProviderError, create_model_adapter
from goondan.models._pool import live_clients

from .conftest import ADD_TOOL, CONVERSATION, request, run
from .fake_http import Reply, Req

KEY = "sk-test-SECRET-0123456789"


def completion(message: dict[str, Any], finish: str = "stop", usage: dict[str, int] | None = None) -> dict[str, Any]:
    return {
        "id": "chatcmpl-1",
        "object": "chat.completion",
        "created": 1,
        "model": "test-model",
        "choices": [{"index": 0, "message": {"role": "assistant", **message}, "finish_reason": finish}],
        "usage": usage or {"prompt_tokens": 11, "completion_tokens": 7, "total_tokens": 18},
    }


def chunk(delta: dict[str, Any], finish: str | None = None, usage: dict[str, int] | None = None) -> dict[str, Any]:
    choices = [] if delta is None else [{"index": 0, "delta": delta, "finish_reason": finish}]
    return {
        "id": "chatcmpl-1",
        "object": "chat.completion.chunk",
        "created": 1,
        "model": "m",
        "choices": choices,
        "usage": usage,
    }


TOOL_REPLY = completion(
    {
        "content": "Let me add.",
        "tool_calls": [
            {"id": "call_a", "type": "function", "function": {"name": "calc__add", "arguments": '{"a": 2, "b": 3}'}}
        ],
    },
    finish="tool_calls",
)

TOOL_STREAM = [
    chunk({"role": "assistant", "content": "Let "}),
    chunk({"content": "me add."}),
    chunk(
        {
            "tool_calls": [
                {"index": 0, "id": "call_a", "type": "function", "function": {"name": "calc__add", "arguments": ""}}
            ]
        }
    ),
    chunk({"tool_calls": [{"index": 0, "function": {"arguments": '{"a": 2, '}}]}),
    chunk({"tool_calls": [{"index": 0, "function": {"arguments": '"b": 3}'}}]}),
    chunk({}, finish="tool_calls"),
    {
        "id": "chatcmpl-1",
        "object": "chat.completion.chunk",
        "created": 1,
        "model": "m",
        "choices": [],
        "usage": {"prompt_tokens": 11, "completion_tokens": 7, "total_tokens": 18},
    },
    "data: [DONE]\n\n",
]


def adapter(url: str, **options: Any) -> Any:
    opts = {"retryBaseDelaySeconds": 0.01, **options}
    return create_model_adapter("openai", model="test-model", options=opts, api_key=KEY, endpoint=url + "/v1")


async def generate(url: str, req: Any, **options: Any) -> Any:
    model = adapter(url, **options)
    try:
        return await model.generate(req)
    finally:
        await model.aclose()


def test_request_maps_every_message_part_params_and_tool_schema_verbatim(serve: Any) -> None:
    server = serve(lambda r: Reply(body=completion({"content": "ok"})))
    params = {"temperature": 0.3, "topP": 0.9, "maxTokens": 77, "extra": {"seed": 7, "stop": ["END"]}}
    run(generate(server.url, request(CONVERSATION, tools=[ADD_TOOL], params=params)))
    [sent] = server.requests
    assert (sent.method, sent.path) == ("POST", "/v1/chat/completions")
    assert sent.headers["authorization"] == f"Bearer {KEY}"
    body = sent.json
    assert body["model"] == "test-model"
    assert body["messages"] == [
        {"role": "system", "content": "You are terse."},
        {"role": "user", "content": "add 2 and 3, then 4 and x"},
        {
            "role": "assistant",
            "content": "Adding.",
            "tool_calls": [
                {
                    "id": "call_1",
                    "type": "function",
                    "function": {"name": "calc__add", "arguments": '{"a": 2, "b": 3}'},
                },
                {
                    "id": "call_2",
                    "type": "function",
                    "function": {"name": "calc__add", "arguments": '{"a": 4, "b": "x"}'},
                },
            ],
        },
        {"role": "tool", "tool_call_id": "call_1", "content": "5"},
        {
            "role": "tool",
            "tool_call_id": "call_2",
            "content": '{"error": {"code": "E_TOOL_INVALID_ARGS", "message": "b must be a number"}}',
        },
        {"role": "system", "content": "Summary so far: one addition failed."},
        {"role": "user", "content": [{"type": "text", "text": "so?"}]},
    ]
    assert body["tools"] == [
        {
            "type": "function",
            "function": {"name": "calc__add", "description": "Add two numbers.", "parameters": ADD_TOOL["parameters"]},
        }
    ]
    # a custom endpoint gets the widely supported max_tokens; extra params go into the body as written
    assert (body["temperature"], body["top_p"], body["max_tokens"]) == (0.3, 0.9, 77)
    assert (body["seed"], body["stop"]) == (7, ["END"])
    assert "stream" not in body


def test_max_tokens_field_is_configurable_for_reasoning_models(serve: Any) -> None:
    server = serve(lambda r: Reply(body=completion({"content": "ok"})))
    run(
        generate(
            server.url,
            request([{"role": "user", "content": "hi"}], params={"maxTokens": 5}),
            maxTokensParam="max_completion_tokens",
        )
    )
    body = server.requests[0].json
    assert body["max_completion_tokens"] == 5 and "max_tokens" not in body


def test_response_maps_text_tool_calls_usage_and_finish_reason(serve: Any) -> None:
    server = serve(lambda r: Reply(body=TOOL_REPLY))
    out = run(generate(server.url, request([{"role": "user", "content": "add"}], tools=[ADD_TOOL])))
    assert out.text == "Let me add."
    assert [(c.id, c.name, c.args) for c in out.tool_calls] == [("call_a", "calc__add", {"a": 2, "b": 3})]
    assert out.usage == {"promptTokens": 11, "completionTokens": 7, "totalTokens": 18}
    assert (out.finish_reason, out.raw_finish_reason) == ("tool-calls", "tool_calls")


@pytest.mark.parametrize(
    ("raw", "normal"),
    [("stop", "stop"), ("length", "length"), ("content_filter", "content-filter"), ("weird", "other")],
)
def test_finish_reasons_are_normalised(serve: Any, raw: str, normal: str) -> None:
    server = serve(lambda r: Reply(body=completion({"content": "x"}, finish=raw)))
    out = run(generate(server.url, request([{"role": "user", "content": "hi"}])))
    assert (out.finish_reason, out.raw_finish_reason) == (normal, raw)


def test_invalid_tool_arguments_are_passed_through_for_the_runtime_to_reject(serve: Any) -> None:
    bad = completion(
        {
            "content": None,
            "tool_calls": [{"id": "c", "type": "function", "function": {"name": "calc__add", "arguments": '{"a": 2,'}}],
        },
        finish="tool_calls",
    )
    server = serve(lambda r: Reply(body=bad))
    out = run(generate(server.url, request([{"role": "user", "content": "add"}], tools=[ADD_TOOL])))
    assert out.text is None
    assert out.tool_calls[0].args == '{"a": 2,'  # not "fixed": the runtime's malformed-call retry handles it


def test_streaming_delivers_deltas_and_returns_what_the_plain_call_returns(serve: Any) -> None:
    def handler(req: Req) -> Reply:
        return Reply(sse=TOOL_STREAM) if req.json.get("stream") else Reply(body=TOOL_REPLY)

    server = serve(handler)
    deltas: list[str] = []
    msgs = [{"role": "user", "content": "add"}]
    streamed = run(generate(server.url, request(msgs, tools=[ADD_TOOL], on_text_delta=deltas.append)))
    plain = run(generate(server.url, request(msgs, tools=[ADD_TOOL])))
    assert deltas == ["Let ", "me add."]
    assert streamed == plain
    first = server.requests[0].json
    assert first["stream"] is True and first["stream_options"] == {"include_usage": True}


def test_streaming_can_be_switched_off_per_model(serve: Any) -> None:
    server = serve(lambda r: Reply(body=TOOL_REPLY))
    deltas: list[str] = []
    out = run(
        generate(server.url, request([{"role": "user", "content": "a"}], on_text_delta=deltas.append), stream=False)
    )
    assert out.text == "Let me add." and deltas == [] and "stream" not in server.requests[0].json


def test_429_waits_for_retry_after_then_succeeds(serve: Any) -> None:
    replies = [
        Reply(429, {"error": {"message": "slow down", "type": "rate_limit"}}, {"retry-after": "1"}),
        Reply(body=TOOL_REPLY),
    ]
    server = serve(lambda r: replies.pop(0))
    out = run(generate(server.url, request([{"role": "user", "content": "a"}])))
    assert out.text == "Let me add."
    first, second = server.requests
    assert second.at - first.at >= 0.95


def test_500_then_success_is_retried_with_backoff(serve: Any) -> None:
    replies = [Reply(500, {"error": {"message": "boom"}}), Reply(502, "bad gateway"), Reply(body=TOOL_REPLY)]
    server = serve(lambda r: replies.pop(0))
    out = run(generate(server.url, request([{"role": "user", "content": "a"}]), retryBaseDelaySeconds=0.05))
    assert out.text == "Let me add." and len(server.requests) == 3
    gaps = [b.at - a.at for a, b in zip(server.requests, server.requests[1:], strict=False)]
    assert gaps[0] >= 0.025 and gaps[1] >= 0.05  # equal jitter: at least half of 0.05 then of 0.1


def test_exhausted_retries_end_in_a_structured_error(serve: Any) -> None:
    server = serve(
        lambda r: Reply(503, {"error": {"message": "overloaded", "type": "server_error"}}, {"x-request-id": "req_42"})
    )
    with pytest.raises(ProviderError) as info:
        run(generate(server.url, request([{"role": "user", "content": "a"}]), maxRetries=2))
    err = info.value
    assert len(server.requests) == 3
    assert (err.code, err.provider, err.status, err.request_id, err.attempts) == (
        "E_MODEL_PROVIDER_ERROR",
        "openai",
        503,
        "req_42",
        3,
    )
    assert err.to_dict()["requestId"] == "req_42" and "overloaded" in err.message


def test_client_errors_are_not_retried(serve: Any) -> None:
    server = serve(lambda r: Reply(400, {"error": {"message": "bad tool schema", "type": "invalid_request_error"}}))
    with pytest.raises(ProviderError) as info:
        run(generate(server.url, request([{"role": "user", "content": "a"}])))
    assert len(server.requests) == 1
    assert (info.value.code, info.value.status) == ("E_MODEL_BAD_REQUEST", 400)


def test_api_key_never_appears_in_errors(serve: Any) -> None:
    server = serve(lambda r: Reply(401, {"error": {"message": f"Incorrect API key provided: {KEY}", "type": "auth"}}))
    with pytest.raises(ProviderError) as info:
        run(generate(server.url, request([{"role": "user", "content": "a"}])))
    err = info.value
    assert err.code == "E_MODEL_AUTH"
    assert KEY not in str(err) and KEY not in repr(err.to_dict()) and KEY not in (err.suggestion or "")
    assert KEY not in repr(adapter(server.url))


def test_a_silent_server_times_out(serve: Any) -> None:
    server = serve(lambda r: Reply(body=TOOL_REPLY, stall_before=3))
    started = time.monotonic()
    with pytest.raises(ProviderError) as info:
        run(generate(server.url, request([{"role": "user", "content": "a"}]), timeoutSeconds=0.3, maxRetries=1))
    assert info.value.code == "E_MODEL_TIMEOUT" and info.value.attempts == 2
    assert time.monotonic() - started < 2.5


def test_a_stream_that_stalls_times_out_between_chunks(serve: Any) -> None:
    server = serve(lambda r: Reply(sse=TOOL_STREAM, stall_after_chunks=2))
    deltas: list[str] = []
    with pytest.raises(ProviderError) as info:
        run(
            generate(
                server.url, request([{"role": "user", "content": "a"}], on_text_delta=deltas.append), timeoutSeconds=0.3
            )
        )
    # text already reached listeners, so the call is not retried (they would see it twice)
    assert info.value.code == "E_MODEL_TIMEOUT" and len(server.requests) == 1 and deltas == ["Let ", "me add."]


@pytest.mark.parametrize(
    "reply",
    [
        Reply(body={"id": "x", "object": "chat.completion"}),
        Reply(body="<html>not json</html>", headers={"content-type": "text/html"}),
        Reply(body={"choices": [{"index": 0, "message": {"role": "assistant", "content": 42}}]}),
    ],
)
def test_malformed_responses_are_a_clear_model_error(serve: Any, reply: Reply) -> None:
    server = serve(lambda r: reply)
    with pytest.raises(ModelError) as info:
        run(generate(server.url, request([{"role": "user", "content": "a"}])))
    assert info.value.code == "E_MODEL_BAD_RESPONSE"
    assert "endpoint" in (info.value.suggestion or "")


def test_cancelling_a_stream_closes_its_connection(serve: Any) -> None:
    server = serve(lambda r: Reply(sse=TOOL_STREAM, stall_after_chunks=1))

    async def scenario() -> None:
        got = asyncio.Event()
        model = adapter(server.url)
        task = asyncio.create_task(
            model.generate(request([{"role": "user", "content": "a"}], on_text_delta=lambda d: got.set()))
        )
        await asyncio.wait_for(got.wait(), 5)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        await model.aclose()

    run(scenario())
    assert server.wait_for(lambda: server.closed_by_client == 1)


def test_one_pooled_client_serves_every_instance_of_a_model(serve: Any) -> None:
    server = serve(lambda r: Reply(body=TOOL_REPLY))

    async def scenario() -> int:
        first, second = adapter(server.url), adapter(server.url)
        for model in (first, second, first, second):
            await model.generate(request([{"role": "user", "content": "a"}]))
        assert live_clients() == 1
        await first.aclose()
        assert live_clients() == 1  # still used by the second instance
        await second.aclose()
        return live_clients()

    assert run(scenario()) == 0
    assert len(server.requests) == 4 and server.opened == 1  # one keep-alive connection for all calls


def test_unknown_options_are_rejected() -> None:
    with pytest.raises(ModelError) as info:
        create_model_adapter("openai", model="m", options={"timeout": 3}, api_key=KEY)
    assert info.value.code == "E_MODEL_CONFIG" and "timeoutSeconds" in (info.value.suggestion or "")


def test_an_error_sent_inside_the_stream_is_a_provider_error(serve: Any) -> None:
    events = [TOOL_STREAM[0], 'data: {"error": {"message": "model crashed", "type": "server_error"}}\n\n']
    server = serve(lambda r: Reply(sse=events))
    deltas: list[str] = []
    with pytest.raises(ProviderError) as info:
        run(generate(server.url, request([{"role": "user", "content": "a"}], on_text_delta=deltas.append)))
    assert info.value.provider == "openai" and "model crashed" in info.value.message
    assert deltas == ["Let "] and len(server.requests) == 1


def test_api_key_never_appears_in_logs_even_at_debug_level(serve: Any, caplog: pytest.LogCaptureFixture) -> None:
    replies = [Reply(500, {"error": {"message": f"echo {KEY}"}}), Reply(401, {"error": {"message": f"bad key {KEY}"}})]
    server = serve(lambda r: replies.pop(0))
    caplog.set_level("DEBUG")
    with pytest.raises(ProviderError):
        run(generate(server.url, request([{"role": "user", "content": "a"}])))
    assert caplog.records and all(KEY not in r.getMessage() for r in caplog.records)


def test_parallel_tool_calls_option_is_passed_through_when_tools_are_offered(serve: Any) -> None:
    server = serve(lambda r: Reply(body=completion({"content": "ok"})))
    hi = [{"role": "user", "content": "hi"}]
    run(generate(server.url, request(hi, tools=[ADD_TOOL]), parallelToolCalls=False))
    run(generate(server.url, request(hi, tools=[ADD_TOOL]), parallelToolCalls=True))
    run(generate(server.url, request(hi, tools=[ADD_TOOL])))
    run(generate(server.url, request(hi), parallelToolCalls=False))  # without tools the API rejects the field
    sent = [r.json.get("parallel_tool_calls", "absent") for r in server.requests]
    assert sent == [False, True, "absent", "absent"]


def test_parallel_tool_calls_option_must_be_a_boolean() -> None:
    with pytest.raises(ModelError) as info:
        create_model_adapter("openai", model="m", options={"parallelToolCalls": "no"}, api_key=KEY)
    assert info.value.code == "E_MODEL_CONFIG" and "parallelToolCalls" in info.value.message


def _instance_request(agent: str, key: str) -> Any:
    req = request([{"role": "user", "content": "hi"}])
    req.agent_name, req.instance_key = agent, key
    return req


def test_every_request_of_an_instance_carries_the_same_prompt_cache_key_and_instances_differ(serve: Any) -> None:
    server = serve(lambda r: Reply(body=completion({"content": "ok"})))
    for agent, key in [("helper", "chat-1"), ("helper", "chat-1"), ("helper", "chat-2"), ("other", "chat-1")]:
        run(generate(server.url, _instance_request(agent, key)))
    keys = [r.json["prompt_cache_key"] for r in server.requests]
    assert keys[0] == keys[1]  # stable: the cache routing follows the instance
    assert len(set(keys)) == 3  # another instance key or another agent is another cache bucket
    assert all("chat-" not in k and len(k) <= 64 for k in keys)  # the instance key itself does not leave


def test_prompt_cache_key_can_be_fixed_or_switched_off(serve: Any) -> None:
    server = serve(lambda r: Reply(body=completion({"content": "ok"})))
    run(generate(server.url, _instance_request("a", "1"), promptCacheKey="shared-docs-bot"))
    run(generate(server.url, _instance_request("a", "1"), promptCacheKey=False))
    assert server.requests[0].json["prompt_cache_key"] == "shared-docs-bot"
    assert "prompt_cache_key" not in server.requests[1].json


@pytest.mark.parametrize("value", [1, "", "x" * 65, None])
def test_prompt_cache_key_option_must_be_a_flag_or_a_short_string(value: Any) -> None:
    with pytest.raises(ModelError) as info:
        adapter("http://127.0.0.1:9", promptCacheKey=value)
    assert info.value.code == "E_MODEL_CONFIG" and "promptCacheKey" in info.value.message
