"""goondan.testing drives an agent whose tool waits for a person: the paused turn lists what it
waits on (and its transcript says so), ``runner.approve`` decides it as ``gdn approvals`` would and
returns the resumed turn, the real tool runs once, and a denial reaches the model with its note."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from goondan.errors import GoondanError
from goondan.testing import AgentRunner

ROOT = Path(__file__).resolve().parents[2]


def _recipe(tmp_path: Path) -> Path:
    """The webhook-approvals cookbook bundle without its Connection (a test runs no connector)."""
    bundle = tmp_path / "ops"
    shutil.copytree(ROOT / "docs" / "cookbook" / "webhook-approvals", bundle)
    text = (bundle / "goondan.yaml").read_text(encoding="utf-8")
    (bundle / "goondan.yaml").write_text(text[: text.index("---\napiVersion: goondan.ai/v1\nkind: Connection")])
    return bundle


def test_approve_resumes_the_paused_turn_and_the_real_tool_runs(tmp_path: Path) -> None:
    with AgentRunner(_recipe(tmp_path), state_root=tmp_path / "s") as runner:
        paused = runner.request("delete old.log")
        paused.assert_finished("awaiting_approval")
        (waiting,) = paused.pending_approvals
        assert (waiting.tool_name, waiting.args) == ("files__delete", {"name": "delete old.log"})
        assert f'waiting for approval: files__delete({{"name": "delete old.log"}}) {waiting.approval_id}' in (
            paused.transcript()
        )
        done = runner.approve(waiting)
        done.assert_finished("text_response")
        done.assert_tool_result("files__delete", contains="removed old.log")
        done.assert_text("done: removed old.log")
        done.assert_event("approval.decided", approvalId=waiting.approval_id, approved=True)
        with pytest.raises(GoondanError) as info:
            runner.approve(waiting)
        assert info.value.code == "E_APPROVAL_DECIDED"


def test_a_denial_with_a_note_reaches_the_model(tmp_path: Path) -> None:
    with AgentRunner(_recipe(tmp_path), state_root=tmp_path / "s") as runner:
        paused = runner.request("delete old.log")
        denied = runner.approve(paused.pending_approvals[0].approval_id, approved=False, note="keep the logs")
        denied.assert_tool_result("files__delete", status="error", code="E_TOOL_DENIED")
        denied.assert_tool_result("files__delete", status="error", contains="keep the logs")
