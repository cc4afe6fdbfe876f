"""The ``google`` provider: the official google-genai SDK end to end against a loopback Gemini API."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from goondan.errors import ModelError
from goondan.models import ProviderError, create_model_adapter

from .conftest import ADD_TOOL, CONVERSATION, request, run
from .fake_http import Reply, Req, sse_event

KEY = "AIza-SECRET-google-key"

TOOL_RESPONSE = {
    "candidates": [
        {
            "content": {
                "role": "model",
                "parts": [
                    {"text": "Let me add."},
                    {
                        "functionCall": {"id": "fc_1", "name": "calc__add", "args": {"a": 2, "b": 3}},
                        "thoughtSignature": "c2lnbmF0dXJl",
                    },
                ],
            },
            "finishReason": "STOP",
            "index": 0,
        }
    ],
    "usageMetadata": {
        "promptTokenCount": 12,
        "candidatesTokenCount": 6,
        "thoughtsTokenCount": 4,
        "totalTokenCount": 22,
    },
    "modelVersion": "gemini-test",
    "responseId": "resp_1",
}

TOOL_STREAM = [
    sse_event(
        {
            "candidates": [{"content": {"role": "model", "parts": [{"text": "Let "}]}, "index": 0}],
            "modelVersion": "gemini-test",
        }
    ),
    sse_event({"candidates": [{"content": {"role": "model", "parts": [{"text": "me add."}]}, "index": 0}]}),
    sse_event(
        {
            "candidates": [
                {
                    "content": {"role": "model", "parts": [TOOL_RESPONSE["candidates"][0]["content"]["parts"][1]]},
                    "finishReason": "STOP",
                    "index": 0,
                }
            ],
            "usageMetadata": TOOL_RESPONSE["usageMetadata"],
        }
    ),
]


async def generate(url: str, req: Any, **options: Any) -> Any:
    model = create_model_adapter(
        "google", model="gemini-test", options={"retryBaseDelaySeconds": 0.01, **options}, api_key=KEY, endpoint=url
    )
    try:
        return await model.generate(req)
    finally:
        await model.aclose()


def test_request_maps_system_instruction_contents_function_parts_and_config(serve: Any) -> None:
    server = serve(lambda r: Reply(body=TOOL_RESPONSE))
    messages = copy.deepcopy(CONVERSATION)
    messages[2]["content"][1]["providerMetadata"] = {"google": {"thoughtSignature": "c2lnbmF0dXJl"}}
    params = {"temperature": 0.1, "topP": 0.5, "maxTokens": 9, "extra": {"top_k": 3}}
    run(generate(server.url, request(messages, tools=[ADD_TOOL], params=params, model="gemini-test")))
    [sent] = server.requests
    assert sent.method == "POST" and sent.path.endswith("/models/gemini-test:generateContent")
    assert sent.headers["x-goog-api-key"] == KEY
    body = sent.json
    assert body["systemInstruction"] == {
        "parts": [{"text": "You are terse."}, {"text": "Summary so far: one addition failed."}]
    }
    assert body["contents"] == [
        {"role": "user", "parts": [{"text": "add 2 and 3, then 4 and x"}]},
        {
            "role": "model",
            "parts": [
                {"text": "Adding."},
                {
                    "functionCall": {"id": "call_1", "name": "calc__add", "args": {"a": 2, "b": 3}},
                    "thoughtSignature": "c2lnbmF0dXJl",
                },
                {"functionCall": {"id": "call_2", "name": "calc__add", "args": {"a": 4, "b": "x"}}},
            ],
        },
        {
            "role": "user",
            "parts": [
                {"functionResponse": {"id": "call_1", "name": "calc__add", "response": {"output": 5}}},
                {
                    "functionResponse": {
                        "id": "call_2",
                        "name": "calc__add",
                        "response": {"error": {"code": "E_TOOL_INVALID_ARGS", "message": "b must be a number"}},
                    }
                },
                {"text": "so?"},
            ],
        },
    ]
    [decl] = body["tools"][0]["functionDeclarations"]
    assert (decl["name"], decl["description"]) == ("calc__add", "Add two numbers.")
    # proto JSON accepts either spelling; what matters is that the JSON Schema arrives untouched
    assert decl.get("parametersJsonSchema", decl.get("parameters_json_schema")) == ADD_TOOL["parameters"]
    assert body["generationConfig"] == {"temperature": 0.1, "topP": 0.5, "maxOutputTokens": 9, "topK": 3}


def test_response_maps_text_function_calls_signature_usage_and_finish(serve: Any) -> None:
    server = serve(lambda r: Reply(body=TOOL_RESPONSE))
    out = run(generate(server.url, request([{"role": "user", "content": "add"}], tools=[ADD_TOOL])))
    assert out.text == "Let me add."
    [call] = out.tool_calls
    assert (call.id, call.name, call.args) == ("fc_1", "calc__add", {"a": 2, "b": 3})
    assert call.metadata == {"google": {"thoughtSignature": "c2lnbmF0dXJl"}}
    assert out.usage == {"promptTokens": 12, "completionTokens": 10, "totalTokens": 22}
    # Gemini says STOP for function calls; the normalised reason says what the step must do
    assert (out.finish_reason, out.raw_finish_reason) == ("tool-calls", "STOP")


@pytest.mark.parametrize(
    ("raw", "normal"),
    [
        ("STOP", "stop"),
        ("MAX_TOKENS", "length"),
        ("SAFETY", "content-filter"),
        ("MALFORMED_FUNCTION_CALL", "error"),
        ("OTHER", "other"),
    ],
)
def test_finish_reasons_are_normalised(serve: Any, raw: str, normal: str) -> None:
    body = {"candidates": [{"content": {"role": "model", "parts": [{"text": "x"}]}, "finishReason": raw, "index": 0}]}
    server = serve(lambda r: Reply(body=body))
    out = run(generate(server.url, request([{"role": "user", "content": "hi"}])))
    assert (out.finish_reason, out.raw_finish_reason) == (normal, raw)


def test_a_blocked_prompt_is_reported_as_content_filter(serve: Any) -> None:
    server = serve(
        lambda r: Reply(body={"promptFeedback": {"blockReason": "SAFETY"}, "usageMetadata": {"promptTokenCount": 3}})
    )
    out = run(generate(server.url, request([{"role": "user", "content": "hi"}])))
    assert (out.text, out.tool_calls, out.finish_reason, out.raw_finish_reason) == (
        None,
        [],
        "content-filter",
        "SAFETY",
    )


def test_streaming_delivers_deltas_and_returns_what_the_plain_call_returns(serve: Any) -> None:
    def handler(req: Req) -> Reply:
        return Reply(sse=TOOL_STREAM) if "streamGenerateContent" in req.path else Reply(body=TOOL_RESPONSE)

    server = serve(handler)
    deltas: list[str] = []
    msgs = [{"role": "user", "content": "add"}]
    streamed = run(generate(server.url, request(msgs, tools=[ADD_TOOL], on_text_delta=deltas.append)))
    plain = run(generate(server.url, request(msgs, tools=[ADD_TOOL])))
    assert deltas == ["Let ", "me add."]
    assert streamed == plain
    assert server.requests[0].query.get("alt") == ["sse"]


def test_429_with_retry_after_then_500_then_success(serve: Any) -> None:
    err = {"error": {"code": 429, "message": "Resource exhausted", "status": "RESOURCE_EXHAUSTED"}}
    replies = [
        Reply(429, err, {"retry-after": "1"}),
        Reply(500, {"error": {"code": 500, "message": "Internal", "status": "INTERNAL"}}),
        Reply(body=TOOL_RESPONSE),
    ]
    server = serve(lambda r: replies.pop(0))
    out = run(generate(server.url, request([{"role": "user", "content": "a"}])))
    assert out.text == "Let me add." and len(server.requests) == 3
    assert server.requests[1].at - server.requests[0].at >= 0.95


def test_exhausted_retries_are_a_structured_error(serve: Any) -> None:
    body = {"error": {"code": 503, "message": "The model is overloaded", "status": "UNAVAILABLE"}}
    server = serve(lambda r: Reply(503, body, {"x-request-id": "g-req-1"}))
    with pytest.raises(ProviderError) as info:
        run(generate(server.url, request([{"role": "user", "content": "a"}]), maxRetries=1))
    err = info.value
    assert (err.provider, err.status, err.request_id, err.attempts) == ("google", 503, "g-req-1", 2)
    assert "UNAVAILABLE: The model is overloaded" in err.message and KEY not in str(err)


def test_a_silent_server_times_out(serve: Any) -> None:
    server = serve(lambda r: Reply(body=TOOL_RESPONSE, stall_before=3))
    with pytest.raises(ProviderError) as info:
        run(generate(server.url, request([{"role": "user", "content": "a"}]), timeoutSeconds=0.3, maxRetries=0))
    assert info.value.code == "E_MODEL_TIMEOUT"


@pytest.mark.parametrize("reply", [Reply(body="<html>oops</html>"), Reply(body={"candidates": "nope"})])
def test_malformed_responses_are_a_clear_model_error(serve: Any, reply: Reply) -> None:
    server = serve(lambda r: reply)
    with pytest.raises(ModelError) as info:
        run(generate(server.url, request([{"role": "user", "content": "a"}]), maxRetries=0))
    assert info.value.code == "E_MODEL_BAD_RESPONSE"


def test_parallel_tool_calls_true_is_accepted_and_false_is_refused_with_the_alternative(serve: Any) -> None:
    """Gemini has no switch for parallel function calls: ``true`` (what it does anyway) keeps one Model
    document portable across providers; ``false`` would be a promise nothing keeps."""
    server = serve(lambda r: Reply(body=TOOL_RESPONSE))
    run(generate(server.url, request([{"role": "user", "content": "hi"}], tools=[ADD_TOOL]), parallelToolCalls=True))
    assert len(server.requests) == 1
    with pytest.raises(ModelError) as info:
        create_model_adapter("google", model="m", options={"parallelToolCalls": False}, api_key=KEY)
    assert info.value.code == "E_MODEL_CONFIG"
    assert "maxParallelToolCalls" in (info.value.suggestion or "")
