"""``gdn run`` / ``gdn validate`` typed inside a bundle's subdirectory (its ``tools/``, where the user
was editing) names the bundle they are in and the path to pass: the suggestion was "run inside a
bundle directory", which they believed they were doing."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from cli_testkit import ECHO_BUNDLE, env_for, gdn

from kit import write_bundle


def test_a_command_in_a_bundles_subdirectory_names_the_enclosing_bundle(tmp_path: Path) -> None:
    bundle = write_bundle(tmp_path / "proj" / "bot", ECHO_BUNDLE)
    tools = bundle / "tools" / "lib"
    tools.mkdir(parents=True)
    run = subprocess.run(
        [sys.executable, "-m", "goondan", "run", "--input", "hi"],
        cwd=tools,
        env=env_for(tmp_path),
        capture_output=True,
        text=True,
        timeout=60,
        stdin=subprocess.DEVNULL,
    )
    assert run.returncode == 3, run.stderr
    assert "[E_CONFIG_NOT_A_BUNDLE] . is not a bundle" in run.stderr
    assert f"suggestion: . is inside the bundle {bundle.resolve()}: pass ../.. as the bundle path" in run.stderr
    validate = gdn(tmp_path, "validate", "proj/bot/tools")
    assert validate.returncode == 4
    assert "pass proj/bot as the bundle path" in validate.stdout
    # above the bundle, the bundles below are listed as before
    above = gdn(tmp_path, "validate", "proj")
    assert "is inside the bundle" not in above.stdout and "bundles below it: proj/bot" in above.stdout
