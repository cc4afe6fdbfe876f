"""Options may come between a subcommand's positionals: `gdn instance delete KEY -y PATH` deletes,
as `gdn instance delete KEY PATH -y` does (argparse alone reported PATH as an unrecognized argument)."""

from __future__ import annotations

from pathlib import Path

from cli_testkit import ECHO_BUNDLE, gdn

from kit import write_bundle


def test_instance_delete_accepts_options_before_the_path(tmp_path: Path) -> None:
    bundle = write_bundle(tmp_path / "b", ECHO_BUNDLE)
    state = ["--state-root", str(tmp_path / "state")]
    assert gdn(tmp_path, "run", str(bundle), "--input", "hi", "--instance-key", "k1", *state).returncode == 0
    instances = tmp_path / "state" / "workspaces"
    assert list(instances.glob("*/instances/talker__k1"))

    deleted = gdn(tmp_path, "instance", "delete", "k1", "-y", str(bundle), *state)
    assert deleted.returncode == 0, deleted.stderr
    assert "deleted talker@k1" in deleted.stdout
    assert not list(instances.glob("*/instances/talker__k1"))

    # an extra word is still reported, against the subcommand
    extra = gdn(tmp_path, "instance", "delete", "k1", "-y", str(bundle), "surplus", *state)
    assert extra.returncode == 2 and "unrecognized arguments: surplus" in extra.stderr


def test_approvals_approve_accepts_options_before_the_path(tmp_path: Path) -> None:
    bundle = write_bundle(tmp_path / "b", ECHO_BUNDLE)
    state = ["--state-root", str(tmp_path / "state")]
    approve = gdn(tmp_path, "approvals", "approve", "appr_missing", "--note", "ok", str(bundle), *state)
    assert "unrecognized arguments" not in approve.stderr, approve.stderr
    assert approve.returncode != 2, approve.stderr
