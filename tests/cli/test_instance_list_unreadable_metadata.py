"""An instance whose metadata.json is corrupt is still listed by `gdn instance list` (with a warning
naming the file), and `gdn run` continues its conversation and writes a new metadata.json."""

from __future__ import annotations

import json
from pathlib import Path

from cli_testkit import ECHO_BUNDLE, gdn

from kit import write_bundle


def test_corrupt_metadata_is_listed_with_a_warning_and_the_next_run_rewrites_it(tmp_path: Path) -> None:
    bundle = write_bundle(tmp_path / "b", ECHO_BUNDLE)
    state = ["--state-root", str(tmp_path / "state")]
    first = gdn(tmp_path, "run", str(bundle), "--input", "hello", *state)
    assert first.returncode == 0, first.stderr
    (metadata,) = (tmp_path / "state").glob("workspaces/*/instances/talker__default/metadata.json")
    metadata.write_bytes(b"garbage{{")

    listed = gdn(tmp_path, "instance", "list", str(bundle), *state)
    assert listed.returncode == 0, listed.stderr
    (row,) = [line.split() for line in listed.stdout.splitlines()[1:]]
    at = row.index("talker")
    assert row[at + 1 : at + 3] == ["default", "unreadable"]
    assert f"metadata.json is not valid JSON ({metadata})" in listed.stderr
    assert str(metadata.parent / "messages") in listed.stderr and "next turn" in listed.stderr

    as_json = gdn(tmp_path, "instance", "list", str(bundle), "--json", *state)
    (record,) = [json.loads(line) for line in as_json.stdout.splitlines()]
    assert record["status"] == "unreadable" and record["problem"] == "metadata.json is not valid JSON"

    # the conversation did not depend on the metadata: the next turn sees it and rewrites the file
    again = gdn(tmp_path, "run", str(bundle), "--input", "again", *state)
    assert again.returncode == 0, again.stderr
    assert json.loads(metadata.read_bytes())["status"] == "idle"
    history = (metadata.parent / "messages" / "base.jsonl").read_text()
    assert history.count('"role":"user"') == 2
    relisted = gdn(tmp_path, "instance", "list", str(bundle), *state)
    assert "unreadable" not in relisted.stdout and "warning" not in relisted.stderr
