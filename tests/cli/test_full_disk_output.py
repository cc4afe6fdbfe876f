"""A chat whose state root fills up (here: a file size limit, EFBIG, where a full disk gives ENOSPC)
reports each store failure as one coded line, E_STORAGE_WRITE with what to do, and no tracebacks:
the engine logged every failed runtime-event and extension-state write with the full traceback of
the store's coded error, two per turn. Real `gdn run`, a real write limit of the kernel."""

from __future__ import annotations

import resource
import subprocess
import sys
from pathlib import Path

import pytest
from cli_testkit import env_for

from kit import write_bundle

BUNDLE = """\
apiVersion: goondan.ai/v1
kind: Model
metadata: {name: echo}
spec: {provider: scripted, model: echo, options: {rules: [{reply: {text: "echo: {{last}}"}}]}}
---
apiVersion: goondan.ai/v1
kind: Extension
metadata: {name: counter}
spec: {entry: ./counter.py}
---
apiVersion: goondan.ai/v1
kind: Agent
metadata: {name: talker}
spec:
  modelConfig: {modelRef: Model/echo}
  extensions: [Extension/counter]
---
apiVersion: goondan.ai/v1
kind: Swarm
metadata: {name: default}
spec: {entryAgent: Agent/talker, agents: [Agent/talker]}
"""

COUNTER = """\
async def register(api):
    async def count(ctx):
        state = await api.state.get() or {}
        await api.state.set({"turns": state.get("turns", 0) + 1, "pad": "p" * 40000})
        return await ctx.next()
    api.pipeline.register("turn", count)
"""


def _limit_file_size() -> None:
    resource.setrlimit(resource.RLIMIT_FSIZE, (30_000, 30_000))  # Python ignores SIGXFSZ: writes fail


@pytest.mark.parametrize("isolation", ["inline", "process"])
def test_a_full_state_root_is_reported_as_coded_lines_without_tracebacks(tmp_path: Path, isolation: str) -> None:
    bundle = write_bundle(tmp_path / "b", BUNDLE, files={"counter.py": COUNTER})
    lines = "".join(f"line {i}\n" for i in range(80))
    proc = subprocess.run(
        [sys.executable, "-m", "goondan", "run", str(bundle), "--state-root", str(tmp_path / "state")],
        input=lines,
        capture_output=True,
        text=True,
        env=env_for(tmp_path, GOONDAN_ISOLATION=isolation),
        timeout=120,
        preexec_fn=_limit_file_size,
    )
    assert proc.returncode == 1, proc.stderr  # piped input and a failed request
    assert "[E_STORAGE_WRITE] could not " in proc.stderr, proc.stderr
    assert "saving extension state failed: [E_STORAGE_WRITE] could not write" in proc.stderr, proc.stderr
    assert "Traceback" not in proc.stderr, proc.stderr[:4000]
