"""The telegram connector against a loopback fake of the Bot API: offsets, 429 retry, replies, skips."""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

from cn_testkit import FakeApi, connector_bundle, gdn_run, probes, wait_for

TOKEN = "123:abc"


def connection(api: str, connector: str = "telegram") -> str:
    return (
        "apiVersion: goondan.ai/v1\n"
        "kind: Connection\n"
        "metadata:\n"
        "  name: tg\n"
        "spec:\n"
        f'  connectorRef: {{ kind: Connector, name: {connector}, package: "@goondan/base" }}\n'
        "  config:\n"
        f'    apiBase: {{ value: "{api}" }}\n'
        '    pollTimeout: { value: "1" }\n'
        '    retryDelay: { value: "0.05" }\n'
        "  secrets:\n"
        "    botToken: { valueFrom: { env: TG_TOKEN } }\n"
    )


def message(update_id: int, chat: int, text: str, *, bot: bool = False) -> dict[str, Any]:
    return {
        "update_id": update_id,
        "message": {
            "message_id": update_id * 10,
            "chat": {"id": chat, "type": "private"},
            "from": {"id": 7, "is_bot": bot, "username": "ann"},
            "text": text,
        },
    }


class Updates:
    """Serves getUpdates: first a 429, then one batch, then empty results; records offsets."""

    def __init__(self, batch: list[dict[str, Any]]) -> None:
        self.batch = batch
        self.calls = 0
        self.lock = threading.Lock()

    def __call__(self, record: dict[str, Any]) -> tuple[int, Any]:
        with self.lock:
            self.calls += 1
            call = self.calls
        if call == 1:
            return 429, {"ok": False, "error_code": 429, "parameters": {"retry_after": 0.1}}
        if call == 2:
            return 500, {"ok": False}
        offset = None
        if "offset=" in record["path"]:
            offset = int(record["path"].split("offset=")[1].split("&")[0])
        return 200, {"ok": True, "result": [u for u in self.batch if offset is None or u["update_id"] >= offset]}


def test_long_polling_delivers_each_update_once_and_replies_with_send_message(
    tmp_path: Path, fake_api: FakeApi
) -> None:
    batch = [
        message(41, 1001, "hello bot"),
        message(42, 1001, "beep", bot=True),
        message(43, 2002, "   "),
        message(44, 2002, "second chat"),
    ]
    fake_api.routes[f"/bot{TOKEN}/getUpdates"] = Updates(batch)
    bundle = connector_bundle(tmp_path / "b", connection(fake_api.url))
    with gdn_run(tmp_path, bundle, TG_TOKEN=TOKEN) as run:
        run.wait_ready()
        sent = wait_for(lambda: len(fake_api.matching("/sendMessage")) >= 2 and fake_api.matching("/sendMessage"))
        polls = [r["path"] for r in fake_api.matching("/getUpdates")]
        wait_for(lambda: any("offset=45" in p for p in [r["path"] for r in fake_api.matching("/getUpdates")]))
        assert run.stop() == 130
    replies = sorted((r["body"]["chat_id"], r["body"]["text"], r["body"]["reply_to_message_id"]) for r in sent)
    assert replies == [(1001, "echo: hello bot", 410), (2002, "echo: second chat", 440)]
    # the first polls (429, 500) carried no offset; the first successful batch is not fetched again
    assert "offset=" not in polls[0]
    records = probes(run.probe_out)
    assert sorted(r["instanceKey"] for r in records) == ["telegram:1001", "telegram:2002"]
    props = next(r["metadata"]["properties"] for r in records if r["instanceKey"] == "telegram:1001")
    assert props == {"chat_id": "1001", "chat_type": "private", "message_id": "410", "from_id": "7", "username": "ann"}
    assert len(fake_api.matching("/sendMessage")) == 2


def test_a_rejected_token_stops_the_connector_with_an_error(tmp_path: Path, fake_api: FakeApi) -> None:
    fake_api.routes[f"/bot{TOKEN}/getUpdates"] = lambda record: (401, {"ok": False, "description": "Unauthorized"})
    bundle = connector_bundle(tmp_path / "b", connection(fake_api.url))
    with gdn_run(tmp_path, bundle, TG_TOKEN=TOKEN) as run:
        run.wait_ready()
        code = run.proc.wait(20)
    assert code == 1  # the only connector failed, so gdn run ends with an error
    assert "rejected the bot token" in run.stderr
    assert "[E_CONNECTOR_FAILED]" in run.stderr and "tg" in run.stderr


def test_upstream_name_telegram_polling_runs_the_same_connector(tmp_path: Path, fake_api: FakeApi) -> None:
    fake_api.routes[f"/bot{TOKEN}/getUpdates"] = lambda record: (401, {"ok": False, "description": "Unauthorized"})
    bundle = connector_bundle(tmp_path / "b", connection(fake_api.url, "telegram-polling"))
    with gdn_run(tmp_path, bundle, TG_TOKEN=TOKEN) as run:
        run.wait_ready()
        code = run.proc.wait(20)
    assert code == 1 and "rejected the bot token" in run.stderr  # the telegram connector's own check
    assert fake_api.matching("/getUpdates")
