"""gdn run --store URL (and GOONDAN_STORE): where a run keeps its conversations."""

from __future__ import annotations

import socket
import time
from pathlib import Path

from cli_testkit import ECHO_BUNDLE, gdn

from kit import write_bundle


def test_gdn_run_store_memory_answers_and_writes_no_instance(tmp_path: Path) -> None:
    bundle = write_bundle(tmp_path / "b", ECHO_BUNDLE)
    state = tmp_path / "state"
    proc = gdn(tmp_path, "run", str(bundle), "--state-root", str(state), "--store", "memory:", "--input", "hi")
    assert proc.returncode == 0, proc.stderr
    assert "echo: hi" in proc.stdout
    assert list(state.glob("workspaces/*/instances/*")) == []


def test_gdn_run_store_directory_keeps_the_conversation_there(tmp_path: Path) -> None:
    bundle = write_bundle(tmp_path / "b", ECHO_BUNDLE)
    store = tmp_path / "conversations"
    for _ in range(2):
        proc = gdn(tmp_path, "run", str(bundle), "--store", str(store), "--input", "hi")
        assert proc.returncode == 0, proc.stderr
    base = next(store.glob("workspaces/*/instances/*/messages/base.jsonl"))
    assert len(base.read_text().splitlines()) == 4  # two turns of the same conversation


def test_goondan_store_env_is_the_default_of_gdn_run(tmp_path: Path) -> None:
    bundle = write_bundle(tmp_path / "b", ECHO_BUNDLE)
    store = tmp_path / "from-env"
    proc = gdn(tmp_path, "run", str(bundle), "--input", "hi", GOONDAN_STORE=store.as_uri())
    assert proc.returncode == 0, proc.stderr
    assert list(store.glob("workspaces/*/instances/*/messages/base.jsonl"))


def test_gdn_run_with_an_unsupported_store_fails_with_the_code_and_no_traceback(tmp_path: Path) -> None:
    bundle = write_bundle(tmp_path / "b", ECHO_BUNDLE)
    proc = gdn(tmp_path, "run", str(bundle), "--store", "redis://db/x", "--input", "hi")
    assert proc.returncode != 0
    assert "E_STORE_UNSUPPORTED" in proc.stderr and "Traceback" not in proc.stderr
    assert "postgresql" in proc.stderr  # the known schemes are listed


def test_gdn_run_against_an_unreachable_postgres_fails_fast_with_the_code_and_no_traceback(tmp_path: Path) -> None:
    bundle = write_bundle(tmp_path / "b", ECHO_BUNDLE)
    with socket.socket() as s:  # a port nobody listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    url = f"postgresql://u:hunter2@127.0.0.1:{port}/x"
    started = time.monotonic()
    proc = gdn(tmp_path, "run", str(bundle), "--store", url, "--input", "hi")
    assert proc.returncode != 0
    assert "E_STORE_UNAVAILABLE" in proc.stderr and "Traceback" not in proc.stderr
    assert "hunter2" not in proc.stderr and "pg_isready" in proc.stderr
    assert time.monotonic() - started < 20
