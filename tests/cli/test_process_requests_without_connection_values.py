"""The default process executor answers a one-shot request of a bundle whose Connections' variables
are unset, as the inline one does: agent processes start no connector, so the fork server that
loads the bundle for them must not require (or resolve) a Connection's config and secrets."""

from __future__ import annotations

from pathlib import Path

from cli_testkit import ECHO_BUNDLE, WEBHOOK_CONNECTION, gdn

from kit import write_bundle


def test_process_executor_requests_need_no_connection_variables(tmp_path: Path) -> None:
    b = str(write_bundle(tmp_path / "b", ECHO_BUNDLE + WEBHOOK_CONNECTION))
    one = gdn(tmp_path, "run", b, "--input", "hi", "--executor", "process", timeout=60)
    assert (one.returncode, one.stdout) == (0, "echo: hi\n"), one.stderr
    chat = gdn(tmp_path, "run", b, "--interactive", "--executor", "process", stdin="there\n", timeout=60)
    assert (chat.returncode, chat.stdout) == (0, "echo: there\n"), chat.stderr
