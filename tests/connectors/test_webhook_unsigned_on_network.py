"""A webhook Connection that listens beyond loopback (host 0.0.0.0) with no signing secret warns at
start that anyone who can reach the port drives the agents; it started silently. Loopback, a secret,
or an explicit requireSignature: "false" (a proxy authenticates) stay quiet. Real `gdn run`."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

import kit

WARNING = "accepts unsigned requests from anyone who can reach it"


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _start_log(tmp_path: Path, host: str, extra_config: dict[str, object], secret: str | None) -> str:
    port = _free_port()
    spec: dict[str, object] = {
        "connectorRef": {"kind": "Connector", "name": "webhook", "package": "@goondan/base"},
        "config": {"host": {"value": host}, "port": {"value": str(port)}, **extra_config},
    }
    if secret is not None:
        spec["secrets"] = {"signingSecret": {"value": secret}}
    connection = {"apiVersion": "goondan.ai/v1", "kind": "Connection", "metadata": {"name": "http"}, "spec": spec}
    root = kit.write_bundle(
        tmp_path / "b",
        kit.python_model_doc(),
        kit.agent_doc("a"),
        kit.swarm_doc(["a"]),
        connection,
        files={"model.py": 'def generate(request):\n    return {"text": "ok"}\n'},
    )
    env = {k: v for k, v in os.environ.items() if not k.startswith("GOONDAN_") and k != "WEBHOOK_SECRET"}
    argv = [sys.executable, "-m", "goondan", "run", str(root), "--state-root", str(tmp_path / "state")]
    proc = subprocess.Popen(argv, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 60
        while socket.socket().connect_ex(("127.0.0.1", port)) != 0:
            assert proc.poll() is None and time.monotonic() < deadline, proc.communicate()[1]
            time.sleep(0.1)
        time.sleep(1.0)  # the warning follows the bind
    finally:
        proc.terminate()
        _, err = proc.communicate(timeout=60)
    return err


def test_an_unsigned_webhook_on_every_interface_warns_at_start(tmp_path: Path) -> None:
    err = _start_log(tmp_path, "0.0.0.0", {}, None)
    assert "webhook on 0.0.0.0:" in err and WARNING in err, err
    assert "signingSecret: {valueFrom: {env: WEBHOOK_SECRET}}" in err


@pytest.mark.parametrize(
    ("host", "extra", "secret"),
    [
        ("127.0.0.1", {}, None),
        ("0.0.0.0", {}, "s3cret"),
        ("0.0.0.0", {"requireSignature": {"value": "false"}}, None),
    ],
    ids=["loopback", "secret", "explicitly-unsigned"],
)
def test_a_webhook_that_is_local_signed_or_deliberately_unsigned_does_not_warn(
    tmp_path: Path, host: str, extra: dict[str, object], secret: str | None
) -> None:
    err = _start_log(tmp_path, host, extra, secret)
    assert WARNING not in err, err
