"""``gdn`` as a subprocess (CONTRACT §9): exit codes, output formats, run and session modes."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

EXAMPLE = Path(__file__).resolve().parents[1] / "examples" / "quickstart"

ECHO_BUNDLE = """\
apiVersion: goondan.ai/v1
kind: Package
metadata:
  name: cli-test
spec:
  version: 0.1.0
---
apiVersion: goondan.ai/v1
kind: Model
metadata:
  name: echo
spec:
  provider: scripted
  model: echo
  options:
    rules:
      - when: { role: user, contains: "explode" }
        reply:
          toolCalls:
            - name: nothing__here
              args: {}
      - reply:
          text: "echo: {{last}}"
---
apiVersion: goondan.ai/v1
kind: Agent
metadata:
  name: talker
spec:
  modelConfig:
    modelRef: Model/echo
---
apiVersion: goondan.ai/v1
kind: Swarm
metadata:
  name: default
spec:
  entryAgent: Agent/talker
  agents: [Agent/talker]
"""

BROKEN_BUNDLE = """\
apiVersion: goondan.ai/v1
kind: Package
metadata:
  name: broken
spec:
  version: 0.1.0
---
apiVersion: goondan.ai/v1
kind: Agent
metadata:
  name: a
spec:
  modelConfig:
    modelRef: Model/missing
---
apiVersion: goondan.ai/v1
kind: Swarm
metadata:
  name: default
spec:
  entryAgent: Agent/a
  agents: [Agent/a]
