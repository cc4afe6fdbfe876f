from __future__ import annotations

from pathlib import Path

import pytest
from bundle_testkit import SAMPLE_FILES

from goondan.bundle import (
    AgentPlan,
    Bundle,
    ExtensionBinding,
    Resource,
    load_bundle,
    validate_bundle,
)
from goondan.bundle._schemas import AgentSpec, ToolSpec
from goondan.errors import ConfigError
from kit import write_files


def test_valid_sample_bundle_loads_with_all_scopes(sample: Path) -> None:
    report = validate_bundle(sample, env={})
    assert report.valid, report.errors
    assert report.warnings == []
    bundle = report.bundle
    assert isinstance(bundle, Bundle)
    assert bundle.root == sample.resolve()
    assert bundle.package_name == "sample"
    local = {r.key for r in bundle.resources if r.package is None}
    assert local == {
        "Package/sample",
        "Model/fake",
        "Agent/main",
        "Swarm/default",
        "Tool/util",
        "Extension/local",
    }
    assert bundle.get("Extension", "context-message", package="@goondan/base") is not None


def test_load_bundle_accepts_the_goondan_yaml_file_itself(sample: Path) -> None:
    bundle = load_bundle(sample / "goondan.yaml", env={})
    assert bundle.root == sample.resolve()


def test_resource_records_file_doc_index_and_locations(sample: Path) -> None:
    bundle = load_bundle(sample, env={})
    agent = bundle.get("Agent", "main")
    assert isinstance(agent, Resource)
    assert (agent.kind, agent.name, agent.package, agent.api_version) == (
        "Agent",
        "main",
        None,
        "goondan.ai/v1",
    )
    assert agent.file == "goondan.yaml"
    assert agent.doc_index == 2
    assert agent.key == "Agent/main"
    assert isinstance(agent.spec, AgentSpec)
    assert agent.raw["metadata"] == {"name": "main"}
    assert agent.location("spec.tools[1]") == (36, 7)
    assert agent.location("spec.tools[1].nothing.deeper") == (36, 7)  # nearest known parent
    tool = bundle.get("Tool", "util")
    assert tool is not None and tool.file == "tools.yaml" and tool.doc_index == 0
    assert isinstance(tool.spec, ToolSpec) and tool.spec.error_message_limit == 1000
    assert tool.entry_path() == (sample / "tools" / "util.py").resolve()


def test_agent_plan_merges_extension_config_reads_system_ref_and_keeps_required_tools(sample: Path) -> None:
    bundle = load_bundle(sample, env={})
    swarm = bundle.select_swarm()
    plan = bundle.agent_plan("main", swarm)
    assert isinstance(plan, AgentPlan)
    assert plan.agent.name == "main" and plan.swarm is swarm and plan.model.name == "fake"
    assert [t.name for t in plan.tools] == ["util"]  # deduplicated, order kept
    assert plan.tool_names == ["util__echo"]
    assert all(isinstance(e, ExtensionBinding) for e in plan.extensions)
    assert [(e.resource.package, e.name) for e in plan.extensions] == [
        ("@goondan/base", "context-message"),
        (None, "local"),
    ]
    assert plan.extensions[0].config == {"includeAgentPrompt": True, "includeSwarmCatalog": True}
    assert plan.extensions[1].config == {"a": 1, "b": 20}  # the reference wins
    assert plan.prompt_system == "You are main.\n"
    assert plan.required_tools == ["util__echo"]
    assert plan.max_steps_per_turn == 5
    assert plan.params == {"temperature": 0.5, "maxTokens": 100}


def test_max_steps_per_turn_defaults_to_32_without_a_swarm(sample: Path) -> None:
    plan = load_bundle(sample, env={}).agent_plan("main")
    assert plan.swarm is None
    assert plan.max_steps_per_turn == 32


def test_blank_system_prompt_file_means_no_prompt(sample: Path) -> None:
    (sample / "prompts" / "main.md").write_text("  \n\n")
    assert load_bundle(sample, env={}).agent_plan("main").prompt_system is None


def test_system_ref_file_removed_after_load_is_a_config_error(sample: Path) -> None:
    bundle = load_bundle(sample, env={})
    (sample / "prompts" / "main.md").unlink()
    with pytest.raises(ConfigError) as info:
        bundle.agent_plan("main")
    assert info.value.code == "E_CONFIG_ENTRY_NOT_FOUND"
    assert info.value.path == "goondan.yaml#2.spec.prompt.systemRef"


