"""Approval settings are checked at load: ``approval`` of a Tool export is ``required`` or
``none``; ``Agent.spec.approval.tools`` names ``<Tool>__<export>`` (an export that exists when the
Tool is one of the agent's); ``timeoutSeconds`` is a positive number of seconds (at most a year)."""

from __future__ import annotations

from pathlib import Path

import pytest
from bundle_testkit import MODEL_DOC, check, only

TOOL = """apiVersion: goondan.ai/v1
kind: Tool
metadata:
  name: shell
spec:
  entry: ./t.py
  exports:
    - name: run
      description: d
      parameters: {type: object}
%s"""

AGENT = """apiVersion: goondan.ai/v1
kind: Agent
metadata:
  name: a
spec:
  modelConfig:
    modelRef: Model/m
  tools: [Tool/shell]
%s"""


def files(export_extra: str = "", agent_extra: str = "") -> dict[str, str]:
    return {
        "goondan.yaml": MODEL_DOC + "---\n" + (TOOL % export_extra) + "---\n" + (AGENT % agent_extra),
        "t.py": "handlers = {'run': lambda ctx, args: 'ok'}\n",
    }


def test_valid_approval_settings_load(tmp_path: Path) -> None:
    report = check(
        tmp_path,
        files(
            "      approval: required\n",
            "  approval:\n    tools: [shell__run, bash__exec, mcp__anything]\n    timeoutSeconds: 90\n",
        ),
    )
    assert report.valid, report.errors


def test_a_tool_export_approval_is_required_or_none(tmp_path: Path) -> None:
    issue = only(check(tmp_path, files("      approval: maybe\n")).errors, "E_CONFIG_SCHEMA_INVALID")
    assert issue.path.endswith("spec.exports[0].approval")


def test_an_approval_policy_naming_a_missing_export_of_the_agents_tool_is_an_error(tmp_path: Path) -> None:
    issue = only(
        check(tmp_path, files(agent_extra="  approval:\n    tools: [shell__rnu]\n")).errors, "E_CONFIG_SCHEMA_INVALID"
    )
    assert issue.path.endswith("spec.approval.tools[0]")
    assert "shell__rnu" in issue.message and "shell__run" in issue.message


@pytest.mark.parametrize("value", ["0", "-5", "1e12", "soon"])
def test_an_approval_timeout_is_a_positive_number_of_seconds(tmp_path: Path, value: str) -> None:
    report = check(tmp_path, files(agent_extra=f"  approval:\n    timeoutSeconds: {value}\n"))
    issue = only(report.errors, "E_CONFIG_SCHEMA_INVALID")
    assert issue.path.endswith("spec.approval.timeoutSeconds")


@pytest.mark.parametrize("name", ["bash", "__exec", "bash__", "a b__c"])
def test_approval_tool_names_are_tool_double_underscore_export(tmp_path: Path, name: str) -> None:
    report = check(tmp_path, files(agent_extra=f"  approval:\n    tools: ['{name}']\n"))
    issue = only(report.errors, "E_CONFIG_SCHEMA_INVALID")
    assert "spec.approval.tools" in issue.path
