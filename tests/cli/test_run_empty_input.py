"""``gdn run --input ""`` (an unset shell variable) or an empty ``--input-file`` is a usage error
(exit 2) with a suggestion, as the chat skips a blank line: it used to send an empty message, which
a provider refuses (anthropic) or the model answers with nothing, after a turn was stored."""

from __future__ import annotations

from pathlib import Path

from cli_testkit import ECHO_BUNDLE, gdn

from kit import write_bundle


def test_an_empty_or_blank_request_is_refused_before_anything_starts(tmp_path: Path) -> None:
    write_bundle(tmp_path / "b", ECHO_BUNDLE)
    (tmp_path / "question.txt").write_text("\n  \n")
    for args in (["--input", ""], ["--input", "  \n"], ["--input-file", "question.txt"]):
        run = gdn(tmp_path, "run", "b", *args, "--state-root", "state")
        assert run.returncode == 2, (args, run.stdout, run.stderr)
        assert "[E_INVALID_ARGUMENT]" in run.stderr and "is empty: there is no request to send" in run.stderr
        assert "leave --input out to chat" in run.stderr and run.stdout == ""
    assert not (tmp_path / "state").exists()  # no instance, no stored turn
    # a blank text beside an attachment is a request (the file is the content)
    (tmp_path / "note.txt").write_text("hello")
    run = gdn(tmp_path, "run", "b", "--input", "", "--attach", "note.txt")
    assert run.returncode == 0, run.stderr
    assert gdn(tmp_path, "run", "b", "--input", "hi").stdout == "echo: hi\n"
