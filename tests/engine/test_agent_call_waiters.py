"""Only agents that wait on a call can close a cycle (``CIRCULAR_CALL_DETECTED``): a coordinator
that hands work out with ``agents__send`` (or an async ``agents__request``) waits on nobody, so the
worker may answer it with a send or a request of its own. Both were refused as circular ("coord@k ->
worker@k -> coord@k"), the send-back too, although the error's own suggestion is to use
``agents__send``. A synchronous A -> B -> A still fails at once.

Real runtime, real agent processes with the process executor (every call through the orchestrator)."""

from __future__ import annotations

import asyncio
import json
import time
from pathlib import Path
from typing import Any

import pytest

import goondan
from kit import (
    agent_doc,
    base_ref,
    export,
    history,
    package_doc,
    python_model_doc,
    swarm_doc,
    tool_doc,
    tool_results,
    write_bundle,
)

# The model's user text is a JSON list of tool calls when it starts with '!', else it is echoed.
MODEL = """
import json


def generate(request):
    messages = [m for m in request.messages if m["role"] != "system"]
    last = messages[-1]
    if last["role"] == "tool":
        return {"text": request.agent_name + " done"}
    text = last["content"] if isinstance(last["content"], str) else ""
    if text.startswith("!"):
        return {"toolCalls": json.loads(text[1:])}
    return {"text": request.agent_name + " echo: " + text}
"""


# hands work out with a send, then (while the worker works on it) asks the worker synchronously
TOOL = """
import asyncio


async def handout(ctx, args):
    await ctx.runtime.send("worker", args["send"])
    await asyncio.sleep(1.0)
    try:
        result = await ctx.runtime.request("worker", "second task", timeout_ms=8000)
        return {"response": result.response}
    except Exception as exc:
        return {"error": getattr(exc, "code", type(exc).__name__), "message": str(exc)}


handlers = {"handout": handout}
"""


def _bundle(root: Path) -> Path:
    tools: list[Any] = [base_ref("Tool", "agents"), "ops"]
    agents = [agent_doc(name, tools=tools) for name in ("coord", "worker")]
    return write_bundle(
        root,
        package_doc(),
        python_model_doc(),
        tool_doc("ops", "./ops.py", [export("handout", {"send": {"type": "string"}})]),
        *agents,
        swarm_doc(["coord", "worker"], policy={"maxParallelToolCalls": 4}),
        files={"model.py": MODEL, "ops.py": TOOL},
    )


def _calls(*calls: tuple[str, dict[str, Any]]) -> str:
    return "!" + json.dumps([{"name": name, "args": args} for name, args in calls])


async def _wait_for(rt: Any, agent: str, text: str, timeout: float = 20.0) -> list[dict[str, Any]]:
    deadline = time.monotonic() + timeout
    while True:
        await rt.wait_idle()
        messages = history(rt, agent, "k")
        if any(m["role"] == "user" and m["content"] == text for m in messages) or time.monotonic() > deadline:
            return messages
        await asyncio.sleep(0.05)


@pytest.mark.parametrize("executor", ["inline", "process"])
@pytest.mark.parametrize(
    ("hand_out", "answer"),
    [
        ("agents__send", "agents__send"),
        ("agents__send", "agents__request"),
        ("async-request", "agents__send"),
        ("async-request", "agents__request"),
    ],
)
def test_a_worker_may_answer_a_coordinator_that_does_not_wait_on_it(
    tmp_path: Path, executor: str, hand_out: str, answer: str
) -> None:
    root = _bundle(tmp_path / "b")
    back = _calls((answer, {"target": "coord", "input": "report from worker"}))
    if hand_out == "agents__send":
        first = _calls(("agents__send", {"target": "worker", "input": back}))
    else:
        first = _calls(("agents__request", {"target": "worker", "input": back, "async": True}))

    async def main() -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
        async with goondan.Runtime(root, state_root=tmp_path / "state", executor=executor) as rt:
            result = await rt.request(first, instance_key="k")
            assert result.finish_reason == "text_response", result
            coord = await _wait_for(rt, "coord", "report from worker")
            return coord, history(rt, "worker", "k")

    coord, worker = asyncio.run(main())
    [answered] = tool_results(worker)
    assert answered["output"]["type"] == "json", answered  # was error-json CIRCULAR_CALL_DETECTED
    assert {"role": "user", "content": "report from worker"} in [
        {"role": m["role"], "content": m["content"]} for m in coord
    ]
    if answer == "agents__request":
        assert answered["output"]["value"]["response"] == "coord echo: report from worker"


@pytest.mark.parametrize("executor", ["inline", "process"])
def test_a_cycle_of_waiting_calls_after_a_send_still_fails_at_once(tmp_path: Path, executor: str) -> None:
    """coord sends to worker, worker asks coord and waits, coord's new turn asks worker and would
    wait: worker waits on coord, so that call closes a cycle (of the calls after the send)."""
    root = _bundle(tmp_path / "b")
    inner = _calls(("agents__request", {"target": "worker", "input": "x"}))
    back = _calls(("agents__request", {"target": "coord", "input": inner}))
    first = _calls(("agents__send", {"target": "worker", "input": back}))

    async def main() -> list[dict[str, Any]]:
        async with goondan.Runtime(root, state_root=tmp_path / "state", executor=executor) as rt:
            t0 = time.monotonic()
            await rt.request(first, instance_key="k")
            coord = await _wait_for(rt, "coord", inner)
            assert time.monotonic() - t0 < 15
            return coord

    results = tool_results(asyncio.run(main()))
    assert [r["toolName"] for r in results] == ["agents__send", "agents__request"]
    assert results[1]["output"]["type"] == "error-json"
    assert results[1]["output"]["value"]["code"] == "CIRCULAR_CALL_DETECTED"
    assert "coord@k -> worker@k -> coord@k -> worker@k" in results[1]["output"]["value"]["message"]


@pytest.mark.parametrize("executor", ["inline", "process"])
def test_asking_a_worker_that_waits_on_you_fails_at_once_after_a_send(tmp_path: Path, executor: str) -> None:
    """coord sends work to worker, worker asks coord back and waits; coord's turn, still running,
    then asks worker synchronously. The stacks of the two chains do not meet (the send started a
    new one), but worker's turn waits on coord: the request could only time out (8 s here, 60 s by
    default), with both agents stuck until then. It fails at once instead, and worker's own request
    is answered as soon as coord's turn ends."""
    root = _bundle(tmp_path / "b")
    back = _calls(("agents__request", {"target": "coord", "input": "question from worker"}))

    async def main() -> tuple[list[dict[str, Any]], list[dict[str, Any]], float]:
        async with goondan.Runtime(root, state_root=tmp_path / "state", executor=executor) as rt:
            t0 = time.monotonic()
            await rt.request(_calls(("ops__handout", {"send": back})), instance_key="k")
            took = time.monotonic() - t0
            coord = await _wait_for(rt, "coord", "question from worker")
            return coord, history(rt, "worker", "k"), took

    coord, worker, took = asyncio.run(main())
    handout = tool_results(coord)[0]["output"]["value"]
    assert handout["error"] == "CIRCULAR_CALL_DETECTED", handout  # was AGENT_REQUEST_TIMEOUT after 8 s
    assert "coord@k -> worker@k -> coord@k ('worker@k' is waiting on 'coord@k')" in handout["message"]
    assert took < 6, took
    [asked] = tool_results(worker)
    assert asked["output"]["value"]["response"] == "coord echo: question from worker"
