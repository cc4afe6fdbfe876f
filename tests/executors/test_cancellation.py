"""Cancellation (``Runtime.cancel``) and steering (``Agent.spec.steering: inject``), in every executor
(``executor`` fixture).

A cancelled turn stops within a second whatever it waits on (a model stream that went silent, a tool
running a shell command), commits with ``finish_reason="cancelled"`` and leaves a history whose every
tool call has a result, so the next turn's model request is valid. The agent may run in another
process: tools and models report through files."""

from __future__ import annotations

import asyncio
import json
import os
import time
from pathlib import Path
from typing import Any

import pytest

import goondan
import kit
from models.providers.fake_http import FakeServer, Reply, Req, sse_event

KEY = "sk-cancel-test"


def chunk(delta: dict[str, Any]) -> str:
    return sse_event(
        {
            "id": "c",
            "object": "chat.completion.chunk",
            "created": 1,
            "model": "m",
            "choices": [{"index": 0, "delta": delta, "finish_reason": None}],
        }
    )


def stalling_stream(req: Req) -> Reply:
    """Two words, then silence with the connection open: only a cancellation ends the call."""
    events = [chunk({"role": "assistant", "content": "Thinking "}), chunk({"content": "hard"}), "data: [DONE]\n\n"]
    return Reply(sse=events, stall_after_chunks=2)


def openai_bundle(root: Path, url: str) -> Path:
    return kit.write_bundle(
        root,
        kit.package_doc(),
        kit.model_doc(
            "m",
            "openai",
            "served",
            endpoint=url + "/v1",
            apiKey={"valueFrom": {"env": "TEST_OPENAI_KEY"}},
            options={"retryBaseDelaySeconds": 0.01},
        ),
        kit.agent_doc("a"),
        kit.swarm_doc(["a"]),
    )


def assert_valid_history(messages: list[dict[str, Any]]) -> None:
    """Every tool call of an assistant message has a result in the tool messages right after it."""
    for i, message in enumerate(messages):
        if message.get("role") != "assistant" or not isinstance(message.get("content"), list):
            continue
        calls = {p["toolCallId"] for p in message["content"] if p.get("type") == "tool-call"}
        answered: set[str] = set()
        for follower in messages[i + 1 :]:
            if follower.get("role") != "tool":
                break
            answered |= {p["toolCallId"] for p in kit.parts(follower, "tool-result")}
        assert calls <= answered, f"unanswered tool calls {calls - answered} in {message}"


def test_cancel_during_a_slow_model_stream_commits_the_turn_as_cancelled_within_a_second(
    tmp_path: Path, state_root: Path, executor: str
) -> None:
    with FakeServer(stalling_stream) as server:
        root = openai_bundle(tmp_path / "b", server.url)

        async def main() -> tuple[Any, float, bool, list[dict[str, Any]]]:
            env = {"TEST_OPENAI_KEY": KEY}
            async with goondan.Runtime(root, state_root=state_root, executor=executor, env=env) as rt:
                streaming = asyncio.Event()
                rt.on_text_delta(lambda payload: streaming.set())
                task = asyncio.create_task(rt.request("think"))
                await asyncio.wait_for(streaming.wait(), 20)
                started = time.monotonic()
                cancelled = await rt.cancel()
                result = await asyncio.wait_for(task, 5)
                elapsed = time.monotonic() - started
                return result, elapsed, cancelled, kit.history(rt)

        result, elapsed, cancelled, history = asyncio.run(main())
        assert cancelled is True
        assert result.finish_reason == "cancelled", result
        assert elapsed < 1.0
        assert kit.roles(history) == ["user"]  # the half-streamed answer is not kept
        assert server.wait_for(lambda: server.closed_by_client == 1)  # the stream was closed


# the model runs the two commands listed in calls.json; once it sees results it reports them
TOOL_MODEL = """\
import json
from pathlib import Path


def generate(request):
    last = request.messages[-1]
    if last["role"] == "tool" or last["content"] == "again":
        codes = [
            p["output"]["value"].get("code")
            for m in request.messages if m["role"] == "tool"
            for p in m["content"] if p.get("type") == "tool-result"
        ]
        return {"text": "results: " + ",".join(str(c) for c in codes)}
    return {"toolCalls": json.loads(Path(__file__).with_name("calls.json").read_text())}
"""


