from __future__ import annotations

import os
from pathlib import Path

import pytest
from bundle_testkit import MODEL_DOC, check, only

from goondan.bundle import load_bundle, resolve_value_source, validate_bundle
from goondan.bundle._values import secret_env_name
from goondan.errors import ConfigError
from kit import agent_yaml, write_files

HEAD = "apiVersion: goondan.ai/v1\n"


def doc(kind: str, name: str, spec: str) -> str:
    return f"{HEAD}kind: {kind}\nmetadata:\n  name: {name}\nspec:\n{spec}"


def agent_with(spec_tail: str) -> str:
    """Model doc (lines 1-10), then an Agent whose spec fields start on line 17."""
    return MODEL_DOC + "---\n" + doc("Agent", "a", "  modelConfig: {modelRef: Model/m}\n" + spec_tail)


@pytest.mark.parametrize("ref", ["Tool", "Tool/a/b", "/x", "Tool/", "{kind: Tool}", "42"])
def test_malformed_object_ref_is_invalid_ref(tmp_path: Path, ref: str) -> None:
    report = check(tmp_path, {"goondan.yaml": agent_with(f"  tools:\n    - {ref}\n")})
    issue = only(report.errors, "E_CONFIG_INVALID_REF")
    assert issue.path is not None and issue.path.startswith("goondan.yaml#1.spec.tools[0]")
    assert issue.line == 19


def test_ref_item_with_bad_ref_points_inside_the_item(tmp_path: Path) -> None:
    report = check(tmp_path, {"goondan.yaml": agent_with("  tools:\n    - ref: Tool/a/b\n")})
    issue = only(report.errors, "E_CONFIG_INVALID_REF")
    assert issue.path == "goondan.yaml#1.spec.tools[0].ref"
    assert (issue.line, issue.column) == (19, 7)


def test_missing_ref_target_is_ref_not_found_with_did_you_mean(tmp_path: Path) -> None:
    files = {
        "goondan.yaml": agent_with("  tools:\n    - ref: Tool/utill\n"),
        "tools.yaml": doc(
            "Tool",
            "util",
            "  entry: ./t.py\n  exports: [{name: x, description: d, parameters: {type: object}}]\n",
        ),
        "t.py": "import collections\n\nhandlers = collections.defaultdict(lambda: print)  # any export name\n",
    }
    issue = only(check(tmp_path, files).errors, "E_CONFIG_REF_NOT_FOUND")
    assert issue.path == "goondan.yaml#1.spec.tools[0]"
    assert (issue.line, issue.column) == (19, 7)
    assert issue.suggestion == "did you mean 'util'?"


def test_ref_kind_must_match_the_field(tmp_path: Path) -> None:
    issue = only(check(tmp_path, {"goondan.yaml": agent_with("  tools: [Model/m]\n")}).errors, "E_CONFIG_INVALID_REF")
    assert issue.path == "goondan.yaml#1.spec.tools[0]"
    assert "must reference a Tool" in issue.message


def test_builtin_needs_package_scoped_ref(tmp_path: Path) -> None:
    report = check(tmp_path, {"goondan.yaml": agent_with("  extensions: [Extension/context-message]\n")})
    issue = only(report.errors, "E_CONFIG_REF_NOT_FOUND")
    assert "@goondan/base" in (issue.suggestion or "")


def test_package_scoped_ref_to_goondan_base_resolves(tmp_path: Path) -> None:
    tail = (
        "  extensions:\n"
        "    - {kind: Extension, name: context-message, package: '@goondan/base'}\n"
        "    - ref: {kind: Extension, name: context-message, package: '@goondan/base'}\n"
        "      config: {includeAgentPrompt: false}\n"
    )
    write_files(tmp_path, {"goondan.yaml": agent_with(tail)})
    plan = load_bundle(tmp_path, env={}).agent_plan("a")
    assert [e.resource.package for e in plan.extensions] == ["@goondan/base", "@goondan/base"]
    assert plan.extensions[0].config == {"includeAgentPrompt": True}
    assert plan.extensions[1].config == {"includeAgentPrompt": False}