def test_agent_plan_for_unknown_agent_is_a_config_error(sample: Path) -> None:
    bundle = load_bundle(sample, env={})
    with pytest.raises(ConfigError) as info:
        bundle.agent_plan("mian")
    assert info.value.code == "E_CONFIG_REF_NOT_FOUND"
    assert "main" in (info.value.suggestion or "")


def test_select_swarm_prefers_name_then_default_then_sole(sample: Path) -> None:
    bundle = load_bundle(sample, env={})
    assert bundle.select_swarm().name == "default"
    assert bundle.select_swarm("default").name == "default"
    with pytest.raises(ConfigError) as info:
        bundle.select_swarm("defualt")
    assert info.value.code == "E_CONFIG_SWARM_NOT_FOUND"
    assert "default" in (info.value.suggestion or "")


def _swarms_manifest(names: list[str]) -> str:
    docs = [
        "apiVersion: goondan.ai/v1\nkind: Model\nmetadata: {name: m}\nspec: {provider: scripted, model: x,"
        " options: {rules: [{reply: {text: hi}}]}}\n",
        "apiVersion: goondan.ai/v1\nkind: Agent\nmetadata: {name: a}\nspec: {modelConfig: {modelRef: Model/m}}\n",
    ]
    for name in names:
        docs.append(
            f"apiVersion: goondan.ai/v1\nkind: Swarm\nmetadata: {{name: {name}}}\n"
            "spec: {entryAgent: Agent/a, agents: [Agent/a]}\n"
        )
    return "---\n".join(docs)


def test_select_swarm_with_several_and_no_default_is_ambiguous(tmp_path: Path) -> None:
    write_files(tmp_path, {"goondan.yaml": _swarms_manifest(["one", "two"])})
    bundle = load_bundle(tmp_path, env={})
    with pytest.raises(ConfigError) as info:
        bundle.select_swarm()
    assert info.value.code == "E_CONFIG_SWARM_AMBIGUOUS"
    assert "one, two" in (info.value.suggestion or "")


def test_select_swarm_returns_the_sole_swarm(tmp_path: Path) -> None:
    write_files(tmp_path, {"goondan.yaml": _swarms_manifest(["only"])})
    assert load_bundle(tmp_path, env={}).select_swarm().name == "only"


def test_bundle_without_swarm_is_valid_with_a_warning(tmp_path: Path) -> None:
    write_files(tmp_path, {"goondan.yaml": _swarms_manifest([])})
    report = validate_bundle(tmp_path, env={})
    assert report.valid
    assert [(w.code, w.severity) for w in report.warnings] == [("E_CONFIG_SWARM_MISSING", "warning")]
    with pytest.raises(ConfigError) as info:
        load_bundle(tmp_path, env={}).select_swarm()
    assert info.value.code == "E_CONFIG_SWARM_NOT_FOUND"


def test_an_agent_only_another_swarm_lists_is_used_and_one_none_lists_is_a_warning(tmp_path: Path) -> None:
    spare = (
        "apiVersion: goondan.ai/v1\nkind: Agent\nmetadata: {name: spare}\nspec: {modelConfig: {modelRef: Model/m}}\n"
    )
    write_files(tmp_path, {"goondan.yaml": _swarms_manifest(["one"]) + "---\n" + spare})
    report = validate_bundle(tmp_path, env={})
    assert report.valid and load_bundle(tmp_path, env={}).select_swarm().name == "one"
    [warning] = report.warnings
    assert (warning.code, warning.severity, warning.file, warning.line) == (
        "E_CONFIG_AGENT_UNUSED",
        "warning",
        "goondan.yaml",
        report_line(tmp_path, "metadata: {name: spare}"),
    )
    other = "apiVersion: goondan.ai/v1\nkind: Swarm\nmetadata: {name: two}\n"
    other += "spec: {entryAgent: Agent/spare, agents: [Agent/spare]}\n"
    write_files(tmp_path, {"goondan.yaml": _swarms_manifest(["one"]) + "---\n" + spare + "---\n" + other})
    second = validate_bundle(tmp_path, env={})
    assert second.valid and second.warnings == []


