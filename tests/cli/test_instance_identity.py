"""Workspaces belong to a bundle: two bundles never share a conversation, `gdn instance` shows and acts
on the current bundle's instances, and deleting asks first."""

from __future__ import annotations

import json
import os
import pty
import shutil
import subprocess
import sys
import time
from pathlib import Path

from cli_testkit import ECHO_BUNDLE, env_for, gdn

from kit import write_bundle

NO_PACKAGE = ECHO_BUNDLE.split("---\n", 1)[1]


def run(tmp_path: Path, bundle: Path, text: str, state: Path, *extra: str) -> str:
    proc = gdn(tmp_path, "run", str(bundle), "--input", text, "--state-root", str(state), *extra)
    assert proc.returncode == 0, proc.stderr
    return proc.stdout


def listing(cwd: Path, state: Path, *args: str) -> list[dict[str, object]]:
    proc = gdn(cwd, "instance", "list", "--json", "--state-root", str(state), *args)
    assert proc.returncode == 0, proc.stderr
    return [json.loads(line) for line in proc.stdout.splitlines()]


def test_bundles_in_different_directories_never_share_a_conversation(tmp_path: Path) -> None:
    state = tmp_path / "state"
    first = write_bundle(tmp_path / "one", NO_PACKAGE)  # same swarm name "default", no Package
    second = write_bundle(tmp_path / "two", NO_PACKAGE)
    run(tmp_path, first, "from one", state)
    run(tmp_path, second, "from two", state)
    workspaces = sorted(p.name for p in (state / "workspaces").iterdir())
    assert len(workspaces) == 2 and all(w.startswith(("one-default-", "two-default-")) for w in workspaces)
    for bundle, text in ((first, "from one"), (second, "from two")):
        [row] = listing(tmp_path, state, str(bundle))
        assert row["bundle"] == str(bundle.resolve()) and row["swarm"] == "default"
        [base] = Path(str(row["path"])).glob("messages/base.jsonl")
        assert text in base.read_text() and ("from two" if text == "from one" else "from one") not in base.read_text()


def test_the_package_name_is_the_identity_and_survives_a_move(tmp_path: Path) -> None:
    state = tmp_path / "state"
    bundle = write_bundle(tmp_path / "here", ECHO_BUNDLE)
    run(tmp_path, bundle, "before the move", state)
    moved = tmp_path / "there"
    bundle.rename(moved)
    after = gdn(tmp_path, "run", str(moved), "--input", "after the move", "--state-root", str(state))
    assert after.returncode == 0 and after.stderr == ""  # a move is not a copy: no shared-workspace warning
    [row] = listing(tmp_path, state, str(moved))
    assert row["package"] == "cli-suite" and row["bundle"] == str(moved.resolve())
    base = (Path(str(row["path"])) / "messages" / "base.jsonl").read_text()
    assert "before the move" in base and "after the move" in base
    other = write_bundle(tmp_path / "other", ECHO_BUNDLE.replace("name: cli-suite", "name: other-suite"))
    run(tmp_path, other, "elsewhere", state)
    assert len(list((state / "workspaces").iterdir())) == 2


def test_a_copied_bundle_is_warned_that_it_shares_the_original_s_conversations(tmp_path: Path) -> None:
    state = tmp_path / "state"
    original = write_bundle(tmp_path / "bot", ECHO_BUNDLE)
    first = gdn(tmp_path, "run", str(original), "--input", "one", "--state-root", str(state))
    assert first.returncode == 0 and "warning" not in first.stderr
    copy = tmp_path / "bot-v2"
    shutil.copytree(original, copy)
    proc = gdn(tmp_path, "run", str(copy), "--input", "two", "--state-root", str(state))
    assert proc.returncode == 0, proc.stderr
    assert proc.stderr.startswith(f"warning: this bundle shares its conversations with the bundle in {original}")
    assert "Package 'cli-suite'" in proc.stderr
    assert f"change metadata.name of the Package in {copy / 'goondan.yaml'} (e.g. to 'bot-v2')" in proc.stderr
    assert "to keep sharing on purpose" in proc.stderr and proc.stdout == "echo: two\n"  # stdout stays the answer
    again = gdn(tmp_path, "run", str(original), "--input", "three", "--state-root", str(state))
    assert f"shares its conversations with the bundle in {copy}" in again.stderr  # each side is told
    quiet = gdn(tmp_path, "run", str(copy), "--input", "four", "--state-root", str(state), "-q")
    assert quiet.returncode == 0 and quiet.stderr == ""
    # the way to split: a Package name of its own gives the copy a workspace of its own, no warning
    manifest = copy / "goondan.yaml"
    manifest.write_text(manifest.read_text().replace("name: cli-suite", "name: bot-v2"))
    split = gdn(tmp_path, "run", str(copy), "--input", "five", "--state-root", str(state))
    assert split.returncode == 0 and split.stderr == ""
    assert len(list((state / "workspaces").iterdir())) == 2
    # the shared workspace last saw the copy's directory, which is another Package now: no warning
    back = gdn(tmp_path, "run", str(original), "--input", "six", "--state-root", str(state))
    assert back.returncode == 0 and back.stderr == ""