def test_cancel_during_a_slow_tool_kills_its_process_and_answers_every_call(
    tmp_path: Path, state_root: Path, executor: str
) -> None:
    pid_file = tmp_path / "sleeper.pid"
    command = f"echo $$ > {pid_file}; exec sleep 30"
    calls = [
        {"id": "c-slow", "name": "bash__exec", "args": {"command": command}},
        {"id": "c-other", "name": "bash__exec", "args": {"command": "sleep 30"}},
    ]
    root = kit.write_bundle(
        tmp_path / "b",
        kit.package_doc(),
        kit.python_model_doc(),
        kit.agent_doc("a", tools=[kit.base_ref("Tool", "bash")]),
        kit.swarm_doc(["a"]),
        files={"model.py": TOOL_MODEL, "calls.json": json.dumps(calls)},
    )

    completed: list[dict[str, Any]] = []

    async def main() -> tuple[Any, float, Any, list[dict[str, Any]]]:
        async with goondan.Runtime(root, state_root=state_root, executor=executor) as rt:
            rt.on_runtime_event(lambda r: completed.append(r) if r["type"] == "turn.completed" else None)
            task = asyncio.create_task(rt.request("go"))
            deadline = time.monotonic() + 20
            while not (pid_file.exists() and pid_file.read_text().strip()):
                assert time.monotonic() < deadline, "the tool never started"
                await asyncio.sleep(0.02)
            started = time.monotonic()
            assert await rt.cancel() is True
            result = await asyncio.wait_for(task, 5)
            elapsed = time.monotonic() - started
            history = kit.history(rt)
            after = await rt.request("again")  # the next turn's model request is valid
            return result, elapsed, after, history

    result, elapsed, after, history = asyncio.run(main())
    assert result.finish_reason == "cancelled", result.error
    assert elapsed < 1.0
    assert_valid_history(history)
    codes = [r["output"]["value"]["code"] for r in kit.tool_results(history)]
    assert codes == ["E_TOOL_CANCELLED", "E_TOOL_CANCELLED"]
    assert after.finish_reason == "text_response" and after.text == "results: E_TOOL_CANCELLED,E_TOOL_CANCELLED"
    assert [r.get("cancelled") for r in completed] == [True, None]  # shown in gdn logs
    pid = int(pid_file.read_text())
    with pytest.raises(ProcessLookupError):  # the tool's process group was killed
        for _ in range(50):
            os.kill(pid, 0)
            time.sleep(0.02)


def test_cancel_returns_false_when_no_turn_runs(tmp_path: Path, state_root: Path, executor: str) -> None:
    root = kit.write_bundle(
        tmp_path / "b",
        kit.package_doc(),
        kit.python_model_doc(),
        kit.agent_doc("a"),
        kit.swarm_doc(["a"]),
        files={"model.py": "def generate(request):\n    return {'text': 'hi'}\n"},
    )

    async def main() -> tuple[bool, Any, bool]:
        async with goondan.Runtime(root, state_root=state_root, executor=executor) as rt:
            before = await rt.cancel()
            result = await rt.request("hello")
            return before, result, await rt.cancel()

    before, result, after = asyncio.run(main())
    assert (before, after) == (False, False)
    assert result.finish_reason == "text_response"


# the first step calls a tool that sleeps; the model then answers with every user message it saw
STEER_MODEL = """\
def generate(request):
    last = request.messages[-1]
    users = [m["content"] for m in request.messages if m["role"] == "user" and isinstance(m["content"], str)]
    if last["role"] == "user" and last["content"] == "first":
        return {"toolCalls": [{"id": "c-wait", "name": "t__wait", "args": {}}]}
    return {"text": "saw: " + "|".join(users)}
"""

