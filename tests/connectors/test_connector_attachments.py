"""Chat attachments: the slack connector downloads a message's files with the bot token and the agent
gets them as image and file parts, stored beside the conversation (not as base64 in its JSONL); a
file that cannot be downloaded is mentioned in the text instead. Events carrying a ``path`` are refused."""

from __future__ import annotations

import base64
import hashlib
import json
from pathlib import Path
from typing import Any

import pytest
from cn_testkit import FakeApi, connector_bundle, free_port, gdn_run, post, wait_for
from test_discord_connector import COMMAND as DISCORD_COMMAND
from test_discord_connector import PUBLIC_HEX as DISCORD_PUBLIC_HEX
from test_discord_connector import connection as discord_connection
from test_discord_connector import signed as discord_signed
from test_github_connector import SECRET as GITHUB_SECRET
from test_github_connector import connection as github_connection
from test_github_connector import signed as github_signed
from test_slack_connector import SECRET, callback, connection, signed
from test_telegram_connector import connection as telegram_connection

import kit
from goondan.connectors import check_event, request_input

PNG = b"\x89PNG\r\n\x1a\n" + bytes(range(256)) * 3
JPEG = b"\xff\xd8\xff\xe0" + bytes(range(256)) * 2


def test_slack_files_are_downloaded_with_the_bot_token_and_stored_by_reference(
    tmp_path: Path, fake_api: FakeApi
) -> None:
    fake_api.routes["/files/cat.png"] = lambda r: (200, PNG)
    fake_api.routes["/files/gone.pdf"] = lambda r: (404, {"error": "file_not_found"})
    port = free_port()
    url = f"http://127.0.0.1:{port}/slack/events"
    bundle = connector_bundle(tmp_path / "b", connection(port, fake_api.url))
    files = [
        {"name": "cat.png", "mimetype": "image/png", "url_private": f"{fake_api.url}/files/cat.png"},
        {"name": "gone.pdf", "mimetype": "application/pdf", "url_private": f"{fake_api.url}/files/gone.pdf"},
    ]
    mention = {"type": "app_mention", "channel": "C1", "user": "U1", "ts": "1.1", "text": "see", "files": files}
    with gdn_run(tmp_path, bundle, SLACK_SIGNING_SECRET=SECRET) as run:
        run.wait_ready()
        assert post(url, *signed(callback(mention, "EvF"))) == (200, {"ok": True})
        [reply] = wait_for(lambda: fake_api.matching("/chat.postMessage"))
        assert run.stop() == 130
    [download, _missing] = fake_api.matching("/files/")
    assert download["headers"]["Authorization"] == "Bearer xoxb-test"
    assert reply["body"]["text"] == f"echo: see\n[file:gone.pdf] {fake_api.url}/files/gone.pdf"
    [inst] = kit.instance_dirs(tmp_path / "state")
    base = (inst / "messages" / "base.jsonl").read_text(encoding="utf-8")
    user = next(json.loads(line)["data"] for line in base.splitlines() if '"role":"user"' in line.replace(" ", ""))
    digest = hashlib.sha256(PNG).hexdigest()
    assert user["content"][1] == {"type": "image", "mediaType": "image/png", "attachment": digest, "size": len(PNG)}
    assert base64.b64encode(PNG).decode()[:40] not in base
    assert (inst / "attachments" / digest).read_bytes() == PNG


def test_event_attachments_become_parts_after_the_text_and_a_path_is_refused() -> None:
    image = {"type": "image", "mediaType": "image/png", "data": base64.b64encode(PNG).decode()}
    event = {"name": "m", "message": "hi", "instanceKey": "k", "attachments": [image]}
    assert request_input(check_event(event)) == [{"type": "text", "text": "hi"}, image]
    assert request_input(check_event({**event, "attachments": []})) == "hi"
    with pytest.raises(ValueError, match="attachment 0"):
        check_event({**event, "attachments": [{"type": "image", "mediaType": "image/png", "path": "/etc/passwd"}]})
    with pytest.raises(ValueError, match="E_CONTENT_MEDIA_TYPE"):
        check_event({**event, "attachments": [{**image, "mediaType": "image/gif"}]})


