"""An event routed to an agent process that died before it accepted the event (while idle, or
between the event's dispatch and its acceptance) is delivered to a respawned process exactly once,
and its message ends up in the conversation. A crash during a turn keeps its recovery semantics
(covered in ``test_process_lifecycle``)."""

from __future__ import annotations

import asyncio
import json
import os
import signal
from pathlib import Path
from typing import Any

import proc_kit as pk
from proc_kit import call, until

import goondan


def runtime(root: Path, state_root: Path, **kw: Any) -> goondan.Runtime:
    kw.setdefault("isolation", "process")
    return goondan.Runtime(root, state_root=state_root, **kw)


def pid_of(result: Any) -> int:
    assert result.text and result.text.startswith("a tool: "), result
    return int(json.loads(result.text[len("a tool: ") :])["value"]["pid"])


def users(state_root: Path, key: str) -> list[str]:
    base = pk.read_jsonl(pk.instance_dir(state_root, "a", key) / "messages" / "base.jsonl")
    return [m["data"]["content"] for m in base if m["data"]["role"] == "user"]


def test_a_request_to_an_idle_process_killed_just_before_is_answered_and_stored(
    tmp_path: Path, state_root: Path
) -> None:
    root = pk.bundle(tmp_path / "b")

    async def main() -> None:
        async with runtime(root, state_root) as rt:
            for i in range(3):
                pid = pid_of(await rt.request(call("pid"), instance_key="k"))
                os.kill(pid, signal.SIGKILL)
                # no waiting: the orchestrator has not noticed the exit yet
                result = await rt.request(f"after kill {i}", instance_key="k")
                assert result.text == f"a@k got: after kill {i}"
                assert result.finish_reason == "text_response"

    asyncio.run(main())
    seen = users(state_root, "k")
    assert [u for u in seen if u.startswith("after kill")] == [f"after kill {i}" for i in range(3)]


def test_a_request_after_the_idle_process_death_was_noticed_is_answered_and_stored(
    tmp_path: Path, state_root: Path
) -> None:
    root = pk.bundle(tmp_path / "b")

    async def main() -> None:
        async with runtime(root, state_root) as rt:
            pid = pid_of(await rt.request(call("pid"), instance_key="k"))
            os.kill(pid, signal.SIGKILL)
            await until(lambda: rt.process_status("a", "k") == "crashed", what="crashed status")
            result = await rt.request("after kill", instance_key="k")
            assert result.text == "a@k got: after kill"

    asyncio.run(main())
    assert users(state_root, "k")[-1] == "after kill"


def test_queued_requests_behind_a_dead_idle_process_each_run_exactly_once(tmp_path: Path, state_root: Path) -> None:
    root = pk.bundle(tmp_path / "b")

    async def main() -> None:
        async with runtime(root, state_root) as rt:
            pid = pid_of(await rt.request(call("pid"), instance_key="k"))
            os.kill(pid, signal.SIGKILL)
            results = await asyncio.gather(*(rt.request(f"m{i}", instance_key="k") for i in range(5)))
            assert [r.text for r in results] == [f"a@k got: m{i}" for i in range(5)]

    asyncio.run(main())
    assert users(state_root, "k")[1:] == [f"m{i}" for i in range(5)]


def test_a_request_arriving_while_its_instance_is_evicted_is_served_by_the_next_process(
    tmp_path: Path, state_root: Path
) -> None:
    from goondan.executors.process import ManualClock

    root = pk.bundle(tmp_path / "b", ttl_seconds=1)
    clock = ManualClock()

    async def main() -> None:
        async with runtime(root, state_root, clock=clock, reconcile_interval_ms=0) as rt:
            orch = rt.orchestrator
            first = pid_of(await rt.request(call("pid"), instance_key="k"))
            await clock.advance(1_000)
            assert (await orch.reconcile()).to_terminate == ["a:k"]
            handle = orch.handles[("a", "k")]
            for _ in range(1000):  # the eviction's stop starts within a few loop iterations
                if handle.stop_task is not None:
                    break
                await asyncio.sleep(0)
            assert handle.stop_task is not None
            result = await rt.request("during eviction", instance_key="k")
            assert result.text == "a@k got: during eviction"
            assert orch.handles[("a", "k")].pid not in (None, first)

    asyncio.run(main())
    assert users(state_root, "k")[-1] == "during eviction"


def test_a_request_arriving_during_a_restart_is_served_once_by_the_new_process(
    tmp_path: Path, state_root: Path
) -> None:
    root = pk.bundle(tmp_path / "b")

    async def main() -> None:
        async with runtime(root, state_root) as rt:
            first = pid_of(await rt.request(call("pid"), instance_key="k"))
            restarting = asyncio.ensure_future(rt.restart("a"))
            await until(lambda: rt.process_status("a", "k") != "idle", what="the restart")
            result = await rt.request("during restart", instance_key="k")
            assert result.text == "a@k got: during restart"
            await restarting
            assert orch_pid(rt) not in (None, first)

    def orch_pid(rt: Any) -> Any:
        return rt.orchestrator.handles[("a", "k")].pid

    asyncio.run(main())
    assert users(state_root, "k").count("during restart") == 1
