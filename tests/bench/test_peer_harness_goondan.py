"""The Goondan side of the peer benchmark keeps working: it verifies (before timing) that the tool ran
once and every pass-through layer ran once per wrapped call, and reports the figures the table needs."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

ADAPTER = Path(__file__).resolve().parents[2] / "bench" / "peers" / "frameworks" / "goondan_.py"


@pytest.mark.parametrize("isolation", ["inline", "process"])
def test_goondan_peer_adapter_runs_the_scenario_and_reports_figures(isolation: str) -> None:
    proc = subprocess.run(
        [
            sys.executable,
            str(ADAPTER),
            "bench",
            "--turns=6",
            "--warmup=1",
            "--block=3",
            "--convs=2",
            "--turns-per-conv=2",
            "--repeats=1",
            "--agents=2",
            "--slope-layers=2",
            f"--isolation={isolation}",
        ],
        capture_output=True,
        text=True,
        timeout=240,
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    (line,) = [ln for ln in proc.stdout.splitlines() if ln.startswith("BENCH-JSON ")]
    report = json.loads(line.removeprefix("BENCH-JSON "))
    assert report["turn_us"] > 0 and report["turns_per_s"] > 0
    assert set(report["per_layer_us"]) == {"turn", "model", "tool"}
    assert report["turns_per_config"] == {"0": 6, "turn": 6, "model": 6, "tool": 6, "all": 6}


def _durable(*extra: str) -> dict[str, object]:
    proc = subprocess.run(
        [sys.executable, str(ADAPTER), "durable", "--turns=4", "--warmup=1", "--block=2", "--persist=on", *extra],
        capture_output=True,
        text=True,
        timeout=240,
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    (line,) = [ln for ln in proc.stdout.splitlines() if ln.startswith("BENCH-JSON ")]
    report: dict[str, object] = json.loads(line.removeprefix("BENCH-JSON "))
    return report


@pytest.mark.parametrize("isolation", ["inline", "process"])
def test_durable_mode_times_persisted_turns_with_the_file_store(isolation: str) -> None:
    report = _durable(f"--isolation={isolation}")
    assert report["durable_turns"] == 4
    assert isinstance(report["durable_turn_cpu_us"], float) and report["durable_turn_cpu_us"] > 0
    assert "unavailable" not in report


def test_durable_mode_runs_on_the_postgresql_store(postgres_url: str) -> None:
    report = _durable("--isolation=inline", f"--store={postgres_url}")
    assert report["name"] == "goondan inline persist=on store=postgresql"
    assert report["durable_turns"] == 4 and "unavailable" not in report
