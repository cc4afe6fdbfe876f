"""bench/scale_store.py keeps measuring what it says: real turns of each store, the persistence
calls of one turn (four durable message events and one fold for Goondan; LangGraph's checkpoints),
and the verdict on the target, on the test session's PostgreSQL server."""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
from pathlib import Path

BENCH = Path(__file__).resolve().parents[2] / "bench" / "scale_store.py"


def test_scale_store_bench_reports_each_stores_per_turn_persistence_cost(postgres_url: str) -> None:
    proc = subprocess.run(
        [sys.executable, str(BENCH), "--conversations=1", "--turns=2", "--json", "--postgres-url", postgres_url],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    figures = json.loads(proc.stdout)
    results = figures["results"]
    for name in ("Goondan filesystem store", "Goondan PostgreSQL store"):
        row = results[name]
        assert row["turns"] == 2 and row["wall_us"] > 0 and row["cpu_us"] > 0
        assert row["calls_per_turn"]["append_event"] == 4  # user, tool call, tool result, answer
        assert row["calls_per_turn"]["commit"] == 1
    saver = results["LangGraph PostgresSaver (durability=sync)"]
    if importlib.util.find_spec("langgraph") is None:
        assert "requirements-scale.txt" in saver["error"]
    else:
        assert saver["calls_per_turn"]["put"] >= 3 and saver["wall_us"] > 0
        assert isinstance(figures["target"]["met"], bool)
