"""Image and file parts reach each provider's API in its native shape (checked field by field on a
loopback server): Anthropic ``image`` / ``document`` blocks, OpenAI ``image_url`` / ``file`` content
parts, Gemini ``inlineData`` / ``fileData`` parts; media a provider cannot take is a clear error."""

from __future__ import annotations

import asyncio
import base64
from pathlib import Path
from typing import Any

import pytest

import goondan
import kit
from goondan.errors import ModelError
from goondan.models import create_model_adapter
from goondan.models._local import parse_local_options
from goondan.models._local_format import to_chat_messages

from .conftest import request, run
from .fake_http import Reply, anthropic_message

PNG = b"\x89PNG\r\n\x1a\n" + bytes(range(200))
PNG64 = base64.b64encode(PNG).decode()
PDF64 = base64.b64encode(b"%PDF-1.4 tiny").decode()
# the google SDK writes bytes in the URL-safe base64 alphabet and the fields of Blob / FileData in
# their proto names (mime_type, file_uri); the Gemini API's JSON mapping accepts both spellings
PNG64_URLSAFE = base64.urlsafe_b64encode(PNG).decode()
KEY = "sk-media-SECRET"

USER = {
    "role": "user",
    "content": [
        {"type": "text", "text": "describe these"},
        {"type": "image", "mediaType": "image/png", "data": PNG64},
        {"type": "image", "mediaType": "image/jpeg", "url": "https://example.com/cat.jpg"},
        {"type": "file", "mediaType": "application/pdf", "name": "report.pdf", "data": PDF64},
    ],
}

OPENAI_REPLY = {
    "id": "c",
    "object": "chat.completion",
    "created": 1,
    "model": "m",
    "choices": [{"index": 0, "message": {"role": "assistant", "content": "ok"}, "finish_reason": "stop"}],
    "usage": {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2},
}
GOOGLE_REPLY = {
    "candidates": [{"content": {"role": "model", "parts": [{"text": "ok"}]}, "finishReason": "STOP", "index": 0}],
    "usageMetadata": {"promptTokenCount": 1, "candidatesTokenCount": 1, "totalTokenCount": 2},
}


async def generate(provider: str, url: str, messages: list[dict[str, Any]]) -> Any:
    options: dict[str, Any] = {"retryBaseDelaySeconds": 0.01}
    if provider == "anthropic":
        options["cacheBreakpoints"] = []  # these tests compare blocks; the marks are test_anthropic's
    model = create_model_adapter(provider, model="test-model", options=options, api_key=KEY, endpoint=url)
    try:
        return await model.generate(request(messages))
    finally:
        await model.aclose()


