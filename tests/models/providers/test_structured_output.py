"""Structured output reaches each network provider in its native request shape (``ModelRequest.
output_schema``): OpenAI ``response_format`` json_schema, Anthropic ``output_config.format``, Google
``responseMimeType`` + ``responseJsonSchema``; without a schema none of them is sent."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

import goondan
import kit
from goondan.models import ModelRequest, create_model_adapter

from .conftest import ADD_TOOL, run
from .fake_http import Reply, anthropic_message

SCHEMA = {
    "type": "object",
    "properties": {"city": {"type": "string"}, "days": {"type": "array", "items": {"type": "integer"}}},
    "required": ["city"],
}

OPENAI_REPLY = {
    "id": "chatcmpl-1",
    "object": "chat.completion",
    "created": 1,
    "model": "test-model",
    "choices": [
        {"index": 0, "message": {"role": "assistant", "content": '{"city": "Seoul"}'}, "finish_reason": "stop"}
    ],
    "usage": {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2},
}
GOOGLE_REPLY = {
    "candidates": [{"content": {"role": "model", "parts": [{"text": '{"city": "Seoul"}'}]}, "finishReason": "STOP"}],
    "usageMetadata": {"promptTokenCount": 1, "candidatesTokenCount": 1, "totalTokenCount": 2},
}


def structured_request(schema: dict[str, Any] | None) -> ModelRequest:
    return ModelRequest(
        messages=[{"role": "user", "content": "where?"}],
        tools=[ADD_TOOL],
        params={},
        model="test-model",
        agent_name="agent",
        instance_key="key",
        output_schema=schema,
    )


async def generate(provider: str, url: str, req: ModelRequest) -> Any:
    endpoint = url + "/v1" if provider == "openai" else url
    model = create_model_adapter(
        provider, model="test-model", options={"retryBaseDelaySeconds": 0.01}, api_key="k-SECRET", endpoint=endpoint
    )
    try:
        return await model.generate(req)
    finally:
        await model.aclose()


def test_openai_receives_response_format_json_schema(serve: Any) -> None:
    server = serve(lambda r: Reply(body=OPENAI_REPLY))
    out = run(generate("openai", server.url, structured_request(SCHEMA)))
    run(generate("openai", server.url, structured_request(None)))
    with_schema, without = (r.json for r in server.requests)
    assert with_schema["response_format"] == {
        "type": "json_schema",
        "json_schema": {"name": "output", "schema": SCHEMA},
    }
    assert with_schema["tools"][0]["function"]["name"] == "calc__add"  # tools stay available
    assert "response_format" not in without
    assert out.text == '{"city": "Seoul"}'


def test_anthropic_receives_output_config_format(serve: Any) -> None:
    server = serve(lambda r: Reply(body=anthropic_message([{"type": "text", "text": '{"city": "Seoul"}'}])))
    out = run(generate("anthropic", server.url, structured_request(SCHEMA)))
    run(generate("anthropic", server.url, structured_request(None)))
    with_schema, without = (r.json for r in server.requests)
    assert with_schema["output_config"] == {"format": {"type": "json_schema", "schema": SCHEMA}}
    assert with_schema["tools"][0]["name"] == "calc__add"
    assert "output_config" not in without
    assert out.text == '{"city": "Seoul"}'


def test_google_receives_response_mime_type_and_json_schema(serve: Any) -> None:
    server = serve(lambda r: Reply(body=GOOGLE_REPLY))
    out = run(generate("google", server.url, structured_request(SCHEMA)))
    run(generate("google", server.url, structured_request(None)))
    with_schema, without = (r.json for r in server.requests)
    config = with_schema["generationConfig"]
    assert config["responseMimeType"] == "application/json"
    assert config.get("responseJsonSchema", config.get("response_json_schema")) == SCHEMA
    assert "responseMimeType" not in without.get("generationConfig", {})
    assert "responseJsonSchema" not in without.get("generationConfig", {})
    assert out.text == '{"city": "Seoul"}'


@pytest.mark.parametrize("provider", ["openai", "anthropic", "google"])
def test_the_schema_arrives_unchanged_whatever_its_keywords(serve: Any, provider: str) -> None:
    schema = {
        "$defs": {"day": {"type": "integer", "minimum": 1}},
        "type": "array",
        "items": {"$ref": "#/$defs/day"},
        "maxItems": 3,
    }
    bodies = {
        "openai": OPENAI_REPLY,
        "anthropic": anthropic_message([{"type": "text", "text": "[1]"}]),
        "google": GOOGLE_REPLY,
    }
    server = serve(lambda r: Reply(body=bodies[provider]))
    run(generate(provider, server.url, structured_request(schema)))
    body = server.requests[0].json
    sent = {
        "openai": lambda: body["response_format"]["json_schema"]["schema"],
        "anthropic": lambda: body["output_config"]["format"]["schema"],
        "google": lambda: body["generationConfig"]["responseJsonSchema"],
    }[provider]()
    assert sent == schema


def test_a_turn_against_a_fake_openai_server_sends_the_schema_and_retries_an_invalid_answer(
    serve: Any, tmp_path: Path, state_root: Path
) -> None:
    def handler(req: Any) -> Reply:
        last = req.json["messages"][-1]
        fixed = last["role"] == "user" and "did not" in str(last["content"])
        content = '{"city": "Seoul", "days": [1, 2]}' if fixed else '{"city": 7}'
        return Reply(
            body={
                **OPENAI_REPLY,
                "choices": [{**OPENAI_REPLY["choices"][0], "message": {"role": "assistant", "content": content}}],
            }
        )

    server = serve(handler)
    agent = kit.agent_doc("a", model="main")
    agent["spec"]["output"] = {"schema": SCHEMA}
    model = kit.model_doc("main", "openai", "test-model", endpoint=server.url + "/v1", apiKey={"value": "sk-x"})
    root = kit.write_bundle(tmp_path / "b", kit.package_doc("structured"), model, agent, kit.swarm_doc(["a"]))

    async def main() -> Any:
        async with goondan.Runtime(root, state_root=state_root, executor="inline") as rt:
            return await rt.request("where?")

    result = run(main())
    assert result.output == {"city": "Seoul", "days": [1, 2]}
    first, second = (r.json for r in server.requests)
    assert (
        first["response_format"]["json_schema"]["schema"]
        == SCHEMA
        == second["response_format"]["json_schema"]["schema"]
    )
    assert "output.city: expected string but got integer" in str(second["messages"][-1]["content"])