def test_a_copied_bundle_started_beside_the_running_original_is_told_to_rename_its_package(tmp_path: Path) -> None:
    """E_RUN_ACTIVE told the copy to send its request with `gdn run COPY --input TEXT` "(that process
    answers)": the original's process refuses another directory's requests, so that advice led on to
    E_INSTANCE_LOCKED. It now names the shared Package and the copy's manifest to rename it in."""
    state = tmp_path / "state"
    original = write_bundle(tmp_path / "bot", ECHO_BUNDLE)
    copy = tmp_path / "bot-v2"
    shutil.copytree(original, copy)
    chat = subprocess.Popen(
        [sys.executable, "-m", "goondan", "run", str(original), "--state-root", str(state)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env_for(tmp_path),
        cwd=tmp_path,
    )
    assert chat.stdin is not None and chat.stdout is not None
    try:
        chat.stdin.write("first\n")
        chat.stdin.flush()
        assert chat.stdout.readline() == "echo: first\n"
        second = gdn(tmp_path, "run", str(copy), "--state-root", str(state), stdin="x\n")
        assert second.returncode == 1 and "[E_RUN_ACTIVE]" in second.stderr, second.stderr
        assert f"bundle '{original.resolve()}'): that bundle has this one's Package name ('cli-suite')" in second.stderr
        assert f"give it a Package name of its own (metadata.name in {copy / 'goondan.yaml'})" in second.stderr
        assert "--input TEXT` (that process answers)" not in second.stderr
        # the same directory started twice keeps the advice that works for it
        twice = gdn(tmp_path, "run", str(original), "--state-root", str(state), stdin="x\n")
        assert twice.returncode == 1 and "--input TEXT` (that process answers)" in twice.stderr, twice.stderr
        chat.stdin.close()
        assert chat.wait(30) == 0
    finally:
        if chat.poll() is None:
            chat.kill()
            chat.wait()


def test_instance_list_shows_the_bundle_and_defaults_to_the_current_one(tmp_path: Path) -> None:
    state = tmp_path / "state"
    mine = write_bundle(tmp_path / "mine", NO_PACKAGE)
    theirs = write_bundle(tmp_path / "theirs", NO_PACKAGE)
    run(tmp_path, mine, "a", state)
    run(tmp_path, theirs, "b", state)
    inside = listing(mine, state)
    assert [row["bundle"] for row in inside] == [str(mine.resolve())]
    assert len(listing(mine, state, "--all-workspaces")) == 2
    assert len(listing(tmp_path, state)) == 2  # not inside a bundle: every bundle's
    text = gdn(mine, "instance", "list", "--state-root", str(state))
    assert text.stdout.splitlines()[0].split()[:2] == ["WORKSPACE", "BUNDLE"]
    assert str(mine.resolve()) in text.stdout and str(theirs.resolve()) not in text.stdout


def test_instance_delete_acts_on_the_current_bundle_only(tmp_path: Path) -> None:
    state = tmp_path / "state"
    mine = write_bundle(tmp_path / "mine", NO_PACKAGE)
    theirs = write_bundle(tmp_path / "theirs", NO_PACKAGE)
    run(tmp_path, mine, "a", state)
    run(tmp_path, theirs, "b", state)
    proc = gdn(mine, "instance", "delete", "default", "--yes", "--state-root", str(state))
    assert proc.returncode == 0, proc.stderr
    assert listing(mine, state) == []
    assert [row["bundle"] for row in listing(tmp_path, state)] == [str(theirs.resolve())]


def test_instance_delete_without_a_terminal_needs_yes(tmp_path: Path) -> None:
    state = tmp_path / "state"
    bundle = write_bundle(tmp_path / "b", ECHO_BUNDLE)
    run(tmp_path, bundle, "keep me", state)
    refused = gdn(tmp_path, "instance", "delete", "default", str(bundle), "--state-root", str(state))
    assert refused.returncode == 2
    assert refused.stderr.startswith("[E_CONFIRMATION_REQUIRED]") and "--yes" in refused.stderr
    assert len(listing(tmp_path, state)) == 1
    done = gdn(tmp_path, "instance", "delete", "default", str(bundle), "-y", "--state-root", str(state))
    assert done.returncode == 0 and listing(tmp_path, state) == []


def _ask_on_a_terminal(tmp_path: Path, state: Path, answer: bytes) -> tuple[int, str]:
    master, slave = pty.openpty()
    proc = subprocess.Popen(
        [sys.executable, "-m", "goondan", "instance", "delete", "default", "--state-root", str(state)],
        stdin=slave,
        stdout=slave,
        stderr=slave,
        env=env_for(tmp_path, TERM="xterm"),
        cwd=tmp_path / "b",
        close_fds=True,
    )
    os.close(slave)
    seen = b""
    deadline = time.monotonic() + 30
    while b"[y/N]" not in seen:
        assert time.monotonic() < deadline, seen
        seen += os.read(master, 4096)
    os.write(master, answer)
    code = proc.wait(30)
    try:
        while True:
            chunk = os.read(master, 4096)
            if not chunk:
                break
            seen += chunk
    except OSError:
        pass
    os.close(master)
    return code, seen.decode(errors="replace")


def test_instance_delete_asks_on_a_terminal(tmp_path: Path) -> None:
    state = tmp_path / "state"
    bundle = write_bundle(tmp_path / "b", ECHO_BUNDLE)
    run(tmp_path, bundle, "hello", state)
    code, out = _ask_on_a_terminal(tmp_path, state, b"n\n")
    assert code == 1 and "talker@default" in out and "nothing was deleted" in out
    assert len(listing(tmp_path, state)) == 1
    code, out = _ask_on_a_terminal(tmp_path, state, b"y\n")
    assert code == 0 and "deleted talker@default" in out
    assert listing(tmp_path, state) == []


def test_init_next_to_a_bundle_of_the_same_package_name_picks_a_name_of_its_own(tmp_path: Path) -> None:
    """`gdn init "my bot"` beside a `my-bot` bundle that has run made a second Package 'my-bot', which
    continued the first one's conversations; only `gdn run`'s warning said so, after the fact."""
    state = tmp_path / "state"
    assert gdn(tmp_path, "init", "-q", "my-bot", "--state-root", str(state)).returncode == 0
    run(tmp_path, tmp_path / "my-bot", "first bot", state)
    made = gdn(tmp_path, "init", "my bot", "--state-root", str(state))
    assert made.returncode == 0, made.stderr
    assert made.stdout.startswith(f"Created default bundle 'my-bot-2' in '{tmp_path / 'my bot'}'\n")
    assert f"'my-bot' is the bundle in {tmp_path / 'my-bot'}, whose conversations a bundle of the same name" in (
        made.stdout
    )
    assert "(pass --name my-bot to share them)" in made.stdout
    second = gdn(tmp_path, "run", str(tmp_path / "my bot"), "--input", "hi", "--state-root", str(state))
    assert second.returncode == 0 and "shares its conversations" not in second.stderr, second.stderr
    assert len(list((state / "workspaces").iterdir())) == 2
    # asked for by name, the shared name is kept, with a note
    shared = gdn(tmp_path, "init", "twin", "--name", "my-bot", "--state-root", str(state))
    assert shared.returncode == 0 and "Created default bundle 'my-bot'" in shared.stdout
    assert f"note: Package 'my-bot' is also the bundle in {tmp_path / 'my-bot'}: the two share" in shared.stdout
    # re-made in its own directory (deleted and created again), a bundle keeps its name
    shutil.rmtree(tmp_path / "my-bot")
    again = gdn(tmp_path, "init", "my-bot", "--state-root", str(state))
    assert again.returncode == 0 and again.stdout.startswith("Created default bundle 'my-bot' in")
