"""A request whose turn fails shows its error once on stderr, with a way to the traceback: the
engine's own ``turn ... failed`` error record used to print the same message again above the
command's ``[CODE] message`` (with the process executor and inline, in one-shot and piped sessions).
``-v`` keeps every record and shows the user's traceback."""

from __future__ import annotations

from pathlib import Path

import pytest
from cli_testkit import ECHO_BUNDLE, bundle_with_audit, gdn

from kit import write_bundle

RAISING = (
    "def register(api, config):\n"
    "    async def step(ctx):\n"
    "        raise ValueError('the audit log is full')\n"
    "    api.pipeline.register('step', step)\n"
)


def bundle(tmp_path: Path) -> Path:
    return bundle_with_audit(tmp_path, RAISING)


@pytest.mark.parametrize("executor", ["process", "inline"])
@pytest.mark.parametrize("how", ["input", "session"])
def test_a_failed_turn_prints_its_error_once_with_the_way_to_its_traceback(
    tmp_path: Path, executor: str, how: str
) -> None:
    path = str(bundle(tmp_path))
    if how == "input":
        proc = gdn(tmp_path, "run", path, "--input", "hi", "--executor", executor)
    else:
        proc = gdn(tmp_path, "run", path, "--executor", executor, stdin="hi\n")
    assert proc.returncode == 1, proc.stderr
    assert proc.stderr.count("the audit log is full") == 1, proc.stderr
    assert "[E_TURN_FAILED] ValueError: the audit log is full" in proc.stderr
    assert "suggestion: `gdn run -v` prints its traceback" in proc.stderr, proc.stderr


def test_verbose_shows_the_users_traceback(tmp_path: Path) -> None:
    proc = gdn(tmp_path, "run", str(bundle(tmp_path)), "--input", "hi", "-v", "--executor", "process")
    assert proc.returncode == 1, proc.stderr
    assert 'audit.py", line 3, in step' in proc.stderr and "raise ValueError" in proc.stderr, proc.stderr


def test_no_matching_scripted_rule_names_the_users_message_not_the_agent_prompt(tmp_path: Path) -> None:
    text = ECHO_BUNDLE.replace(
        "    rules:\n      - reply:\n", "    rules:\n      - when: {contains: hello}\n        reply:\n", 1
    ).replace("    modelRef: Model/echo\n", "    modelRef: Model/echo\n  prompt: {system: You are terse.}\n", 1)
    proc = gdn(tmp_path, "run", str(write_bundle(tmp_path / "b", text)), "--input", "what now")
    assert proc.returncode == 1, proc.stderr
    assert "no scripted rule matches the last message (user: 'what now')" in proc.stderr, proc.stderr
