"""gdn validate formats (github, strict), argument error codes and gdn init's printed commands."""

from __future__ import annotations

import json
import shlex
from pathlib import Path

from cli_testkit import ECHO_BUNDLE, gdn

from kit import write_bundle

NO_SWARM = """\
apiVersion: goondan.ai/v1
kind: Model
metadata: {name: m}
spec: {provider: scripted, model: x, options: {rules: [{reply: {text: hi}}]}}
"""

TYPO = """\
apiVersion: goondan.ai/v1
kind: Model
metadata: {name: m}
spec: {provider: scripted, model: x, optoins: {}}
"""


def test_github_format_paths_are_relative_to_the_working_directory_and_keep_the_suggestion(tmp_path: Path) -> None:
    write_bundle(tmp_path / "proj" / "bundle", TYPO)
    proc = gdn(tmp_path, "validate", "proj/bundle", "--format", "github")
    assert proc.returncode == 4
    line = next(x for x in proc.stdout.splitlines() if x.startswith("::error "))
    assert "file=proj/bundle/goondan.yaml,line=4," in line
    assert "title=E_CONFIG_SCHEMA_INVALID::" in line
    assert "did you mean 'options'?" in line and "%0Asuggestion: " in line


def test_strict_turns_warnings_into_errors_under_their_real_codes(tmp_path: Path) -> None:
    write_bundle(tmp_path / "b", NO_SWARM)
    assert gdn(tmp_path, "validate", "b").returncode == 0
    proc = gdn(tmp_path, "validate", "b", "--strict", "--format", "json")
    assert proc.returncode == 4
    payload = json.loads(proc.stdout)
    assert [e["code"] for e in payload["errors"]] == ["E_CONFIG_SWARM_MISSING"]
    assert payload["warnings"] == []
    assert "STRICT_" not in proc.stdout


def test_an_agent_no_swarm_lists_is_a_warning_at_its_line(tmp_path: Path) -> None:
    orphan = "---\napiVersion: goondan.ai/v1\nkind: Agent\nmetadata:\n  name: orphan\nspec:\n  modelConfig:\n"
    orphan += "    modelRef: Model/echo\n"
    bundle = write_bundle(tmp_path / "b", ECHO_BUNDLE + orphan)
    line = (bundle / "goondan.yaml").read_text().splitlines().index("  name: orphan") + 1
    proc = gdn(tmp_path, "validate", "b")
    assert proc.returncode == 0, proc.stdout  # a warning, not an error: the bundle still runs
    assert "[E_CONFIG_AGENT_UNUSED] Agent/orphan is not listed in any Swarm's spec.agents" in proc.stdout
    assert f"goondan.yaml:{line}:3" in proc.stdout and "spec.agents of Swarm/default" in proc.stdout
    payload = json.loads(gdn(tmp_path, "validate", "b", "--format", "json").stdout)
    assert [(w["code"], w["line"]) for w in payload["warnings"]] == [("E_CONFIG_AGENT_UNUSED", line)]
    assert gdn(tmp_path, "validate", "b", "--strict").returncode == 4
    assert gdn(tmp_path, "validate", "b", "--format", "github").stdout.startswith(
        f"::warning file=b/goondan.yaml,line={line},"
    )
    listed = ECHO_BUNDLE.replace("[Agent/talker, Agent/helper]", "[Agent/talker, Agent/helper, Agent/orphan]")
    write_bundle(tmp_path / "b", listed + orphan)
    assert gdn(tmp_path, "validate", "b", "--strict").returncode == 0


def test_missing_env_file_is_a_config_error_with_the_documented_exit_codes(tmp_path: Path) -> None:
    write_bundle(tmp_path / "b", ECHO_BUNDLE)
    validate = gdn(tmp_path, "validate", "b", "--env-file", "nosuch")
    assert validate.returncode == 4 and "[E_ENV_FILE_NOT_FOUND]" in validate.stdout
    run = gdn(tmp_path, "run", "b", "--input", "x", "--env-file", "nosuch")
    assert run.returncode == 3 and "[E_ENV_FILE_NOT_FOUND]" in run.stderr
    docs = (Path(__file__).resolve().parents[2] / "docs" / "errors.md").read_text()
    assert "exit code 3 (run) / 4 (validate)" in docs.split("`E_ENV_FILE_NOT_FOUND`")[0].rsplit("##", 1)[1]


def test_argument_errors_have_the_e_prefix(tmp_path: Path) -> None:
    proc = gdn(tmp_path, "init", "x", "--name", "Bad Name")
    assert proc.returncode == 2 and proc.stderr.startswith("[E_INVALID_ARGUMENT]")


def test_init_in_a_directory_with_a_space_prints_commands_that_paste(tmp_path: Path) -> None:
    proc = gdn(tmp_path, "init", "My Project")
    assert proc.returncode == 0, proc.stderr
    next_line = next(x for x in proc.stdout.splitlines() if x.startswith("Next: "))
    first = next_line.removeprefix("Next: ").split(" && ")[0]
    assert shlex.split(first) == ["gdn", "validate", "My Project"]
    assert "'" in proc.stdout.splitlines()[0]  # the created directory is quoted too
    assert gdn(tmp_path, *shlex.split(first)[1:]).returncode == 0


def test_readme_given_as_path_is_not_a_bundle(tmp_path: Path) -> None:
    write_bundle(tmp_path / "b", ECHO_BUNDLE)
    (tmp_path / "b" / "README.md").write_text("# hi\n")
    proc = gdn(tmp_path, "validate", "b/README.md")
    assert proc.returncode == 4
    assert proc.stdout.count("[E_") == 1 and "[E_CONFIG_NOT_A_BUNDLE]" in proc.stdout
