"""`gdn doctor` lists what the extensions an agent uses need, as they are declared in the guides.

A compaction's summaryModel is a Model: its provider's extra and its key (apiKeyEnv, else the
provider's default variables). Doctor said "the bundle needs no optional extra and no API key", and
the first `gdn run` failed with E_EXT_CONFIG (apiKeyEnv not set). An Extension of the bundle whose
entry re-exports the MCP bridge (one per server, as the MCP guide and cookbook declare them) needs the
`mcp` extra as Extension/mcp does; only the latter was counted."""

from __future__ import annotations

import json
from pathlib import Path

from cli_testkit import gdn
from test_doctor import SCRIPTED, bundle

from kit import write_files


def _compaction(summary_model: str) -> str:
    return (
        "  extensions:\n"
        '    - ref: { kind: Extension, name: message-compaction, package: "@goondan/base" }\n'
        f"      config: {{ maxMessages: 60, mode: truncate, summaryModel: {summary_model} }}\n"
    )


def _checks(tmp_path: Path, summary_model: str, **env: str) -> tuple[int, dict[str, dict[str, str]]]:
    app = write_files(
        tmp_path / "app", {"goondan.yaml": bundle(model=SCRIPTED, extra_agent_spec=_compaction(summary_model))}
    )
    proc = gdn(tmp_path, "doctor", str(app), "--json", **env)
    return proc.returncode, {c["check"]: c for c in json.loads(proc.stdout)["checks"]}


def test_a_summary_models_api_key_env_is_a_key_the_bundle_needs(tmp_path: Path) -> None:
    model = "{ provider: anthropic, model: claude-haiku-4-5, apiKeyEnv: SUMMARY_KEY }"
    code, checks = _checks(tmp_path, model, SUMMARY_KEY="", ANTHROPIC_API_KEY="")
    assert code == 1
    assert checks["key:SUMMARY_KEY"]["status"] == "fail"
    assert "Extension/message-compaction summaryModel.apiKeyEnv" in checks["key:SUMMARY_KEY"]["detail"]
    assert "extra:anthropic" in checks and "needs" not in checks
    code, checks = _checks(tmp_path / "set", model, SUMMARY_KEY="sk-x", ANTHROPIC_API_KEY="")
    assert checks["key:SUMMARY_KEY"]["status"] == "ok"


def test_a_summary_model_without_api_key_env_needs_its_providers_default_key(tmp_path: Path) -> None:
    code, checks = _checks(tmp_path, "{ provider: openai, model: gpt-x }", OPENAI_API_KEY="")
    assert code == 1 and checks["key:OPENAI_API_KEY"]["status"] == "fail"
    assert "summaryModel (provider openai)" in checks["key:OPENAI_API_KEY"]["detail"]


def test_an_extension_reexporting_the_mcp_bridge_needs_the_mcp_extra(tmp_path: Path) -> None:
    notes = (
        "  extensions: [Extension/notes]\n"
        "---\napiVersion: goondan.ai/v1\nkind: Extension\nmetadata: {name: notes}\n"
        "spec:\n  entry: ./notes.py\n  config: {transport: {type: stdio, command: [python, server.py]}}\n"
    )
    app = write_files(
        tmp_path / "app",
        {
            "goondan.yaml": bundle(model=SCRIPTED, extra_agent_spec=notes),
            "notes.py": "from goondan.base.extensions.mcp import CONFIG_SCHEMA, register\n",
        },
    )
    proc = gdn(tmp_path, "doctor", str(app), "--json")
    found = {c["check"]: c for c in json.loads(proc.stdout)["checks"]}
    assert "Agent/a uses Extension/notes (the MCP bridge)" in found["extra:mcp"]["detail"], proc.stdout
