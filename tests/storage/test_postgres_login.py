"""A store URL whose login the server refuses (a wrong password, a database that does not exist) is
bad configuration, said as such by every command that opens the store: ``E_STORE_AUTH`` /
``E_STORE_DATABASE_NOT_FOUND`` naming the user and the host (never the password), a suggestion, and
the config exit code (3). It was ``E_STORE_UNAVAILABLE`` with exit 1, as if the server were down and
waiting would help. A real server of the test's own that wants a scram-sha-256 password over TCP."""

from __future__ import annotations

import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest
from storage_testkit import gdn as _gdn

from kit import simple_bundle
from kit.postgres import PostgresServer, own_server

ECHO = "def generate(request):\n    return {'text': 'echo'}\n"
PASSWORD = "right-horse-battery"
WRONG = "wrong-staple-42"


@pytest.fixture(scope="module")
def guarded() -> Iterator[PostgresServer]:
    with own_server() as server:
        server.require_password("alice", PASSWORD)
        yield server


def _url(server: PostgresServer, password: str, database: str = "postgres") -> str:
    return f"postgresql://alice:{password}@127.0.0.1:{server.port}/{database}"


def _commands(tmp_path: Path, url: str) -> dict[str, subprocess.CompletedProcess[str]]:
    bundle = simple_bundle(tmp_path / "bundle", files={"model.py": ECHO})
    return {
        "run": _gdn(tmp_path, "run", str(bundle), "--store", url, "--input", "hi"),
        "run (GOONDAN_STORE)": _gdn(tmp_path, "run", str(bundle), "--input", "hi", GOONDAN_STORE=url),
        "run (service)": _gdn(tmp_path, "run", str(bundle), "--store", url),  # claims the workspace first
        "studio": _gdn(tmp_path, "studio", "--store", url, "--port", "0"),
        "logs": _gdn(tmp_path, "logs", "--store", url),
        "instance list": _gdn(tmp_path, "instance", "list", "-A", "--store", url),
    }


def test_a_wrong_password_is_e_store_auth_naming_user_and_host_with_the_config_exit_code(
    tmp_path: Path, guarded: PostgresServer
) -> None:
    for command, proc in _commands(tmp_path, _url(guarded, WRONG)).items():
        err = proc.stderr
        assert proc.returncode == 3, (command, proc.returncode, err)  # was 1 (E_STORE_UNAVAILABLE)
        assert err.startswith("[E_STORE_AUTH] "), (command, err)
        assert "'alice'" in err and f"127.0.0.1:{guarded.port}" in err and "wrong password" in err, (command, err)
        assert "suggestion: Check the user and password" in err, (command, err)
        assert WRONG not in err + proc.stdout and "Traceback" not in err, (command, err)


def test_a_database_that_does_not_exist_is_named_with_how_to_create_it(tmp_path: Path, guarded: PostgresServer) -> None:
    for command, proc in _commands(tmp_path, _url(guarded, PASSWORD, "no_such_db")).items():
        err = proc.stderr
        assert proc.returncode == 3, (command, proc.returncode, err)
        assert err.startswith("[E_STORE_DATABASE_NOT_FOUND] "), (command, err)
        assert "'no_such_db'" in err and f"createdb -h 127.0.0.1 -p {guarded.port} -U alice no_such_db" in err
        assert PASSWORD not in err + proc.stdout and "Traceback" not in err, (command, err)


def test_gdn_doctor_fails_the_store_check_with_the_login_code(tmp_path: Path, guarded: PostgresServer) -> None:
    bundle = simple_bundle(tmp_path / "bundle", files={"model.py": ECHO})
    for url, code in ((_url(guarded, WRONG), "E_STORE_AUTH"), (_url(guarded, "", "nodb"), "E_STORE_AUTH")):
        proc = _gdn(tmp_path, "doctor", str(bundle), GOONDAN_STORE=url)
        out = proc.stdout + proc.stderr
        assert proc.returncode == 1 and f"[{code}]" in out and "'alice'" in out, out
        assert WRONG not in out and "Traceback" not in out, out
    proc = _gdn(tmp_path, "doctor", str(bundle), GOONDAN_STORE=_url(guarded, PASSWORD, "nodb"))
    assert proc.returncode == 1 and "[E_STORE_DATABASE_NOT_FOUND]" in proc.stdout + proc.stderr


def test_the_right_password_opens_the_store(tmp_path: Path, guarded: PostgresServer) -> None:
    proc = _gdn(tmp_path, "instance", "list", "-A", "--store", _url(guarded, PASSWORD))
    assert proc.returncode == 0, proc.stderr
