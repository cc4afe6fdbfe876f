"""An agent process that cannot start (an extension fails to load) reports why and exits with code 3
on purpose. That exit is not a crash: ``gdn run`` shows the start error and no "crashed with exit
code" warning, however the host happened to read the error, the end of the stream and the exit code.

The race the user hit about once in seven runs on a busy machine: the host reads the start error,
the stream's end and the fork server's exit report in one go, so the exit is handled before the
CLI reacts to the error by closing the runtime. Here the extension stops the ``gdn`` process
(SIGSTOP) before it raises and lets it go on a second later, which makes that order certain."""

from __future__ import annotations

from pathlib import Path

from cli_testkit import gdn
from test_run_load_exit_codes import bundle

# register() stops the ``gdn run`` host (the ancestor running ``-m goondan run``) and has a shell
# continue it after a second: by then the start error, the end of the stream and the exit code are
# all waiting for the host at once
STOP_THE_HOST = """\
import os, signal, subprocess


def host_pid():
    pid = os.getppid()
    while pid > 1:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            if b"\\0goondan\\0run\\0" in f.read():
                return pid
        with open(f"/proc/{pid}/stat") as f:
            pid = int(f.read().rsplit(")", 1)[1].split()[1])
    raise RuntimeError("no gdn run ancestor")


def register(api, config):
    pid = host_pid()
    subprocess.Popen(["sh", "-c", f"sleep 1; kill -CONT {pid}"])
    os.kill(pid, signal.SIGSTOP)
    raise RuntimeError("no token")
"""


def test_an_exit_after_a_reported_start_error_is_not_a_crash(tmp_path: Path) -> None:
    path = bundle(tmp_path, **{"audit.py": STOP_THE_HOST})
    proc = gdn(tmp_path, "run", str(path), "--input", "add", "--executor", "process")
    assert proc.returncode == 3, proc.stderr
    assert "[E_EXT_INIT]" in proc.stderr and "no token" in proc.stderr, proc.stderr
    assert "crashed" not in proc.stderr, proc.stderr
