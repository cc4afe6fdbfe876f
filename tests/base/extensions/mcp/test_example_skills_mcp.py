"""examples/skills-mcp runs offline through the real CLI: skills + MCP (stdio server in the example)
+ message-compaction, with the ``python`` model."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

EXAMPLE = Path(__file__).resolve().parents[4] / "examples" / "skills-mcp"

EXPECTED = """\
Release 1.2.0 is out!
- Faster startup
- Skills can run scripts
- MCP servers reconnect after a crash
(19 words)
"""


def test_the_example_runs_offline_from_any_directory(tmp_path: Path) -> None:
    state = tmp_path / "state"
    argv = [sys.executable, "-m", "goondan", "run", str(EXAMPLE), "--input", "prepare the release notes"]
    done = subprocess.run(
        [*argv, "--state-root", str(state)], cwd=tmp_path, capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout == EXPECTED
    (skills_state,) = state.rglob("extensions/skills.json")
    assert json.loads(skills_state.read_text())["openSkills"] == ["release-notes"]
    (messages,) = state.rglob("messages/base.jsonl")
    records = [json.loads(line) for line in messages.read_text().splitlines()]
    contexts = [r["data"]["content"] for r in records if r["data"]["role"] == "system"]
    assert any("[mcp.resources server=mcp]" in c and "release://versions" in c for c in contexts)
    assert any("[skills.open name=release-notes" in c for c in contexts)
