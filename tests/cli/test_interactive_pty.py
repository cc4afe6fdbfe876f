"""`gdn run` as an interactive chat on a pseudo-terminal: prompt, line editing, history, /quit, Ctrl+C."""

from __future__ import annotations

import os
import pty
import select
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from cli_testkit import ECHO_BUNDLE, env_for

from kit import write_bundle


def _take_terminal() -> None:
    """In the child: make the pty its controlling terminal so that ^C in the pty sends SIGINT."""
    import fcntl
    import termios

    fcntl.ioctl(0, termios.TIOCSCTTY, 0)


class Terminal:
    def __init__(self, tmp_path: Path, *args: str, **extra_env: str) -> None:
        master, slave = pty.openpty()
        self.master = master
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "goondan", "run", *args],
            stdin=slave,
            stdout=slave,
            stderr=slave,
            env=env_for(tmp_path, TERM="xterm", **extra_env),
            start_new_session=True,
            close_fds=True,
            preexec_fn=_take_terminal,
        )
        os.close(slave)
        self.buffer = b""

    def expect(self, text: str, timeout: float = 20) -> str:
        deadline = time.monotonic() + timeout
        needle = text.encode()
        while needle not in self.buffer:
            remaining = deadline - time.monotonic()
            assert remaining > 0, f"did not see {text!r} in {self.buffer.decode(errors='replace')!r}"
            ready, _, _ = select.select([self.master], [], [], remaining)
            if ready:
                try:
                    chunk = os.read(self.master, 4096)
                except OSError:
                    chunk = b""
                if not chunk:
                    continue
                self.buffer += chunk
        index = self.buffer.index(needle) + len(needle)
        seen, self.buffer = self.buffer[:index], self.buffer[index:]
        return seen.decode(errors="replace")

    def send(self, data: str) -> None:
        os.write(self.master, data.encode())

    def wait(self, timeout: float = 15) -> int:
        deadline = time.monotonic() + timeout
        while self.proc.poll() is None and time.monotonic() < deadline:
            ready, _, _ = select.select([self.master], [], [], 0.1)
            if ready:
                try:
                    os.read(self.master, 4096)
                except OSError:
                    pass
        return self.proc.wait(1)

    def close(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()
        os.close(self.master)


def test_chat_with_line_editing_history_and_quit(tmp_path: Path) -> None:
    bundle = write_bundle(tmp_path / "b", ECHO_BUNDLE)
    state = tmp_path / "state"
    term = Terminal(tmp_path, str(bundle), "--state-root", str(state))
    try:
        term.expect("Chatting with talker (swarm default). /quit to exit.")
        term.expect("> ")
        term.send("helpp\x7f\x7flo there\r")  # two backspaces: "hel" + "lo there"
        assert "echo: hello there" in term.expect("echo: hello there")
        term.expect("> ")
        term.send("\x1b[A\r")  # arrow up recalls the previous line
        term.expect("echo: hello there")
        term.expect("> ")
        term.send("/quit\r")
        assert term.wait() == 0
    finally:
        term.close()
    assert "hello there" in (state / "history").read_text()
    # typed lines are as private as the conversations they started
    assert (state / "history").stat().st_mode & 0o777 == 0o600


def test_ctrl_c_exits_130_and_ctrl_d_exits_0(tmp_path: Path) -> None:
    bundle = write_bundle(tmp_path / "b", ECHO_BUNDLE)
    term = Terminal(tmp_path, str(bundle), "--state-root", str(tmp_path / "state"))
    try:
        term.expect("> ")
        term.send("\x03")
        assert term.wait() == 130
    finally:
        term.close()
    term = Terminal(tmp_path, str(bundle), "--state-root", str(tmp_path / "state"))
    try:
        term.expect("> ")
        term.send("\x04")
        assert term.wait() == 0
    finally:
        term.close()
    assert not (tmp_path / "state" / "runtime" / "runs" / "default.json").exists()


def test_sigint_during_a_session_restores_the_terminal(tmp_path: Path) -> None:
    import termios

    bundle = write_bundle(tmp_path / "b", ECHO_BUNDLE)
    term = Terminal(tmp_path, str(bundle), "--state-root", str(tmp_path / "state"))
    try:
        before = termios.tcgetattr(term.master)
        term.expect("> ")
        os.killpg(term.proc.pid, signal.SIGINT)
        assert term.wait() == 130
        after = termios.tcgetattr(term.master)
        assert after[3] & termios.ECHO == before[3] & termios.ECHO
        assert after[3] & termios.ICANON == before[3] & termios.ICANON
    finally:
        term.close()


STREAMING_BUNDLE = """\
apiVersion: goondan.ai/v1
kind: Package
metadata:
  name: streamer
spec:
  version: 0.1.0
---
apiVersion: goondan.ai/v1
kind: Model
metadata:
  name: slow
spec:
  provider: python
  model: slow
  options:
    entry: ./model.py
---
apiVersion: goondan.ai/v1
kind: Agent
metadata:
  name: talker
spec:
  modelConfig:
    modelRef: Model/slow
---
apiVersion: goondan.ai/v1
kind: Swarm
metadata:
  name: default
spec:
  entryAgent: Agent/talker
  agents: [Agent/talker]
"""

STREAMING_MODEL = """\
import asyncio


async def generate(request):
    parts = ["first-", "second-", "third"]
    for part in parts:
        if request.on_text_delta is not None:
            request.on_text_delta(part)
        await asyncio.sleep(0.3)
    return {"text": "".join(parts)}
"""


@pytest.mark.parametrize("isolation", ["inline", "process"])
def test_replies_stream_to_the_terminal_as_they_are_generated(tmp_path: Path, isolation: str) -> None:
    bundle = write_bundle(tmp_path / "b", STREAMING_BUNDLE)
    (bundle / "model.py").write_text(STREAMING_MODEL)
    term = Terminal(tmp_path, str(bundle), "--state-root", str(tmp_path / "state"), GOONDAN_ISOLATION=isolation)
    try:
        term.expect("> ")
        term.send("go\r")
        term.expect("first-")
        # the first delta is on screen while the model is still generating the rest
        assert "third" not in term.buffer.decode(errors="replace")
        rest = term.expect("> ")
        assert "second-third\r\n" in rest
        assert rest.count("third") == 1  # the final text is not printed a second time
        term.send("/quit\r")
        assert term.wait() == 0
    finally:
        term.close()


SLOW_MODEL = """\
import asyncio


async def generate(request):
    await asyncio.sleep(1.0)
    return {"text": "done thinking"}
"""


def test_a_slow_reply_shows_a_transient_thinking_line_on_color_terminals(tmp_path: Path) -> None:
    bundle = write_bundle(tmp_path / "b", STREAMING_BUNDLE)
    (bundle / "model.py").write_text(SLOW_MODEL)
    term = Terminal(tmp_path, str(bundle), "--state-root", str(tmp_path / "state"), NO_COLOR="")
    try:
        term.expect("> ")
        term.send("go\r")
        term.expect("... thinking")
        rest = term.expect("> ")
        assert "\r\x1b[K" in rest  # the status line is erased before the reply is printed
        assert rest.index("\r\x1b[K") < rest.index("done thinking")
        term.send("/quit\r")
        assert term.wait() == 0
    finally:
        term.close()
