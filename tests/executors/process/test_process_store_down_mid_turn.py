"""A PostgreSQL server that stops while a turn runs in an agent process fails that turn with
E_STORE_UNAVAILABLE and its suggestion, and nothing more: the orchestrator's attempt to mark the
instance idle after the process ended (the store is down, so it cannot) printed a "fork server
channel: handling a exited message failed" traceback. Real gdn run, agent process and server."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

import kit
from kit.postgres import PostgresServer, own_server

MODEL = """\
import os, pathlib, time
def generate(request):
    pathlib.Path(os.environ["TURN_MARKER"]).write_text("started")
    time.sleep(3)
    return {"text": "ok"}
"""


@pytest.fixture
def stoppable() -> Iterator[PostgresServer]:
    """A server of this module's own: the test stops it."""
    with own_server() as server:
        yield server


def test_a_store_that_goes_down_mid_turn_fails_the_turn_without_a_traceback(
    tmp_path: Path, stoppable: PostgresServer
) -> None:
    url = stoppable.create_database()
    root = kit.write_bundle(
        tmp_path / "b",
        kit.package_doc("store-down"),
        kit.python_model_doc(),
        kit.agent_doc("a"),
        kit.swarm_doc(["a"]),
        files={"model.py": MODEL},
    )
    marker = tmp_path / "started"
    env = {k: v for k, v in os.environ.items() if not k.startswith("GOONDAN_")}
    argv = [sys.executable, "-m", "goondan", "run", str(root), "--store", url, "--input", "hi"]
    proc = subprocess.Popen(
        [*argv, "--state-root", str(tmp_path / "state")],
        env={**env, "TURN_MARKER": str(marker)},
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        deadline = time.monotonic() + 60
        while not marker.exists():
            assert proc.poll() is None and time.monotonic() < deadline
            time.sleep(0.05)
        stoppable.stop()
        _, stderr = proc.communicate(timeout=120)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    assert proc.returncode == 1, stderr
    assert "[E_STORE_UNAVAILABLE]" in stderr and "suggestion: Check that the PostgreSQL server is running" in stderr
    assert "Traceback" not in stderr and "handling a exited message failed" not in stderr, stderr
