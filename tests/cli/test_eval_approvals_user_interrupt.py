"""A KeyboardInterrupt that a tool raises under `gdn eval` and `gdn approvals approve` (which run the
tool inline, on their own loop) is that tool's error, E_USER_CODE_INTERRUPT, as under `gdn run`:
both commands installed no Ctrl+C handling of their own, so Python's default handler was in place
and the tool's KeyboardInterrupt ended the whole command with exit 130, as if Ctrl+C had been
pressed. Real `gdn` subprocesses on a copy of examples/quickstart whose calc__add raises it."""

from __future__ import annotations

import re
import shutil
from pathlib import Path

from cli_testkit import gdn

QUICKSTART = Path(__file__).resolve().parents[2] / "examples" / "quickstart"


def _bundle(tmp_path: Path, *, approval: bool) -> Path:
    bundle = tmp_path / "b"
    shutil.copytree(QUICKSTART, bundle)
    calc = bundle / "tools" / "calc.py"
    source = calc.read_text()
    head = "def add(ctx: ToolContext, args: dict[str, Any]) -> dict[str, Any]:\n"
    assert head in source
    calc.write_text(source.replace(head, head + "    raise KeyboardInterrupt\n"))
    if approval:
        manifest = bundle / "goondan.yaml"
        text = manifest.read_text()
        agent = "kind: Agent\nmetadata:\n  name: assistant\nspec:\n"
        assert agent in text
        manifest.write_text(text.replace(agent, agent + "  approval: {tools: [calc__add]}\n"))
    return bundle


def test_a_tools_keyboard_interrupt_under_gdn_eval_is_the_tools_error(tmp_path: Path) -> None:
    bundle = _bundle(tmp_path, approval=False)
    suite = tmp_path / "suite.yaml"
    suite.write_text(
        "name: ki\nbundle: ./b\nthreshold: 0.5\nscenarios:\n"
        "  - name: adds\n    input: add 2 and 3\n    expect:\n      textContains: E_USER_CODE_INTERRUPT\n"
    )
    assert bundle.parent == suite.parent
    proc = gdn(tmp_path, "eval", str(suite), "--state-root", str(tmp_path / "s"))
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "PASSED: 1/1 scenarios passed" in proc.stdout


def test_a_tools_keyboard_interrupt_under_gdn_approvals_approve_is_the_tools_error(tmp_path: Path) -> None:
    bundle = _bundle(tmp_path, approval=True)
    state = str(tmp_path / "s")
    waiting = gdn(tmp_path, "run", str(bundle), "--input", "add 2 and 3", "--state-root", state)
    assert waiting.returncode == 0, waiting.stderr
    found = re.search(r"appr_[0-9a-f]+", waiting.stderr)
    assert found, waiting.stderr
    proc = gdn(tmp_path, "approvals", "approve", found.group(0), str(bundle), "--state-root", state)
    assert proc.returncode == 0, proc.stderr
    assert '"code":"E_USER_CODE_INTERRUPT"' in proc.stdout, proc.stdout + proc.stderr
