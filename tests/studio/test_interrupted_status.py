"""Studio shows an instance whose turn nobody runs any more (its `gdn run` was killed mid-turn) as
`interrupted`, in the list and on the instance, as `gdn instance list` does; it said `processing`
for good. While the runtime is alive it stays `processing`. A real `gdn run` killed with SIGKILL."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import kit
from goondan.storage import open_store
from goondan.studio._data import StudioData

MODEL = """\
import os, pathlib, time
def generate(request):
    pathlib.Path(os.environ["TURN_MARKER"]).write_text("started")
    time.sleep(120)
    return {"text": "ok"}
"""


def _statuses(state: Path) -> tuple[str, str]:
    data = StudioData(open_store(None, state_root=state))
    (item,) = data.instances(workspace=None, query=None, offset=0, limit=10)["items"]
    return item["status"], data.instance(item["workspace"], item["agent"], item["key"])["status"]


def test_studio_shows_a_turn_whose_gdn_run_was_killed_as_interrupted(tmp_path: Path) -> None:
    root = kit.write_bundle(
        tmp_path / "b",
        kit.package_doc("studio-interrupted"),
        kit.python_model_doc(),
        kit.agent_doc("a"),
        kit.swarm_doc(["a"]),
        files={"model.py": MODEL},
    )
    state, marker = tmp_path / "state", tmp_path / "started"
    env = {k: v for k, v in os.environ.items() if not k.startswith("GOONDAN_")}
    proc = subprocess.Popen(
        [sys.executable, "-m", "goondan", "run", str(root), "--input", "hello", "--state-root", str(state)],
        env={**env, "TURN_MARKER": str(marker)},
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
    try:
        deadline = time.monotonic() + 60
        while not marker.exists():
            assert proc.poll() is None and time.monotonic() < deadline
            time.sleep(0.1)
        assert _statuses(state) == ("processing", "processing")  # its runtime is alive
        os.killpg(proc.pid, signal.SIGKILL)  # gdn run and its agent process, mid-turn
        proc.wait()
        deadline = time.monotonic() + 20  # the agent process notices its orchestrator is gone and exits
        while (statuses := _statuses(state)) != ("interrupted", "interrupted"):
            assert statuses == ("processing", "processing") and time.monotonic() < deadline, statuses
            time.sleep(0.5)  # was processing for good
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