def test_anthropic_gets_image_blocks_and_a_pdf_document_block(serve: Any) -> None:
    server = serve(lambda r: Reply(body=anthropic_message([{"type": "text", "text": "ok"}])))
    run(generate("anthropic", server.url, [USER]))
    [sent] = server.requests
    assert sent.json["messages"] == [
        {
            "role": "user",
            "content": [
                {"type": "text", "text": "describe these"},
                {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": PNG64}},
                {"type": "image", "source": {"type": "url", "url": "https://example.com/cat.jpg"}},
                {
                    "type": "document",
                    "source": {"type": "base64", "media_type": "application/pdf", "data": PDF64},
                    "title": "report.pdf",
                },
            ],
        }
    ]


def test_anthropic_reads_a_text_file_as_a_plain_text_document(serve: Any) -> None:
    server = serve(lambda r: Reply(body=anthropic_message([{"type": "text", "text": "ok"}])))
    note = {"type": "file", "mediaType": "text/markdown", "name": "n.md", "data": base64.b64encode(b"# hi").decode()}
    run(generate("anthropic", server.url, [{"role": "user", "content": [note]}]))
    block = server.requests[0].json["messages"][0]["content"][0]
    assert block == {
        "type": "document",
        "source": {"type": "text", "media_type": "text/plain", "data": "# hi"},
        "title": "n.md",
    }


def test_openai_gets_image_url_parts_and_an_inline_file_part(serve: Any) -> None:
    server = serve(lambda r: Reply(body=OPENAI_REPLY))
    run(generate("openai", server.url + "/v1", [USER]))
    [sent] = server.requests
    assert sent.json["messages"] == [
        {
            "role": "user",
            "content": [
                {"type": "text", "text": "describe these"},
                {"type": "image_url", "image_url": {"url": f"data:image/png;base64,{PNG64}"}},
                {"type": "image_url", "image_url": {"url": "https://example.com/cat.jpg"}},
                {
                    "type": "file",
                    "file": {"filename": "report.pdf", "file_data": f"data:application/pdf;base64,{PDF64}"},
                },
            ],
        }
    ]


def test_google_gets_inline_data_and_file_data_parts(serve: Any) -> None:
    server = serve(lambda r: Reply(body=GOOGLE_REPLY))
    run(generate("google", server.url, [USER]))
    [sent] = server.requests
    assert sent.json["contents"] == [
        {
            "role": "user",
            "parts": [
                {"text": "describe these"},
                {"inlineData": {"mime_type": "image/png", "data": PNG64_URLSAFE}},
                {"fileData": {"mime_type": "image/jpeg", "file_uri": "https://example.com/cat.jpg"}},
                {"inlineData": {"mime_type": "application/pdf", "data": PDF64}},
            ],
        }
    ]


@pytest.mark.parametrize(
    ("provider", "part"),
    [
        ("anthropic", {"type": "file", "mediaType": "application/zip", "name": "a.zip", "data": PDF64}),
        ("openai", {"type": "file", "mediaType": "application/pdf", "name": "a.pdf", "url": "https://e.com/a.pdf"}),
    ],
)
def test_media_a_provider_cannot_take_is_a_clear_error_before_any_request(
    serve: Any, provider: str, part: dict[str, Any]
) -> None:
    server = serve(lambda r: Reply(body=OPENAI_REPLY))
    url = server.url + ("/v1" if provider == "openai" else "")
    with pytest.raises(ModelError) as info:
        run(generate(provider, url, [{"role": "user", "content": [part]}]))
    assert info.value.code == "E_MODEL_UNSUPPORTED_CONTENT" and info.value.suggestion
    assert server.requests == []


def test_an_image_sent_through_the_runtime_reaches_the_openai_server_and_stays_out_of_the_jsonl(
    serve: Any, tmp_path: Path, state_root: Path
) -> None:
    server = serve(lambda r: Reply(body=OPENAI_REPLY))
    spec = {"provider": "openai", "model": "served", "endpoint": server.url + "/v1", "options": {"stream": False}}
    bundle = kit.write_bundle(
        tmp_path / "b",
        kit.package_doc(),
        {"apiVersion": kit.API, "kind": "Model", "metadata": {"name": "main"}, "spec": spec},
        kit.agent_doc("a", model="main"),
        kit.swarm_doc(["a"]),
    )
    image = tmp_path / "cat.png"
    image.write_bytes(PNG)

    async def main() -> Any:
        async with goondan.Runtime(bundle, state_root=state_root, executor="inline") as rt:
            return await rt.request([{"type": "text", "text": "what?"}, {"type": "image", "path": str(image)}])

    result = asyncio.run(main())
    assert result.finish_reason == "text_response", result.error
    user = next(m for m in server.requests[0].json["messages"] if m["role"] == "user")
    assert user["content"][1] == {"type": "image_url", "image_url": {"url": f"data:image/png;base64,{PNG64}"}}
    [inst] = kit.instance_dirs(state_root)
    assert PNG64[:32] not in (inst / "messages" / "base.jsonl").read_text(encoding="utf-8")


def test_the_text_only_local_model_refuses_media_with_a_clear_error_by_default() -> None:
    with pytest.raises(ModelError) as info:
        to_chat_messages([USER], "sys")
    assert info.value.code == "E_MODEL_UNSUPPORTED_CONTENT"
    assert "reads text only" in info.value.message and "mediaParts: placeholder" in (info.value.suggestion or "")


def test_the_local_model_reads_a_placeholder_per_media_part_when_configured() -> None:
    options = parse_local_options({"mediaParts": "placeholder"}, None, locate=False)
    assert options.media_parts == "placeholder"
    [_system, user] = to_chat_messages([USER], "sys", media=options.media_parts)
    lines = user["content"].split("\n")
    assert lines[0] == "describe these"
    assert lines[1].startswith("[image (image/png") and "not shown" in lines[1]
    assert "https://example.com/cat.jpg" in lines[2]
    assert lines[3].startswith("[file report.pdf (application/pdf")


def test_an_unknown_local_media_mode_is_a_config_error() -> None:
    with pytest.raises(ModelError) as info:
        parse_local_options({"mediaParts": "ocr"}, None, locate=False)
    assert info.value.code == "E_MODEL_CONFIG" and "placeholder" in info.value.message


def test_openai_gets_a_text_file_as_a_text_part_headed_with_its_name(serve: Any) -> None:
    server = serve(lambda r: Reply(body=OPENAI_REPLY))
    note = {"type": "file", "mediaType": "text/csv", "name": "t.csv", "data": base64.b64encode(b"a,b\n1,2").decode()}
    run(generate("openai", server.url + "/v1", [{"role": "user", "content": [note]}]))
    assert server.requests[0].json["messages"] == [
        {"role": "user", "content": [{"type": "text", "text": "[file t.csv]\na,b\n1,2"}]}
    ]
