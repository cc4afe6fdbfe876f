"""A request whose turn fails shows its error once on stderr, with a way to the traceback: the
engine's own ``turn ... failed`` error record used to print the same message again above the
command's ``[CODE] message`` (with the process executor and inline, in one-shot and piped sessions).
``-v`` keeps every record and shows the user's traceback."""

from __future__ import annotations

import http.server
import json
import threading
from pathlib import Path

import pytest
from cli_testkit import ECHO_BUNDLE, bundle_with_audit, gdn

from kit import write_bundle

RAISING = (
    "def register(api, config):\n"
    "    async def step(ctx):\n"
    "        raise ValueError('the audit log is full')\n"
    "    api.pipeline.register('step', step)\n"
)


def bundle(tmp_path: Path) -> Path:
    return bundle_with_audit(tmp_path, RAISING)


@pytest.mark.parametrize("executor", ["process", "inline"])
@pytest.mark.parametrize("how", ["input", "session"])
def test_a_failed_turn_prints_its_error_once_with_the_way_to_its_traceback(
    tmp_path: Path, executor: str, how: str
) -> None:
    path = str(bundle(tmp_path))
    if how == "input":
        proc = gdn(tmp_path, "run", path, "--input", "hi", "--executor", executor)
    else:
        proc = gdn(tmp_path, "run", path, "--executor", executor, stdin="hi\n")
    assert proc.returncode == 1, proc.stderr
    assert proc.stderr.count("the audit log is full") == 1, proc.stderr
    named = "step middleware register.<locals>.step of extension 'audit'"  # which one raised
    assert f"[E_TURN_FAILED] {named} raised ValueError: the audit log is full" in proc.stderr, proc.stderr
    assert "suggestion: `gdn run -v` prints its traceback" in proc.stderr, proc.stderr


def test_verbose_shows_the_users_traceback(tmp_path: Path) -> None:
    proc = gdn(tmp_path, "run", str(bundle(tmp_path)), "--input", "hi", "-v", "--executor", "process")
    assert proc.returncode == 1, proc.stderr
    assert 'audit.py", line 3, in step' in proc.stderr and "raise ValueError" in proc.stderr, proc.stderr


def test_no_matching_scripted_rule_names_the_users_message_not_the_agent_prompt(tmp_path: Path) -> None:
    text = ECHO_BUNDLE.replace(
        "    rules:\n      - reply:\n", "    rules:\n      - when: {contains: hello}\n        reply:\n", 1
    ).replace("    modelRef: Model/echo\n", "    modelRef: Model/echo\n  prompt: {system: You are terse.}\n", 1)
    proc = gdn(tmp_path, "run", str(write_bundle(tmp_path / "b", text)), "--input", "what now")
    assert proc.returncode == 1, proc.stderr
    assert "no scripted rule matches the last message (user: 'what now')" in proc.stderr, proc.stderr


def test_a_provider_error_names_the_base_url_the_sdk_used(tmp_path: Path) -> None:
    """With OPENAI_BASE_URL set (a proxy), a 401 named https://api.openai.com/v1 as the endpoint."""

    class Refuse(http.server.BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            self.rfile.read(int(self.headers.get("content-length", 0)))
            body = json.dumps({"error": {"message": "bad key", "type": "invalid_request_error"}}).encode()
            self.send_response(401)
            self.send_header("content-type", "application/json")
            self.send_header("content-length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args: object) -> None:
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Refuse)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        model = "  provider: openai\n  model: gpt-4o-mini\n  apiKey: {value: sk-test}\n"
        text = ECHO_BUNDLE.replace("  provider: scripted\n  model: echo\n  options:\n", model + "  options:\n", 1)
        text = text.replace('    rules:\n      - reply:\n          text: "echo: {{last}}"\n', "    {}\n", 1)
        base = f"http://127.0.0.1:{server.server_address[1]}/v1"
        proc = gdn(tmp_path, "run", str(write_bundle(tmp_path / "b", text)), "--input", "hi", OPENAI_BASE_URL=base)
    finally:
        server.shutdown()
    assert proc.returncode == 1 and "[E_MODEL_AUTH]" in proc.stderr, proc.stderr
    assert f"openai request to {base} (OPENAI_BASE_URL) failed with HTTP 401" in proc.stderr, proc.stderr
