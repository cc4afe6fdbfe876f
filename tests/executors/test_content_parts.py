"""Images and files in requests, in every executor (``executor`` fixture): the model sees the parts
with their bytes, the conversation on disk keeps them by reference only."""

from __future__ import annotations

import asyncio
import base64
import hashlib
import json
from pathlib import Path
from typing import Any

import pytest

import goondan
import kit
from goondan.errors import GoondanError

PNG = b"\x89PNG\r\n\x1a\n" + bytes(range(256)) * 8

# the model answers with what it saw in the last user message: kind, media type, name and a hash of
# the bytes (the agent may run in another process, so the answer is the only way back)
MODEL = """\
import base64, hashlib, json


def generate(request):
    seen = []
    last = request.messages[-1]
    for part in last["content"] if isinstance(last["content"], list) else []:
        entry = {"type": part["type"]}
        if part["type"] == "text":
            entry["text"] = part["text"]
        else:
            entry["mediaType"] = part["mediaType"]
            entry["name"] = part.get("name")
            entry["sha256"] = hashlib.sha256(base64.b64decode(part["data"])).hexdigest() if "data" in part else None
            entry["url"] = part.get("url")
        seen.append(entry)
    if isinstance(last["content"], str):  # a plain question: the hashes of every image in the history
        seen = [
            hashlib.sha256(base64.b64decode(p["data"])).hexdigest()
            for m in request.messages if isinstance(m["content"], list)
            for p in m["content"] if p["type"] == "image"
        ]
    return {"text": json.dumps(seen)}
"""


def bundle(root: Path) -> Path:
    docs = [kit.package_doc(), kit.python_model_doc(), kit.agent_doc("a"), kit.swarm_doc(["a"])]
    return kit.write_bundle(root, *docs, files={"model.py": MODEL})


def ask(root: Path, state_root: Path, executor: str, parts: Any) -> Any:
    async def main() -> Any:
        async with goondan.Runtime(root, state_root=state_root, executor=executor) as rt:
            return await rt.request(parts)

    return asyncio.run(main())


def test_an_image_part_reaches_the_model_with_its_bytes_and_is_stored_by_reference(
    tmp_path: Path, state_root: Path, executor: str
) -> None:
    root = bundle(tmp_path / "b")
    image = tmp_path / "cat.png"
    image.write_bytes(PNG)
    parts = [
        {"type": "text", "text": "what is this?"},
        {"type": "image", "path": str(image)},
        {"type": "file", "mediaType": "application/pdf", "name": "r.pdf", "data": b"%PDF-1.4"},
        {"type": "image", "mediaType": "image/jpeg", "url": "https://example.com/a.jpg"},
    ]
    result = ask(root, state_root, executor, parts)
    assert result.finish_reason == "text_response", result.error
    digest = hashlib.sha256(PNG).hexdigest()
    assert json.loads(result.text) == [
        {"type": "text", "text": "what is this?"},
        {"type": "image", "mediaType": "image/png", "name": None, "sha256": digest, "url": None},
        {
            "type": "file",
            "mediaType": "application/pdf",
            "name": "r.pdf",
            "sha256": hashlib.sha256(b"%PDF-1.4").hexdigest(),
            "url": None,
        },
        {"type": "image", "mediaType": "image/jpeg", "name": None, "sha256": None, "url": "https://example.com/a.jpg"},
    ]
    [inst] = kit.instance_dirs(state_root)
    base = (inst / "messages" / "base.jsonl").read_text(encoding="utf-8")
    assert base64.b64encode(PNG).decode()[:40] not in base and "JVBERi0xLjQ" not in base
    user = next(r["data"] for r in kit.read_jsonl(inst / "messages" / "base.jsonl") if r["data"]["role"] == "user")
    assert user["content"][1] == {"type": "image", "mediaType": "image/png", "attachment": digest, "size": len(PNG)}
    assert (inst / "attachments" / digest).read_bytes() == PNG


def test_stored_images_reach_the_model_again_after_a_restart(tmp_path: Path, state_root: Path, executor: str) -> None:
    root = bundle(tmp_path / "b")
    ask(
        root,
        state_root,
        executor,
        [{"type": "image", "mediaType": "image/png", "data": base64.b64encode(PNG).decode()}],
    )
    # a new runtime loads the history from disk and resolves the stored reference back to the bytes
    again = ask(root, state_root, executor, "and now?")
    assert json.loads(again.text) == [hashlib.sha256(PNG).hexdigest()]


def test_a_part_over_the_size_limit_is_refused_before_the_turn(
    tmp_path: Path, state_root: Path, executor: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    root = bundle(tmp_path / "b")
    monkeypatch.setenv("GOONDAN_MAX_ATTACHMENT_BYTES", "1000")
    with pytest.raises(GoondanError) as info:
        ask(
            root,
            state_root,
            executor,
            [{"type": "image", "mediaType": "image/png", "data": base64.b64encode(PNG).decode()}],
        )
    assert info.value.code == "E_CONTENT_TOO_LARGE"
    assert "1000" in info.value.message and info.value.suggestion


def test_the_scripted_provider_matches_the_text_of_a_message_with_an_image(
    tmp_path: Path, state_root: Path, executor: str
) -> None:
    rules = {"rules": [{"when": {"contains": "look"}, "reply": {"text": "seen: {{last}}"}}]}
    docs = [
        kit.package_doc(),
        kit.model_doc("m", "scripted", "s", options=rules),
        kit.agent_doc("a"),
        kit.swarm_doc(["a"]),
    ]
    root = kit.write_bundle(tmp_path / "b", *docs)
    image = {"type": "image", "mediaType": "image/png", "data": base64.b64encode(PNG).decode()}
    result = ask(root, state_root, executor, [{"type": "text", "text": "look"}, image])
    assert (result.finish_reason, result.text) == ("text_response", "seen: look")


ADDS_IMAGE = """\
from goondan.messages import user_message


def register(api):
    async def turn(ctx):
        if ctx.conversation_state.to_llm_messages()[-1]["content"] == "with the chart":
            part = {"type": "image", "mediaType": "image/png", "path": CHART}
            ctx.emit_message_event({"type": "append", "message": user_message([part])})
        return await ctx.next()

    api.pipeline.register("turn", turn)
"""


def test_an_image_an_extension_adds_by_path_reaches_the_model_with_its_bytes(
    tmp_path: Path, state_root: Path, executor: str
) -> None:
    chart = tmp_path / "chart.png"
    chart.write_bytes(PNG)
    docs = [
        kit.package_doc(),
        kit.python_model_doc(),
        kit.extension_doc("adds", "./adds.py"),
        kit.agent_doc("a", extensions=["adds"]),
        kit.swarm_doc(["a"]),
    ]
    files = {"model.py": MODEL, "adds.py": f"CHART = {str(chart)!r}\n" + ADDS_IMAGE}
    root = kit.write_bundle(tmp_path / "b", *docs, files=files)
    result = ask(root, state_root, executor, "with the chart")
    assert result.finish_reason == "text_response", result.error
    assert json.loads(result.text)[0]["sha256"] == hashlib.sha256(PNG).hexdigest()
