"""The streaming benchmark keeps working: every variant (SDK alone, inline and process runtimes, a
client of the webhook connector's streamed reply) gets one first-delta sample per turn, timed from the
moment the fake server wrote the first token."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

BENCH = Path(__file__).resolve().parents[2] / "bench" / "streaming.py"


def run_bench(*args: str) -> dict[str, Any]:
    """The bench's BENCH-JSON report for ``args``."""
    proc = subprocess.run([sys.executable, str(BENCH), *args], capture_output=True, text=True, timeout=180)
    assert proc.returncode == 0, proc.stderr[-2000:]
    (line,) = [ln for ln in proc.stdout.splitlines() if ln.startswith("BENCH-JSON ")]
    report: dict[str, Any] = json.loads(line.removeprefix("BENCH-JSON "))
    return report


def test_streaming_bench_times_first_token_to_first_delta_for_every_variant() -> None:
    report = run_bench("--turns=6", "--block=3", "--warmup=1")
    assert set(report) == {"sdk", "inline", "process", "webhook"}
    for figures in report.values():
        assert figures["samples"] == 6
        # a delta cannot arrive before the server wrote the token, nor wait for the whole answer
        assert 0 < figures["min_us"] <= figures["p50_us"] < 5_000_000


def test_the_opt_in_connector_variant_times_only_the_connector_hop() -> None:
    report = run_bench("--variants=connector", "--turns=4", "--block=2", "--warmup=1")
    assert set(report) == {"connector"}
    assert report["connector"]["samples"] == 4
    assert 0 < report["connector"]["min_us"] <= report["connector"]["p50_us"] < 5_000_000
