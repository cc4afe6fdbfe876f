"""A ``.env`` line that is not ``KEY=value`` (``TOKEN: abc`` from YAML habits, ``TOKEN abc``, an
unclosed quote) is ``E_CONFIG_PARSE_ERROR`` at its line with the line to write, from ``gdn validate``
and ``gdn run``: dotenv logged "could not parse statement starting at line 1" and skipped it, and the
bundle then said the variable "is not set ... put TOKEN=... in the bundle's .env file"."""

from __future__ import annotations

from pathlib import Path

from cli_testkit import ECHO_BUNDLE, gdn

from kit import write_bundle

SECRET_TOOL = """\
---
apiVersion: goondan.ai/v1
kind: Tool
metadata: {name: crm}
spec:
  entry: ./crm.py
  config:
    token: {valueFrom: {env: CRM_TOKEN}}
  exports:
    - {name: find, description: finds, parameters: {type: object}}
"""


def _bundle(tmp_path: Path, dotenv: str) -> Path:
    agent = "    modelRef: Model/echo\n  tools: [Tool/crm]\n"
    text = ECHO_BUNDLE.replace("    modelRef: Model/echo\n", agent, 1) + SECRET_TOOL
    bundle = write_bundle(
        tmp_path / "b", text, files={"crm.py": "def find(ctx, args):\n    return 1\n\n\nhandlers = {'find': find}\n"}
    )
    (bundle / ".env").write_text(dotenv)
    return bundle


def test_a_yaml_style_line_in_dotenv_is_an_error_at_its_line_with_the_line_to_write(tmp_path: Path) -> None:
    _bundle(tmp_path, "# secrets\nCRM_TOKEN: abc123\n")
    validate = gdn(tmp_path, "validate", "b")
    assert validate.returncode == 4, validate.stdout
    assert "[E_CONFIG_PARSE_ERROR] .env:2: not a KEY=value line: 'CRM_TOKEN: abc123'" in validate.stdout
    assert "suggestion: write it as KEY=value (CRM_TOKEN=abc123)" in validate.stdout
    assert "E_CONFIG_ENV_MISSING" not in validate.stdout
    run = gdn(tmp_path, "run", "b", "--input", "hi")
    assert run.returncode == 3, run.stderr
    assert ".env:2: not a KEY=value line" in run.stderr and "could not parse statement" not in run.stderr


def test_an_unclosed_quote_is_named_and_valid_dotenv_forms_still_load(tmp_path: Path) -> None:
    _bundle(tmp_path, "CRM_TOKEN='abc\n")
    assert ".env:1: not a KEY=value line" in gdn(tmp_path, "validate", "b").stdout
    _bundle(tmp_path, '# c\nexport CRM_TOKEN="a b" # note\nEMPTY=\nBARE\nMULTI="one\ntwo"\n')
    validate = gdn(tmp_path, "validate", "b")
    assert validate.returncode == 0, validate.stdout
