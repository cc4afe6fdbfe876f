"""``systemctl stop`` (SIGTERM) while a connector is still posting a reply: the reply is posted whole.
gdn run now waits for running turns before it stops the connectors, but the slack connector's
reply tasks were dropped when the connector host exited (its pooled HTTP connections closed under
the request), so a Slack answer that took its usual few hundred milliseconds was cut. A real
``gdn run`` with the slack connector and a stand-in Slack API on 127.0.0.1 answering after 1 s."""

from __future__ import annotations

import json
import signal
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

from cn_testkit import connector_bundle, free_port, gdn_run, post
from test_slack_connector import SECRET, callback, connection, signed


def test_a_reply_being_posted_when_sigterm_arrives_is_posted_whole(tmp_path: Path) -> None:
    answered: list[dict[str, Any]] = []

    class Slack(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
            time.sleep(1.0)  # Slack takes a moment to post a message
            data = b'{"ok": true}'
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)
            self.wfile.flush()
            answered.append(body)  # only once the answer went out

        def log_message(self, *args: object) -> None:
            pass

    api = ThreadingHTTPServer(("127.0.0.1", 0), Slack)
    threading.Thread(target=api.serve_forever, daemon=True).start()
    port = free_port()
    bundle = connector_bundle(tmp_path / "b", connection(port, f"http://127.0.0.1:{api.server_port}"))
    try:
        with gdn_run(tmp_path, bundle, SLACK_SIGNING_SECRET=SECRET) as run:
            run.wait_ready()
            mention = {"type": "app_mention", "channel": "C1", "user": "U1", "ts": "100.1", "text": "<@B> status?"}
            url = f"http://127.0.0.1:{port}/slack/events"
            assert post(url, *signed(callback(mention, "Ev1"))) == (200, {"ok": True})
            time.sleep(0.4)  # the echo turn is done; chat.postMessage is on its way
            assert run.stop(signal.SIGTERM, timeout=30) == 0, run.stderr
        # was []: the connector host exited with the request in flight
        assert [(a["channel"], a["text"]) for a in answered] == [("C1", "echo: <@B> status?")], answered
    finally:
        api.shutdown()
