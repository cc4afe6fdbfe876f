"""`gdn run` in chat mode (no --input, no connector) on a PostgreSQL store claims its workspace like
a service does. When the server restarts and another service takes the workspace meanwhile, the chat
must not go on writing beside it: it ends with E_RUN_CLAIM_LOST naming the new holder (pid, host
and the end of its bundle's path), without a traceback. Real `gdn run` processes, a real PostgreSQL server."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from test_postgres_service_claim import _claim_holders, _serve, _stop, _wait_listening

import kit
from kit.postgres import PostgresServer, own_server

MODEL = 'def generate(request):\n    return {"text": "ok: " + str(len(request["messages"]))}\n'


@pytest.fixture(scope="module")
def restartable() -> Iterator[PostgresServer]:
    with own_server() as server:
        yield server


def _chat(tmp_path: Path, url: str) -> subprocess.Popen[str]:
    """``gdn run`` of the bundle ``_serve`` serves, as a chat: stdin a pipe kept open."""
    root = kit.write_bundle(
        tmp_path / "chat",
        kit.package_doc("served-once"),
        kit.python_model_doc(),
        kit.agent_doc("a"),
        kit.swarm_doc(["a"]),
        files={"model.py": MODEL},
    )
    env = {k: v for k, v in os.environ.items() if not k.startswith("GOONDAN_")}
    argv = [sys.executable, "-m", "goondan", "run", str(root), "--store", url, "--state-root", str(tmp_path / "sc")]
    return subprocess.Popen(
        argv, env=env, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )


def test_a_chat_whose_workspace_another_service_took_while_the_server_was_away_ends_with_e_run_claim_lost(
    tmp_path: Path, restartable: PostgresServer
) -> None:
    url = restartable.create_database()
    name = url.rsplit("/", 1)[1]
    hba = restartable.data / "pg_hba.conf"
    before = hba.read_text(encoding="utf-8")
    chat = _chat(tmp_path, url)
    procs = [chat]
    try:
        deadline = time.monotonic() + 60
        while not any(f"pid {chat.pid} " in h for h in _claim_holders(url)):
            assert chat.poll() is None and time.monotonic() < deadline, chat.communicate()
            time.sleep(0.1)
        restartable.stop()
        hba.write_text("host all all 127.0.0.1/32 reject\n" + before, encoding="utf-8")  # the chat cannot come back
        restartable.start()
        second, second_port = _serve(tmp_path, "machine-b", restartable.socket_url(name))
        procs.append(second)
        _wait_listening(second, second_port)
        hba.write_text(before, encoding="utf-8")
        restartable._run("pg_ctl", "-D", str(restartable.data), "reload")
        try:
            chat.wait(timeout=30)  # stdin stays open: the user is still there
        except subprocess.TimeoutExpired:
            chat.kill()
            out, err = chat.communicate()
            pytest.fail(f"the chat goes on beside the service that took its workspace: {out!r} {err!r}")
        out, err = chat.communicate()
        assert chat.returncode == 1, (out, err)
        assert "[E_RUN_CLAIM_LOST] workspace " in err and f"by pid {second.pid} on " in err, err
        assert "Traceback" not in err
        # the holder's bundle path is cut at its start, not its end (PostgreSQL keeps 63 bytes of the name)
        assert "/machine-b), since " in err, err
        assert second.poll() is None
    finally:
        hba.write_text(before, encoding="utf-8")
        _stop(*procs)
