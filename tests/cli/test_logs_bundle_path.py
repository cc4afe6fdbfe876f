"""``gdn logs PATH`` shows the runtime events of the bundle in PATH only, as ``gdn instance list
PATH`` lists its instances: a user types ``gdn logs my-bot`` after ``gdn run my-bot`` (it was
refused as an unrecognized argument). Without PATH every bundle's events are shown, as before."""

from __future__ import annotations

from pathlib import Path

from cli_testkit import ECHO_BUNDLE, gdn

from kit import write_bundle


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
    assert f"bundle={one}" in only.stderr
    missing = gdn(tmp_path, "logs", str(tmp_path / "nowhere"), "--state-root", state)
    assert missing.returncode == 3 and "[E_CONFIG_NOT_A_BUNDLE]" in missing.stderr
    assert "no PATH for every bundle's events" in missing.stderr
