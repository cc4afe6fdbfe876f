"""One ``gdn run`` service per workspace on a PostgreSQL store, also across machines (state roots).
Two services on one database both started before: both answered webhooks with 202, and each event the
second received for an instance the first held failed with E_INSTANCE_LOCKED in its log, lost for
the sender. Now the second refuses to start (E_RUN_ACTIVE naming the first) and starts once the first
is gone. Real ``gdn run`` processes serving a webhook Connection, a real PostgreSQL server."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import kit

MODEL = 'def generate(request):\n    return {"text": "ok"}\n'


def _connection(port: int) -> dict[str, object]:
    return {
        "apiVersion": "goondan.ai/v1",
        "kind": "Connection",
        "metadata": {"name": "http"},
        "spec": {
            "connectorRef": {"kind": "Connector", "name": "webhook", "package": "@goondan/base"},
            "config": {"port": {"value": str(port)}},
            "secrets": {"signingSecret": {"value": "s3cret"}},
        },
    }


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _serve(tmp_path: Path, name: str, url: str) -> tuple[subprocess.Popen[str], int]:
    """``gdn run`` of the same bundle (its own copy, port and state root: another machine)."""
    port = _free_port()
    root = kit.write_bundle(
        tmp_path / name,
        kit.package_doc("served-once"),
        kit.python_model_doc(),
        kit.agent_doc("a"),
        kit.swarm_doc(["a"]),
        _connection(port),
        files={"model.py": MODEL},
    )
    env = {k: v for k, v in os.environ.items() if not k.startswith("GOONDAN_")}
    argv = [sys.executable, "-m", "goondan", "run", str(root), "--store", url]
    argv += ["--state-root", str(tmp_path / f"state-{name}")]
    proc = subprocess.Popen(argv, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    return proc, port


def _wait_listening(proc: subprocess.Popen[str], port: int) -> None:
    deadline = time.monotonic() + 60
    while socket.socket().connect_ex(("127.0.0.1", port)) != 0:
        assert proc.poll() is None and time.monotonic() < deadline, proc.communicate()[1]
        time.sleep(0.1)


def test_a_second_service_of_a_workspace_on_one_database_refuses_to_start_and_starts_after_the_first(
    tmp_path: Path, postgres_url: str
) -> None:
    first, first_port = _serve(tmp_path, "machine-a", postgres_url)
    procs = [first]
    try:
        _wait_listening(first, first_port)
        second, _ = _serve(tmp_path, "machine-b", postgres_url)
        procs.append(second)
        _, err = second.communicate(timeout=60)
        # was: started, served its webhook port, and lost the events of instances the first held
        assert second.returncode == 1, err
        assert err.startswith("[E_RUN_ACTIVE] workspace "), err
        assert f"by pid {first.pid} on " in err and "Traceback" not in err
        first.send_signal(signal.SIGTERM)
        assert first.wait(60) == 0
        third, third_port = _serve(tmp_path, "machine-b", postgres_url)
        procs.append(third)
        _wait_listening(third, third_port)  # the claim went away with the first process
    finally:
        for proc in procs:
            if proc.poll() is None:
                proc.send_signal(signal.SIGTERM)
                try:
                    proc.wait(30)
                except subprocess.TimeoutExpired:
                    proc.kill()
                    proc.wait()