STEER_TOOL = """\
import asyncio
from pathlib import Path


async def wait(ctx, args):
    flag = Path(__file__).with_name("started")
    flag.write_text("1")
    await asyncio.sleep(0.6)
    return "waited"


handlers = {"wait": wait}
"""


def steering_bundle(root: Path, steering: str | None) -> Path:
    agent = kit.agent_doc("a", tools=["t"])
    if steering is not None:
        agent["spec"]["steering"] = steering
    return kit.write_bundle(
        root,
        kit.package_doc(),
        kit.python_model_doc(),
        kit.tool_doc("t", "./t.py", [kit.export("wait")]),
        agent,
        kit.swarm_doc(["a"]),
        files={"model.py": STEER_MODEL, "t.py": STEER_TOOL},
    )


def run_steering(root: Path, state_root: Path, executor: str) -> tuple[Any, Any]:
    async def main() -> tuple[Any, Any]:
        async with goondan.Runtime(root, state_root=state_root, executor=executor) as rt:
            first = asyncio.create_task(rt.request("first"))
            deadline = time.monotonic() + 20
            while not (root / "started").exists():
                assert time.monotonic() < deadline, "the tool never started"
                await asyncio.sleep(0.02)
            second = await asyncio.wait_for(rt.request("second"), 20)
            return await first, second

    return asyncio.run(main())


def test_steering_injects_a_message_before_the_next_step_of_the_running_turn(
    tmp_path: Path, state_root: Path, executor: str
) -> None:
    first, second = run_steering(steering_bundle(tmp_path / "b", "inject"), state_root, executor)
    assert first.finish_reason == "text_response", first.error
    assert first.text == "saw: first|second"  # the running turn answered the steered message
    assert second.turn_id == first.turn_id and second.text == first.text


def test_without_steering_a_message_waits_for_the_next_turn(tmp_path: Path, state_root: Path, executor: str) -> None:
    first, second = run_steering(steering_bundle(tmp_path / "b", None), state_root, executor)
    assert first.text == "saw: first"
    assert second.text == "saw: first|second" and second.turn_id != first.turn_id


SWALLOW_MODEL = """\
def generate(request):
    last = request.messages[-1]
    if last["role"] == "tool":
        return {"toolCalls": [{"id": "c-again", "name": "t__stubborn", "args": {}}]}
    return {"toolCalls": [{"id": "c-first", "name": "t__stubborn", "args": {}}]}
"""

SWALLOW_TOOL = """\
import asyncio
from pathlib import Path


async def stubborn(ctx, args):
    Path(__file__).with_name("started").write_text("1")
    try:
        await asyncio.sleep(30)
    except asyncio.CancelledError:
        return "swallowed the cancellation"
    return "slept"


handlers = {"stubborn": stubborn}
"""


def test_a_tool_that_swallows_the_cancellation_still_ends_the_turn_at_the_next_step(
    tmp_path: Path, state_root: Path, executor: str
) -> None:
    root = kit.write_bundle(
        tmp_path / "b",
        kit.package_doc(),
        kit.python_model_doc(),
        kit.tool_doc("t", "./t.py", [kit.export("stubborn")]),
        kit.agent_doc("a", tools=["t"]),
        kit.swarm_doc(["a"]),
        files={"model.py": SWALLOW_MODEL, "t.py": SWALLOW_TOOL},
    )

    async def main() -> tuple[Any, float, list[dict[str, Any]]]:
        async with goondan.Runtime(root, state_root=state_root, executor=executor) as rt:
            task = asyncio.create_task(rt.request("go"))
            deadline = time.monotonic() + 20
            while not (root / "started").exists():
                assert time.monotonic() < deadline, "the tool never started"
                await asyncio.sleep(0.02)
            started = time.monotonic()
            assert await rt.cancel() is True
            result = await asyncio.wait_for(task, 5)
            return result, time.monotonic() - started, kit.history(rt)

    result, elapsed, history = asyncio.run(main())
    assert result.finish_reason == "cancelled"
    assert elapsed < 1.0
    assert_valid_history(history)
    # the tool's own answer is kept; no second step ran
    assert [r["toolCallId"] for r in kit.tool_results(history)] == ["c-first"]
