"""SIGTERM to gdn run's whole process group, as `systemctl stop` (KillMode=control-group), `timeout`
and `kill -TERM -- -PGID` send it: the connector processes get it too. The connector host ignored
only SIGINT (Ctrl+C reaches the group as well), so SIGTERM killed it at once: a webhook request whose
turn was still running lost its answer (the connection closed under it), and the supervisor logged
'connector process exited unexpectedly (code -15); restarting' during the stop. The supervisor
decides when a connector stops, for SIGTERM as for SIGINT. The same held for agent processes (and
their fork server): gdn run decides when they stop. A real gdn run on 127.0.0.1."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import pytest
from cn_testkit import free_port, gdn_env, post

BUNDLE = """\
apiVersion: goondan.ai/v1
kind: Package
metadata:
  name: group-stop
spec:
  version: 0.1.0
---
apiVersion: goondan.ai/v1
kind: Model
metadata:
  name: slow
spec:
  provider: python
  model: slow
  options:
    entry: ./model.py
---
apiVersion: goondan.ai/v1
kind: Agent
metadata:
  name: front
spec:
  modelConfig:
    modelRef: Model/slow
---
apiVersion: goondan.ai/v1
kind: Swarm
metadata:
  name: default
spec:
  entryAgent: Agent/front
  agents: [Agent/front]
---
apiVersion: goondan.ai/v1
kind: Connection
metadata:
  name: hook
spec:
  connectorRef: { kind: Connector, name: webhook, package: "@goondan/base" }
  config:
    port: { value: "PORT" }
"""

MODEL = """\
import time


def generate(request):
    time.sleep(1.5)  # the turn is still running when the stop comes
    return {"text": "answered after the stop"}
"""


@pytest.mark.parametrize("isolation", ["inline", "process"])
def test_sigterm_to_the_process_group_lets_a_running_webhook_turn_answer(tmp_path: Path, isolation: str) -> None:
    # inline: the turn runs in gdn run's process; process: in an agent process of the same group,
    # which (with its fork server) died of the same SIGTERM mid-turn (E_AGENT_PROCESS_EXITED, 500)
    port = free_port()
    bundle = tmp_path / "b"
    bundle.mkdir()
    (bundle / "goondan.yaml").write_text(BUNDLE.replace("PORT", str(port)))
    (bundle / "model.py").write_text(MODEL)
    proc = subprocess.Popen(
        [sys.executable, "-m", "goondan", "run", str(bundle), "--state-root", str(tmp_path / "state")],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=gdn_env(tmp_path, GOONDAN_ISOLATION=isolation),
        start_new_session=True,  # its own process group, which the signal goes to
    )
    try:
        deadline = time.monotonic() + 30
        while proc.poll() is None and time.monotonic() < deadline:
            try:
                if post(f"http://127.0.0.1:{port}/other", b"{}", timeout=2)[0] == 404:
                    break
            except OSError:
                time.sleep(0.2)
        answer: dict[str, Any] = {}

        def ask() -> None:
            try:
                answer["reply"] = post(f"http://127.0.0.1:{port}/", b'{"text": "hi"}', timeout=30)
            except OSError as exc:
                answer["reply"] = repr(exc)

        asking = threading.Thread(target=ask)
        asking.start()
        time.sleep(0.5)  # the turn runs
        os.killpg(proc.pid, signal.SIGTERM)
        asking.join(40)
        _, stderr = proc.communicate(timeout=40)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
    assert answer["reply"] == (200, {"ok": True, "text": "answered after the stop"}), (answer, stderr)
    assert proc.returncode == 0, stderr
    assert "exited unexpectedly" not in stderr, stderr
