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


EXTENSION = """---
apiVersion: goondan.ai/v1
kind: Extension
metadata:
  name: guard
spec:
  entry: ./g.py
"""


def test_an_approval_name_near_a_tool_the_agent_has_but_with_another_prefix_is_an_error(tmp_path: Path) -> None:
    """``shel__run`` for the agent's ``shell__run``: no call is ever named that, so the typo would
    leave the real tool unguarded; the error names the near tool."""
    report = check(tmp_path, files(agent_extra="  approval:\n    tools: [shel__run]\n"))
    issue = only(report.errors, "E_CONFIG_SCHEMA_INVALID")
    assert issue.path.endswith("spec.approval.tools[0]")
    assert "names no Tool or Extension of this agent" in issue.message
    assert issue.suggestion is not None and "did you mean 'shell__run'?" in issue.suggestion


def test_an_approval_name_of_a_tool_the_agent_does_not_have_is_a_warning(tmp_path: Path) -> None:
    report = check(tmp_path, files(agent_extra="  approval:\n    tools: [filez__delete]\n"))
    assert report.valid, report.errors
    issue = only(report.warnings, "E_CONFIG_SCHEMA_INVALID")
    assert "filez__delete" in issue.message and "no call would ever wait for approval" in issue.message


def test_an_approval_name_of_an_extensions_tool_is_valid(tmp_path: Path) -> None:
    """An extension's tools are named ``<extension>__<tool>``: any such name may be guarded."""
    bundle = files(agent_extra="  extensions:\n    - ref: Extension/guard\n  approval:\n    tools: [guard__wipe]\n")
    bundle["goondan.yaml"] += EXTENSION
    bundle["g.py"] = "def register(api, config):\n    pass\n"
    report = check(tmp_path, bundle)
    assert report.valid, report.errors
    assert not [w for w in report.warnings if "approval" in w.path], report.warnings
