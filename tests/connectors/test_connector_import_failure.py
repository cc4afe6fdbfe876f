"""A bundle's own connector module that fails to import: the error names the file and line in the
user's code, as a tool's does, and `gdn run -v` prints the user's traceback. It said only
'[E_CONNECTOR_LOAD] ...: ModuleNotFoundError: No module named 'x'' with 'Check the connector's config
and secrets in the Connection, and its entry module', and -v showed nothing more. A real gdn run."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from cn_testkit import connector_bundle, gdn_env

CONNECTOR = """\
apiVersion: goondan.ai/v1
kind: Connector
metadata:
  name: inbox
spec:
  entry: ./connectors/inbox.py
  events:
    - name: inbox_line
---
apiVersion: goondan.ai/v1
kind: Connection
metadata:
  name: inbox
spec:
  connectorRef: Connector/inbox
"""

MODULE = """\
import asyncio

import helpers_that_do_not_exist


async def run(ctx):
    ctx.ready()
    await asyncio.Event().wait()
"""


def test_a_connector_that_does_not_import_names_its_line_and_shows_its_traceback_with_v(tmp_path: Path) -> None:
    bundle = connector_bundle(tmp_path / "b", CONNECTOR)
    (bundle / "connectors").mkdir()
    (bundle / "connectors" / "inbox.py").write_text(MODULE)
    for verbose in ([], ["-v"]):
        done = subprocess.run(
            [sys.executable, "-m", "goondan", "run", str(bundle), "--state-root", str(tmp_path / "s"), *verbose],
            capture_output=True,
            text=True,
            env=gdn_env(tmp_path),
            timeout=60,
        )
        assert done.returncode == 3, done.stderr
        assert (
            "[E_CONNECTOR_LOAD] Connection/inbox (inbox): importing inbox.py failed at connectors/inbox.py:3: "
            "ModuleNotFoundError: No module named 'helpers_that_do_not_exist'" in done.stderr
        ), done.stderr
        assert "suggestion: Fix inbox.py: `gdn run -v` prints the traceback of its import." in done.stderr
        user_frame = 'inbox.py", line 3, in <module>'
        assert (user_frame in done.stderr) == bool(verbose), done.stderr
