"""``bench/scale.py --quick`` keeps working: the process executor and the Ray executor (one worker
node of a local ``ray.cluster_utils`` cluster) serve every conversation without an error, and the
figures the tables print (throughput, latency percentiles, inter-agent round trip) are there."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

SCRIPT = Path(__file__).resolve().parents[2] / "bench" / "scale.py"


@pytest.mark.slow
def test_scale_quick_serves_every_conversation_on_process_and_ray_and_reports_figures() -> None:
    proc = subprocess.run(
        [sys.executable, str(SCRIPT), "--quick", "--no-store", "--json"],
        capture_output=True,
        text=True,
        timeout=600,
        env=dict(os.environ, RAY_USAGE_STATS_ENABLED="0"),
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    figures = json.loads(proc.stdout)
    runs = {(r["executor"], r["nodes"]): r for r in figures["runs"]}
    assert set(runs) == {("process", 0), ("ray", 1)}
    for run in runs.values():
        assert "error" not in run, run
        assert run["errors"] == 0 and run["turns"] == 12 and run["conversations"] == 6
        assert run["turns_per_s"] > 0
        # a warm turn is two 50 ms model waits and a 5 ms tool at least
        assert run["later_turn_ms"]["p50"] >= 100
        assert run["rtt"]["samples"] == 100 and 0 < run["rtt"]["p50_ms"] <= run["rtt"]["p99_ms"]
