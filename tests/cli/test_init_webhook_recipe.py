"""The default template ends with a commented-out webhook Connection and how to call it. A user who
uncomments it and follows the comment's recipe (HMAC-SHA256 of the body with WEBHOOK_SECRET, hex,
in ``X-Signature-256: sha256=...``) gets the assistant's answer; unsigned requests get 401."""

from __future__ import annotations

import hashlib
import hmac
import json
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path

from cli_testkit import env_for, gdn


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def uncomment_connection(text: str, port: int) -> str:
    head, _, tail = text.partition("# ---\n")
    lines = ["---"]
    for line in tail.splitlines():
        if line.startswith(("# then", "#   body", "#   curl", "# (")):
            continue
        lines.append(line[2:])
    return head + "\n".join(lines).replace('"8080"', f'"{port}"') + "\n"


def post(port: int, body: bytes, headers: dict[str, str]) -> tuple[int, dict[str, object]]:
    request = urllib.request.Request(f"http://127.0.0.1:{port}/", data=body, headers=headers, method="POST")
    try:
        with urllib.request.urlopen(request, timeout=10) as response:
            return response.status, json.loads(response.read())
    except urllib.error.HTTPError as exc:
        return exc.code, json.loads(exc.read())


def test_the_templates_webhook_recipe_answers_a_signed_request(tmp_path: Path) -> None:
    assert gdn(tmp_path, "init", "bot").returncode == 0
    manifest = tmp_path / "bot" / "goondan.yaml"
    text = manifest.read_text()
    assert "X-Signature-256: sha256=$sig" in text and "openssl dgst -sha256 -hmac" in text, text
    port = free_port()
    manifest.write_text(uncomment_connection(text, port))
    env = env_for(tmp_path, WEBHOOK_SECRET="s3cret")
    run = subprocess.Popen(
        [sys.executable, "-m", "goondan", "run", "bot", "--state-root", str(tmp_path / "state")],
        cwd=tmp_path,
        env=env,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    try:
        body = b'{"text": "hi"}'
        signature = hmac.new(b"s3cret", body, hashlib.sha256).hexdigest()
        deadline = time.monotonic() + 30
        while True:
            try:
                status, answer = post(port, body, {"X-Signature-256": f"sha256={signature}"})
                break
            except (ConnectionError, urllib.error.URLError):
                assert run.poll() is None and time.monotonic() < deadline, run.stderr.read() if run.stderr else ""
                time.sleep(0.2)
        assert (status, answer) == (200, {"ok": True, "text": "Hello! I am bot's assistant. Ask me anything."})
        unsigned, _ = post(port, b'{"text": "hello again"}', {})
        assert unsigned == 401
    finally:
        run.send_signal(signal.SIGTERM)
        _, stderr = run.communicate(timeout=30)
    assert run.returncode == 0
    assert f"logs: gdn logs bot --state-root {tmp_path / 'state'} --follow" in stderr.decode(), stderr  # this bundle's