def test_unused_builtin_with_missing_entry_does_not_break_a_bundle(tmp_path: Path, base_package: Path) -> None:
    (base_package / "extensions" / "context_message.py").unlink()
    assert check(tmp_path, {"goondan.yaml": MODEL_DOC}).valid
    report = validate_bundle(tmp_path, env={})
    assert report.valid
    write_files(
        tmp_path,
        {
            "goondan.yaml": agent_with(
                "  extensions: [{ref: {kind: Extension, name: context-message, package: '@goondan/base'}}]\n"
            )
        },
    )
    issue = only(validate_bundle(tmp_path, env={}).errors, "E_CONFIG_ENTRY_NOT_FOUND")
    assert issue.file == str(base_package / "goondan.yaml")


def test_unknown_package_in_ref_is_ref_not_found(tmp_path: Path) -> None:
    tail = "  tools: [{kind: Tool, name: x, package: '@acme/none'}]\n"
    issue = only(check(tmp_path, {"goondan.yaml": agent_with(tail)}).errors, "E_CONFIG_REF_NOT_FOUND")
    assert "@acme/none" in issue.message


def test_ref_to_invalid_resource_is_not_reported_twice(tmp_path: Path) -> None:
    report = check(tmp_path, {"goondan.yaml": MODEL_DOC.replace("model: x", "model: ''") + "---\n" + agent_yaml()})
    assert [i.code for i in report.errors] == ["E_CONFIG_SCHEMA_INVALID"]


def test_required_tools_must_be_tools_of_the_agent(tmp_path: Path) -> None:
    report = check(tmp_path, {"goondan.yaml": agent_with("  requiredTools: [bash__exec]\n")})
    issue = only(report.errors, "E_CONFIG_SCHEMA_INVALID")
    assert issue.path == "goondan.yaml#1.spec.requiredTools[0]"
    assert "spec.requiredTools(bash__exec)" in issue.message


ENTRY_CASES = [
    ("../outside.py", "E_CONFIG_ENTRY_OUTSIDE_ROOT"),
    ("/etc/passwd.py", "E_CONFIG_ENTRY_OUTSIDE_ROOT"),
    ("./sub/../../outside.py", "E_CONFIG_ENTRY_OUTSIDE_ROOT"),
    ("./missing.py", "E_CONFIG_ENTRY_NOT_FOUND"),
    ("./e.txt", "E_CONFIG_SCHEMA_INVALID"),
]


@pytest.mark.parametrize(("entry", "code"), ENTRY_CASES)
def test_parent_directory_and_absolute_entries_are_rejected(tmp_path: Path, entry: str, code: str) -> None:
    root = tmp_path / "b"
    (tmp_path / "outside.py").write_text("")
    files = {
        "goondan.yaml": MODEL_DOC,
        "extensions.yaml": doc("Extension", "e", f"  entry: '{entry}'\n"),
        "e.txt": "",
    }
    issue = only(check(root, files).errors, code)
    assert issue.path == "extensions.yaml#0.spec.entry"
    assert (issue.file, issue.line, issue.column) == ("extensions.yaml", 6, 3)
    if code == "E_CONFIG_ENTRY_OUTSIDE_ROOT":
        assert "inside the bundle" in (issue.suggestion or "")


def test_symlink_pointing_outside_root_is_rejected(tmp_path: Path) -> None:
    root = tmp_path / "b"
    root.mkdir()
    (tmp_path / "real.py").write_text("")
    os.symlink(tmp_path / "real.py", root / "link.py")
    files = {"goondan.yaml": MODEL_DOC, "extensions.yaml": doc("Extension", "e", "  entry: ./link.py\n")}
    issue = only(check(root, files).errors, "E_CONFIG_ENTRY_OUTSIDE_ROOT")
    assert issue.path == "extensions.yaml#0.spec.entry"


def connection(spec: str) -> dict[str, str]:
    swarm = doc("Swarm", "default", "  entryAgent: Agent/a\n  agents: [Agent/a]\n")
    conn = doc("Connection", "conn", "  connectorRef: Connector/c\n" + spec)
    connector = doc("Connector", "c", "  entry: ./c.py\n  events: [{name: msg}]\n")
    return {
        "goondan.yaml": MODEL_DOC + "---\n" + agent_yaml("a") + "---\n" + agent_yaml("b") + "---\n" + swarm,
        "connections.yaml": conn,
        "connectors.yaml": connector,
        "c.py": "async def run(ctx): ...\n",
    }


