"""``gdn validate`` suggests the near name of a misspelt bundle path or file a resource points at."""

from __future__ import annotations

import json
from pathlib import Path

from cli_testkit import ECHO_BUNDLE, gdn

from kit import write_bundle


def test_a_misspelt_bundle_directory_is_shown_absolute_with_the_near_one(tmp_path: Path) -> None:
    write_bundle(tmp_path / "quickstart", ECHO_BUNDLE)
    proc = gdn(tmp_path, "validate", "quikstart", "--format", "json")
    assert proc.returncode != 0
    (error,) = json.loads(proc.stdout)["errors"]
    assert error["code"] == "E_CONFIG_FILE_NOT_FOUND"
    assert str(tmp_path / "quikstart") in error["message"]
    assert error["suggestion"].startswith("did you mean quickstart?")
    proc = gdn(tmp_path, "validate", "quikstart/goondan.yml", "--format", "json")
    (error,) = json.loads(proc.stdout)["errors"]
    assert error["suggestion"].startswith("did you mean quickstart/goondan.yaml?")


def test_a_misspelt_system_prompt_path_suggests_the_file_that_exists(tmp_path: Path) -> None:
    agent = "    modelRef: Model/echo\n  prompt:\n    systemRef: ./prompt/asistant.md\n"
    text = ECHO_BUNDLE.replace("    modelRef: Model/echo\n", agent, 1)
    b = write_bundle(tmp_path / "b", text, files={"prompts/assistant.md": "You help."})
    proc = gdn(tmp_path, "validate", str(b), "--format", "json")
    (error,) = json.loads(proc.stdout)["errors"]
    assert error["code"] == "E_CONFIG_ENTRY_NOT_FOUND"
    assert error["suggestion"].startswith("did you mean './prompts/assistant.md'?")


def test_a_bundle_path_that_does_not_exist_is_named_once_and_points_at_gdn_init(tmp_path: Path) -> None:
    proc = gdn(tmp_path, "run", "my-bot", "--input", "hi")
    assert proc.returncode == 3 and proc.stderr.startswith("[E_CONFIG_FILE_NOT_FOUND] my-bot does not exist")
    assert "  at: my-bot\n" in proc.stderr, proc.stderr  # was 'at: my-bot (my-bot)'
    assert "or create one with `gdn init my-bot`" in proc.stderr, proc.stderr
    here = gdn(tmp_path, "run", "--input", "hi")  # no bundle in the current directory
    assert here.returncode == 3 and "[E_CONFIG_NOT_A_BUNDLE]" in here.stderr and "gdn init" in here.stderr


def test_the_readme_example_run_outside_a_checkout_says_where_the_examples_are(tmp_path: Path) -> None:
    proc = gdn(tmp_path, "run", "examples/quickstart", "--input", "add 2 and 3")
    assert proc.returncode == 3, proc.stderr
    assert "the examples/ bundles come with the source repository, not with the installed package" in proc.stderr
    assert "gdn init examples" not in proc.stderr
