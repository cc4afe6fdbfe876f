from __future__ import annotations

from pathlib import Path

import pytest
from bundle_testkit import MODEL_DOC, check, only

from goondan.bundle import load_bundle
from kit import agent_yaml

HEAD = "apiVersion: goondan.ai/v1\n"


def doc(kind: str, name: str, spec: str) -> str:
    """A document whose ``spec:`` block starts on line 5 (spec fields from line 6)."""
    return f"{HEAD}kind: {kind}\nmetadata:\n  name: {name}\nspec:\n{spec}"


def test_undeclared_spec_field_is_rejected_with_suggestion(tmp_path: Path) -> None:
    report = check(tmp_path, {"goondan.yaml": MODEL_DOC + "  modle: y\n"})
    issue = only(report.errors, "E_CONFIG_SCHEMA_INVALID")
    assert issue.path == "goondan.yaml#0.spec.modle"
    assert (issue.line, issue.column) == (11, 3)
    assert "did you mean 'model'?" in (issue.suggestion or "")


def test_missing_required_field_points_at_parent(tmp_path: Path) -> None:
    report = check(tmp_path, {"goondan.yaml": MODEL_DOC.replace("  model: x\n", "")})
    issue = only(report.errors, "E_CONFIG_SCHEMA_INVALID")
    assert issue.path == "goondan.yaml#0.spec.model"
    assert "missing required field 'model'" in issue.message
    assert (issue.line, issue.column) == (5, 1)


def test_unknown_provider_suggests_the_closest(tmp_path: Path) -> None:
    report = check(tmp_path, {"goondan.yaml": doc("Model", "m", "  provider: anthropc\n  model: x\n")})
    issue = only(report.errors, "E_CONFIG_SCHEMA_INVALID")
    assert issue.path == "goondan.yaml#0.spec.provider"
    assert (issue.line, issue.column) == (6, 3)
    assert "did you mean 'anthropic'?" in (issue.suggestion or "")


def test_python_provider_needs_an_existing_entry(tmp_path: Path) -> None:
    text = doc("Model", "m", "  provider: python\n  model: x\n  options:\n    entry: ./model.py\n")
    report = check(tmp_path, {"goondan.yaml": text})
    issue = only(report.errors, "E_CONFIG_ENTRY_NOT_FOUND")
    assert issue.path == "goondan.yaml#0.spec.options.entry"
    assert (issue.line, issue.column) == (9, 5)
    (tmp_path / "model.py").write_text("def generate(request):\n    return {}\n")
    bundle = load_bundle(tmp_path, env={})
    model = bundle.get("Model", "m")
    assert model is not None and model.entry_path() == (tmp_path / "model.py").resolve()


@pytest.mark.parametrize(
    ("provider", "options", "needle"),
    [
        ("openai", "    maxTokensParam: tokens\n", "maxTokensParam"),
        ("anthropic", "    timeoutMs: soon\n", "timeoutMs"),
        ("local", "    maxToolCalls: 0\n", "maxToolCalls"),
    ],
)
def test_provider_options_are_checked_at_validation_time(
    tmp_path: Path, provider: str, options: str, needle: str
) -> None:
    """A bad option of a real or local provider is a validation error at spec.options (with its line),
    not a failure on the first request."""
    text = doc("Model", "m", f"  provider: {provider}\n  model: x\n  options:\n{options}")
    report = check(tmp_path, {"goondan.yaml": text})
    issue = only(report.errors, "E_MODEL_CONFIG")
    assert issue.path == "goondan.yaml#0.spec.options"
    assert needle in issue.message
    assert issue.line == 8


def test_python_provider_without_entry_is_rejected(tmp_path: Path) -> None:
    report = check(tmp_path, {"goondan.yaml": doc("Model", "m", "  provider: python\n  model: x\n")})
    issue = only(report.errors, "E_CONFIG_SCHEMA_INVALID")
    assert issue.path == "goondan.yaml#0.spec.options.entry"


@pytest.mark.parametrize(
    ("rules", "path"),
    [
        ("[{when: {role: robot}, reply: {text: x}}]", "spec.options.rules[0].when.role"),
        ("[{when: {regex: '(['}, reply: {text: x}}]", "spec.options.rules[0].when.regex"),
        ("[{reply: {toolCalls: [{args: {}}]}}]", "spec.options.rules[0].reply.toolCalls[0].name"),
        ("[{reply: {toolCalls: [{name: t, args: [1]}]}}]", "spec.options.rules[0].reply.toolCalls[0].args"),
        ("[{when: {role: user}}]", "spec.options.rules[0].reply"),
        ("[{reply: {text: x}, extra: 1}]", "spec.options.rules[0].extra"),
        ("[]", "spec.options.rules"),
    ],
)
def test_scripted_provider_rules_shape_is_validated(tmp_path: Path, rules: str, path: str) -> None:
    text = doc("Model", "m", f"  provider: scripted\n  model: x\n  options:\n    rules: {rules}\n")
    report = check(tmp_path, {"goondan.yaml": text})
    issue = only(report.errors, "E_CONFIG_SCHEMA_INVALID")
    assert issue.path == f"goondan.yaml#0.{path}"
    assert issue.line == 9


