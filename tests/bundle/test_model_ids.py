"""A Model whose ``model`` id is not in the installed provider SDK's own list is a warning
(E_CONFIG_MODEL_UNKNOWN) with a did-you-mean from that list; never for a Model that talks to another
server (``endpoint`` or the SDK's base URL variable), an SDK that is not installed, or the runtime's
load. The list is read from the SDK's source, so validation imports no SDK."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from goondan.bundle import API_VERSION, ValidationReport, _model_ids, validate_bundle
from goondan.errors import ConfigIssue
from kit import write_bundle

AGENT = {"apiVersion": API_VERSION, "kind": "Agent", "metadata": {"name": "a"}, "spec": {"modelConfig": {}}}


def check(root: Path, env: dict[str, str] | None = None, **spec: Any) -> ValidationReport:
    model = {"apiVersion": API_VERSION, "kind": "Model", "metadata": {"name": "m"}, "spec": spec}
    agent = {**AGENT, "spec": {"modelConfig": {"modelRef": "Model/m"}}}
    swarm = {
        "apiVersion": API_VERSION,
        "kind": "Swarm",
        "metadata": {"name": "default"},
        "spec": {"entryAgent": "Agent/a", "agents": ["Agent/a"]},
    }
    write_bundle(root, model, agent, swarm)
    return validate_bundle(root, env={"K": "k", **(env or {})})


def unknown(report: ValidationReport) -> list[ConfigIssue]:
    assert report.errors == [], report.errors
    return [w for w in report.warnings if w.code == "E_CONFIG_MODEL_UNKNOWN"]


KEY = {"apiKey": {"valueFrom": {"env": "K"}}}


@pytest.mark.parametrize(
    ("provider", "model", "meant"),
    [("anthropic", "claude-sonet-4-5", "claude-sonnet-4-5"), ("openai", "gpt-4o-mnii", "gpt-4o-mini")],
)
def test_a_misspelt_model_id_is_a_warning_with_the_sdks_nearest_name(
    tmp_path: Path, provider: str, model: str, meant: str
) -> None:
    (warning,) = unknown(check(tmp_path, provider=provider, model=model, **KEY))
    assert warning.severity == "warning" and f"model {model!r}" in warning.message
    assert warning.path is not None and warning.path.endswith("spec.model") and warning.line, warning
    assert warning.suggestion is not None and f"Did you mean {meant!r}?" in warning.suggestion


def test_a_model_id_far_from_every_known_one_names_some_known_ones(tmp_path: Path) -> None:
    (warning,) = unknown(check(tmp_path, provider="openai", model="zzzz-qqqq", **KEY))
    known = _model_ids.sdk_models("openai")
    assert known is not None and known.names[0] in (warning.suggestion or "")


@pytest.mark.parametrize("provider", ["anthropic", "openai"])
def test_every_model_id_the_sdk_lists_passes(tmp_path: Path, provider: str) -> None:
    known = _model_ids.sdk_models(provider)
    assert known is not None and len(known.names) > 5, "the installed SDK's list was not found"
    for i, name in enumerate((known.names[0], known.names[-1])):
        assert unknown(check(tmp_path / str(i), provider=provider, model=name, **KEY)) == []


def test_a_model_on_another_server_is_not_checked(tmp_path: Path) -> None:
    report = check(tmp_path / "a", provider="openai", model="my-llama", endpoint="http://127.0.0.1:8000/v1")
    assert unknown(report) == []
    via_env = check(tmp_path / "b", {"ANTHROPIC_BASE_URL": "http://127.0.0.1:9/"}, provider="anthropic", model="x")
    assert unknown(via_env) == []


def test_no_warning_when_the_sdk_is_not_installed(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(_model_ids.SDK_MODEL_LISTS, "openai", ("goondan_no_such_sdk", "types.py", "ChatModel"))
    _model_ids.sdk_models.cache_clear()
    try:
        assert unknown(check(tmp_path, provider="openai", model="gpt-4o-mnii", **KEY)) == []
    finally:
        _model_ids.sdk_models.cache_clear()


def test_validation_imports_no_sdk_and_the_runtime_load_reads_no_list(tmp_path: Path) -> None:
    check(tmp_path, provider="anthropic", model="claude-sonet-4", **KEY)
    script = (
        "import sys\n"
        "from goondan.bundle import load_bundle, validate_bundle, _model_ids\n"
        f"load_bundle({str(tmp_path)!r}, env={{'K': 'k'}})\n"
        "assert _model_ids.sdk_models.cache_info().misses == 0, 'load_bundle read the SDK list'\n"
        f"report = validate_bundle({str(tmp_path)!r}, env={{'K': 'k'}})\n"
        "assert [w.code for w in report.warnings] == ['E_CONFIG_MODEL_UNKNOWN'], report.warnings\n"
        "assert 'anthropic' not in sys.modules, 'validation imported the SDK'\n"
    )
    proc = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr


@pytest.mark.parametrize(
    ("provider", "model"),
    [
        ("anthropic", "claude-opus-4-1"),  # served, and dropped from anthropic 2.12.0's list
        ("anthropic", "claude-3-7-sonnet-latest"),
        ("anthropic", "claude-3-5-haiku-20241022"),
        ("anthropic", "claude-sonnet-4-20250514"),
        ("openai", "gpt-4o-2024-05-13"),  # a dated snapshot
        ("openai", "o3-deep-research"),  # 'research' is two letters from the listed 'search': a word of its own
        ("openai", "gpt-4o-mini-tts"),
        ("openai", "ft:gpt-4o-mini-2024-07-18:my-org::abc123"),  # a fine-tune
    ],
)
def test_an_id_made_of_the_providers_own_words_passes_though_the_sdk_does_not_list_it(
    tmp_path: Path, provider: str, model: str
) -> None:
    assert unknown(check(tmp_path, provider=provider, model=model, **KEY)) == []


@pytest.mark.parametrize(
    ("provider", "model", "said", "meant"),
    [
        ("anthropic", "claude-opsu-4-1", "misspelt anthropic model id", "claude-opus-4-1"),  # corrected, unlisted
        ("anthropic", "claud-sonnet-4-5", "misspelt anthropic model id", "claude-sonnet-4-5"),
        ("openai", "gtp-4o", "misspelt openai model id", "gpt-4o"),
        ("anthropic", "Claude-Sonnet-4-5", "ids are lower case", "claude-sonnet-4-5"),
        ("anthropic", "claude-3.5-sonnet", "use '-' between version numbers", "claude-3-5-sonnet"),
        ("anthropic", "gpt-4o", "is `provider: openai` meant?", None),
        ("openai", "gemini-2.5-flash", "is `provider: google` meant?", None),
        ("openai", "llama3", "does not look like an id of provider openai", None),
    ],
)
def test_an_id_that_is_almost_surely_a_mistake_still_warns(
    tmp_path: Path, provider: str, model: str, said: str, meant: str | None
) -> None:
    (warning,) = unknown(check(tmp_path, provider=provider, model=model, **KEY))
    assert said in warning.message, warning.message
    if meant is not None:
        assert f"Did you mean {meant!r}?" in (warning.suggestion or ""), warning.suggestion
