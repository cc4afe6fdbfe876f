"""A misspelt agent or instance key in `gdn logs` / `gdn instance delete` says what exists.

Each test drives the real `gdn` on a bundle made by `gdn init` (its offline scripted model) after one
`gdn run` turn, which stores agent `assistant` with instance key `assistant`."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
from pathlib import Path

import pytest
from cli_testkit import ECHO_BUNDLE, env_for, gdn

from kit import write_bundle


def _workspace_with_one_turn(base: Path) -> dict[str, str]:
    env = {"GOONDAN_STATE_ROOT": str(base / "state")}
    assert gdn(base, "init", "bot", **env).returncode == 0
    ran = gdn(base, "run", "bot", "--input", "hi", **env)
    assert ran.returncode == 0, ran.stderr
    return env


@pytest.fixture(scope="module")
def one_turn(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, str]]:
    base = tmp_path_factory.mktemp("one-turn")
    return base, _workspace_with_one_turn(base)


@pytest.mark.parametrize(
    ("option", "typo", "code", "exit_code"),
    [("-a", "assistnt", "E_AGENT_NOT_FOUND", 2), ("-i", "asistant", "E_INSTANCE_NOT_FOUND", 1)],
)
def test_logs_agent_or_key_that_matches_nothing_stored_is_an_error_naming_the_near_name(
    one_turn: tuple[Path, dict[str, str]], option: str, typo: str, code: str, exit_code: int
) -> None:
    """An agent typo is a usage error (exit 2, as `gdn run --agent typo`); an unknown instance key
    exits 1, as `gdn instance delete` does for one."""
    base, env = one_turn
    proc = gdn(base, "logs", option, typo, **env)
    assert proc.returncode == exit_code
    assert proc.stderr.startswith(f"[{code}]")
    assert "did you mean 'assistant'?" in proc.stderr.lower()
    assert "(no runtime events match)" not in proc.stderr


def test_logs_name_with_nothing_close_lists_the_known_names(one_turn: tuple[Path, dict[str, str]]) -> None:
    base, env = one_turn
    proc = gdn(base, "logs", "--instance", "zzzz", **env)
    assert proc.returncode == 1 and proc.stderr.startswith("[E_INSTANCE_NOT_FOUND]")
    assert "Known instance keys: 'assistant'." in proc.stderr


def test_logs_existing_names_without_matching_events_still_say_no_events_match(tmp_path: Path) -> None:
    env = _workspace_with_one_turn(tmp_path)
    (events,) = (tmp_path / "state").glob("workspaces/*/instances/*/messages/runtime-events.jsonl")
    events.write_bytes(b"")  # the instance exists, its events are not written yet
    proc = gdn(tmp_path, "logs", "-a", "assistant", "-i", "assistant", **env)
    assert proc.returncode == 0, proc.stderr
    assert "(no runtime events match)" in proc.stderr and "E_" not in proc.stderr


def test_logs_follow_only_warns_about_an_unknown_key_and_shows_it_once_it_appears(tmp_path: Path) -> None:
    env = _workspace_with_one_turn(tmp_path)
    follower = subprocess.Popen(
        [sys.executable, "-m", "goondan", "logs", "--follow", "--json", "-i", "later"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env_for(tmp_path, **env),
        cwd=tmp_path,
    )
    try:
        assert follower.stderr is not None and follower.stdout is not None
        warning = follower.stderr.readline()
        assert warning.startswith("warning: [E_INSTANCE_NOT_FOUND]")
        assert gdn(tmp_path, "run", "bot", "--input", "hi", "--instance-key", "later", **env).returncode == 0
        seen: list[dict[str, object]] = []
        while not any(r.get("type") == "turn.completed" for r in seen):
            seen.append(json.loads(follower.stdout.readline()))
        assert {r["instanceKey"] for r in seen} == {"later"}
        follower.send_signal(signal.SIGINT)
        assert follower.wait(10) == 130
    finally:
        if follower.poll() is None:
            follower.kill()


def test_instance_delete_of_a_missing_key_exits_nonzero_naming_the_near_key(
    one_turn: tuple[Path, dict[str, str]],
) -> None:
    base, env = one_turn
    proc = gdn(base, "instance", "delete", "asistant", "--yes", **env)
    assert proc.returncode == 1
    assert proc.stderr.startswith("[E_INSTANCE_NOT_FOUND]")
    assert "did you mean 'assistant'?" in proc.stderr.lower()
    listed = gdn(base, "instance", "list", "--json", **env).stdout.splitlines()
    assert [json.loads(row)["instanceKey"] for row in listed] == ["assistant"]  # nothing was deleted


def test_instance_delete_with_an_agent_that_does_not_hold_the_key_names_the_agent_that_does(
    one_turn: tuple[Path, dict[str, str]],
) -> None:
    base, env = one_turn
    proc = gdn(base, "instance", "delete", "assistant", "--agent", "asistant", "--yes", **env)
    assert proc.returncode == 1 and proc.stderr.startswith("[E_INSTANCE_NOT_FOUND]")
    assert "belongs to agent(s) 'assistant'" in proc.stderr


def test_instance_delete_scoped_to_one_bundle_points_at_the_bundle_that_holds_the_key(
    one_turn: tuple[Path, dict[str, str]],
) -> None:
    base, env = one_turn
    if not (base / "other").exists():
        assert gdn(base, "init", "other", **env).returncode == 0
    proc = gdn(base, "instance", "delete", "assistant", "other", "--yes", **env)
    assert proc.returncode == 1 and proc.stderr.startswith("[E_INSTANCE_NOT_FOUND]")
    assert "exists in another bundle's workspace: pass --all-workspaces" in proc.stderr


def test_a_reference_written_as_a_bare_name_suggests_its_kind(tmp_path: Path) -> None:
    text = ECHO_BUNDLE.replace("modelRef: Model/echo", "modelRef: echo", 1).replace(
        "entryAgent: Agent/talker", "entryAgent: talker"
    )
    text = text.replace("agents: [Agent/talker, Agent/helper]", "agents: [{ref: talker}, Agent/helper]")
    proc = gdn(tmp_path, "validate", str(write_bundle(tmp_path / "b", text)))
    assert proc.returncode == 4, proc.stdout
    for meant in ("Model/echo", "Agent/talker"):
        assert f"suggestion: write {meant} (a reference is Kind/name)" in proc.stdout, proc.stdout
    assert proc.stdout.count("write Agent/talker") == 2, proc.stdout  # entryAgent and the {ref: talker} item


@pytest.mark.parametrize(
    ("typo", "hint"), [("asistant", "Did you mean 'assistant'?"), ("zzzz", "Known agents: 'assistant'.")]
)
def test_run_agent_the_swarm_lacks_is_a_usage_error_naming_the_near_name(
    one_turn: tuple[Path, dict[str, str]], typo: str, hint: str
) -> None:
    """CONTRACT §9: a name given on the command line that matches nothing is a usage error (2), not a
    failed turn (1), and the suggestion says what was meant."""
    base, env = one_turn
    proc = gdn(base, "run", "bot", "--agent", typo, "--input", "hi", **env)
    assert proc.returncode == 2, proc.stderr
    assert proc.stderr.startswith(f"[E_AGENT_NOT_FOUND] agent '{typo}' is not part of swarm"), proc.stderr
    assert f"suggestion: {hint}" in proc.stderr, proc.stderr
