"""The ``Executor`` protocol, run against every executor through the ``executor`` fixture
(``tests/conftest.py``): the same calls give the same answers wherever the instances live. A new
executor is added to ``EXECUTORS`` there and must pass this file unchanged."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import pytest

import goondan
import kit
from goondan.executors import Executor, ExecutorOptions, open_executor

MODEL = """\
def generate(request):
    last = request.messages[-1]
    text = last["content"] if isinstance(last["content"], str) else ""
    if text == "fail":
        raise RuntimeError("the model gave up")
    return {"text": f"{request.agent_name}@{request.instance_key} got: {text}"}
"""


def bundle(root: Path) -> Path:
    docs = [
        kit.package_doc(),
        kit.python_model_doc(),
        kit.agent_doc("a"),
        kit.agent_doc("b"),
        kit.swarm_doc(["a", "b"]),
    ]
    return kit.write_bundle(root, *docs, files={"model.py": MODEL})


def session(root: Path, state_root: Path, executor: str, body: Callable[[Any], Awaitable[Any]], **kw: Any) -> Any:
    async def main() -> Any:
        async with goondan.Runtime(root, state_root=state_root, executor=executor, **kw) as rt:
            out = await body(rt)
            await rt.wait_idle()
            return out

    return asyncio.run(main())


def event(text: str, key: str) -> dict[str, Any]:
    return {
        "id": f"evt-{text}-{key}",
        "type": "message",
        "createdAt": "2026-01-01T00:00:00Z",
        "input": text,
        "instanceKey": key,
        "source": {"kind": "agent", "name": "a"},
        "metadata": {},
    }


def test_every_executor_implements_the_executor_protocol(executor: str) -> None:
    built = open_executor(executor, ExecutorOptions())
    assert isinstance(built, Executor)
    assert built.name == executor


def test_submit_answers_and_send_is_served_by_the_same_instance(
    tmp_path: Path, state_root: Path, executor: str
) -> None:
    root = bundle(tmp_path / "b")

    async def body(rt: Any) -> tuple[str | None, bool, list[tuple[str, str]], str | None]:
        assert rt.executor.name == executor == rt.isolation
        result = await rt.request("hi", agent="b", instance_key="k")
        accepted = await rt.send("later", agent="b", instance_key="k")
        await rt.wait_idle()
        infos = await rt.instances()
        return result.text, accepted, sorted((i.agent_name, i.instance_key) for i in infos), rt.process_status("b", "k")

    text, accepted, listed, status = session(root, state_root, executor, body, persist=False)
    assert text == "b@k got: hi"
    assert accepted is True
    assert listed == [("b", "k")]
    assert status == "idle"


def test_a_failing_turn_is_an_error_result_not_an_exception(tmp_path: Path, state_root: Path, executor: str) -> None:
    root = bundle(tmp_path / "b")
    result = session(root, state_root, executor, lambda rt: rt.request("fail", instance_key="k"))
    assert result.finish_reason == "error"
    assert "the model gave up" in str(result.error)


def test_the_executor_routes_request_send_spawn_and_list_between_instances(
    tmp_path: Path, state_root: Path, executor: str
) -> None:
    root = bundle(tmp_path / "b")

    async def body(rt: Any) -> dict[str, Any]:
        ex = rt.executor
        owner = ("a", "k")
        answer = await ex.run_request("b", "k2", event("ping", "k2"))
        await ex.run_send("b", "k3", event("note", "k3"))
        first = await ex.spawn(owner, "b", "k4", None)
        again = await ex.spawn(owner, "b", "k4", None)
        mine = await ex.list(owner, False)
        others = await ex.list(("b", "x"), False)
        everyone = await ex.list(("b", "x"), True)
        with pytest.raises(goondan.AgentRequestError) as failed:
            await ex.run_request("b", "k5", event("fail", "k5"))
        return {
            "answer": answer,
            "spawned": (first["spawned"], again["spawned"]),
            "mine": [(r["target"], r["instanceKey"]) for r in mine["agents"]],
            "others": others["agents"],
            "everyone": len(everyone["agents"]),
            "failed": failed.value.code,
            "statuses": {k: rt.process_status("b", k) for k in ("k2", "k3", "k4")},
        }

    out = session(root, state_root, executor, body)
    assert out["answer"] == "b@k2 got: ping"
    assert out["spawned"] == (True, False)
    assert out["mine"] == [("b", "k4")]
    assert out["others"] == []
    assert out["everyone"] == 1
    assert out["failed"] == "AGENT_REQUEST_FAILED"
    assert set(out["statuses"].values()) == {"idle"}


def test_restart_names_the_instances_it_restarted_and_delete_forgets_one(
    tmp_path: Path, state_root: Path, executor: str
) -> None:
    root = bundle(tmp_path / "b")

    async def body(rt: Any) -> tuple[list[str], list[str], bool, bool, str | None]:
        await rt.request("one", agent="a", instance_key="k")
        await rt.request("two", agent="b", instance_key="k")
        only_b = await rt.restart("b")
        await rt.request("three", agent="b", instance_key="k")
        everything = await rt.restart(fresh=True)
        await rt.request("four", agent="a", instance_key="k")
        deleted = await rt.delete_instance("a", "k")
        again = await rt.delete_instance("a", "k")
        return only_b, sorted(everything), deleted, again, rt.process_status("a", "k")

    only_b, everything, deleted, again, status = session(root, state_root, executor, body)
    assert only_b == ["b:k"]
    assert everything == ["a:k", "b:k"]
    assert (deleted, again) == (True, False)
    assert status is None


def test_listeners_see_every_instance_until_they_unsubscribe(tmp_path: Path, state_root: Path, executor: str) -> None:
    root = bundle(tmp_path / "b")
    seen: list[tuple[str, str]] = []

    async def body(rt: Any) -> None:
        off = rt.on_runtime_event(lambda r: seen.append((r.get("agentName"), r.get("type"))))
        await rt.request("one", agent="a", instance_key="k")
        await rt.request("two", agent="b", instance_key="k")
        await rt.wait_idle()
        off()
        count = len(seen)
        await rt.request("three", agent="a", instance_key="k")
        await rt.wait_idle()
        assert len(seen) == count

    session(root, state_root, executor, body)
    assert ("a", "turn.completed") in seen
    assert ("b", "turn.completed") in seen


def test_interrupt_close_cancels_a_running_turn_instead_of_waiting_for_it(
    tmp_path: Path, state_root: Path, executor: str
) -> None:
    slow = (
        "import asyncio\n\n\nasync def generate(request):\n    await asyncio.sleep(30)\n    return {'text': 'late'}\n"
    )
    docs = [kit.package_doc(), kit.python_model_doc(), kit.agent_doc("a"), kit.swarm_doc(["a"])]
    root = kit.write_bundle(tmp_path / "b", *docs, files={"model.py": slow})

    async def main() -> float:
        rt = goondan.Runtime(root, state_root=state_root, executor=executor, grace_period_ms=60000)
        await rt.start()
        await rt.send("hang", instance_key="k")
        loop = asyncio.get_running_loop()
        while rt.process_status("a", "k") != "processing":
            await asyncio.sleep(0.02)
        started = loop.time()
        await rt.close(interrupt=True)
        return loop.time() - started

    assert asyncio.run(asyncio.wait_for(main(), 30)) < 10
