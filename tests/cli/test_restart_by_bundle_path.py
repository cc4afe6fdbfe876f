"""`gdn restart PATH` and `gdn instance restart KEY PATH` find the running service of the bundle in
PATH also before its first conversation. For a bundle with a Package, the run was matched only
through the workspace's workspace.json, which the first conversation writes, so a service restarted
before any request got E_NO_ACTIVE_RUN; and `gdn restart` took no PATH at all (usage error, exit 2).
Real `gdn run` serving a webhook, real `gdn restart`."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

from cli_testkit import gdn

import kit


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def test_a_packaged_service_is_restarted_by_its_bundle_path_before_its_first_request(tmp_path: Path) -> None:
    port = _free_port()
    connection = {
        "apiVersion": "goondan.ai/v1",
        "kind": "Connection",
        "metadata": {"name": "http"},
        "spec": {
            "connectorRef": {"kind": "Connector", "name": "webhook", "package": "@goondan/base"},
            "config": {"port": {"value": str(port)}},
        },
    }
    root = kit.write_bundle(
        tmp_path / "svc",
        kit.package_doc("svc-bundle"),
        kit.python_model_doc(),
        kit.agent_doc("a"),
        kit.swarm_doc(["a"]),
        connection,
        files={"model.py": 'def generate(request):\n    return {"text": "ok"}\n'},
    )
    state = ["--state-root", str(tmp_path / "state")]
    env = {k: v for k, v in os.environ.items() if not k.startswith("GOONDAN_")}
    proc = subprocess.Popen(
        [sys.executable, "-m", "goondan", "run", str(root), *state],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        deadline = time.monotonic() + 60
        while socket.socket().connect_ex(("127.0.0.1", port)) != 0:
            assert proc.poll() is None and time.monotonic() < deadline, proc.communicate()[1]
            time.sleep(0.1)
        assert not list((tmp_path / "state").glob("workspaces/*/workspace.json"))  # no conversation yet

        by_key = gdn(tmp_path, "instance", "restart", "default", str(root), *state)
        assert by_key.returncode == 0, by_key.stderr  # was E_NO_ACTIVE_RUN
        assert 'swarm "default" (instanceKey=default) restarted' in by_key.stdout

        by_path = gdn(tmp_path, "restart", str(root), "--agent", "a", *state)
        assert by_path.returncode == 0, by_path.stderr  # was: unrecognized arguments (exit 2)
        assert 'agent "a" restarted' in by_path.stdout

        other = kit.write_bundle(tmp_path / "other", kit.package_doc("other"), kit.agent_doc("a"), kit.swarm_doc(["a"]))
        elsewhere = gdn(tmp_path, "restart", str(other), *state)
        assert elsewhere.returncode == 1 and elsewhere.stderr.startswith("[E_NO_ACTIVE_RUN]"), elsewhere.stderr
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.wait(60)
