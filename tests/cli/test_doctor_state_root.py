"""`gdn doctor` checks that the state root can be written (every `gdn run` writes there): a path under
a file, or a read-only volume, fails the check with what to do, before the service's first request
fails. One that does not exist yet is fine (created on the first run) and doctor creates nothing."""

from __future__ import annotations

import json
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest
from cli_testkit import gdn

from kit import write_files

BUNDLE = """\
apiVersion: goondan.ai/v1
kind: Model
metadata: {name: main}
spec: {provider: scripted, model: m, options: {rules: [{reply: {text: hi}}]}}
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


def _state_check(tmp_path: Path, root: Path) -> tuple[int, dict[str, str]]:
    app = write_files(tmp_path / "app", {"goondan.yaml": BUNDLE})
    proc = gdn(tmp_path, "doctor", str(app), "--json", GOONDAN_STATE_ROOT=str(root))
    (check,) = [c for c in json.loads(proc.stdout)["checks"] if c["check"] == "state-root"]
    return proc.returncode, check


def test_a_state_root_under_a_file_fails_the_doctor(tmp_path: Path) -> None:
    (tmp_path / "notadir").write_text("x")
    code, check = _state_check(tmp_path, tmp_path / "notadir" / "state")
    assert code == 1 and check["status"] == "fail"
    assert check["detail"].endswith(f"{tmp_path / 'notadir'} is not a directory")
    assert "--state-root or GOONDAN_STATE_ROOT" in check["suggestion"]


def test_a_state_root_that_does_not_exist_yet_is_fine_and_not_created(tmp_path: Path) -> None:
    code, check = _state_check(tmp_path, tmp_path / "later" / "state")
    assert code == 0 and check["status"] == "ok" and "created on the first run" in check["detail"]
    assert not (tmp_path / "later").exists()


@pytest.fixture
def read_only_dir(tmp_path: Path) -> Iterator[Path]:
    point = tmp_path / "ro"
    point.mkdir()
    mount = shutil.which("mount")
    if mount is None or subprocess.run([mount, "-t", "tmpfs", "tmpfs", str(point)], capture_output=True).returncode:
        pytest.skip("this user may not mount a tmpfs (needs root): the read-only volume case is not run")
    try:
        (point / "state").mkdir()
        subprocess.run([mount, "-o", "remount,ro", str(point)], check=True)
        yield point / "state"
    finally:
        subprocess.run(["umount", str(point)], check=False)


def test_a_state_root_on_a_read_only_volume_fails_the_doctor(tmp_path: Path, read_only_dir: Path) -> None:
    code, check = _state_check(tmp_path, read_only_dir)
    assert code == 1 and check["status"] == "fail"
    assert check["detail"] == f"{read_only_dir}: {read_only_dir} is read-only"
