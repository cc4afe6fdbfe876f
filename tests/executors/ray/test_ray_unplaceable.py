"""An agent instance whose Ray actor asks for more than any node has (a custom resource name
with a typo, a GPU on a cluster without one) is named in a warning within seconds, with what it
asks and what the nodes offer, and its turn fails with E_RAY_ACTOR_START saying it was never placed;
before, the run waited 120 s in silence and then blamed the installation. A real local Ray."""

from __future__ import annotations

import asyncio
import logging
import time
from pathlib import Path
from typing import Any

import pytest

import goondan
import kit
from goondan.executors import register_executor
from goondan.executors.ray import RayExecutor, _spawner

MODEL = 'def generate(request):\n    return {"text": "ok"}\n'


def test_an_actor_no_node_can_hold_is_named_at_once_and_fails_as_never_placed(
    tmp_path: Path,
    state_root: Path,
    ray_session: Any,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
) -> None:
    monkeypatch.setattr(_spawner, "START_TIMEOUT_S", 8.0)
    register_executor("ray-typo", lambda o: RayExecutor(o, actor_options={"resources": {"gpu_bx": 0.01}}))
    root = kit.write_bundle(
        tmp_path / "b",
        kit.package_doc("ray-unplaced"),
        kit.python_model_doc(),
        kit.agent_doc("a"),
        kit.swarm_doc(["a"]),
        files={"model.py": MODEL},
    )
    warned_at: list[float] = []

    class Clock(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            if "cannot be placed" in record.getMessage():
                warned_at.append(time.monotonic())

    clock = Clock()
    logging.getLogger("goondan.executors.ray").addHandler(clock)

    async def main() -> Any:
        async with goondan.Runtime(root, state_root=state_root, executor="ray-typo") as rt:
            try:
                return await rt.request("hi", agent="a", instance_key="k")
            except goondan.GoondanError as exc:
                return exc

    started = time.monotonic()
    try:
        with caplog.at_level(logging.WARNING, logger="goondan.executors.ray"):
            outcome = asyncio.run(main())
    finally:
        logging.getLogger("goondan.executors.ray").removeHandler(clock)
    error = outcome if isinstance(outcome, goondan.GoondanError) else outcome.error
    code = error.code if isinstance(error, goondan.GoondanError) else error["code"]
    message = error.message if isinstance(error, goondan.GoondanError) else error["message"]
    suggestion = error.suggestion if isinstance(error, goondan.GoondanError) else error["suggestion"]
    assert code == "E_RAY_ACTOR_START"
    # was "did not connect within 120 s" with a suggestion to check the installation
    assert "was never placed within 8 s" in message and "gpu_bx 0.01" in message, message
    assert "GOONDAN_RAY_ACTOR_OPTIONS" in suggestion
    assert warned_at and warned_at[0] - started < 7, "no early warning"
    warnings = [r.getMessage() for r in caplog.records if "cannot be placed" in r.getMessage()]
    assert len(warnings) == 1 and "'a@k'" in warnings[0] and "gpu_bx 0" in warnings[0]


def test_resource_demand_and_placement_are_read_as_ray_schedules_actors() -> None:
    from goondan.executors.ray._spawner import resource_demand, unplaceable

    assert resource_demand({}) == {"CPU": 1.0}
    assert resource_demand({"num_cpus": 0, "num_gpus": 1}) == {"GPU": 1.0}
    assert resource_demand({"resources": {"box": 0.5}, "num_cpus": 2}) == {"CPU": 2.0, "box": 0.5}
    assert resource_demand({"scheduling_strategy": object()}) == {}  # node affinity, placement groups: not judged
    assert unplaceable({"CPU": 1.0}, [{"CPU": 2.0}]) is None
    assert unplaceable({"CPU": 1.0, "GPU": 1.0}, [{"CPU": 8.0}, {"CPU": 1.0, "GPU": 2.0}]) is None
    reason = unplaceable({"CPU": 1.0, "GPU": 1.0}, [{"CPU": 8.0}])
    assert reason == "it asks for CPU 1, GPU 1 and no node of the cluster has that (nodes: [CPU 8, GPU 0])"
    assert (
        unplaceable({"CPU": 1.0}, [])
        == "it asks for CPU 1 and no node of the cluster has that (nodes: no node is alive)"
    )
