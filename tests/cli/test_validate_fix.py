"""``gdn validate --fix``: mechanical fixes only, shown as a diff first, applied with consent."""

from __future__ import annotations

import json
import os
import pty
import select
import subprocess
import sys
import time
from pathlib import Path

from cli_testkit import env_for, gdn

from kit import write_files

BROKEN = """\
# my bundle: this comment stays
kind: Package
metadata:
  name: fx
spec:
  version: 0.1.0
---
apiVersion: goondan.ai/v1
kind: Model
metadata: {name: m}
spec:
  provider: scripted
  model: m
  options: {rules: [{reply: {text: fixed}}]}
---
apiVersion: goondan.ai/v1
kind: Agent
metadata:
  name: a
spec:
  modelConfig:
    model_ref: Model/m   # snake_case, as Python habits write it
  required_tools: []
---
kind: Swarm
metadata: {name: default}
spec:
  entry_agent: Agent/a
  agents: [Agent/a]
"""


def test_fix_shows_the_diff_and_writes_nothing_without_consent(tmp_path: Path) -> None:
    app = write_files(tmp_path / "app", {"goondan.yml": BROKEN})
    proc = gdn(tmp_path, "validate", str(app), "--fix")
    assert proc.returncode == 4
    assert "rename goondan.yml -> goondan.yaml" in proc.stdout
    assert "+apiVersion: goondan.ai/v1" in proc.stdout
    assert "-    model_ref: Model/m   # snake_case" in proc.stdout
    assert "+    modelRef: Model/m   # snake_case" in proc.stdout
    assert "+  entryAgent: Agent/a" in proc.stdout
    assert "Not applied" in proc.stdout
    assert (app / "goondan.yml").read_text() == BROKEN and not (app / "goondan.yaml").exists()


def test_fix_yes_applies_every_mechanical_fix_and_the_bundle_then_runs(tmp_path: Path) -> None:
    app = write_files(tmp_path / "app", {"goondan.yml": BROKEN})
    proc = gdn(tmp_path, "validate", str(app), "--fix", "--yes")
    assert proc.returncode == 0, proc.stdout
    assert "Applied 6 fix(es)." in proc.stdout and "Bundle is valid." in proc.stdout
    text = (app / "goondan.yaml").read_text()
    assert not (app / "goondan.yml").exists()
    assert text.startswith("# my bundle: this comment stays\napiVersion: goondan.ai/v1\nkind: Package\n")
    assert text.count("apiVersion: goondan.ai/v1") == 4 and "model_ref" not in text
    assert gdn(tmp_path, "run", str(app), "--input", "hi").stdout == "fixed\n"
    again = gdn(tmp_path, "validate", str(app), "--fix")
    assert again.returncode == 0 and "Nothing to fix mechanically." in again.stdout


def test_typos_that_need_judgement_are_reported_not_guessed(tmp_path: Path) -> None:
    typo = BROKEN.replace("  required_tools: []\n", "  promt: {system: hi}\n")
    app = write_files(tmp_path / "app", {"goondan.yaml": typo})
    proc = gdn(tmp_path, "validate", str(app), "--fix", "--yes")
    assert proc.returncode == 4
    assert "promt: {system: hi}" in (app / "goondan.yaml").read_text()
    assert "unknown field 'promt'" in proc.stdout and "did you mean 'prompt'" in proc.stdout


def test_a_field_written_in_both_spellings_is_left_for_the_user_not_duplicated(tmp_path: Path) -> None:
    both = BROKEN.replace(
        "  entry_agent: Agent/a\n", "  entryAgent: Agent/a\n  agents: [Agent/a]\n  entry_agent: Agent/a\n", 1
    )
    both = both.replace("  agents: [Agent/a]\n", "", 1)  # the original agents line, after the new one
    app = write_files(tmp_path / "app", {"goondan.yaml": both})
    proc = gdn(tmp_path, "validate", str(app), "--fix", "--yes")
    text = (app / "goondan.yaml").read_text()
    assert text.count("entryAgent:") == 1 and "entry_agent: Agent/a" in text  # never two entryAgent keys
    assert "E_CONFIG_PARSE_ERROR" not in proc.stdout + proc.stderr
    assert "unknown field 'entry_agent'" in proc.stdout and proc.returncode == 4


def test_fix_with_json_output_keeps_stdout_json(tmp_path: Path) -> None:
    app = write_files(tmp_path / "app", {"goondan.yaml": BROKEN})
    proc = gdn(tmp_path, "validate", str(app), "--fix", "--yes", "--format", "json")
    assert json.loads(proc.stdout)["valid"] is True
    assert "+apiVersion: goondan.ai/v1" in proc.stderr


def test_fix_asks_on_a_terminal_and_applies_on_yes(tmp_path: Path) -> None:
    app = write_files(tmp_path / "app", {"goondan.yaml": BROKEN})
    master, slave = pty.openpty()
    proc = subprocess.Popen(
        [sys.executable, "-m", "goondan", "validate", str(app), "--fix"],
        stdin=slave,
        stdout=slave,
        stderr=slave,
        env=env_for(tmp_path, TERM="xterm"),
    )
    os.close(slave)
    seen = b""
    deadline = time.monotonic() + 60
    while b"[y/N]" not in seen and time.monotonic() < deadline:
        if select.select([master], [], [], 1)[0]:
            seen += os.read(master, 4096)
    assert b"Apply 5 fix(es)? [y/N]" in seen
    os.write(master, b"y\n")
    assert proc.wait(timeout=60) == 0
    os.close(master)
    assert "entryAgent: Agent/a" in (app / "goondan.yaml").read_text()
