"""``systemctl stop`` sends SIGTERM: ``gdn run --executor ray`` must stop as gracefully as with the
other executors (exit 0, CONTRACT §9) and shut down the local Ray it started. ``ray.init`` put Ray's
native failure-signal handler in front of Python's: SIGTERM printed a C stack dump, aborted the run
(exit -6) and left the Ray processes running. A real ``gdn run`` serving a webhook Connection."""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import kit

MODEL = 'def generate(request):\n    return {"text": "ok"}\n'
CONNECTION = {
    "apiVersion": "goondan.ai/v1",
    "kind": "Connection",
    "metadata": {"name": "http"},
    "spec": {
        "connectorRef": {"kind": "Connector", "name": "webhook", "package": "@goondan/base"},
        "config": {"port": {"valueFrom": {"env": "HOOK_PORT"}}},
        "secrets": {"signingSecret": {"value": "s3cret"}},
    },
}


def _processes_under(directory: str) -> list[str]:
    found = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                cmdline = Path(f"/proc/{entry}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
            except OSError:
                continue
            if directory in cmdline:
                found.append(f"{entry}: {cmdline[:120]}")
    return found


def test_sigterm_stops_gdn_run_on_ray_with_exit_0_and_no_ray_left_running(tmp_path: Path) -> None:
    root = kit.write_bundle(
        tmp_path / "b",
        kit.package_doc("ray-sigterm"),
        kit.python_model_doc(),
        kit.agent_doc("a"),
        kit.swarm_doc(["a"]),
        CONNECTION,
        files={"model.py": MODEL},
    )
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    ray_tmp = tempfile.mkdtemp(prefix="gdnray", dir="/tmp")  # short: Ray's socket paths live under it
    env = {k: v for k, v in os.environ.items() if not k.startswith(("RAY_", "GOONDAN_"))}
    env.update(RAY_USAGE_STATS_ENABLED="0", RAY_TMPDIR=ray_tmp, HOOK_PORT=str(port))
    argv = [sys.executable, "-m", "goondan", "run", str(root), "--executor", "ray"]
    argv += ["--state-root", str(tmp_path / "state")]
    proc = subprocess.Popen(argv, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 120
        while socket.socket().connect_ex(("127.0.0.1", port)) != 0:  # connectors start after the executor
            assert proc.poll() is None and time.monotonic() < deadline, proc.stderr.read() if proc.stderr else ""
            time.sleep(0.2)
        assert _processes_under(ray_tmp), "the run should have started a local Ray"
        proc.send_signal(signal.SIGTERM)
        _, err = proc.communicate(timeout=60)
        assert "SIGTERM received" not in err, err  # Ray's native handler no longer answers it
        assert proc.returncode == 0, err  # was -6 (SIGABRT)
        gone = time.monotonic() + 20
        while _processes_under(ray_tmp) and time.monotonic() < gone:
            time.sleep(0.2)
        assert _processes_under(ray_tmp) == []  # the local Ray was shut down, not left behind
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        for line in _processes_under(ray_tmp):  # never leave a Ray behind on the test machine
            os.kill(int(line.split(":", 1)[0]), signal.SIGKILL)
        shutil.rmtree(ray_tmp, ignore_errors=True)
