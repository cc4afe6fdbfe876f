"""``gdn logs PATH`` shows the runtime events of the bundle in PATH only, as ``gdn instance list
PATH`` lists its instances: a user types ``gdn logs my-bot`` after ``gdn run my-bot`` (it was
refused as an unrecognized argument). Without PATH: the current directory's bundle when it holds a
goondan.yaml (as ``gdn instance list``), else every bundle's; ``-A`` for every bundle's anyway."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from cli_testkit import ECHO_BUNDLE, env_for, gdn

from kit import write_bundle


def gdn_in(cwd: Path, tmp_path: Path, *args: str) -> subprocess.CompletedProcess[str]:
    """``gdn`` run from ``cwd`` (cli_testkit's runs from tmp_path, which holds no bundle)."""
    return subprocess.run(
        [sys.executable, "-m", "goondan", *args],
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        env=env_for(tmp_path),
        timeout=60,
        cwd=cwd,
    )


def test_logs_of_one_bundle_among_two(tmp_path: Path) -> None:
    state = str(tmp_path / "state")
    one = write_bundle(tmp_path / "one", ECHO_BUNDLE.replace("name: cli-suite", "name: one", 1))
    two = write_bundle(tmp_path / "two", ECHO_BUNDLE.replace("name: cli-suite", "name: two", 1))
    for bundle, key in ((one, "k-one"), (two, "k-two")):
        ran = gdn(tmp_path, "run", str(bundle), "--input", "hi", "--instance-key", key, "--state-root", state)
        assert ran.returncode == 0, ran.stderr
    everything = gdn(tmp_path, "logs", "--state-root", state)
    assert "talker@k-one" in everything.stdout and "talker@k-two" in everything.stdout
    only = gdn(tmp_path, "logs", str(one), "--state-root", state)
    assert only.returncode == 0, only.stderr
    assert "talker@k-one" in only.stdout and "talker@k-two" not in only.stdout, only.stdout
    assert "bundle=one" in only.stderr, only.stderr
    inside = gdn_in(one, tmp_path, "logs", "--state-root", state)  # in the bundle's directory: its events
    assert "talker@k-one" in inside.stdout and "talker@k-two" not in inside.stdout, inside.stdout
    every = gdn_in(one, tmp_path, "logs", "-A", "--state-root", state)
    assert "talker@k-one" in every.stdout and "talker@k-two" in every.stdout, every.stdout
    missing = gdn(tmp_path, "logs", str(tmp_path / "nowhere"), "--state-root", state)
    assert missing.returncode == 3 and "[E_CONFIG_NOT_A_BUNDLE]" in missing.stderr
    assert "-A for every bundle's events" in missing.stderr
