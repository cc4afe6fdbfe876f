"""What a new user gets wrong in the first week, through real `gdn` subprocesses: a clear
``[CODE] message`` with a suggestion and the exit code of CONTRACT §9, never an INTERNAL_ERROR."""

from __future__ import annotations

from pathlib import Path

from cli_testkit import ECHO_BUNDLE, gdn

from kit import write_bundle


def test_init_into_a_file_or_an_unwritable_place_is_a_usage_error(tmp_path: Path) -> None:
    """`gdn init notes.txt` and a path under a file or a missing mount were INTERNAL_ERROR (exit 1)."""
    (tmp_path / "notes.txt").write_text("mine\n")
    on_file = gdn(tmp_path, "init", "notes.txt")
    assert on_file.returncode == 2, on_file.stderr
    assert on_file.stderr.startswith(f"[E_INVALID_ARGUMENT] {tmp_path / 'notes.txt'} is a file, not a directory")
    assert "suggestion: Give gdn init a directory" in on_file.stderr
    under_file = gdn(tmp_path, "init", "notes.txt/bot")
    assert under_file.returncode == 2, under_file.stderr
    assert under_file.stderr.startswith(f"[E_INVALID_ARGUMENT] cannot write {tmp_path / 'notes.txt' / 'bot'}")
    assert "Not a directory" in under_file.stderr and "suggestion: Choose a directory" in under_file.stderr
    assert (tmp_path / "notes.txt").read_text() == "mine\n"


def test_schema_output_to_a_missing_directory_or_a_directory_is_a_usage_error(tmp_path: Path) -> None:
    (tmp_path / "bundle").mkdir()
    for target, why in [("missing/goondan.schema.json", "No such file or directory"), ("bundle", "Is a directory")]:
        result = gdn(tmp_path, "schema", "-o", target)
        assert result.returncode == 2, result.stderr
        assert result.stderr.startswith(f"[E_INVALID_ARGUMENT] cannot write the schema to {target}: {why}")
        assert "suggestion: Give -o a file path" in result.stderr


def test_a_misspelt_dependency_names_the_installed_package(tmp_path: Path) -> None:
    """E_PACKAGE_MISSING only said how to install the misspelt name from the index (another
    project's, or nobody's); the installed package it is near comes first."""
    bundle = ECHO_BUNDLE.replace(
        "  version: 0.1.0\n", '  version: 0.1.0\n  dependencies: [{name: "@goondan/bsae"}]\n', 1
    )
    write_bundle(tmp_path / "b", bundle)
    result = gdn(tmp_path, "validate", "b")
    assert result.returncode == 4
    assert "[E_PACKAGE_MISSING] package @goondan/bsae is not installed" in result.stdout
    assert "suggestion: did you mean '@goondan/base', which is installed? Else install it" in result.stdout
