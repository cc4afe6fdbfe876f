"""A Model switched from an offline provider to a real one keeps its old ``options`` (``gdn init``'s
model says "for a real model, replace the spec with provider: anthropic ..."): the unknown option is
named as the other provider's, and a misspelt option gets the one meant, from real ``gdn validate``
and ``gdn run`` runs."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

BUNDLE = """\
apiVersion: goondan.ai/v1
kind: Model
metadata: {name: main}
spec:
  provider: PROVIDER
  model: MODEL
  apiKey: {valueFrom: {env: SOME_KEY}}
  options:
    OPTIONS
---
apiVersion: goondan.ai/v1
kind: Agent
metadata: {name: a}
spec: {modelConfig: {modelRef: Model/main}}
---
apiVersion: goondan.ai/v1
kind: Swarm
metadata: {name: default}
spec: {entryAgent: Agent/a, agents: [Agent/a]}
"""


def _gdn(tmp_path: Path, provider: str, model: str, options: str, *args: str) -> subprocess.CompletedProcess[str]:
    bundle = tmp_path / "b"
    bundle.mkdir(exist_ok=True)
    text = BUNDLE.replace("PROVIDER", provider).replace("MODEL", model).replace("OPTIONS", options)
    (bundle / "goondan.yaml").write_text(text)
    (bundle / ".env").write_text("SOME_KEY=sk-test\n")
    return subprocess.run(
        [sys.executable, "-m", "goondan", *args, "b", "--state-root", str(tmp_path / "state")],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=60,
        stdin=subprocess.DEVNULL,
    )


def test_scripted_rules_left_under_a_network_provider_are_named_as_a_leftover(tmp_path: Path) -> None:
    rules = "rules: [{reply: {text: hi}}]"
    validate = _gdn(tmp_path, "openai", "gpt-4o-mini", rules, "validate")
    assert validate.returncode == 4, validate.stdout
    assert "[E_MODEL_CONFIG] Model/main: openai model: unknown option 'rules'" in validate.stdout
    assert "'rules' is an option of provider: scripted, left over from it? Remove it" in validate.stdout
    run = _gdn(tmp_path, "openai", "gpt-4o-mini", rules, "run", "--input", "hi")
    assert run.returncode == 3 and "left over from it?" in run.stderr


def test_a_misspelt_option_gets_the_one_meant(tmp_path: Path) -> None:
    validate = _gdn(tmp_path, "anthropic", "claude-sonnet-4-5", "timeout: 30", "validate")
    assert validate.returncode == 4, validate.stdout
    assert "unknown option 'timeout'" in validate.stdout
    assert "suggestion: did you mean 'timeoutSeconds'? Model.spec.options accepts:" in validate.stdout


def test_the_python_providers_entry_under_the_local_provider(tmp_path: Path) -> None:
    validate = _gdn(tmp_path, "local", "smollm2", "entry: ./model.py", "validate")
    assert validate.returncode == 4, validate.stdout
    assert "'entry' is an option of provider: python, left over from it?" in validate.stdout
