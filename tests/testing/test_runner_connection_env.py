"""A test (goondan.testing) and an eval scenario start no connector, so a bundle's Connection needs
neither its port nor its secrets set: the webhook-approvals recipe as shipped failed with
E_CONFIG_ENV_MISSING for PORT and WEBHOOK_SECRET, and the testing guide had to say "without its
Connection". A Model's own API key variable is still required (it is used)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from goondan.testing import AgentRunner

RECIPE = Path(__file__).resolve().parents[2] / "docs" / "cookbook" / "webhook-approvals"


@pytest.fixture
def unset(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("PORT", "WEBHOOK_SECRET", "SIGNING_SECRET"):
        monkeypatch.delenv(name, raising=False)


def test_the_recipe_with_its_connection_runs_under_the_runner_without_its_variables(
    tmp_path: Path, unset: None
) -> None:
    bundle = tmp_path / "ops"
    shutil.copytree(RECIPE, bundle)
    with AgentRunner(bundle, state_root=tmp_path / "s") as runner:
        paused = runner.request("delete old.log")
        paused.assert_finished("awaiting_approval")
        runner.approve(paused.pending_approvals[0]).assert_text("done: removed old.log")


def test_gdn_eval_of_the_recipe_with_its_connection_needs_no_port_or_secret(tmp_path: Path) -> None:
    shutil.copytree(RECIPE, tmp_path / "ops")
    (tmp_path / "suite.yaml").write_text(
        "name: ops\nbundle: ./ops\nscenarios:\n"
        "  - {name: asks first, input: delete old.log, expect: {finishReason: awaiting_approval}}\n"
    )
    env = {k: v for k, v in os.environ.items() if k not in ("PORT", "WEBHOOK_SECRET", "SIGNING_SECRET")}
    run = subprocess.run(
        [sys.executable, "-m", "goondan", "eval", "suite.yaml", "--state-root", str(tmp_path / "state")],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
        stdin=subprocess.DEVNULL,
        env={**env, "HOME": str(tmp_path / "home")},
    )
    assert run.returncode == 0, run.stdout + run.stderr
    assert "PASSED: 1/1" in run.stdout and "E_CONFIG_ENV_MISSING" not in run.stderr
