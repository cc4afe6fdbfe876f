"""Loading a long history streams it: the raw file text never exists next to the decoded messages."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from storage_testkit import child_env

from goondan._json import dumps_line
from goondan.messages import user_message

CHILD = """
import gc, json, sys
from pathlib import Path
from goondan.storage import FileInstanceStore

def status_kib(field):
    # VmHWM, unlike ru_maxrss, is not inherited from the parent (pytest's own peak)
    with open("/proc/self/status") as f:
        return next(int(line.split()[1]) for line in f if line.startswith(field + ":"))

def rss_kib():
    return status_kib("VmRSS")

gc.collect()
before = rss_kib()
store = FileInstanceStore(Path(sys.argv[1]))
base = store.load().base
gc.collect()
kept = rss_kib()
peak = status_kib("VmHWM")
print(json.dumps({"n": len(base), "before": before, "kept": kept, "peak": peak}))
"""


@pytest.mark.skipif(not Path("/proc/self/status").exists(), reason="needs /proc to read the resident set size")
def test_loading_a_long_history_does_not_hold_the_file_text_beside_the_messages(tmp_path: Path) -> None:
    messages = tmp_path / "messages"
    messages.mkdir()
    line = dumps_line(user_message("x" * 400).to_record())
    count = 50_000
    (messages / "base.jsonl").write_bytes(line * count)
    size_kib = len(line) * count // 1024
    out = subprocess.run(
        [sys.executable, "-c", CHILD, str(tmp_path)], env=child_env(), capture_output=True, text=True, check=True
    ).stdout
    figures = json.loads(out.strip().splitlines()[-1])
    assert figures["n"] == count
    # what the load needed beyond what it returned: one read chunk and the allocator's slack, not
    # the whole file (before: the file's bytes, its split lines and the raw records all at once)
    transient = figures["peak"] - figures["kept"]
    assert transient < size_kib // 2, figures | {"file_kib": size_kib}
