"""A Connection config value from the environment that breaks the connector's schema names its
variable: `PORT=abc` read "config.port: expected integer but got string (got '***')", which said
neither where the value came from nor what to check (the value stays hidden, as every variable's)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

RECIPE = Path(__file__).resolve().parents[2] / "docs" / "cookbook" / "webhook-approvals"


def test_a_bad_port_from_the_environment_names_its_variable(tmp_path: Path) -> None:
    bundle = tmp_path / "ops"
    shutil.copytree(RECIPE, bundle)
    env = {**os.environ, "HOME": str(tmp_path / "home"), "NO_COLOR": "1", "WEBHOOK_SECRET": "s3cret", "PORT": "abc"}
    checked = subprocess.run(
        [sys.executable, "-m", "goondan", "validate", str(bundle)],
        capture_output=True,
        text=True,
        timeout=120,
        env=env,
        stdin=subprocess.DEVNULL,
    )
    assert checked.returncode == 4, checked.stdout + checked.stderr
    assert "config.port: expected integer but got string (got the value of PORT, not shown)" in checked.stdout
    assert "suggestion: check PORT in the environment or the bundle's .env" in checked.stdout
    assert "abc" not in checked.stdout and "'***'" not in checked.stdout
