"""Loading a long conversation: time and peak memory of ``FileInstanceStore.load()``.

Run: ``python bench/load_history.py`` (``--messages N``, default 1,000,000 small messages).

The history is written once into a temporary instance directory; each measurement then runs in a
fresh subprocess, so the peak resident set size (``VmHWM``, else ``ru_maxrss``) is that of one load.
Printed: file size, load time, peak RSS of the process, and RSS growth over an interpreter that has
only imported goondan (the memory the load itself needed).
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import platform
import subprocess
import sys
import tempfile
from datetime import UTC, datetime
from pathlib import Path

CHILD = """
import gc, json, resource, sys, time
from pathlib import Path
from goondan.storage import FileInstanceStore

def peak_kib():
    # VmHWM is the peak of this process image only; ru_maxrss would include the parent's peak
    try:
        with open("/proc/self/status") as f:
            return next(int(line.split()[1]) for line in f if line.startswith("VmHWM:"))
    except OSError:
        return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss

gc.collect()
before = peak_kib()
store = FileInstanceStore(Path(sys.argv[1]))
start = time.perf_counter()
loaded = store.load()
elapsed = time.perf_counter() - start
peak = peak_kib()
store.close()
print(json.dumps({"messages": len(loaded.base), "seconds": elapsed, "peak_kib": peak, "base_kib": before}))
"""


def write_history(path: Path, count: int) -> int:
    """``count`` small user/assistant messages, in exactly the format the store commits (written
    directly, batch by batch, so that this process stays small: ``ru_maxrss`` is inherited by the
    measuring subprocess)."""
    from goondan._json import dumps_line
    from goondan.messages import assistant_message, user_message
    from goondan.storage import FileInstanceStore

    when = datetime(2025, 1, 2, 3, 4, 5, tzinfo=UTC)
    store = FileInstanceStore(path)
    store.load()
    store.close()
    with open(store.base_path, "ab") as out:
        for start in range(0, count, 10_000):
            lines = []
            for i in range(start, min(count, start + 10_000)):
                make = user_message if i % 2 == 0 else assistant_message
                message = dataclasses.replace(make(f"message number {i}"), created_at=when)
                lines.append(dumps_line(message.to_record()))
            out.write(b"".join(lines))
    return store.base_path.stat().st_size


def measure(path: Path) -> dict[str, float]:
    src = str(Path(__file__).resolve().parents[1] / "src")
    env = {**os.environ, "PYTHONPATH": src + os.pathsep + os.environ.get("PYTHONPATH", "")}
    out = subprocess.run(
        [sys.executable, "-c", CHILD, str(path)], env=env, check=True, capture_output=True, text=True
    ).stdout
    result: dict[str, float] = json.loads(out.strip().splitlines()[-1])
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--messages", type=int, default=1_000_000)
    parser.add_argument("--repeat", type=int, default=3, help="loads to run (best time is reported)")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="goondan-bench-") as tmp:
        path = Path(tmp) / "instance"
        size = write_history(path, args.messages)
        runs = [measure(path) for _ in range(args.repeat)]
    best = min(runs, key=lambda r: r["seconds"])
    peak = min(r["peak_kib"] for r in runs)
    grew = min(r["peak_kib"] - r["base_kib"] for r in runs)
    print(f"goondan load_history | Python {platform.python_version()} | {platform.machine()} | {os.cpu_count()} CPUs")
    print(f"messages           {int(best['messages']):,}")
    print(f"base.jsonl         {size / 2**20:.1f} MiB")
    print(f"load time (best)   {best['seconds']:.2f} s   of {args.repeat} runs")
    print(f"peak RSS           {peak / 2**10:.0f} MiB")
    print(f"RSS growth by load {grew / 2**10:.0f} MiB")


if __name__ == "__main__":
    main()
