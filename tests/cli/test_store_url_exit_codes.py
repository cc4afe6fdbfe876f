"""A store URL that cannot mean any store is a usage error (exit 2, CONTRACT §9) named
E_STORE_URL_INVALID / E_STORE_UNSUPPORTED, never "is the server running?"; a valid URL whose server
is down or refuses the login is a failed run (exit 1) whose suggestion says which. Real ``gdn``
subprocesses, a real PostgreSQL server for the login case."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from cli_testkit import ECHO_BUNDLE, gdn

from kit import write_bundle


@pytest.mark.parametrize(
    ("url", "code"),
    [
        ("postgresql://u:hunter2@127.0.0.1:abc/db", "E_STORE_URL_INVALID"),
        ("postgresql://u:hunter2@127.0.0.1:99999/db", "E_STORE_URL_INVALID"),
        ("postgresql://u:hunter2@127.0.0.1:5432/db?sslmode=bogus", "E_STORE_URL_INVALID"),
        ("postgresql://u:hunter2@127.0.0.1:5432/db?pool_size=0", "E_STORE_URL_INVALID"),
        ("postgres://u:hunter2@127.0.0.1:5432/db?no_such_option=1", "E_STORE_URL_INVALID"),
        ("redis://u:hunter2@127.0.0.1/0", "E_STORE_UNSUPPORTED"),
    ],
    ids=["port-not-a-number", "port-out-of-range", "bad-sslmode", "bad-pool-size", "unknown-option", "scheme"],
)
@pytest.mark.parametrize("command", ["run", "instance-list"])
def test_a_store_url_that_cannot_mean_a_store_is_a_usage_error_with_its_code(
    tmp_path: Path, url: str, code: str, command: str
) -> None:
    bundle = write_bundle(tmp_path / "b", ECHO_BUNDLE)
    args = ["run", str(bundle), "--input", "hi"] if command == "run" else ["instance", "list", "-A"]
    proc = gdn(tmp_path, *args, "--store", url)
    assert proc.stderr.startswith(f"[{code}] "), proc.stderr  # port=abc was E_STORE_UNAVAILABLE
    assert proc.returncode == 2, proc.stderr  # was 1 (internal)
    assert "Traceback" not in proc.stderr and "hunter2" not in proc.stderr
    assert "server is running" not in proc.stderr


def test_a_missing_database_on_a_real_server_is_a_config_error_naming_it(tmp_path: Path, postgres_url: str) -> None:
    bundle = write_bundle(tmp_path / "b", ECHO_BUNDLE)
    url = re.sub(r"/[^/]+$", "/no_such_db", postgres_url)
    proc = gdn(tmp_path, "run", str(bundle), "--input", "hi", "--store", url)
    assert proc.returncode == 3, proc.stderr  # was 1 with E_STORE_UNAVAILABLE: waiting does not create it
    assert proc.stderr.startswith("[E_STORE_DATABASE_NOT_FOUND] ") and "no database 'no_such_db'" in proc.stderr
    assert "createdb" in proc.stderr and "Traceback" not in proc.stderr
