"""A required API key or Connection secret read from a variable that is set but blank is
E_CONFIG_ENV_MISSING at its line, in ``gdn validate`` and ``gdn run`` alike.

``ANTHROPIC_API_KEY=`` left empty in ``.env`` (the template's line uncommented, no key pasted)
validated, and the first model call failed; an empty webhook ``signingSecret`` counts as no secret,
so the webhook accepted unsigned requests."""

from __future__ import annotations

import json
from pathlib import Path

from cli_testkit import ECHO_BUNDLE, WEBHOOK_CONNECTION, gdn

from kit import write_bundle

ANTHROPIC = ECHO_BUNDLE.replace(
    '  provider: scripted\n  model: echo\n  options:\n    rules:\n      - reply:\n          text: "echo: {{last}}"\n',
    "  provider: anthropic\n  model: claude-sonnet-4-20250514\n  apiKey: { valueFrom: { env: ANTHROPIC_API_KEY } }\n",
)


def test_a_blank_api_key_in_dotenv_fails_validate_and_run_at_the_api_key_line(tmp_path: Path) -> None:
    assert "apiKey" in ANTHROPIC
    b = write_bundle(tmp_path / "b", ANTHROPIC, files={".env": "ANTHROPIC_API_KEY=\n"})
    proc = gdn(tmp_path, "validate", str(b), "--format", "json")
    assert proc.returncode == 4, proc.stdout
    (error,) = json.loads(proc.stdout)["errors"]
    assert error["code"] == "E_CONFIG_ENV_MISSING" and "ANTHROPIC_API_KEY is set but empty" in error["message"]
    assert error["path"].endswith("spec.apiKey") and error["line"] is not None
    run = gdn(tmp_path, "run", str(b), "--input", "hi")
    assert run.returncode == 3 and "set but empty" in run.stderr, run.stderr


def test_a_blank_connection_secret_is_an_error_and_a_blank_setting_means_the_default(tmp_path: Path) -> None:
    b = write_bundle(tmp_path / "b", ECHO_BUNDLE + WEBHOOK_CONNECTION)
    proc = gdn(tmp_path, "validate", str(b), "--format", "json", WEBHOOK_SECRET=" ", HOOK_PATH="")
    assert proc.returncode == 4, proc.stdout
    (error,) = json.loads(proc.stdout)["errors"]
    assert error["code"] == "E_CONFIG_ENV_MISSING" and error["path"].endswith("spec.secrets.signingSecret")
    ok = gdn(tmp_path, "validate", str(b), WEBHOOK_SECRET="s3cret", HOOK_PATH="")
    assert ok.returncode == 0, ok.stdout + ok.stderr


def test_a_blank_key_of_a_model_with_its_own_endpoint_stays_valid(tmp_path: Path) -> None:
    local = ANTHROPIC.replace("  provider: anthropic\n", "  provider: openai\n  endpoint: http://127.0.0.1:9/v1\n")
    local = local.replace("ANTHROPIC_API_KEY", "LOCAL_KEY")
    b = write_bundle(tmp_path / "b", local)
    proc = gdn(tmp_path, "validate", str(b), LOCAL_KEY="")
    assert proc.returncode == 0, proc.stdout + proc.stderr
