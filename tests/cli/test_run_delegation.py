"""`gdn run --input` hands its request to a running `gdn run` only when that run serves the same bundle.

A running session owns its instance files, so a one-shot request for the *same* bundle goes through its
control socket. Any other bundle (another directory, even with the same Package name and swarm) must be
answered by its own runtime, never by whichever run happens to be open.
"""

from __future__ import annotations

import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from cli_testkit import ECHO_BUNDLE, env_for, gdn

from kit import write_bundle


def _bundle(directory: Path, reply: str) -> Path:
    return write_bundle(directory, ECHO_BUNDLE.replace('text: "echo: {{last}}"', f'text: "{reply}: {{{{last}}}}"'))


@pytest.fixture
def running_a(tmp_path: Path) -> Iterator[tuple[Path, str, subprocess.Popen[str]]]:
    """`gdn run A` as a piped chat session that stays open, registered under the state root."""
    bundle = _bundle(tmp_path / "a", "from A")
    state = str(tmp_path / "state")
    session = subprocess.Popen(
        [sys.executable, "-m", "goondan", "run", str(bundle), "--state-root", state],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env_for(tmp_path),
    )
    try:
        runs = Path(state) / "runtime" / "runs"
        deadline = time.monotonic() + 20
        while not list(runs.glob("*.json")) and time.monotonic() < deadline:
            assert session.poll() is None, session.stderr.read() if session.stderr else ""
            time.sleep(0.05)
        assert list(runs.glob("*.json")), "gdn run A never registered"
        yield bundle, state, session
    finally:
        if session.poll() is None:
            session.kill()
            session.wait()


def test_a_request_for_another_bundle_with_the_same_package_name_is_not_delegated(
    tmp_path: Path, running_a: tuple[Path, str, subprocess.Popen[str]]
) -> None:
    _, state, session = running_a
    other = _bundle(tmp_path / "b", "from B")  # same Package name and swarm, another directory
    proc = gdn(tmp_path, "run", str(other), "--input", "hi", "-v", "--state-root", state)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout == "from B: hi\n"
    assert "delegating to running" not in proc.stderr
    assert f"the running gdn run (pid {session.pid}) serves another bundle" in proc.stderr
    assert session.poll() is None


def test_a_request_for_the_same_bundle_is_delegated_and_says_so_with_verbose(
    tmp_path: Path, running_a: tuple[Path, str, subprocess.Popen[str]]
) -> None:
    bundle, state, session = running_a
    proc = gdn(tmp_path, "run", str(bundle / "goondan.yaml"), "--input", "hi", "-v", "--state-root", state)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout == "from A: hi\n"
    assert f"delegating to running gdn run (pid {session.pid})" in proc.stderr
    quiet = gdn(tmp_path, "run", str(bundle), "--input", "again", "--state-root", state)
    assert quiet.stdout == "from A: again\n" and "delegating" not in quiet.stderr


def test_a_control_request_naming_another_bundle_is_refused_by_the_running_session(
    tmp_path: Path, running_a: tuple[Path, str, subprocess.Popen[str]]
) -> None:
    """The check also holds on the serving side, so a stale or reused registration cannot misroute."""
    from goondan.cli._control import control_request

    bundle, state, _ = running_a
    record = next((Path(state) / "runtime" / "runs").glob("*.json"))
    import json

    sock = json.loads(record.read_text())["socket"]
    hello = control_request(sock, {"op": "hello"}, timeout=10)
    assert hello["ok"] and hello["identity"]["bundle"] == str(bundle.resolve())
    assert hello["identity"]["package"] == "cli-suite" and hello["identity"]["swarm"] == "default"
    wrong = dict(hello["identity"], bundle=str(tmp_path / "elsewhere"))
    reply = control_request(sock, {"op": "request", "input": "x", "identity": wrong}, timeout=10)
    assert not reply["ok"] and reply["error"]["code"] == "E_CONTROL_IDENTITY"


def test_a_request_for_the_same_bundle_in_another_store_is_answered_from_that_store(
    tmp_path: Path, running_a: tuple[Path, str, subprocess.Popen[str]]
) -> None:
    """`--store` names where the conversation lives: a running session that serves the bundle from
    another store does not hold it, and answering through it silently ignored `--store`."""
    bundle, state, session = running_a
    other = tmp_path / "other-store"
    proc = gdn(tmp_path, "run", str(bundle), "--input", "hi", "-v", "--state-root", state, "--store", str(other))
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout == "from A: hi\n"
    assert "delegating to running" not in proc.stderr
    assert f"the running gdn run (pid {session.pid}) serves this bundle from {state}" in proc.stderr
    assert list(other.glob("workspaces/*/instances/*/messages/base.jsonl")), sorted(other.rglob("*"))
    same = gdn(tmp_path, "run", str(bundle), "--input", "again", "-v", "--state-root", state, "--store", state)
    assert f"delegating to running gdn run (pid {session.pid})" in same.stderr  # the same store: its to answer
    assert session.poll() is None
