"""Process supervision with real agent processes (issue 3 §1–3, digest §2.2): one process per
instance, crash isolation and recovery, SIGKILL mid-turn, graceful shutdown with and without the ack,
crash-loop backoff on an injected clock, idle eviction, restarts and self-restart."""

from __future__ import annotations

import asyncio
import json
import logging
import os
import signal
import time
from pathlib import Path
from typing import Any

import proc_kit as pk
import pytest
from proc_kit import call, until

import goondan
from goondan import ExtensionError, GoondanError
from goondan.executors.process import ManualClock


def runtime(root: Path, state_root: Path, **kw: Any) -> goondan.Runtime:
    kw.setdefault("isolation", "process")
    return goondan.Runtime(root, state_root=state_root, **kw)


def pid_of(result: Any) -> int:
    assert result.text and result.text.startswith("a tool: "), result
    return int(json.loads(result.text[len("a tool: ") :])["value"]["pid"])


def test_process_is_the_default_isolation(tmp_path: Path, state_root: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("GOONDAN_ISOLATION", raising=False)
    root = pk.bundle(tmp_path / "b")

    async def main() -> None:
        async with goondan.Runtime(root, state_root=state_root) as rt:
            assert rt.isolation == "process"
            result = await rt.request(call("pid"))
            assert pid_of(result) != os.getpid()

    asyncio.run(main())


def test_each_instance_has_its_own_process_and_instances_run_in_parallel(tmp_path: Path, state_root: Path) -> None:
    root = pk.bundle(tmp_path / "b")

    async def main() -> None:
        async with runtime(root, state_root) as rt:
            pids = [pid_of(await rt.request(call("pid"), instance_key=k)) for k in ("k1", "k2")]
            assert len(set(pids)) == 2 and os.getpid() not in pids
            assert pid_of(await rt.request(call("pid"), instance_key="k1")) == pids[0]
            # three instances are inside a turn at the same moment: they run side by side
            release = tmp_path / "release"
            held = [
                asyncio.ensure_future(rt.request(call("hold", release=str(release)), instance_key=k))
                for k in ("k1", "k2", "k3")
            ]
            await until(
                lambda: all(rt.process_status("a", k) == "processing" for k in ("k1", "k2", "k3")),
                timeout=30,
                what="three turns at once",
            )
            release.write_text("go")
            results = await asyncio.gather(*held)
            assert len({json.loads(r.text[len("a tool: ") :])["value"]["pid"] for r in results}) == 3

    asyncio.run(main())


def test_turns_of_one_instance_are_fifo_and_never_overlap(tmp_path: Path, state_root: Path) -> None:
    root = pk.bundle(tmp_path / "b")

    async def main() -> list[Any]:
        async with runtime(root, state_root) as rt:
            return await asyncio.gather(*(rt.request(f"msg {i}", instance_key="q") for i in range(8)))

    results = asyncio.run(main())
    assert [r.text for r in results] == [f"a@q got: msg {i}" for i in range(8)]
    base = pk.read_jsonl(pk.instance_dir(state_root, "a", "q") / "messages" / "base.jsonl")
    users = [m["data"]["content"] for m in base if m["data"]["role"] == "user"]
    assert users == [f"msg {i}" for i in range(8)]
    # each model call saw the previous turn completely: strictly alternating user/assistant
    assert [m["data"]["role"] for m in base] == ["user", "assistant"] * 8


def test_a_crashing_instance_leaves_the_others_serving_and_recovers(tmp_path: Path, state_root: Path) -> None:
    root = pk.bundle(tmp_path / "b")

    async def main() -> None:
        async with runtime(root, state_root) as rt:
            other = pid_of(await rt.request(call("pid"), instance_key="calm"))
            await rt.request("remember me", instance_key="boom")
            with pytest.raises(GoondanError) as info:
                await rt.request(call("crash", code=3), instance_key="boom")
            assert info.value.code == "E_AGENT_PROCESS_EXITED"
            await until(lambda: rt.process_status("a", "boom") == "crashed", what="crashed status")
            assert rt.orchestrator.handles[("a", "boom")].consecutive_crashes == 1
            assert pid_of(await rt.request(call("pid"), instance_key="calm")) == other
            assert rt.process_status("a", "calm") == "idle"
            again = await rt.request("still there?", instance_key="boom")
            assert again.text == "a@boom got: still there?"
            assert rt.orchestrator.handles[("a", "boom")].consecutive_crashes == 0

    asyncio.run(main())
    meta = json.loads((pk.instance_dir(state_root, "a", "boom") / "metadata.json").read_text())
    assert meta["status"] == "idle"
    seen = [r["messages"] for r in pk.out(root, "model") if r["key"] == "boom"][-1]
    assert seen[0] == {"role": "user", "content": "remember me"}


def test_sigkill_of_an_agent_process_mid_turn_loses_nothing(tmp_path: Path, state_root: Path) -> None:
    root = pk.bundle(tmp_path / "b")
    ready = tmp_path / "ready"

    async def main() -> None:
        async with runtime(root, state_root) as rt:
            pending = asyncio.ensure_future(rt.request(call("block", ready=str(ready)), instance_key="k"))
            await until(ready.exists, what="the blocking tool")
            pid = int(ready.read_text())
            assert rt.process_status("a", "k") == "processing"
            inst = pk.instance_dir(state_root, "a", "k")
            assert json.loads((inst / "metadata.json").read_text())["status"] == "processing"
            os.kill(pid, signal.SIGKILL)
            with pytest.raises(GoondanError) as info:
                await pending
            assert info.value.code == "E_AGENT_PROCESS_EXITED"
            await until(lambda: rt.process_status("a", "k") == "crashed", what="crashed status")
            assert json.loads((inst / "metadata.json").read_text())["status"] == "idle"
            assert pk.read_jsonl(inst / "messages" / "events.jsonl"), "the killed turn left residual events"
            result = await rt.request("after the crash", instance_key="k")
            assert result.text == "a@k got: after the crash"
            assert pk.read_jsonl(inst / "messages" / "events.jsonl") == []

    asyncio.run(main())
    seen = [r["messages"] for r in pk.out(root, "model")][-1]
    assert seen[0]["content"].startswith("call t__block")
    assert seen[1]["role"] == "assistant" and seen[1]["content"][0]["type"] == "tool-call"
    assert seen[-1] == {"role": "user", "content": "after the crash"}
    base = pk.read_jsonl(pk.instance_dir(state_root, "a", "k") / "messages" / "base.jsonl")
    ids = [m["id"] for m in base]
    assert len(ids) == len(set(ids))


HOST = """\
import asyncio
import sys

import goondan


async def main():
    async with goondan.Runtime(sys.argv[1], state_root=sys.argv[2], isolation="process") as rt:
        await rt.request(sys.argv[3], instance_key="k")


asyncio.run(main())
"""


def test_sigkill_of_the_orchestrator_takes_its_agents_down_and_a_new_one_recovers(
    tmp_path: Path, state_root: Path
) -> None:
    import subprocess
    import sys

    root = pk.bundle(tmp_path / "b")
    ready = tmp_path / "ready"
    script = tmp_path / "host.py"
    script.write_text(HOST, encoding="utf-8")
    host = subprocess.Popen(
        [sys.executable, str(script), str(root), str(state_root), call("block", ready=str(ready))],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        deadline = time.monotonic() + 30
        while not ready.exists():
            assert host.poll() is None, "host exited early"
            assert time.monotonic() < deadline
            time.sleep(0.02)
        agent_pid = int(ready.read_text())
        os.kill(host.pid, signal.SIGKILL)
        host.wait(10)
    finally:
        if host.poll() is None:
            host.kill()
            host.wait(10)
    deadline = time.monotonic() + 10
    while pk.alive(agent_pid):
        assert time.monotonic() < deadline, "the agent process outlived its orchestrator"
        time.sleep(0.02)

    async def main() -> Any:
        async with runtime(root, state_root) as rt:
            return await rt.request("hello again", instance_key="k")

    result = asyncio.run(main())
    assert result.text == "a@k got: hello again"
    seen = pk.out(root, "model")[-1]["messages"]
    assert seen[0]["content"].startswith("call t__block") and seen[-1]["content"] == "hello again"


def test_graceful_restart_lets_the_current_turn_finish(tmp_path: Path, state_root: Path) -> None:
    root = pk.bundle(tmp_path / "b")
    release = tmp_path / "release"

    async def main() -> None:
        async with runtime(root, state_root) as rt:
            before = pid_of(await rt.request(call("pid"), instance_key="k"))
            held = asyncio.ensure_future(rt.request(call("hold", release=str(release)), instance_key="k"))
            await until(lambda: rt.process_status("a", "k") == "processing", what="processing")
            restarting = asyncio.ensure_future(rt.restart("a"))
            await until(lambda: rt.process_status("a", "k") == "draining", timeout=30, what="draining")
            assert pk.alive(before) and not held.done()
            release.write_text("go")
            result = await held
            assert result.finish_reason == "text_response" and '"released": true' in (result.text or "")
            assert await restarting == ["a:k"]
            after = pid_of(await rt.request(call("pid"), instance_key="k"))
            assert after != before and not pk.alive(before)

    asyncio.run(main())


def test_a_draining_process_still_reads_the_response_its_last_turn_waits_for(tmp_path: Path, state_root: Path) -> None:
    """A graceful restart of ``a`` while a's turn waits for an inter-agent request to ``b``: the
    draining process keeps reading its stream, so b's answer completes the turn at once (before,
    nothing was read until the shutdown returned, which waited for that very turn: the turn sat
    until the grace period ran out and was then killed)."""
    root = pk.bundle(tmp_path / "b")
    release = tmp_path / "release"

    async def main() -> None:
        async with runtime(root, state_root) as rt:
            first = pid_of(await rt.request(call("pid"), instance_key="k"))
            asking = call("ask", target="b", input=call("hold", release=str(release)))
            held = asyncio.ensure_future(rt.request(asking, instance_key="k"))
            await until(lambda: rt.process_status("b", "k") == "processing", timeout=30, what="b processing")
            restarting = asyncio.ensure_future(rt.restart("a"))
            await until(lambda: rt.process_status("a", "k") == "draining", timeout=30, what="a draining")
            release.write_text("go")
            result = await asyncio.wait_for(held, 15)  # the grace period is 30 s
            assert result.finish_reason == "text_response" and "released" in (result.text or "")
            assert await asyncio.wait_for(restarting, 15) == ["a:k"]
            assert pid_of(await rt.request(call("pid"), instance_key="k")) != first

    asyncio.run(main())


def test_shutdown_without_ack_is_sigkilled_after_the_grace_period(tmp_path: Path, state_root: Path) -> None:
    root = pk.bundle(tmp_path / "b")
    ready = tmp_path / "ready"
    clock = ManualClock()

    async def main() -> None:
        async with runtime(root, state_root, clock=clock, reconcile_interval_ms=0) as rt:
            orch = rt.orchestrator
            pending = asyncio.ensure_future(rt.request(call("block", ready=str(ready)), instance_key="k"))
            await until(ready.exists, what="the blocking tool")
            pid = int(ready.read_text())
            handle = orch.handles[("a", "k")]
            stopping = asyncio.ensure_future(orch.stop(handle, "restart", grace_ms=200))
            await until(lambda: handle.status == "draining" and clock.sleepers == 1, what="draining")
            await asyncio.sleep(0.2)
            assert pk.alive(pid), "nothing may kill the process before the grace period ends"
            await clock.advance(199)
            assert pk.alive(pid) and handle.status == "draining"
            await clock.advance(1)
            await stopping
            assert handle.status == "terminated" and not pk.alive(pid)
            with pytest.raises(GoondanError):
                await pending

    asyncio.run(main())


def test_backoff_schedule_on_an_injected_clock(
    tmp_path: Path, state_root: Path, caplog: pytest.LogCaptureFixture
) -> None:
    root = pk.bundle(tmp_path / "b", crash_at_start=["a"])
    clock = ManualClock()

    async def main() -> None:
        async with runtime(
            root, state_root, clock=clock, reconcile_interval_ms=0, crash_threshold=2, backoff_initial_ms=500
        ) as rt:
            orch = rt.orchestrator
            with pytest.raises(GoondanError):
                await rt.request("hi", instance_key="k")
            handle = orch.handles[("a", "k")]

            async def crash_once() -> None:
                n = handle.consecutive_crashes
                await until(lambda: handle.consecutive_crashes == n + 1 and not handle.alive, what="a crash")

            await until(lambda: handle.consecutive_crashes == 1 and not handle.alive, what="first crash")
            assert handle.status == "crashed"
            for expected in (2, 3):
                plan = await orch.reconcile()
                assert plan.to_respawn == [{"name": "a:k", "backoffMs": 0}]
                await crash_once()
                assert handle.consecutive_crashes == expected
            assert handle.status == "crashLoopBackOff"
            assert handle.next_spawn_allowed_at == clock.now_ms() + 500
            plan = await orch.reconcile()
            assert plan.to_respawn == [{"name": "a:k", "backoffMs": 500}] and not handle.alive
            with pytest.raises(GoondanError) as info:
                await rt.request("hi", instance_key="k")
            assert info.value.code == "E_AGENT_CRASH_LOOP"
            await clock.advance(499)
            assert (await orch.reconcile()).to_respawn == [{"name": "a:k", "backoffMs": 1}]
            await clock.advance(1)
            await orch.reconcile()
            await crash_once()
            assert handle.status == "crashLoopBackOff"
            assert handle.next_spawn_allowed_at == clock.now_ms() + 1000  # 500·2^(4−2−1)
            await rt.restart("a")  # a restart forgives the crashes: no backoff for the next event
            assert (handle.status, handle.consecutive_crashes) == ("terminated", 0)
            assert (await orch.reconcile()).to_respawn == []

    with caplog.at_level(logging.WARNING, logger="goondan.executors.process"):
        asyncio.run(main())
    lines = [r.getMessage() for r in caplog.records if "crashLoopBackOff" in r.getMessage()]
    assert len(lines) == 2
    record = json.loads(lines[0].split(" ", 2)[2])
    assert record["event"] == "orchestrator.crashLoopBackOff"
    assert record["consecutiveCrashes"] == 3 and record["crashThreshold"] == 2 and record["backoffMs"] == 500
    assert record["agentName"] == "a" and record["instanceKey"] == "k" and record["swarmName"] == "default"


def test_idle_instances_are_evicted_after_ttl_and_respawn_with_their_history(tmp_path: Path, state_root: Path) -> None:
    root = pk.bundle(tmp_path / "b", ttl_seconds=60)
    clock = ManualClock()

    async def main() -> None:
        async with runtime(root, state_root, clock=clock, reconcile_interval_ms=0) as rt:
            orch = rt.orchestrator
            first = pid_of(await rt.request(call("pid"), instance_key="k"))
            await clock.advance(59_000)
            assert (await orch.reconcile()).to_terminate == []
            await clock.advance(1_000)
            assert (await orch.reconcile()).to_terminate == ["a:k"]
            await until(lambda: ("a", "k") not in orch.handles, what="eviction")
            assert not pk.alive(first)
            second = pid_of(await rt.request(call("pid"), instance_key="k"))
            assert second != first

    asyncio.run(main())
    seen = pk.out(root, "model")[-1]["messages"]
    assert [m["role"] for m in seen] == ["user", "assistant", "tool", "assistant", "user", "assistant", "tool"]


def test_restart_one_agent_only_replaces_its_processes_and_fresh_clears_history(
    tmp_path: Path, state_root: Path
) -> None:
    root = pk.bundle(tmp_path / "b")

    async def main() -> None:
        async with runtime(root, state_root) as rt:
            a1 = pid_of(await rt.request(call("pid"), instance_key="k"))
            await rt.request(call("ask", target="b", input="x"), instance_key="k")
            b_pid = rt.orchestrator.handles[("b", "k")].pid
            assert await rt.restart("a") == ["a:k"]
            assert rt.orchestrator.handles[("b", "k")].pid == b_pid
            a2 = rt.orchestrator.handles[("a", "k")].pid
            assert a2 not in (None, a1)
            await rt.restart("a", fresh=True)
            await rt.request("fresh start", instance_key="k")
            assert rt.orchestrator.handles[("b", "k")].pid == b_pid

    asyncio.run(main())
    assert pk.out(root, "model")[-1]["messages"] == [{"role": "user", "content": "fresh start"}]
    b_base = pk.read_jsonl(pk.instance_dir(state_root, "b", "k") / "messages" / "base.jsonl")
    assert b_base, "b's history is untouched"


def test_a_tool_asking_for_a_restart_restarts_its_instance_after_persisting(tmp_path: Path, state_root: Path) -> None:
    root = pk.bundle(tmp_path / "b")

    async def main() -> None:
        async with runtime(root, state_root) as rt:
            before = pid_of(await rt.request(call("pid"), instance_key="k"))
            result = await rt.request(call("restart"), instance_key="k")
            assert '"restartRequested": true' in (result.text or "")
            await until(lambda: rt.orchestrator.handles[("a", "k")].pid not in (None, before), what="the new process")
            after = pid_of(await rt.request(call("pid"), instance_key="k"))
            assert after != before

    asyncio.run(main())
    seen = pk.out(root, "model")[-1]["messages"]
    assert sum(1 for m in seen if m["role"] == "user" and m["content"].startswith("call t__restart")) == 1


def test_watch_restarts_only_the_agents_a_changed_file_affects(tmp_path: Path, state_root: Path) -> None:
    root = pk.bundle(tmp_path / "b")
    text = (root / "goondan.yaml").read_text(encoding="utf-8")

    async def main() -> None:
        async with runtime(root, state_root, watch=True, watch_interval_ms=50) as rt:
            await rt.request("hi", instance_key="k")
            await rt.request("hi", agent="b", instance_key="k")
            orch = rt.orchestrator
            a_pid, b_pid = orch.handles[("a", "k")].pid, orch.handles[("b", "k")].pid
            # give agent b its own prompt: only b's fingerprint changes
            changed = text.replace(
                "name: b\nspec:\n  modelConfig:\n    modelRef: Model/m\n",
                "name: b\nspec:\n  modelConfig:\n    modelRef: Model/m\n  prompt:\n    system: be brief\n",
            )
            assert changed != text
            (root / "goondan.yaml").write_text(changed, encoding="utf-8")
            await until(lambda: orch.handles[("b", "k")].pid not in (None, b_pid), timeout=20, what="b restarted")
            assert orch.handles[("a", "k")].pid == a_pid
            result = await rt.request("again", agent="b", instance_key="k")
            assert result.text == "b@k got: again"

    asyncio.run(main())
    last_b = [r for r in pk.out(root, "model") if r["agent"] == "b"][-1]["messages"]
    assert {"role": "system", "content": "be brief"} in last_b


def test_an_extension_that_fails_to_register_fails_the_request_with_extension_error(
    tmp_path: Path, state_root: Path
) -> None:
    root = pk.bundle(tmp_path / "b", crash_at_start=["a"])
    (root / "crash_ext.py").write_text("def register(api):\n    raise RuntimeError('broken')\n", encoding="utf-8")

    async def main() -> None:
        async with runtime(root, state_root) as rt:
            with pytest.raises(ExtensionError) as info:
                await rt.request("hi")
            assert info.value.code == "E_EXT_INIT" and "broken" in info.value.message

    asyncio.run(main())


def test_instances_and_delete_keep_metadata_accurate(tmp_path: Path, state_root: Path) -> None:
    root = pk.bundle(tmp_path / "b")

    async def main() -> None:
        async with runtime(root, state_root) as rt:
            await rt.request("one", instance_key="k1")
            await rt.request("two", instance_key="k2")
            infos = await rt.instances()
            assert [(i.agent_name, i.instance_key, i.status) for i in infos] == [
                ("a", "k1", "idle"),
                ("a", "k2", "idle"),
            ]
            pid = rt.orchestrator.handles[("a", "k1")].pid
            assert await rt.delete_instance("a", "k1") is True
            assert not pk.alive(pid)
            assert [i.instance_key for i in await rt.instances()] == ["k2"]
            result = await rt.request("new life", instance_key="k1")
            assert result.text == "a@k1 got: new life"

    asyncio.run(main())
    seen = pk.out(root, "model")[-1]["messages"]
    assert seen == [{"role": "user", "content": "new life"}]


def test_two_hundred_concurrent_instances(tmp_path: Path, state_root: Path) -> None:
    root = pk.bundle(tmp_path / "b")

    async def main() -> None:
        async with runtime(root, state_root, persist=False) as rt:
            results = await asyncio.gather(*(rt.request(f"n{i}", instance_key=f"k{i}") for i in range(200)))
            assert [r.text for r in results] == [f"a@k{i} got: n{i}" for i in range(200)]
            pids = {h.pid for h in rt.orchestrator.handles.values()}
            assert len(pids) == 200 and None not in pids
            assert all(h.status == "idle" for h in rt.orchestrator.handles.values())

    asyncio.run(main())


def test_an_event_that_is_not_json_is_refused_and_the_instance_keeps_serving(tmp_path: Path, state_root: Path) -> None:
    root = pk.bundle(tmp_path / "b")

    async def main() -> None:
        async with runtime(root, state_root) as rt:
            await rt.request("first", instance_key="k")
            with pytest.raises(GoondanError) as info:
                await rt.request("bad", instance_key="k", metadata={"handle": object()})
            assert info.value.code == "E_IPC_NOT_JSON"
            assert (await rt.request("after", instance_key="k")).text == "a@k got: after"

    asyncio.run(main())
