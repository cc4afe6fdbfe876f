"""Failover on a real multi-node Ray cluster with a real PostgreSQL store: the node hosting an agent
instance is killed in the middle of a turn (a tool is blocked on a file); the instance comes back
on the other node, every runtime event the head saw is in the database, the interrupted tool call
is answered ``E_TOOL_INTERRUPTED`` and the next turn succeeds.

The cluster (``ray.cluster_utils.Cluster``: a head that runs no actors, two worker nodes, all on
this machine) runs in a child Python (``failover_scenario.py``), because the test session already
holds a Ray of its own."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

HERE = Path(__file__).parent
TESTS = HERE.parent.parent


def run_scenario(tmp_path: Path, store: str) -> dict[str, Any]:
    env = dict(os.environ, RAY_USAGE_STATS_ENABLED="0")
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(TESTS), env.get("PYTHONPATH", "")) if p)
    proc = subprocess.run(
        [sys.executable, str(HERE / "failover_scenario.py"), str(tmp_path), store],
        env=env,
        capture_output=True,
        text=True,
        timeout=400,
    )
    result = tmp_path / "result.json"
    assert proc.returncode == 0 and result.exists(), proc.stderr[-4000:]
    out: dict[str, Any] = json.loads(result.read_text(encoding="utf-8"))
    return out


def event_key(record: dict[str, Any]) -> tuple[Any, ...]:
    return (record.get("type"), record.get("turnId"), record.get("spanId"), record.get("timestamp"))


@pytest.mark.slow
def test_killing_the_node_of_an_instance_mid_turn_moves_it_to_another_node_losing_nothing(
    tmp_path: Path, postgres_url: str
) -> None:
    out = run_scenario(tmp_path, postgres_url)
    assert out["first"][0] == "text_response"
    # the turn whose node died fails like a process that died mid-turn (it is not run twice)
    assert out["second"] == ["raised", "E_AGENT_PROCESS_EXITED"]
    # the instance came back on the surviving node and its next turn succeeded, having read the
    # interrupted call's E_TOOL_INTERRUPTED answer from the database
    assert out["node_after"] != out["node_before"]
    assert out["node_after"] in out["alive_nodes"]
    assert out["third"] == ["text_response", "got again; interrupted call answered: True"]
    # every runtime event the head saw, including those of the killed turn, was durable already
    seen = [event_key(r) for r in out["seen"]]
    stored = [event_key(r) for r in out["stored"]]
    assert seen and set(seen) <= set(stored)
    assert ("tool.called" in [k[0] for k in stored]) and [k[0] for k in stored].count("turn.started") == 3
    # the conversation holds the held call and its interrupted answer
    text = json.dumps(out["messages"])
    assert "t__hold" in text and "E_TOOL_INTERRUPTED" in text
