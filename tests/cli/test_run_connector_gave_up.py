"""A connector whose own code keeps failing: gdn run gives up on it after one restart and ends with
E_CONNECTOR_FAILED naming the Connection, a suggestion (the bare '[E_CONNECTOR_FAILED] connector(s)
stopped with an error: c' had none, and bypassed --json), and the user's traceback above it."""

from __future__ import annotations

import json
from pathlib import Path

from cli_testkit import gdn

from kit import write_bundle

BUNDLE = """\
apiVersion: goondan.ai/v1
kind: Model
metadata: {name: m}
spec:
  provider: scripted
  model: x
  options:
    rules:
      - reply: {text: "ok"}
---
apiVersion: goondan.ai/v1
kind: Agent
metadata: {name: a}
spec:
  modelConfig: {modelRef: Model/m}
---
apiVersion: goondan.ai/v1
kind: Swarm
metadata: {name: s}
spec:
  entryAgent: Agent/a
  agents: [Agent/a]
---
apiVersion: goondan.ai/v1
kind: Connector
metadata: {name: inbox}
spec:
  entry: ./connectors/inbox.py
  events:
    - name: inbox_line
---
apiVersion: goondan.ai/v1
kind: Connection
metadata: {name: mail}
spec:
  connectorRef: Connector/inbox
"""

CONNECTOR = """\
from typing import Any


async def run(ctx: Any) -> None:
    ctx.ready()
    raise RuntimeError("boom in my connector")
"""


def _bundle(tmp_path: Path) -> Path:
    bundle = write_bundle(tmp_path / "b", BUNDLE)
    (bundle / "connectors").mkdir()
    (bundle / "connectors" / "inbox.py").write_text(CONNECTOR)
    return bundle


def test_a_connector_given_up_on_is_named_with_a_suggestion_under_its_users_traceback(tmp_path: Path) -> None:
    bundle = _bundle(tmp_path)
    proc = gdn(tmp_path, "run", str(bundle), "--state-root", str(tmp_path / "s"))
    assert proc.returncode == 1, proc.stderr
    err = proc.stderr
    assert 'connectors/inbox.py", line 6, in run' in err  # the user's own traceback
    assert "[E_CONNECTOR_FAILED] the connector of Connection/mail stopped with an error" in err
    assert "  suggestion: Its error is logged above" in err
    assert err.index("boom in my connector") < err.index("[E_CONNECTOR_FAILED]")


def test_a_connector_given_up_on_is_a_json_error_with_json(tmp_path: Path) -> None:
    bundle = _bundle(tmp_path)
    proc = gdn(tmp_path, "--json", "run", str(bundle), "--state-root", str(tmp_path / "s"))
    assert proc.returncode == 1, proc.stderr
    error = json.loads(proc.stderr.strip().splitlines()[-1])
    assert error["code"] == "E_CONNECTOR_FAILED" and error["exitCode"] == 1
    assert "Connection/mail" in error["message"] and error["suggestion"]