def test_api_key_value_source_must_have_exactly_one_source(tmp_path: Path) -> None:
    spec = "  provider: openai\n  model: x\n  apiKey: {value: a, valueFrom: {env: K}}\n"
    report = check(tmp_path, {"goondan.yaml": doc("Model", "m", spec)})
    issue = only(report.errors, "E_CONFIG_SCHEMA_INVALID")
    assert issue.path == "goondan.yaml#0.spec.apiKey"
    assert "exactly one" in issue.message


def test_optional_api_key_from_unset_env_is_left_unset(tmp_path: Path) -> None:
    spec = "  provider: openai\n  model: x\n  apiKey: {valueFrom: {env: NOPE_KEY}}\n"
    report = check(tmp_path, {"goondan.yaml": doc("Model", "m", spec)})
    assert report.valid, report.errors


@pytest.mark.parametrize(("params", "field"), [("{temperature: 3}", "temperature"), ("{maxTokens: 0}", "maxTokens")])
def test_agent_params_are_range_checked(tmp_path: Path, params: str, field: str) -> None:
    spec = f"  modelConfig:\n    modelRef: Model/m\n    params: {params}\n"
    report = check(tmp_path, {"goondan.yaml": MODEL_DOC + "---\n" + doc("Agent", "a", spec)})
    issue = only(report.errors, "E_CONFIG_SCHEMA_INVALID")
    assert issue.path == f"goondan.yaml#1.spec.modelConfig.params.{field}"
    assert issue.line == 19


def test_prompt_system_and_system_ref_are_exclusive(tmp_path: Path) -> None:
    spec = "  modelConfig: {modelRef: Model/m}\n  prompt:\n    system: hi\n    systemRef: ./p.md\n"
    report = check(tmp_path, {"goondan.yaml": MODEL_DOC + "---\n" + doc("Agent", "a", spec)})
    issue = only(report.errors, "E_CONFIG_SCHEMA_INVALID")
    assert issue.path == "goondan.yaml#1.spec.prompt"
    assert (issue.line, issue.column) == (18, 3)


def test_missing_system_ref_file_is_entry_not_found(tmp_path: Path) -> None:
    spec = "  modelConfig: {modelRef: Model/m}\n  prompt:\n    systemRef: ./p.md\n"
    report = check(tmp_path, {"goondan.yaml": MODEL_DOC + "---\n" + doc("Agent", "a", spec)})
    issue = only(report.errors, "E_CONFIG_ENTRY_NOT_FOUND")
    assert issue.path == "goondan.yaml#1.spec.prompt.systemRef"


def swarm(spec: str) -> str:
    return MODEL_DOC + "---\n" + agent_yaml("a") + "---\n" + agent_yaml("b") + "---\n" + doc("Swarm", "s", spec)


def test_entry_agent_must_be_listed_in_swarm_agents(tmp_path: Path) -> None:
    report = check(tmp_path, {"goondan.yaml": swarm("  entryAgent: Agent/b\n  agents: [Agent/a]\n")})
    issue = only(report.errors, "E_CONFIG_SCHEMA_INVALID")
    assert issue.path == "goondan.yaml#3.spec.entryAgent"
    assert (issue.line, issue.column) == (27, 3)


def test_swarm_needs_at_least_one_agent(tmp_path: Path) -> None:
    report = check(tmp_path, {"goondan.yaml": swarm("  entryAgent: Agent/a\n  agents: []\n")})
    issue = only(report.errors, "E_CONFIG_SCHEMA_INVALID")
    assert issue.path == "goondan.yaml#3.spec.agents"


def test_swarm_instance_key_must_not_be_empty(tmp_path: Path) -> None:
    spec = "  entryAgent: Agent/a\n  agents: [Agent/a]\n  instanceKey: ''\n"
    issue = only(check(tmp_path, {"goondan.yaml": swarm(spec)}).errors, "E_CONFIG_SCHEMA_INVALID")
    assert issue.path == "goondan.yaml#3.spec.instanceKey"


@pytest.mark.parametrize(
    ("policy", "path"),
    [
        ("{maxStepsPerTurn: 0}", "spec.policy.maxStepsPerTurn"),
        ("{retries: 3}", "spec.policy.retries"),
        ("{lifecycle: {ttl: 1}}", "spec.policy.lifecycle.ttl"),
        ("{shutdown: {gracePeriodSeconds: soon}}", "spec.policy.shutdown.gracePeriodSeconds"),
        ("{maxParallelToolCalls: 0}", "spec.policy.maxParallelToolCalls"),
    ],
)
def test_swarm_policy_allows_only_documented_keys(tmp_path: Path, policy: str, path: str) -> None:
    spec = f"  entryAgent: Agent/a\n  agents: [Agent/a]\n  policy: {policy}\n"
    issue = only(check(tmp_path, {"goondan.yaml": swarm(spec)}).errors, "E_CONFIG_SCHEMA_INVALID")
    assert issue.path == f"goondan.yaml#3.{path}"


