"""`gdn instance list` on a PostgreSQL store shows `interrupted` for an instance whose turn nobody
runs any more (its `gdn run` was killed mid-turn), as it does for the filesystem store; it said
`processing` until the next turn, from every machine (and `--json` says what the table says). An
instance whose runtime is alive stays `processing`. Real `gdn run` processes, a real PostgreSQL server."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import kit

MODEL = """\
import os, pathlib, time
def generate(request):
    marker = os.environ.get("TURN_MARKER")
    if marker:
        pathlib.Path(marker).write_text("started")
        time.sleep(120)
    return {"text": "ok"}
"""


def _status(tmp_path: Path, root: Path, url: str) -> str:
    """The STATUS column of `gdn instance list` run on another machine (its own state root)."""
    proc = subprocess.run(
        [sys.executable, "-m", "goondan", "instance", "list", str(root), "--store", url],
        capture_output=True,
        text=True,
        env={**_env(), "GOONDAN_STATE_ROOT": str(tmp_path / "other-machine")},
        timeout=60,
    )
    assert proc.returncode == 0, proc.stderr
    (row,) = [line.split() for line in proc.stdout.splitlines()[1:]]
    return row[-4]


def _env() -> dict[str, str]:
    return {k: v for k, v in os.environ.items() if not k.startswith("GOONDAN_")}


def test_a_turn_whose_gdn_run_was_killed_is_listed_interrupted(tmp_path: Path, postgres_url: str) -> None:
    root = kit.write_bundle(
        tmp_path / "b",
        kit.package_doc("pg-interrupted"),
        kit.python_model_doc(),
        kit.agent_doc("a"),
        kit.swarm_doc(["a"]),
        files={"model.py": MODEL},
    )
    marker = tmp_path / "started"
    argv = [sys.executable, "-m", "goondan", "run", str(root), "--store", postgres_url, "--input", "hello"]
    argv += ["--state-root", str(tmp_path / "state")]
    proc = subprocess.Popen(
        argv,
        env={**_env(), "TURN_MARKER": str(marker)},
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
    try:
        deadline = time.monotonic() + 60
        while not marker.exists():
            assert proc.poll() is None and time.monotonic() < deadline
            time.sleep(0.1)
        assert _status(tmp_path, root, postgres_url) == "processing"  # its runtime is alive
        os.killpg(proc.pid, signal.SIGKILL)  # gdn run and its agent process, mid-turn
        proc.wait()
        deadline = time.monotonic() + 20
        while (status := _status(tmp_path, root, postgres_url)) != "interrupted":
            assert status == "processing" and time.monotonic() < deadline, status  # was processing for good
            time.sleep(0.5)
        listed = subprocess.run(
            [sys.executable, "-m", "goondan", "instance", "list", str(root), "--store", postgres_url, "--json"],
            capture_output=True,
            text=True,
            env={**_env(), "GOONDAN_STATE_ROOT": str(tmp_path / "other-machine")},
            timeout=60,
        )
        assert json.loads(listed.stdout)["status"] == "interrupted", listed.stdout  # --json says what the table does
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
    again = subprocess.run(
        argv,
        env=_env(),
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert again.returncode == 0, again.stderr
    assert _status(tmp_path, root, postgres_url) == "idle"
