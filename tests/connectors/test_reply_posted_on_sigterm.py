"""``systemctl stop`` (SIGTERM) while a connector is still posting a reply: the reply is posted whole.
gdn run now waits for running turns before it stops the connectors, but the slack connector's
reply tasks were dropped when the connector host exited (its pooled HTTP connections closed under
the request), so a Slack answer that took its usual few hundred milliseconds was cut. A real
``gdn run`` with the slack connector and a stand-in Slack API on 127.0.0.1 answering after 1 s."""

from __future__ import annotations

import contextlib
import json
import signal
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

from cn_testkit import connector_bundle, free_port, gdn_run, post
from test_discord_connector import COMMAND, PUBLIC_HEX
from test_discord_connector import connection as discord_connection
from test_discord_connector import signed as discord_signed
from test_slack_connector import SECRET, callback, connection, signed


class _SlowApi(BaseHTTPRequestHandler):
    """A platform API that takes 1 s to answer (as Slack or Discord may); what it answered, with the
    path, is in ``answered``."""

    answered: list[dict[str, Any]]

    def _answer(self) -> None:
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        time.sleep(1.0)
        data = b'{"ok": true}'
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)
        self.wfile.flush()
        self.answered.append({"path": self.path, **body})  # only once the answer went out

    do_POST = do_PATCH = _answer

    def log_message(self, *args: object) -> None:
        pass


@contextlib.contextmanager
def _slow_api() -> Iterator[tuple[str, list[dict[str, Any]]]]:
    handler = type("Api", (_SlowApi,), {"answered": []})
    api = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=api.serve_forever, daemon=True).start()
    try:
        yield f"http://127.0.0.1:{api.server_port}", handler.answered
    finally:
        api.shutdown()


def _sigterm_once_the_reply_is_on_its_way(tmp_path: Path, bundle: Path, url: str, request: Any, **env: str) -> None:
    """POST the signed ``request``, let the echo turn finish (its reply is then being posted) and
    stop gdn run as systemctl does: exit 0."""
    with gdn_run(tmp_path, bundle, **env) as run:
        run.wait_ready()
        status, _ = post(url, *request)
        assert status == 200
        time.sleep(0.4)  # the echo turn is done; the reply is on its way
        assert run.stop(signal.SIGTERM, timeout=30) == 0, run.stderr


def test_a_reply_being_posted_when_sigterm_arrives_is_posted_whole(tmp_path: Path) -> None:
    port = free_port()
    with _slow_api() as (api, answered):
        bundle = connector_bundle(tmp_path / "b", connection(port, api))
        mention = {"type": "app_mention", "channel": "C1", "user": "U1", "ts": "100.1", "text": "<@B> status?"}
        request = signed(callback(mention, "Ev1"))
        url = f"http://127.0.0.1:{port}/slack/events"
        _sigterm_once_the_reply_is_on_its_way(tmp_path, bundle, url, request, SLACK_SIGNING_SECRET=SECRET)
        # was []: the connector host exited with chat.postMessage in flight
        assert [(a["channel"], a["text"]) for a in answered] == [("C1", "echo: <@B> status?")], answered


def test_a_discord_follow_up_being_posted_when_sigterm_arrives_is_posted_whole(tmp_path: Path) -> None:
    """The discord connector's follow-up (PATCH of the deferred interaction answer) had the same gap."""
    port = free_port()
    with _slow_api() as (api, answered):
        bundle = connector_bundle(tmp_path / "b", discord_connection(port, api))
        url = f"http://127.0.0.1:{port}/"
        _sigterm_once_the_reply_is_on_its_way(
            tmp_path, bundle, url, discord_signed(COMMAND), DISCORD_PUBLIC_KEY=PUBLIC_HEX
        )
        # was []: the connector host exited with the follow-up in flight
        assert [(a["path"], a["content"]) for a in answered] == [
            ("/webhooks/app1/tok1/messages/@original", "echo: /ask q=why")
        ], answered
