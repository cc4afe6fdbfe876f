"""``gdn validate`` prints a misspelt model id as a warning (exit 0) with the SDK's nearest name;
``--strict`` makes it fail (exit 4), as every warning."""

from __future__ import annotations

from pathlib import Path

from cli_testkit import ECHO_BUNDLE, gdn

from kit import write_bundle


def test_a_misspelt_openai_model_id_warns_and_fails_under_strict(tmp_path: Path) -> None:
    model = "  provider: openai\n  model: gpt-4o-mnii\n  apiKey: {value: sk-test}\n"
    text = ECHO_BUNDLE.replace("  provider: scripted\n  model: echo\n  options:\n", model + "  options:\n", 1)
    text = text.replace('    rules:\n      - reply:\n          text: "echo: {{last}}"\n', "    {}\n", 1)
    b = write_bundle(tmp_path / "b", text)
    proc = gdn(tmp_path, "validate", str(b))
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "[E_CONFIG_MODEL_UNKNOWN] Model/echo: model 'gpt-4o-mnii'" in proc.stdout, proc.stdout
    assert "at: goondan.yaml#1.spec.model (goondan.yaml:" in proc.stdout
    assert "suggestion: Did you mean 'gpt-4o-mini'?" in proc.stdout
    strict = gdn(tmp_path, "validate", str(b), "--strict")
    assert strict.returncode == 4 and "E_CONFIG_MODEL_UNKNOWN" in strict.stdout, strict.stdout


def test_strict_passes_a_model_id_the_api_serves_though_the_sdk_no_longer_lists_it(tmp_path: Path) -> None:
    model = "  provider: anthropic\n  model: claude-opus-4-1\n  apiKey: {value: sk-test}\n"
    text = ECHO_BUNDLE.replace("  provider: scripted\n  model: echo\n  options:\n", model + "  options:\n", 1)
    text = text.replace('    rules:\n      - reply:\n          text: "echo: {{last}}"\n', "    {}\n", 1)
    proc = gdn(tmp_path, "validate", str(write_bundle(tmp_path / "b", text)), "--strict")
    assert proc.returncode == 0 and "E_CONFIG_MODEL_UNKNOWN" not in proc.stdout, proc.stdout
