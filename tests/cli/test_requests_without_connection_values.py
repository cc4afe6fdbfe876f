"""A command that sends requests and starts no connector (``gdn run --input``, ``gdn run
--interactive``, ``gdn approvals``) does not need the Connections' variables: a user asking one
question of a bundle with a webhook Connection had to export its port and signing secret first.
``gdn validate`` and a connector run still require them, at their file:line. (The process
executor's load: test_process_requests_without_connection_values.py.)"""

from __future__ import annotations

from pathlib import Path

from cli_testkit import ECHO_BUNDLE, WEBHOOK_CONNECTION, gdn

from kit import write_bundle


def test_requests_need_no_connection_variables_and_connectors_still_do(tmp_path: Path) -> None:
    b = str(write_bundle(tmp_path / "b", ECHO_BUNDLE + WEBHOOK_CONNECTION))
    one = gdn(tmp_path, "run", b, "--input", "hi", "--executor", "inline")
    assert (one.returncode, one.stdout) == (0, "echo: hi\n"), one.stderr
    chat = gdn(tmp_path, "run", b, "--interactive", "--executor", "inline", stdin="there\n")
    assert (chat.returncode, chat.stdout) == (0, "echo: there\n"), chat.stderr
    listed = gdn(tmp_path, "approvals", "list", b)
    assert (listed.returncode, listed.stdout) == (0, "no pending approvals\n"), listed.stderr
    serve = gdn(tmp_path, "run", b, timeout=60)
    assert serve.returncode == 3 and "HOOK_PATH is not set" in serve.stderr, serve.stderr
    assert "goondan.yaml:" in serve.stderr  # at the line of the Connection's config
    checked = gdn(tmp_path, "validate", b)
    assert checked.returncode == 4 and "WEBHOOK_SECRET is not set" in checked.stdout, checked.stdout


def test_a_connection_variable_with_a_bad_value_stops_only_what_reads_it(tmp_path: Path) -> None:
    """PORT=abc (set for another program) refused `gdn run --input` and `gdn studio` of a bundle whose
    Connection reads PORT, although neither starts the connector: its config was checked against the
    connector's schema with the variable's value. A connector run and `gdn validate` still refuse it."""
    connection = WEBHOOK_CONNECTION.replace(
        "    path: { valueFrom: { env: HOOK_PATH } }\n", "    port: { valueFrom: { env: PORT } }\n"
    )
    b = str(write_bundle(tmp_path / "b", ECHO_BUNDLE + connection))
    one = gdn(tmp_path, "run", b, "--input", "hi", "--executor", "inline", PORT="abc")
    assert (one.returncode, one.stdout) == (0, "echo: hi\n"), one.stderr
    checked = gdn(tmp_path, "validate", b, PORT="abc", WEBHOOK_SECRET="s")
    assert checked.returncode == 4 and "config.port: expected integer" in checked.stdout, checked.stdout
    assert "(got the value of PORT, not shown)" in checked.stdout
    serve = gdn(tmp_path, "run", b, PORT="abc", WEBHOOK_SECRET="s", timeout=60)
    assert serve.returncode == 3 and "config.port: expected integer" in serve.stderr, serve.stderr