"""


@pytest.fixture
def home(tmp_path: Path) -> Path:
    h = tmp_path / "home"
    h.mkdir()
    return h


def gdn(*args: str, home: Path, stdin: str | None = None, timeout: float = 30) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k != "GOONDAN_STATE_ROOT"}
    env.update({"HOME": str(home), "NO_COLOR": "1"})
    return subprocess.run(
        [sys.executable, "-m", "goondan", *args],
        input=stdin,
        capture_output=True,
        text=True,
        env=env,
        timeout=timeout,
        stdin=None if stdin is not None else subprocess.DEVNULL,
    )


def write(dir_: Path, manifest: str) -> Path:
    dir_.mkdir(parents=True, exist_ok=True)
    (dir_ / "goondan.yaml").write_text(textwrap.dedent(manifest), encoding="utf-8")
    return dir_


# --- help and usage -----------------------------------------------------------------------------------


def test_help_lists_validate_and_run(home: Path) -> None:
    proc = gdn("--help", home=home)
    assert proc.returncode == 0
    assert "validate" in proc.stdout
    assert "run" in proc.stdout


def test_unknown_command_exits_2(home: Path) -> None:
    proc = gdn("frobnicate", home=home)
    assert proc.returncode == 2
    assert "frobnicate" in proc.stderr


# --- validate -----------------------------------------------------------------------------------------


def test_validate_example_exits_0(tmp_path: Path, home: Path) -> None:
    proc = gdn("validate", str(EXAMPLE), "--state-root", str(tmp_path / "state"), home=home)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "errors=0" in proc.stdout


def test_validate_broken_bundle_exits_4_with_code_lines(tmp_path: Path, home: Path) -> None:
    bundle = write(tmp_path / "broken", BROKEN_BUNDLE)
    proc = gdn("validate", str(bundle), "--state-root", str(tmp_path / "state"), home=home)
    assert proc.returncode == 4
    assert "[E_CONFIG_REF_NOT_FOUND]" in proc.stdout
    assert "Model/missing" in proc.stdout
    assert "goondan.yaml:" in proc.stdout  # file:line:column location


def test_validate_json_format_reports_valid_false(tmp_path: Path, home: Path) -> None:
    bundle = write(tmp_path / "broken", BROKEN_BUNDLE)
    proc = gdn("validate", str(bundle), "--format", "json", "--state-root", str(tmp_path / "state"), home=home)
    assert proc.returncode == 4
    report = json.loads(proc.stdout)
    assert report["valid"] is False
    assert [e["code"] for e in report["errors"]] == ["E_CONFIG_REF_NOT_FOUND"]
    err = report["errors"][0]
    assert err["file"] == "goondan.yaml"
    assert isinstance(err["line"], int) and isinstance(err["column"], int)
    assert report["warnings"] == []


def test_validate_json_format_on_valid_bundle(tmp_path: Path, home: Path) -> None:
    proc = gdn("validate", str(EXAMPLE), "--format", "json", "--state-root", str(tmp_path / "s"), home=home)
    assert proc.returncode == 0
    assert json.loads(proc.stdout)["valid"] is True


# --- run ----------------------------------------------------------------------------------------------


def test_run_with_input_prints_the_final_text(tmp_path: Path, home: Path) -> None:
    bundle = write(tmp_path / "echo", ECHO_BUNDLE)
    state = tmp_path / "state"
    proc = gdn("run", str(bundle), "--input", "hello world", "--state-root", str(state), home=home)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout == "echo: hello world\n"
    # state goes to --state-root only: nothing under the bundle or $HOME
    assert list(state.glob("workspaces/*/instances/*/messages/base.jsonl"))
    assert sorted(p.name for p in bundle.iterdir()) == ["goondan.yaml"]
    assert not (home / ".goondan").exists()


def test_run_example_uses_the_tool(tmp_path: Path, home: Path) -> None:
    proc = gdn("run", str(EXAMPLE), "--input", "add 2 and 3", "--state-root", str(tmp_path / "s"), home=home)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == 'Tool said: {"sum":5}'


def test_the_quickstart_adds_the_numbers_the_user_typed(tmp_path: Path, home: Path) -> None:
    """Any two numbers, not only the README's 2 and 3 (its rule passed fixed args: "add 4 and 5"
    printed a sum of 5)."""
    proc = gdn("run", str(EXAMPLE), "--input", "add 4 and 5", "--state-root", str(tmp_path / "s"), home=home)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == 'Tool said: {"sum":9}'


def test_run_json_prints_a_turn_result(tmp_path: Path, home: Path) -> None:
    bundle = write(tmp_path / "echo", ECHO_BUNDLE)
    proc = gdn("run", str(bundle), "--input", "hi", "--json", "--state-root", str(tmp_path / "s"), home=home)
    assert proc.returncode == 0, proc.stderr
    result = json.loads(proc.stdout)
    assert result["text"] == "echo: hi"
    assert result["finishReason"] == "text_response"
    assert result["turnId"]
    assert result["error"] is None


def test_run_input_file(tmp_path: Path, home: Path) -> None:
    bundle = write(tmp_path / "echo", ECHO_BUNDLE)
    source = tmp_path / "input.txt"
    source.write_text("from a file", encoding="utf-8")
    proc = gdn("run", str(bundle), "--input-file", str(source), "--state-root", str(tmp_path / "s"), home=home)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout == "echo: from a file\n"


def test_run_config_error_exits_3_with_code_and_no_traceback(tmp_path: Path, home: Path) -> None:
    bundle = write(tmp_path / "broken", BROKEN_BUNDLE)
    proc = gdn("run", str(bundle), "--input", "hi", "--state-root", str(tmp_path / "s"), home=home)
    assert proc.returncode == 3
    assert "[E_CONFIG_REF_NOT_FOUND]" in proc.stderr
    assert "Traceback" not in proc.stderr
    assert proc.stdout == ""


def test_run_extension_failure_exits_nonzero_with_code(tmp_path: Path, home: Path) -> None:
    manifest = ECHO_BUNDLE.replace(
        "    modelRef: Model/echo\n",
        "    modelRef: Model/echo\n  extensions:\n    - ref: Extension/bad\n",
    ) + textwrap.dedent(
        """\
        ---
        apiVersion: goondan.ai/v1
        kind: Extension
        metadata:
          name: bad
        spec:
          entry: ./bad.py
        """
    )
    bundle = write(tmp_path / "ext", manifest)
    (bundle / "bad.py").write_text("def register(api):\n    raise RuntimeError('token missing')\n")
    proc = gdn("run", str(bundle), "--input", "hi", "--state-root", str(tmp_path / "s"), home=home)
    assert proc.returncode != 0
    assert "[E_EXT_INIT]" in proc.stderr
    assert "token missing" in proc.stderr
    assert "Traceback" not in proc.stderr


def test_stdin_session_prints_one_reply_per_line(tmp_path: Path, home: Path) -> None:
    bundle = write(tmp_path / "echo", ECHO_BUNDLE)
    proc = gdn("run", str(bundle), "--state-root", str(tmp_path / "s"), home=home, stdin="first line\nsecond line\n")
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.splitlines() == ["echo: first line", "echo: second line"]


def test_run_keeps_the_conversation_across_invocations(tmp_path: Path, home: Path) -> None:
    bundle = write(tmp_path / "echo", ECHO_BUNDLE)
    state = tmp_path / "s"
    for word in ("one", "two"):
        assert gdn("run", str(bundle), "--input", word, "--state-root", str(state), home=home).returncode == 0
    [base] = list(state.glob("workspaces/*/instances/*/messages/base.jsonl"))
    records = [json.loads(line) for line in base.read_text().splitlines()]
    assert [r["data"]["content"] for r in records] == ["one", "echo: one", "two", "echo: two"]


def test_state_root_from_environment(tmp_path: Path, home: Path) -> None:
    bundle = write(tmp_path / "echo", ECHO_BUNDLE)
    env_root = tmp_path / "env-root"
    env = {**os.environ, "HOME": str(home), "GOONDAN_STATE_ROOT": str(env_root)}
    proc = subprocess.run(
        [sys.executable, "-m", "goondan", "run", str(bundle), "--input", "x"],
        capture_output=True,
        text=True,
        env=env,
        timeout=30,
        stdin=subprocess.DEVNULL,
    )
    assert proc.returncode == 0, proc.stderr
    assert list(env_root.glob("workspaces/*/instances/*/metadata.json"))
    assert not (home / ".goondan").exists()


def test_run_never_writes_under_the_bundle_directory(tmp_path: Path, home: Path) -> None:
    import shutil

    bundle = tmp_path / "quickstart"
    shutil.copytree(EXAMPLE, bundle, ignore=shutil.ignore_patterns("__pycache__", ".goondan"))
    before = sorted(str(p.relative_to(bundle)) for p in bundle.rglob("*"))
    proc = gdn("run", str(bundle), "--input", "add 2 and 3", "--state-root", str(tmp_path / "s"), home=home)
    assert proc.returncode == 0, proc.stderr
    after = sorted(str(p.relative_to(bundle)) for p in bundle.rglob("*"))
    assert after == before
