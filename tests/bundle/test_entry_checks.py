"""validate_bundle reads entry files without running them: syntax, handlers, extension config, API keys."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from bundle_testkit import codes, only, real_base_root

from goondan.bundle import validate_bundle
from kit import write_files


@pytest.fixture(autouse=True)
def base_package() -> Path:
    """The real @goondan/base (overrides conftest's stub copy): built-in config schemas are checked."""
    return real_base_root()


HEADER = "apiVersion: goondan.ai/v1\n"
MODEL = (
    HEADER
    + "kind: Model\nmetadata: {name: m}\n"
    + "spec: {provider: scripted, model: x, options: {rules: [{reply: {text: hi}}]}}\n"
)


def tool_yaml(exports: list[str], entry: str = "./tools/calc.py") -> str:
    items = ", ".join(f"{{name: {e}, description: d, parameters: {{type: object}}}}" for e in exports)
    return HEADER + f"kind: Tool\nmetadata: {{name: calc}}\nspec:\n  entry: {entry}\n  exports: [{items}]\n"


def agent(extra: str = "", model: str = "Model/m") -> str:
    return HEADER + f"kind: Agent\nmetadata: {{name: main}}\nspec:\n  modelConfig: {{modelRef: {model}}}\n{extra}"


def bundle(tmp_path: Path, docs: list[str], files: dict[str, str] | None = None) -> Path:
    return write_files(tmp_path, {"goondan.yaml": "---\n".join(docs), **(files or {})})


def test_tool_file_with_a_syntax_error_is_reported_with_its_file_and_line(tmp_path: Path) -> None:
    root = bundle(tmp_path, [MODEL, tool_yaml(["add"])], {"tools/calc.py": "def add(ctx, args):\n    return (\n"})
    issue = only(validate_bundle(root, env={}).errors, "E_CONFIG_ENTRY_SYNTAX")
    assert issue.file == "tools/calc.py" and issue.line is not None and issue.line >= 2
    assert "Tool/calc" in issue.message and "py_compile" in (issue.suggestion or "")


def test_return_outside_function_is_a_syntax_error_too(tmp_path: Path) -> None:
    root = bundle(tmp_path, [MODEL, tool_yaml(["add"])], {"tools/calc.py": "return 1\nhandlers = {}\n"})
    assert only(validate_bundle(root, env={}).errors, "E_CONFIG_ENTRY_SYNTAX").line == 1


def test_tool_without_handlers_is_reported(tmp_path: Path) -> None:
    root = bundle(tmp_path, [MODEL, tool_yaml(["add"])], {"tools/calc.py": "def add(ctx, args):\n    return 1\n"})
    issue = only(validate_bundle(root, env={}).errors, "E_CONFIG_ENTRY_EXPORT_MISSING")
    assert "handlers" in issue.message and issue.file == "goondan.yaml" and issue.line is not None


def test_handlers_dict_missing_an_export_names_the_export_and_suggests_the_close_key(tmp_path: Path) -> None:
    source = "def add(ctx, args):\n    return 1\n\n\nhandlers = {'ad': add, 'mul': add}\n"
    root = bundle(tmp_path, [MODEL, tool_yaml(["add", "mul"])], {"tools/calc.py": source})
    issue = only(validate_bundle(root, env={}).errors, "E_CONFIG_TOOL_HANDLER_MISSING")
    assert "'add'" in issue.message and "tools/calc.py:5" in issue.message
    assert "did you mean 'ad'?" in (issue.suggestion or "")
    assert issue.path is not None and issue.path.endswith("spec.exports[0].name")


def test_checks_never_run_the_module_and_dynamic_handlers_are_left_to_the_runtime(tmp_path: Path) -> None:
    marker = tmp_path / "ran"
    source = (
        f"open({str(marker)!r}, 'w').close()\n"
        "handlers = {}\nfor name in ('add', 'mul'):\n    handlers[name] = print\n"
    )
    root = bundle(tmp_path, [MODEL, tool_yaml(["add", "mul"])], {"tools/calc.py": source})
    report = validate_bundle(root, env={})
    assert report.errors == []
    assert not marker.exists()


def test_extension_connector_and_python_model_need_their_entry_function(tmp_path: Path) -> None:
    docs = [
        HEADER + "kind: Model\nmetadata: {name: m}\nspec: {provider: python, model: x, options: {entry: ./model.py}}\n",
        HEADER + "kind: Extension\nmetadata: {name: ext}\nspec: {entry: ./ext.py}\n",
        HEADER + "kind: Connector\nmetadata: {name: con}\nspec: {entry: ./con.py, events: [{name: message}]}\n",
    ]
    files = {"model.py": "def generat(request):\n    pass\n", "ext.py": "x = 1\n", "con.py": "def run(ctx): pass\n"}
    report = validate_bundle(bundle(tmp_path, docs, files), env={})
    messages = [e.message for e in report.errors if e.code == "E_CONFIG_ENTRY_EXPORT_MISSING"]
    assert len(messages) == 2
    assert any("Model/m" in m and "generate" in m for m in messages)
    assert any("Extension/ext" in m and "register" in m for m in messages)


def test_builtin_extension_config_typo_is_reported_with_did_you_mean(tmp_path: Path) -> None:
    uses = (
        "  extensions:\n"
        "    - ref: {kind: Extension, name: message-window, package: '@goondan/base'}\n"
        "      config: {maxMesages: 10}\n"
    )
    root = bundle(tmp_path, [MODEL, agent(uses)])
    issue = only(validate_bundle(root, env={}).errors, "E_CONFIG_EXTENSION_CONFIG_INVALID")
    assert "maxMesages" in issue.message and "did you mean 'maxMessages'?" in (issue.suggestion or "")
    lines = (root / "goondan.yaml").read_text().splitlines()
    assert issue.file == "goondan.yaml" and "maxMesages" in lines[(issue.line or 0) - 1]


def test_builtin_extension_with_a_computed_schema_is_checked_too(tmp_path: Path) -> None:
    uses = (
        "  extensions:\n"
        "    - ref: {kind: Extension, name: message-compaction, package: '@goondan/base'}\n"
        "      config: {maxMessages: 0}\n"
    )
    root = bundle(tmp_path, [MODEL, agent(uses)])
    assert "E_CONFIG_EXTENSION_CONFIG_INVALID" in codes(validate_bundle(root, env={}).errors)


def test_valid_builtin_extension_config_passes(tmp_path: Path) -> None:
    uses = (
        "  extensions:\n"
        "    - ref: {kind: Extension, name: message-window, package: '@goondan/base'}\n"
        "      config: {maxMessages: 10}\n"
    )
    assert validate_bundle(bundle(tmp_path, [MODEL, agent(uses)]), env={}).errors == []


def test_local_extension_literal_schema_is_checked_in_its_own_config(tmp_path: Path) -> None:
    ext = HEADER + "kind: Extension\nmetadata: {name: ext}\nspec: {entry: ./ext.py, config: {limt: 3}}\n"
    source = (
        "CONFIG_SCHEMA = {'type': 'object', 'properties': {'limit': {'type': 'integer'}}, "
        "'additionalProperties': False}\n\n\ndef register(api, config):\n    pass\n"
    )
    root = bundle(tmp_path, [MODEL, ext, agent("  extensions: [Extension/ext]\n")], {"ext.py": source})
    issue = only(validate_bundle(root, env={}).errors, "E_CONFIG_EXTENSION_CONFIG_INVALID")
    assert issue.path is not None and "spec.config.limt" in issue.path
    assert "did you mean 'limit'?" in (issue.suggestion or "")


OPENAI = HEADER + (
    "kind: Model\nmetadata: {name: gpt}\n"
    "spec:\n  provider: openai\n  model: gpt-x\n  apiKey: {valueFrom: {env: MY_BUNDLE_KEY}}\n"
)


def test_model_api_key_from_an_unset_variable_fails_at_load_naming_it(tmp_path: Path) -> None:
    root = bundle(tmp_path, [OPENAI, agent(model="Model/gpt")])
    issue = only(validate_bundle(root, env={}).errors, "E_CONFIG_ENV_MISSING")
    assert "MY_BUNDLE_KEY" in issue.message and "Model/gpt" in issue.message
    lines = (root / "goondan.yaml").read_text().splitlines()
    assert issue.file == "goondan.yaml" and "apiKey" in lines[(issue.line or 0) - 1]
    assert validate_bundle(root, env={"MY_BUNDLE_KEY": "k"}).errors == []


def test_unused_model_with_an_unset_key_does_not_block_the_bundle(tmp_path: Path) -> None:
    assert validate_bundle(bundle(tmp_path, [MODEL, OPENAI, agent()]), env={}).errors == []


def test_gdn_run_and_validate_report_the_unset_api_key_variable(tmp_path: Path) -> None:
    swarm = HEADER + "kind: Swarm\nmetadata: {name: default}\nspec: {entryAgent: Agent/main, agents: [Agent/main]}\n"
    root = bundle(tmp_path / "b", [OPENAI, agent(model="Model/gpt"), swarm])
    env = {"PATH": "/usr/bin:/bin", "HOME": str(tmp_path), "OPENAI_API_KEY": "sk-other"}
    for args, status in ((["validate"], 4), (["run", "--input", "hi"], 3)):
        proc = subprocess.run(
            [sys.executable, "-m", "goondan", *args, str(root), "--state-root", str(tmp_path / "s")],
            capture_output=True,
            text=True,
            env=env,
            timeout=60,
        )
        assert proc.returncode == status, proc.stdout + proc.stderr
        output = proc.stdout + proc.stderr
        assert "E_CONFIG_ENV_MISSING" in output and "MY_BUNDLE_KEY" in output and "goondan.yaml:" in output


def test_load_bundle_reports_syntax_errors_and_leaves_handler_checks_to_the_runtime(tmp_path: Path) -> None:
    from goondan.bundle import load_bundle
    from goondan.errors import ConfigError

    root = bundle(tmp_path, [MODEL, tool_yaml(["add"])], {"tools/calc.py": "x = 1\n"})
    assert load_bundle(root, env={}) is not None  # no handlers: the runtime's import reports E_TOOL_LOAD
    (root / "tools" / "calc.py").write_text("handlers = {\n")
    with pytest.raises(ConfigError) as info:
        load_bundle(root, env={})
    assert info.value.code == "E_CONFIG_ENTRY_SYNTAX" and info.value.file == "tools/calc.py"
