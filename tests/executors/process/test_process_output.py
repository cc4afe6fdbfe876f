"""What an agent process writes to its fds 1 and 2 (prints, C-level writes, a tool's subprocesses)
goes to a bounded per-instance log, never to the host's stdout; ``-v`` reaches agent processes, and
their records (a failing tool's traceback included) reach the host's stderr. Real ``gdn run``."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import yaml

from goondan.executors.process._output import OUTPUT_FILE, OUTPUT_LIMIT

API = "goondan.ai/v1"
TEN_MB = 10 * 1024 * 1024

MODEL = """\
def generate(request):
    last = request.messages[-1]
    if last["role"] == "tool":
        return {"text": "the answer"}
    return {"text": None, "toolCalls": [{"name": "t__" + last["content"], "args": {}}]}
"""

TOOLS = f"""\
import os
import subprocess
import sys


def noisy(ctx, args):
    block = b"x" * 65536 + b"\\n"
    for _ in range({TEN_MB} // len(block) // 2):
        os.write(1, block)  # C-level writes to fd 1, past any sys.stdout capture
    subprocess.run(["sh", "-c", "head -c {TEN_MB // 4} /dev/zero | tr '\\\\0' y; echo err-line >&2"], check=True)
    sys.__stdout__.write("z" * 100000 + "\\n")
    sys.__stdout__.flush()
    return "done"


def broken(ctx, args):
    helper_value = 1
    raise ValueError("tool exploded " + str(helper_value))


handlers = {{"noisy": noisy, "broken": broken}}
"""


def bundle(root: Path) -> Path:
    exports = [
        {"name": "noisy", "description": "noisy", "parameters": {"type": "object", "properties": {}}},
        {"name": "broken", "description": "broken", "parameters": {"type": "object", "properties": {}}},
    ]
    docs: list[dict[str, Any]] = [
        {"apiVersion": API, "kind": "Package", "metadata": {"name": "output"}, "spec": {"version": "0.1.0"}},
        {
            "apiVersion": API,
            "kind": "Model",
            "metadata": {"name": "m"},
            "spec": {"provider": "python", "model": "fake", "options": {"entry": "./model.py"}},
        },
        {
            "apiVersion": API,
            "kind": "Tool",
            "metadata": {"name": "t"},
            "spec": {"entry": "./tools.py", "exports": exports},
        },
        {
            "apiVersion": API,
            "kind": "Agent",
            "metadata": {"name": "a"},
            "spec": {"modelConfig": {"modelRef": "Model/m"}, "tools": [{"ref": "Tool/t"}]},
        },
        {
            "apiVersion": API,
            "kind": "Swarm",
            "metadata": {"name": "output"},
            "spec": {"entryAgent": "Agent/a", "agents": [{"ref": "Agent/a"}]},
        },
    ]
    root.mkdir(parents=True)
    (root / "goondan.yaml").write_text(yaml.safe_dump_all(docs, sort_keys=False), encoding="utf-8")
    (root / "model.py").write_text(textwrap.dedent(MODEL), encoding="utf-8")
    (root / "tools.py").write_text(TOOLS, encoding="utf-8")
    return root


def gdn(root: Path, state_root: Path, *args: str) -> subprocess.CompletedProcess[bytes]:
    env = {**os.environ, "GOONDAN_ISOLATION": "process", "NO_COLOR": "1"}
    return subprocess.run(
        [sys.executable, "-m", "goondan", "run", str(root), "--state-root", str(state_root), *args],
        capture_output=True,
        env=env,
        timeout=180,
        check=False,
    )


def test_agent_process_output_never_reaches_the_hosts_stdout_and_is_kept_bounded(
    tmp_path: Path, state_root: Path
) -> None:
    root = bundle(tmp_path / "b")
    done = gdn(root, state_root, "--input", "noisy")
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.decode().strip() == "the answer"
    assert len(done.stderr) < 100_000  # nor does it flood the terminal through stderr
    logs = list(state_root.rglob(OUTPUT_FILE))
    assert len(logs) == 1
    kept = logs[0].read_bytes() + (logs[0].with_name(OUTPUT_FILE + ".1").read_bytes())
    assert len(kept) <= 2 * OUTPUT_LIMIT
    assert b"err-line" in kept and b"zzzz" in kept  # the newest output is what is kept
    assert oct(logs[0].stat().st_mode & 0o777) == "0o600"


def test_verbose_reaches_agent_processes_and_a_failing_tools_traceback_is_on_stderr(
    tmp_path: Path, state_root: Path
) -> None:
    root = bundle(tmp_path / "b")
    quiet = gdn(root, state_root, "--input", "broken", "--instance-key", "q")
    assert quiet.stdout.decode().strip() == "the answer"
    assert b"Traceback" not in quiet.stderr
    loud = gdn(root, state_root, "-v", "--input", "broken", "--instance-key", "v")
    assert loud.stdout.decode().strip() == "the answer"
    err = loud.stderr.decode()
    assert "Traceback" in err and "ValueError: tool exploded 1" in err, err[-3000:]
    line = TOOLS.splitlines().index('    raise ValueError("tool exploded " + str(helper_value))') + 1
    assert f'tools.py", line {line}, in broken' in err, err[-3000:]
