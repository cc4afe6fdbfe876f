"""Cancellation and steering at the edges of a turn, in every executor (``executor`` fixture).

A cancel that lands while a turn is on its way to running (dispatched, its ``turn.started``
subscribers still running) must stick: ``Runtime.cancel`` says True, so the turn must end cancelled,
with the user's message recorded and no model call. The agent may run in another process: the
extension and the model report through files next to the bundle."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path
from typing import Any

import goondan
import kit

# turn.started subscriber: says it runs, then holds the turn until the test says go
HOLD_EXT = """\
import asyncio
from pathlib import Path

HERE = Path(__file__).parent


def register(api):
    async def hold(event):
        (HERE / "starting").write_text("1")
        for _ in range(1000):
            if (HERE / "go").exists():
                return
            await asyncio.sleep(0.01)

    api.events.on("turn.started", hold)
"""

COUNTING_MODEL = """\
from pathlib import Path


def generate(request):
    with open(Path(__file__).with_name("model-calls"), "a") as fh:
        fh.write("1\\n")
    return {"text": "answered"}
"""


async def _until(path: Path, seconds: float = 20) -> None:
    deadline = time.monotonic() + seconds
    while not path.exists():
        assert time.monotonic() < deadline, f"{path.name} never appeared"
        await asyncio.sleep(0.01)


def test_a_cancel_before_the_turn_reaches_its_steps_sticks_and_records_the_message(
    tmp_path: Path, state_root: Path, executor: str
) -> None:
    root = kit.write_bundle(
        tmp_path / "b",
        kit.package_doc(),
        kit.python_model_doc(),
        kit.extension_doc("hold", "./hold.py"),
        kit.agent_doc("a", extensions=["hold"]),
        kit.swarm_doc(["a"]),
        files={"model.py": COUNTING_MODEL, "hold.py": HOLD_EXT},
    )

    async def main() -> tuple[bool, Any, list[dict[str, Any]], Any]:
        async with goondan.Runtime(root, state_root=state_root, executor=executor) as rt:
            task = asyncio.create_task(rt.request("hello"))
            await _until(root / "starting")
            cancelled = await rt.cancel()
            (root / "go").write_text("1")
            result = await asyncio.wait_for(task, 10)
            history = kit.history(rt)
            (root / "starting").unlink()
            after = await asyncio.wait_for(rt.request("again"), 10)  # the next turn runs as usual
            return cancelled, result, history, after

    cancelled, result, history, after = asyncio.run(main())
    assert cancelled is True
    assert result.finish_reason == "cancelled", result
    assert [(m["role"], m["content"]) for m in history] == [("user", "hello")]
    assert after.finish_reason == "text_response" and after.text == "answered"
    assert (root / "model-calls").read_text().count("1") == 1  # only the second turn called the model


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
    Path(__file__).with_name("started").write_text("1")
    await asyncio.sleep(float(Path(__file__).with_name("seconds").read_text()))
    return "waited"


handlers = {"wait": wait}
"""


def steering_bundle(root: Path, seconds: float, max_steps: int | None = None) -> Path:
    agent = kit.agent_doc("a", tools=["t"])
    agent["spec"]["steering"] = "inject"
    return kit.write_bundle(
        root,
        kit.package_doc(),
        kit.python_model_doc(),
        kit.tool_doc("t", "./t.py", [kit.export("wait")]),
        agent,
        kit.swarm_doc(["a"], max_steps=max_steps),
        files={"model.py": STEER_MODEL, "t.py": STEER_TOOL, "seconds": str(seconds)},
    )


def test_a_message_steered_into_the_last_step_is_answered_by_a_turn_of_its_own(
    tmp_path: Path, state_root: Path, executor: str
) -> None:
    root = steering_bundle(tmp_path / "b", 0.6, max_steps=1)

    async def main() -> tuple[Any, Any, list[dict[str, Any]]]:
        async with goondan.Runtime(root, state_root=state_root, executor=executor) as rt:
            first = asyncio.create_task(rt.request("first"))
            await _until(root / "started")
            second = await asyncio.wait_for(rt.request("second"), 20)
            return await first, second, kit.history(rt)

    first, second, history = asyncio.run(main())
    assert first.finish_reason == "max_steps"  # its only step was the tool call
    assert second.finish_reason == "text_response" and second.turn_id != first.turn_id
    assert second.text == "saw: first|second"
    assert history[-1] == {"role": "assistant", "content": "saw: first|second"}


FAILING_MODEL = """\
def generate(request):
    last = request.messages[-1]
    if last["role"] == "user" and last["content"] == "first":
        return {"toolCalls": [{"id": "c-wait", "name": "t__wait", "args": {}}]}
    raise RuntimeError("the model broke")
"""


def test_a_message_steered_into_a_turn_that_fails_gets_an_error_instead_of_no_answer(
    tmp_path: Path, state_root: Path, executor: str
) -> None:
    root = steering_bundle(tmp_path / "b", 0.6)
    (root / "model.py").write_text(FAILING_MODEL)

    async def main() -> tuple[Any, Any]:
        async with goondan.Runtime(root, state_root=state_root, executor=executor) as rt:
            first = asyncio.create_task(rt.request("first"))
            await _until(root / "started")
            second = await asyncio.wait_for(rt.request("second"), 20)
            return await first, second

    first, second = asyncio.run(main())
    assert first.finish_reason == "error"
    assert second.finish_reason == "error" and second.error["code"] == "E_TURN_FAILED"
