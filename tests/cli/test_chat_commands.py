"""Slash commands in a `gdn run` chat: /help and a mistyped command are answered locally and never sent
to the model; a message that merely starts with a slash (a path) is sent as typed."""

from __future__ import annotations

from pathlib import Path

from cli_testkit import ECHO_BUNDLE, gdn

from kit import write_bundle


def test_help_and_mistyped_commands_stay_local_and_slash_messages_reach_the_model(tmp_path: Path) -> None:
    bundle = write_bundle(tmp_path / "b", ECHO_BUNDLE)
    lines = "/help\n/hlep\n/atach notes.txt\n/usr/bin is missing\n/tmp is full\n//etc\n/quit now\n/quit\n"
    proc = gdn(tmp_path, "run", str(bundle), "--state-root", str(tmp_path / "s"), stdin=lines)
    assert proc.returncode == 0, proc.stderr
    # the echo model answers every line it gets: exactly the messages, in order
    assert proc.stdout.splitlines() == ["echo: /usr/bin is missing", "echo: /tmp is full", "echo: /etc"]
    assert "chat commands:" in proc.stderr
    for command in ("/attach FILE[:TYPE]", "/help", "/quit"):
        assert f"\n  {command} " in proc.stderr
    assert "unknown command /hlep; did you mean '/help'? (not sent;" in proc.stderr
    assert "unknown command /atach; did you mean '/attach'?" in proc.stderr
    assert "//hlep sends it as a message" in proc.stderr
    assert "/quit takes no arguments" in proc.stderr
