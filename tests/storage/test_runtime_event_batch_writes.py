"""The file store's batch of runtime events is all or nothing: a write that stops part way (here a
real one: the process's file size limit, RLIMIT_FSIZE, cuts it short and the next write fails with
EFBIG) is cut back to where it started, so the engine's retry of the same batch stores each record
once. Keeping the complete lines of the failed batch (the torn-tail repair alone) stored the first
record twice."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

SCRIPT = """\
import os
import resource
import signal
import sys

from goondan.errors import StorageError
from goondan.storage import FileInstanceStore

signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # a write past the limit fails with EFBIG instead
store = FileInstanceStore(sys.argv[1], agent_name="a", instance_key="k")
store.load()
store.append_runtime_event({"type": "first"})
size = os.path.getsize(store.runtime_events_path)
batch = [{"type": "second", "pad": "x" * 80}, {"type": "third", "pad": "y" * 80}]
soft, hard = resource.getrlimit(resource.RLIMIT_FSIZE)
resource.setrlimit(resource.RLIMIT_FSIZE, (size + 120, hard))  # room for "second" and part of "third"
try:
    store.append_runtime_events(batch)
except StorageError as exc:
    print("failed:", exc.code)
resource.setrlimit(resource.RLIMIT_FSIZE, (soft, hard))
print("size after the failure:", os.path.getsize(store.runtime_events_path) - size)
store.append_runtime_events(batch)  # the engine's retry
store.close()
"""


def test_a_batch_whose_write_stops_part_way_leaves_none_of_its_records_so_a_retry_stores_each_once(
    tmp_path: Path,
) -> None:
    instance = tmp_path / "instance"
    done = subprocess.run(
        [sys.executable, "-c", SCRIPT, str(instance)], capture_output=True, text=True, timeout=60, check=False
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines() == ["failed: E_STORAGE_WRITE", "size after the failure: 0"], done.stdout
    lines = (instance / "messages" / "runtime-events.jsonl").read_text(encoding="utf-8").splitlines()
    assert [json.loads(line)["type"] for line in lines] == ["first", "second", "third"]