def report_line(root: Path, text: str) -> int:
    return (root / "goondan.yaml").read_text().splitlines().index(text) + 1


def test_of_kind_defaults_to_local_scope_and_star_means_all(sample: Path) -> None:
    bundle = load_bundle(sample, env={})
    assert [r.name for r in bundle.of_kind("Extension")] == ["local"]
    assert [r.name for r in bundle.of_kind("Extension", package="@goondan/base")] == ["context-message"]
    assert {r.name for r in bundle.of_kind("Extension", package="*")} == {"local", "context-message"}


def test_resolve_ref_uses_the_owner_package_scope(sample: Path) -> None:
    bundle = load_bundle(sample, env={})
    agent = bundle.get("Agent", "main")
    base_ext = bundle.get("Extension", "context-message", "@goondan/base")
    assert agent is not None and base_ext is not None
    assert bundle.resolve_ref("Tool/util", agent, "Tool").name == "util"
    assert bundle.resolve_ref({"kind": "Extension", "name": "context-message", "package": "@goondan/base"}, agent)
    with pytest.raises(ConfigError) as info:
        bundle.resolve_ref("Extension/context-message", agent)  # built-ins need package
    assert info.value.code == "E_CONFIG_REF_NOT_FOUND"
    with pytest.raises(ConfigError) as info:
        bundle.resolve_ref("Extension/local", base_ext)  # a package cannot see the local bundle
    assert info.value.code == "E_CONFIG_REF_NOT_FOUND"
    with pytest.raises(ConfigError) as info:
        bundle.resolve_ref("Tool/util", agent, "Extension")
    assert info.value.code == "E_CONFIG_INVALID_REF"
    with pytest.raises(ConfigError) as info:
        bundle.resolve_ref("Tool/a/b", agent)
    assert info.value.code == "E_CONFIG_INVALID_REF"


def test_local_package_name_in_ref_means_local_scope(sample: Path) -> None:
    bundle = load_bundle(sample, env={})
    agent = bundle.get("Agent", "main")
    assert agent is not None
    assert bundle.resolve_ref({"kind": "Tool", "name": "util", "package": "sample"}, agent).name == "util"


def test_load_bundle_raises_first_error_and_lists_all(tmp_path: Path) -> None:
    files = dict(SAMPLE_FILES)
    files["goondan.yaml"] = (
        SAMPLE_FILES["goondan.yaml"]
        .replace("Model/fake", "Model/fak")
        .replace("Agent/main\n  agents", "Agent/nope\n  agents")
    )
    write_files(tmp_path, files)
    with pytest.raises(ConfigError) as info:
        load_bundle(tmp_path, env={})
    err = info.value
    assert err.code == "E_CONFIG_REF_NOT_FOUND"
    assert err.path == "goondan.yaml#2.spec.modelConfig.modelRef"
    assert (err.file, err.line, err.column) == ("goondan.yaml", 30, 5)
    assert err.suggestion == "did you mean 'fake'?"
    assert len(err.errors) >= 2
    assert validate_bundle(tmp_path, env={}).bundle is None


def test_specs_dump_back_to_yaml_spelling_and_revalidate(sample: Path) -> None:
    bundle = load_bundle(sample, env={})
    agent = bundle.get("Agent", "main")
    assert agent is not None
    dumped = agent.spec.model_dump(by_alias=True, exclude_none=True)
    assert dumped["modelConfig"]["modelRef"] == {"kind": "Model", "name": "fake"}
    assert dumped["extensions"][1] == {"ref": {"kind": "Extension", "name": "local"}, "config": {"b": 20}}
    assert AgentSpec.model_validate(dumped) == agent.spec


def test_shipped_goondan_base_package_is_valid(sample: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from bundle_testkit import real_base_root

    from goondan.bundle import _loader

    real = real_base_root()
    assert (real / "extensions" / "context_message.py").is_file()
    monkeypatch.setattr(_loader, "base_package_root", lambda: real)
    bundle = load_bundle(sample, env={})
    builtin = bundle.get("Extension", "context-message", package="@goondan/base")
    assert builtin is not None
    assert builtin.entry_path() == (real / "extensions" / "context_message.py").resolve()
    assert builtin.file == str((real / "goondan.yaml").resolve())
