"""What a stdio MCP server prints on stderr reaches `gdn run -v`: when a tool of the user's server
raises, the SDK sends the model only "Error executing tool NAME" and logs the traceback on the
server's stderr, which was logged at DEBUG (only `-vv` showed it)."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

RECIPE = Path(__file__).resolve().parents[4] / "docs" / "cookbook" / "mcp-tools"


def test_a_tool_that_raises_in_the_server_shows_its_traceback_with_v(tmp_path: Path) -> None:
    bundle = tmp_path / "shop"
    shutil.copytree(RECIPE, bundle)
    server = bundle / "server.py"
    server.write_text(
        server.read_text().replace("    return STOCK.get(item, 0)", '    raise ValueError("no such shelf")', 1)
    )
    argv = [sys.executable, "-m", "goondan", "run", str(bundle), "--input", "apples"]
    argv += ["--state-root", str(tmp_path / "state")]

    quiet = subprocess.run(argv, cwd=tmp_path, capture_output=True, text=True, timeout=120)
    assert quiet.returncode == 0, quiet.stderr
    assert "E_MCP_TOOL_ERROR" in quiet.stdout and "Error executing tool stock" in quiet.stdout
    assert "no such shelf" not in quiet.stderr  # the server's log is for -v

    verbose = subprocess.run([*argv, "-v"], cwd=tmp_path, capture_output=True, text=True, timeout=120)
    assert verbose.returncode == 0, verbose.stderr
    assert "[inventory stderr]" in verbose.stderr
    assert "no such shelf" in verbose.stderr and "ValueError" in verbose.stderr, verbose.stderr
