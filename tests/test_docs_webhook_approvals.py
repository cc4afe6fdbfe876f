"""docs/cookbook/webhook-approvals.md runs as written: its send.py starts `gdn run` on the bundle,
POSTs signed messages and prints the replies; answering the same approval twice (two people in
one chat) gets the bot's E_APPROVAL_DECIDED reply, not a replay refusal and a traceback."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
RECIPE = ROOT / "docs" / "cookbook" / "webhook-approvals"


def test_the_recipes_client_approves_once_and_is_told_when_it_approves_again(tmp_path: Path) -> None:
    doc = (ROOT / "docs" / "cookbook" / "webhook-approvals.md").read_text(encoding="utf-8")
    assert '"delete old.log" "approve {approval}"' in doc
    out = subprocess.run(
        [
            sys.executable,
            str(RECIPE / "send.py"),
            str(RECIPE),
            "delete old.log",
            "approve {approval}",
            "approve {approval}",
        ],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=tmp_path,
        env={
            "PATH": str(Path(sys.executable).parent),
            "HOME": str(tmp_path),
            "GOONDAN_STATE_ROOT": str(tmp_path / "s"),
        },
    )
    assert out.returncode == 0, out.stdout + out.stderr
    lines = out.stdout.splitlines()
    assert lines[:2] == ["> delete old.log", 'Waiting for approval: files__delete {"name": "delete old.log"}']
    assert re.fullmatch(r"Reply `approve (appr_\w+)` or `deny \1 <reason>`\.", lines[2])
    assert lines[4] == "done: removed old.log"
    assert lines[5].startswith("> approve appr_")
    assert "E_APPROVAL_DECIDED" in lines[6] and "was already approved by connector:webhook" in lines[6]
    assert "Traceback" not in out.stderr