def test_telegram_photos_and_documents_are_downloaded_through_get_file(tmp_path: Path, fake_api: FakeApi) -> None:
    token = "123:abc"
    update = {
        "update_id": 5,
        "message": {
            "message_id": 50,
            "chat": {"id": 9, "type": "private"},
            "from": {"id": 7, "is_bot": False},
            "caption": "what is it",
            "photo": [{"file_id": "small"}, {"file_id": "big"}],
            "document": {"file_id": "doc", "file_name": "notes.txt", "mime_type": "text/plain"},
        },
    }
    served = {"n": 0}

    def updates(record: dict[str, Any]) -> tuple[int, Any]:
        served["n"] += 1
        return 200, {"ok": True, "result": [update] if served["n"] == 1 else []}

    paths = {"big": "photos/big.jpg", "doc": "documents/notes.txt"}
    fake_api.routes[f"/bot{token}/getUpdates"] = updates
    fake_api.routes[f"/bot{token}/getFile"] = lambda r: (
        200,
        {"ok": True, "result": {"file_path": paths[r["path"].split("file_id=")[1]]}},
    )
    fake_api.routes[f"/file/bot{token}/photos/big.jpg"] = lambda r: (200, JPEG)
    fake_api.routes[f"/file/bot{token}/documents/notes.txt"] = lambda r: (200, b"remember")
    bundle = connector_bundle(tmp_path / "b", telegram_connection(fake_api.url))
    with gdn_run(tmp_path, bundle, TG_TOKEN=token) as run:
        run.wait_ready()
        [reply] = wait_for(lambda: fake_api.matching("/sendMessage"))
        assert run.stop() == 130
    assert reply["body"]["text"] == "echo: what is it"
    [inst] = kit.instance_dirs(tmp_path / "state")
    stored = sorted(p.name for p in (inst / "attachments").iterdir())
    assert stored == sorted(hashlib.sha256(b).hexdigest() for b in (JPEG, b"remember"))
    base = kit.read_jsonl(inst / "messages" / "base.jsonl")
    user = next(r["data"] for r in base if r["data"]["role"] == "user")
    assert [(p["type"], p.get("mediaType"), p.get("name")) for p in user["content"]] == [
        ("text", None, None),
        ("image", "image/jpeg", None),
        ("file", "text/plain", "notes.txt"),
    ]


def test_discord_attachment_options_are_downloaded_from_the_cdn(tmp_path: Path, fake_api: FakeApi) -> None:
    fake_api.routes["/attachments/1/cat.png"] = lambda r: (200, PNG)
    port = free_port()
    bundle = connector_bundle(tmp_path / "b", discord_connection(port, fake_api.url))
    command = {
        **DISCORD_COMMAND,
        "data": {
            "name": "look",
            "options": [{"name": "image", "type": 11, "value": "900"}],
            "resolved": {
                "attachments": {
                    "900": {
                        "id": "900",
                        "filename": "cat.png",
                        "content_type": "image/png",
                        "url": f"{fake_api.url}/attachments/1/cat.png",
                    }
                }
            },
        },
    }
    with gdn_run(tmp_path, bundle, DISCORD_PUBLIC_KEY=DISCORD_PUBLIC_HEX) as run:
        run.wait_ready()
        assert post(f"http://127.0.0.1:{port}/", *discord_signed(command)) == (200, {"type": 5})
        [patch] = wait_for(lambda: fake_api.matching("/messages/@original"))
        assert run.stop() == 130
    assert patch["body"]["content"] == "echo: /look image=cat.png"
    [inst] = kit.instance_dirs(tmp_path / "state")
    assert (inst / "attachments" / hashlib.sha256(PNG).hexdigest()).read_bytes() == PNG


def test_github_comment_files_on_upload_hosts_are_downloaded_and_other_links_are_not(
    tmp_path: Path, fake_api: FakeApi
) -> None:
    fake_api.routes["/user-attachments/assets/cat.png"] = lambda r: (200, PNG)
    port = free_port()
    uploads = f"{fake_api.url}/user-attachments/"
    conn = github_connection(port, fake_api.url).replace(
        "  secrets:\n", f'    attachmentPrefixes: {{ value: "{uploads}" }}\n  secrets:\n'
    )
    bundle = connector_bundle(tmp_path / "b", conn)
    body = f"see ![cat]({uploads}assets/cat.png) and [this]({fake_api.url}/internal/secret)"
    payload = {
        "action": "created",
        "repository": {"full_name": "acme/app"},
        "sender": {"login": "octo"},
        "issue": {"number": 3},
        "comment": {"body": body},
    }
    with gdn_run(tmp_path, bundle, GH_SECRET=GITHUB_SECRET) as run:
        run.wait_ready()
        status, _ = post(f"http://127.0.0.1:{port}/", *github_signed("issue_comment", payload, "d-1"))
        assert status == 202
        wait_for(lambda: fake_api.matching("/issues/3/comments"))
        assert run.stop() == 130
    assert fake_api.matching("/internal/") == []
    [download] = fake_api.matching("/user-attachments/")
    assert download["headers"]["Authorization"] == "Bearer ghp-test"
    [inst] = kit.instance_dirs(tmp_path / "state")
    assert (inst / "attachments" / hashlib.sha256(PNG).hexdigest()).read_bytes() == PNG
