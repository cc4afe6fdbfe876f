"""An instance directory whose creation was interrupted (a `gdn run` killed after it took the lease,
before metadata.json or any message was written) is listed by `gdn instance list` as `incomplete`, so
that the user can see and delete it; one a live process is creating right now is not listed."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
from pathlib import Path

from cli_testkit import ECHO_BUNDLE, gdn

from kit import write_bundle


def _dead_pid() -> int:
    proc = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True)
    return int(proc.stdout)


def _half_created(instances: Path, name: str, pid: int) -> Path:
    """What an interrupted creation leaves: the lease files and empty conversation files."""
    directory = instances / name
    (directory / "messages").mkdir(parents=True)
    (directory / "lease.lock").write_bytes(b"")
    holder = {"pid": pid, "host": socket.gethostname(), "since": "2026-11-24T20:00:00Z", "token": 1, "owner": "x"}
    (directory / "lease.json").write_text(json.dumps(holder))
    for file in ("base.jsonl", "events.jsonl"):
        (directory / "messages" / file).write_bytes(b"")
    return directory


def test_an_interrupted_creation_is_listed_as_incomplete_and_can_be_deleted(tmp_path: Path) -> None:
    bundle = write_bundle(tmp_path / "b", ECHO_BUNDLE)
    state = ["--state-root", str(tmp_path / "state")]
    assert gdn(tmp_path, "run", str(bundle), "--input", "hi", *state).returncode == 0
    (instances,) = (tmp_path / "state").glob("workspaces/*/instances")
    half = _half_created(instances, "talker__half", _dead_pid())
    _half_created(instances, "talker__busy", os.getpid())  # being created by a live process

    listed = gdn(tmp_path, "instance", "list", str(bundle), *state)
    assert listed.returncode == 0, listed.stderr
    rows = [line.split() for line in listed.stdout.splitlines()[1:]]
    assert any(row[-6:-3] == ["talker", "half", "incomplete"] for row in rows), listed.stdout
    assert not any("busy" in row for row in rows)
    assert "talker/half is incomplete" in listed.stderr and "gdn instance delete half --agent talker" in listed.stderr

    as_json = gdn(tmp_path, "instance", "list", str(bundle), "--json", *state)
    records = {r["instanceKey"]: r for r in map(json.loads, as_json.stdout.splitlines())}
    assert records["half"]["status"] == "incomplete" and "creation was interrupted" in records["half"]["problem"]

    deleted = gdn(tmp_path, "instance", "delete", "half", str(bundle), "-y", *state)
    assert deleted.returncode == 0, deleted.stderr
    assert not half.exists()


def test_the_next_turn_of_an_incomplete_instance_completes_it(tmp_path: Path) -> None:
    bundle = write_bundle(tmp_path / "b", ECHO_BUNDLE)
    state = ["--state-root", str(tmp_path / "state")]
    assert gdn(tmp_path, "run", str(bundle), "--input", "hi", *state).returncode == 0
    (instances,) = (tmp_path / "state").glob("workspaces/*/instances")
    half = _half_created(instances, "talker__half", _dead_pid())

    again = gdn(tmp_path, "run", str(bundle), "--input", "again", "--instance-key", "half", *state)
    assert again.returncode == 0, again.stderr
    assert "echo: again" in again.stdout
    assert json.loads((half / "metadata.json").read_bytes())["status"] == "idle"
    listed = gdn(tmp_path, "instance", "list", str(bundle), *state)
    assert "incomplete" not in listed.stdout and "warning" not in listed.stderr