TOOL_OK = (
    "  entry: ./t.py\n  exports:\n    - name: run\n      description: d\n"
    "      parameters: {type: object, properties: {x: {type: string}}}\n"
)


def tool_files(spec: str) -> dict[str, str]:
    return {
        "goondan.yaml": MODEL_DOC,
        "tools.yaml": doc("Tool", "t", spec),
        "t.py": "import collections\n\nhandlers = collections.defaultdict(lambda: print)  # any export name\n",
    }


def test_valid_tool_loads(tmp_path: Path) -> None:
    assert check(tmp_path, tool_files(TOOL_OK)).valid


def test_tool_export_parallel_is_a_boolean(tmp_path: Path) -> None:
    assert check(tmp_path / "ok", tool_files(TOOL_OK + "      parallel: false\n")).valid
    issue = only(
        check(tmp_path / "bad", tool_files(TOOL_OK + "      parallel: sometimes\n")).errors, "E_CONFIG_SCHEMA_INVALID"
    )
    assert issue.path == "tools.yaml#0.spec.exports[0].parallel"


def test_tool_needs_at_least_one_export(tmp_path: Path) -> None:
    issue = only(check(tmp_path, tool_files("  entry: ./t.py\n  exports: []\n")).errors, "E_CONFIG_SCHEMA_INVALID")
    assert issue.path == "tools.yaml#0.spec.exports"


def test_tool_export_names_must_be_unique(tmp_path: Path) -> None:
    spec = TOOL_OK + "    - name: run\n      description: again\n      parameters: {type: object}\n"
    issue = only(check(tmp_path, tool_files(spec)).errors, "E_CONFIG_SCHEMA_INVALID")
    assert issue.path == "tools.yaml#0.spec.exports[1].name"
    assert (issue.line, issue.column) == (11, 7)


def test_tool_export_name_must_not_contain_double_underscore(tmp_path: Path) -> None:
    issue = only(
        check(tmp_path, tool_files(TOOL_OK.replace("name: run", "name: a__b"))).errors,
        "E_CONFIG_SCHEMA_INVALID",
    )
    assert issue.path == "tools.yaml#0.spec.exports[0].name"


def test_tool_parameters_must_be_an_object_schema(tmp_path: Path) -> None:
    spec = TOOL_OK.replace("{type: object, properties: {x: {type: string}}}", "{type: string}")
    issue = only(check(tmp_path, tool_files(spec)).errors, "E_CONFIG_SCHEMA_INVALID")
    assert issue.path == "tools.yaml#0.spec.exports[0].parameters"
    assert issue.line == 10


def test_tool_parameters_must_be_a_valid_json_schema(tmp_path: Path) -> None:
    spec = TOOL_OK.replace("{x: {type: string}}", "{x: {type: strin}}")
    issue = only(check(tmp_path, tool_files(spec)).errors, "E_CONFIG_SCHEMA_INVALID")
    assert "not a valid JSON Schema" in issue.message


def test_tool_error_message_limit_must_be_positive(tmp_path: Path) -> None:
    issue = only(check(tmp_path, tool_files(TOOL_OK + "  errorMessageLimit: 0\n")).errors, "E_CONFIG_SCHEMA_INVALID")
    assert issue.path == "tools.yaml#0.spec.errorMessageLimit"


def test_extension_config_must_be_an_object(tmp_path: Path) -> None:
    files = {
        "goondan.yaml": MODEL_DOC,
        "extensions.yaml": doc("Extension", "e", "  entry: ./e.py\n  config: [1]\n"),
    }
    files["e.py"] = "def register(api):\n    pass\n"
    issue = only(check(tmp_path, files).errors, "E_CONFIG_SCHEMA_INVALID")
    assert issue.path == "extensions.yaml#0.spec.config"


CONNECTOR_OK = "  entry: ./c.py\n  events:\n    - name: msg\n      properties:\n        chat: {type: string}\n"


def connector_files(spec: str) -> dict[str, str]:
    return {
        "goondan.yaml": MODEL_DOC,
        "connectors.yaml": doc("Connector", "c", spec),
        "c.py": "async def run(ctx): ...\n",
    }


def test_connector_event_names_must_be_unique(tmp_path: Path) -> None:
    spec = CONNECTOR_OK + "    - name: msg\n"
    issue = only(check(tmp_path, connector_files(spec)).errors, "E_CONFIG_SCHEMA_INVALID")
    assert issue.path == "connectors.yaml#0.spec.events[1].name"


def test_connector_property_types_are_limited(tmp_path: Path) -> None:
    spec = CONNECTOR_OK.replace("type: string", "type: date")
    issue = only(check(tmp_path, connector_files(spec)).errors, "E_CONFIG_SCHEMA_INVALID")
    assert issue.path == "connectors.yaml#0.spec.events[0].properties.chat.type"


def test_connector_needs_events(tmp_path: Path) -> None:
    issue = only(check(tmp_path, connector_files("  entry: ./c.py\n")).errors, "E_CONFIG_SCHEMA_INVALID")
    assert issue.path == "connectors.yaml#0.spec.events"
