"""A webhook request waiting for its reply (replyMode sync) when `gdn run` is killed (SIGKILL, the OOM
killer) is answered with the documented failed-turn JSON, `{"ok": false, "error": {"code":
"E_CONNECTOR_STOPPED", ...}}`, as soon as the connector host sees its supervisor gone. It was left
to the HTTP server's shutdown grace and then cancelled: a plain-text "Internal Server Error" and a
CancelledError traceback in the log. Real `gdn run`, a real webhook port, a real HTTP client."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from pathlib import Path

import kit

MODEL = """\
import os, pathlib, time
def generate(request):
    pathlib.Path(os.environ["TURN_MARKER"]).write_text("started")
    time.sleep(60)
    return {"text": "too late"}
"""


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def test_a_sync_request_in_flight_when_gdn_run_is_killed_gets_e_connector_stopped_json(tmp_path: Path) -> None:
    port = _free_port()
    connection = {
        "apiVersion": "goondan.ai/v1",
        "kind": "Connection",
        "metadata": {"name": "http"},
        "spec": {
            "connectorRef": {"kind": "Connector", "name": "webhook", "package": "@goondan/base"},
            "config": {"port": {"value": str(port)}, "replyMode": {"value": "sync"}},
        },
    }
    root = kit.write_bundle(
        tmp_path / "b",
        kit.python_model_doc(),
        kit.agent_doc("a"),
        kit.swarm_doc(["a"]),
        connection,
        files={"model.py": MODEL},
    )
    marker = tmp_path / "turn-started"
    env = {k: v for k, v in os.environ.items() if not k.startswith("GOONDAN_")}
    env["TURN_MARKER"] = str(marker)
    argv = [sys.executable, "-m", "goondan", "run", str(root), "--state-root", str(tmp_path / "state")]
    log = (tmp_path / "run.log").open("w")
    proc = subprocess.Popen(argv, env=env, stdout=log, stderr=log, start_new_session=True)
    answer: dict[str, object] = {}

    def post() -> None:
        request = urllib.request.Request(
            f"http://127.0.0.1:{port}/",
            data=json.dumps({"text": "hello", "instanceKey": "k"}).encode(),
            headers={"Content-Type": "application/json"},
        )
        try:
            with urllib.request.urlopen(request, timeout=30) as response:
                answer.update(status=response.status, body=response.read())
        except urllib.error.HTTPError as exc:
            answer.update(status=exc.code, body=exc.read(), content_type=exc.headers.get("Content-Type"))
        except OSError as exc:
            answer.update(error=repr(exc))

    try:
        deadline = time.monotonic() + 60
        while socket.socket().connect_ex(("127.0.0.1", port)) != 0:
            assert proc.poll() is None and time.monotonic() < deadline, (tmp_path / "run.log").read_text()
            time.sleep(0.1)
        client = threading.Thread(target=post)
        client.start()
        while not marker.exists():
            assert time.monotonic() < deadline, (tmp_path / "run.log").read_text()
            time.sleep(0.05)
        killed_at = time.monotonic()
        proc.kill()
        proc.wait()
        client.join(30)
        waited = time.monotonic() - killed_at
        assert answer.get("status") == 500, answer
        assert answer.get("content_type") == "application/json", answer
        body = json.loads(answer["body"])  # type: ignore[arg-type]
        assert body["ok"] is False and body["error"]["code"] == "E_CONNECTOR_STOPPED", body
        assert waited < 3.0, waited  # not the server's 3 s shutdown grace
        time.sleep(0.5)
        assert "CancelledError" not in (tmp_path / "run.log").read_text()
    finally:
        if proc.poll() is None:
            proc.kill()
        # the group: the connector host and agent processes, should the test fail before they exit
        for _ in range(50):
            try:
                os.killpg(proc.pid, 0)
            except ProcessLookupError:
                break
            time.sleep(0.1)
        else:
            os.killpg(proc.pid, signal.SIGKILL)
        log.close()