def test_required_env_missing_names_variable_and_resource(tmp_path: Path) -> None:
    report = check(tmp_path, connection("  secrets:\n    token: {valueFrom: {env: BOT_TOKEN}}\n"))
    issue = only(report.errors, "E_CONFIG_ENV_MISSING")
    assert issue.path == "connections.yaml#0.spec.secrets.token"
    assert (issue.line, issue.column) == (8, 5)
    assert "BOT_TOKEN" in issue.message and "Connection/conn" in issue.message
    assert "export BOT_TOKEN" in (issue.suggestion or "") and ".env" in (issue.suggestion or "")
    assert check(tmp_path, {}, env={"BOT_TOKEN": "t"}).valid


def test_secret_ref_reads_goondan_secret_env_convention(tmp_path: Path) -> None:
    spec = "  secrets:\n    token: {valueFrom: {secretRef: {ref: Secret/slack-bot, key: token}}}\n"
    report = check(tmp_path, connection(spec))
    issue = only(report.errors, "E_CONFIG_ENV_MISSING")
    assert "GOONDAN_SECRET_SLACK_BOT_TOKEN" in issue.message
    assert check(tmp_path, {}, env={"GOONDAN_SECRET_SLACK_BOT_TOKEN": "x"}).valid


def test_route_agent_must_be_in_the_swarm(tmp_path: Path) -> None:
    spec = "  ingress:\n    rules:\n      - route: {agentRef: Agent/b}\n"
    issue = only(check(tmp_path, connection(spec)).errors, "E_CONFIG_SCHEMA_INVALID")
    assert issue.path == "connections.yaml#0.spec.ingress.rules[0].route.agentRef"


def test_route_instance_key_and_property_are_exclusive(tmp_path: Path) -> None:
    spec = "  ingress:\n    rules:\n      - route: {instanceKey: k, instanceKeyProperty: chat}\n"
    issue = only(check(tmp_path, connection(spec)).errors, "E_CONFIG_SCHEMA_INVALID")
    assert issue.path == "connections.yaml#0.spec.ingress.rules[0].route"


def test_connection_refs_are_checked(tmp_path: Path) -> None:
    files = connection("  swarmRef: Swarm/nope\n")
    issue = only(check(tmp_path, files).errors, "E_CONFIG_REF_NOT_FOUND")
    assert issue.path == "connections.yaml#0.spec.swarmRef"


def test_resolve_value_source_policy() -> None:
    env = {"A": "1", "GOONDAN_SECRET_S_K": "s"}
    assert resolve_value_source({"value": "v"}, env, required=True, path="p") == "v"
    assert resolve_value_source({"valueFrom": {"env": "A"}}, env, required=True, path="p") == "1"
    assert resolve_value_source({"valueFrom": {"env": "B"}}, env, required=False, path="p") is None
    assert resolve_value_source(None, env, required=False, path="p") is None
    secret = {"valueFrom": {"secretRef": {"ref": "Secret/s", "key": "k"}}}
    assert resolve_value_source(secret, env, required=True, path="p") == "s"
    with pytest.raises(ConfigError) as info:
        resolve_value_source({"valueFrom": {"env": "B"}}, env, required=True, path="Model/m spec.apiKey")
    assert info.value.code == "E_CONFIG_ENV_MISSING" and "B" in info.value.message
    with pytest.raises(ConfigError) as info:
        resolve_value_source({}, env, required=True, path="p")
    assert info.value.code == "E_CONFIG_SCHEMA_INVALID"
    with pytest.raises(ConfigError):
        resolve_value_source(
            {"valueFrom": {"env": "A", "secretRef": {"ref": "Secret/s", "key": "k"}}},
            env,
            required=True,
            path="p",
        )
    assert secret_env_name("my.secret", "api-key") == "GOONDAN_SECRET_MY_SECRET_API_KEY"
